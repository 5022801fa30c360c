/**
 * @file devices.h
 * @brief The devices a daemon serves: its device layer (device/dev.h) or why it has none, each
 *        device's facts and the budget its jobs' device pools are charged to
 *        (device_pool_budget), the page-locked host buffers kept for its staged operations
 *        (core/dev_pinned.h), the executor of device memory (core/dev_exec.h) or why there is
 *        none, and whether NCCL is there. Loop thread only.
 */
#ifndef COLL_CORE_DEVICES_H
#define COLL_CORE_DEVICES_H

#include <stdint.h>

#include "core/dev_pinned.h"
#include "core/pool.h"
#include "device/dev.h"
#include "kernels/exec.h"

/** One device. */
typedef struct {
    coll_dev_info_t info;
    coll_pool_budget_t budget; /**< what the jobs' pools on it may hold, and hold */
    uint32_t pools;            /**< jobs' pools on it now */
    uint64_t staged_ops;       /**< operations whose buffers on it the staged path copied
                                    (engine/dev_staged.h) */
    uint64_t staged_bytes;     /**< bytes it copied between the device and host memory, both
                                    ways */
    uint64_t staged_unpinned;  /**< host copies of the staged path in ordinary memory, as the
                                    device layer refused page-locked memory (host_alloc) */
    uint64_t stream_waits;     /**< device waits the daemon queued on its streams for a
                                    rank's ready word (engine/dev_sync.h) */
    uint64_t nccl_ops;         /**< operations on its pools that NCCL ran between the daemons
                                    (engine/algos/nccl.h) */
    uint64_t kernel_reduces;   /**< reductions the daemon queued on it through the executor
                                    (engine/algos/dev_combine.h: the NCCL path's local reduce
                                    of several ranks, a one-node group's on the device) */
    uint64_t kernel_copies;    /**< copies between its buffers the daemon queued on it through
                                    the executor (the NCCL path's placing and distribution, a
                                    one-node group's on the device) */
    char fault[COLL_DEV_TEXT_MAX]; /**< "" while sound; else the device layer's text of the
                                        error its work met (a kernel's fault): sticky for the
                                        daemon's context, so device allocations on it are
                                        refused until the daemon restarts
                                        (coll_device_fault()) */
} coll_device_t;

/** The daemon's devices. */
typedef struct coll_devices {
    const coll_dev_ops_t *ops; /**< NULL: no device layer (status says why) */
    const char *status;        /**< coll_dev_status(): the layer and its devices, or why none */
    int n;                     /**< devices served */
    coll_device_t dev[COLL_DEV_MAX];
    const coll_exec_t *exec;   /**< the executor of device memory (COLL_MEM_CUDA); NULL: none,
                                    exec_status says why */
    char exec_status[COLL_DEV_TEXT_MAX]; /**< what coll_dev_exec_open() registered, or why not */
    int nccl;                  /**< 1 when NCCL is there */
    const char *nccl_text;     /**< its version, or why it is absent */
    coll_pinned_t pinned;      /**< the page-locked host buffers kept for the staged path, per
                                    device (staged_pinned_cache_bytes); nothing is kept until
                                    coll_pinned_configure() */
} coll_devices_t;

/**
 * @brief Open the device layer, read every device and set its budget (coll_devices_budget());
 *        register the executor of device memory (coll_dev_exec_open() with the CUDA module
 *        COLL_CUDA_MODULE_FILE, found on the daemon's run path); log what was found (or why
 *        nothing was: device allocations are then refused), the executor or why there is
 *        none, and NCCL's presence. A device the driver refuses to describe is not served
 *        (logged).
 */
void coll_devices_open(coll_devices_t *ds, uint64_t budget);

/**
 * @brief The daemon's device layer by name: its table's ("cuda", "fake"), or without one the
 *        layer its environment selected (coll_dev_layer()). A rank's must be the same: the
 *        join reply tells the ranks, and device allocations from another layer are refused.
 * @return A static string.
 */
const char *coll_devices_layer(const coll_devices_t *ds);

/**
 * @brief Set each device's budget: @p budget bytes, or with 0 a quarter of its memory
 *        (device_pool_budget). What pools hold already stays; growth beyond is refused.
 */
void coll_devices_budget(coll_devices_t *ds, uint64_t budget);

/**
 * @brief Record that the work the daemon queued on device @p index (@p dv) failed, as the
 *        event query or sync that saw it said (@p why, the device layer's text): a device's
 *        asynchronous error is sticky for the daemon's context (CUDA's illegal address, a
 *        kernel's launch failure), so the device is out of service for this daemon: its
 *        allocations are refused from now on, naming @p why (job/devalloc.h). The first fault
 *        is kept and logged, once; later ones change nothing.
 */
void coll_device_fault(coll_device_t *dv, int index, const char *why);

/**
 * @brief The device a rank names: by its UUID (@p uuid of @p uuid_len bytes, which names it
 *        whatever numbering the rank sees) or, with none, by this daemon's index @p index.
 * @return Its index here, or -1 when there is no such device (or no device layer).
 */
int coll_devices_find(const coll_devices_t *ds, const uint8_t *uuid, size_t uuid_len,
                      uint32_t index);

#endif
