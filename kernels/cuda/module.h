/**
 * @file module.h
 * @brief The one entry point of the CUDA module, libcollective_cuda.so: the CUDA executor
 *        (kernels/exec.h, memory kind COLL_MEM_CUDA), built apart so that the daemon and the
 *        library start on a machine without a CUDA driver and load it only where one is.
 *
 * The loader dlopen()s COLL_CUDA_MODULE_FILE (RTLD_NOW | RTLD_LOCAL), looks up
 * COLL_CUDA_MODULE_SYMBOL, calls it with COLL_EXEC_ABI and passes the table it returns to
 * coll_exec_register(); it never unloads the module. The module needs libcuda.so.1 (the driver)
 * and the toolkit's cuBLAS (libcublas.so, found through its run path); the CUDA runtime is linked
 * into it statically and hidden, as is everything but this symbol.
 *
 * What the caller keeps to (kernels/cuda/README.md has the rest): the entries work on the
 * devices' primary contexts (memory mapped with the driver API must be mapped in the primary
 * context, e.g. after cuDevicePrimaryCtxRetain, and streams handed to the asynchronous entries
 * created in it); an entry leaves the calling thread's current context as it found it.
 */
#ifndef COLL_KERNELS_CUDA_MODULE_H
#define COLL_KERNELS_CUDA_MODULE_H

#include <stddef.h>

#include "kernels/exec.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The module's file name, as the loader passes it to dlopen(). */
#define COLL_CUDA_MODULE_FILE "libcollective_cuda.so"
/** The name of its entry point, coll_cuda_module_exec(), for dlsym(). */
#define COLL_CUDA_MODULE_SYMBOL "coll_cuda_module_exec"

/**
 * Where the module reports a device error an entry cannot return (the entries whose result is
 * void or a value, kernels/cuda/README.md): one line, no newline, from the thread that met it.
 * Must be thread-safe.
 */
typedef void (*coll_cuda_log_fn)(const char *line);

/** The type of coll_cuda_module_exec(), for the pointer dlsym() gives. */
typedef const coll_exec_t *(*coll_cuda_module_exec_fn)(unsigned abi, coll_cuda_log_fn log,
                                                       char *why, size_t why_len);

/**
 * @brief The CUDA executor, once the module found a driver and a device it can use.
 *
 * Asks the CUDA runtime for the devices and the driver for the functions the entries need (it
 * creates no context and allocates nothing); the first call decides, later calls return the
 * same answer (the log function of a later call is ignored).
 *
 * @param [in]  abi     COLL_EXEC_ABI as the caller was built with.
 * @param [in]  log     Where device errors go (see coll_cuda_log_fn); NULL: stderr.
 * @param [out] why     On NULL: a sentence that says why, e.g. "no CUDA driver (CUDA driver
 *                      version is insufficient for CUDA runtime version)", "no CUDA device",
 *                      or an ABI mismatch; NUL-terminated, cut to @p why_len. May be NULL.
 * @param [in]  why_len Bytes at @p why.
 * @return The table (kind COLL_MEM_CUDA, name "cuda"), valid for the life of the process; NULL
 *         when @p abi is not the module's, or there is no driver or no device.
 * Thread-safe.
 */
__attribute__((visibility("default"))) const coll_exec_t *
coll_cuda_module_exec(unsigned abi, coll_cuda_log_fn log, char *why, size_t why_len);

#ifdef __cplusplus
}
#endif

#endif
