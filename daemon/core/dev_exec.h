/**
 * @file dev_exec.h
 * @brief The executor of device memory (kernels/exec.h, COLL_MEM_CUDA), given beside the
 *        device layer when the daemon opens it (core/devices.h): the CUDA module
 *        (kernels/cuda/module.h) loaded beside the CUDA driver's layer, the host executor's
 *        entries beside the fake one (whose device memory is host memory). What needs it (the
 *        NCCL path's local reduce and copies, engine/algos/nccl.c) fails the operation's job
 *        with COLL_ERR_UNSUPPORTED and this file's reason where there is none.
 */
#ifndef COLL_CORE_DEV_EXEC_H
#define COLL_CORE_DEV_EXEC_H

#include <stddef.h>

#include "device/dev.h"
#include "kernels/exec.h"

/**
 * @brief Register the executor of COLL_MEM_CUDA for the device layer @p ops, once per process
 *        (coll_exec_register(); a later call finds the same one).
 *
 * Over the fake layer (coll_dev_fake), whose device memory is host memory, the host
 * executor's entries serve as they are: they are registered as the table of kind
 * COLL_MEM_CUDA (named "fake"), so the daemon's code for device buffers runs over the fake as
 * over a GPU. Over the CUDA driver's layer, @p module is dlopen()ed (RTLD_NOW | RTLD_LOCAL, never
 * unloaded), its entry point asked with COLL_EXEC_ABI for its table, and the table registered.
 *
 * @param [in]  ops    The device layer (coll_dev_open()); NULL: none, nothing is registered.
 * @param [in]  module The CUDA module as dlopen() takes it: COLL_CUDA_MODULE_FILE (found on the
 *                     daemon's run path: installed beside it, or the build tree's) or a path.
 * @param [out] text   What was registered ("cuda (libcollective_cuda.so)", "fake: ...") or why
 *                     nothing was, naming the module and the loader's, the driver's or the
 *                     module's words; NUL-terminated, cut to @p len.
 * @param [in]  len    Bytes at @p text (> 0).
 * @return The executor; NULL when there is none (no layer, the module missing, without its
 *         entry point, refusing: another ABI, no driver or device it can use; or another table
 *         holding the kind). Loop thread (the daemon's start); device errors of the module's
 *         entries are logged from the thread that met them.
 */
const coll_exec_t *coll_dev_exec_open(const coll_dev_ops_t *ops, const char *module, char *text,
                                      size_t len);

#endif
