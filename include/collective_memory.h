/**
 * @file collective_memory.h
 * @brief Memory of a kind and a device: allocations in the job's pool on a CUDA device beside
 *        its host pool (docs/gpu.md), and what an address of this rank's allocations is.
 *        Included by collective.h.
 */
#ifndef COLLECTIVE_MEMORY_H
#define COLLECTIVE_MEMORY_H

#ifdef __cplusplus
extern "C" {
#endif

/** Where memory lives. The values are the daemon's memory kinds (kernels/mem_kind.h). */
typedef enum {
    COLL_MEMORY_HOST = 0, /**< host memory: the job's shared pool (coll_mem_alloc()) */
    COLL_MEMORY_CUDA = 1, /**< a CUDA device's memory: the job's pool on that device */
} coll_memory_t;

/**
 * @brief Allocate @p bytes in the job's pool of memory kind @p kind on @p device, on this node.
 *
 * COLL_MEMORY_HOST on device 0 is coll_mem_alloc(). COLL_MEMORY_CUDA: the daemon makes the
 * job's pool on the device at the job's first allocation there and grows it in chunks of device
 * memory (the driver's virtual memory management, cuMemCreate; never managed memory) as
 * allocations need, within the device's budget (the daemon's device_pool_budget); this process
 * imports every chunk it has not mapped yet (file descriptors passed by the daemon) into one
 * range of device addresses, so the pool lies at the same offsets for every local rank
 * (coll_mem_query()). A rank's mapping reaches as far as the pool had grown at its latest
 * allocation on the device, which always covers its own buffers. Device memory is given back
 * to the device when the job ends (freed allocations are reused before). The driver and the
 * device layer are loaded at run time: a process that only allocates host memory never loads
 * libcuda. COLL_DEVICE_FAKE=N (tests only, in the daemon's and the ranks' environment alike)
 * stands host memory in for N devices.
 * @param [in]  comm   Communicator.
 * @param [in]  bytes  Size in bytes, > 0; rounded up to 64 bytes.
 * @param [in]  kind   COLL_MEMORY_HOST or COLL_MEMORY_CUDA.
 * @param [in]  device The CUDA device as this process numbers it (CUDA_VISIBLE_DEVICES
 *                     applies: the daemon finds the same device by its UUID); 0 for host.
 * @param [out] ptr_p  Start of the buffer, 64-byte aligned: for CUDA a device address
 *                     (CUdeviceptr) of this process, for kernels and copies on that device;
 *                     owned by @p comm until coll_mem_free() or coll_comm_destroy().
 * @return COLL_OK;
 *         COLL_ERR_INVALID for 0 bytes, an unknown kind, a negative device or a host
 *         allocation on a device other than 0, a NULL @p comm or @p ptr_p;
 *         COLL_ERR_UNSUPPORTED when no device memory is to be had, the reason in
 *         coll_comm_last_error(): no CUDA driver in this process or the daemon (the loader's
 *         words), cuInit failed (the driver's words), a build without CUDA, no such device
 *         here or on the daemon, a device without virtual memory management or
 *         file-descriptor handles, a daemon whose device layer is not this process's
 *         (COLL_DEVICE_FAKE set for one of them only: the message names both layers, what
 *         each found and the variable);
 *         COLL_ERR_POOL_FULL when the device's budget (device_pool_budget) has no room left
 *         (the message gives what the device's pools hold of it);
 *         COLL_ERR_NOMEM when the device (the driver's words) or the bookkeeping has no memory;
 *         COLL_ERR_IO when another device call failed here or in the daemon (its words);
 *         once the job failed, the status it failed with; COLL_ERR_CLOSED, COLL_ERR_TIMEDOUT
 *         (no answer in 30 s), COLL_ERR_PROTOCOL (a reply that does not fit the pool).
 *         Thread-safe.
 */
COLL_API coll_status_t coll_mem_alloc_on(coll_comm_t *comm, size_t bytes, coll_memory_t kind,
                                         int device, void **ptr_p);

/** What an address inside one of this rank's allocations is (coll_mem_query()). */
typedef struct {
    coll_memory_t kind;
    int device;          /**< the device as this process numbers it; 0 for host memory */
    uint64_t offset;     /**< from the start of its pool: the same for every local rank, so
                              ranks of one node name each other's buffers by it */
    void *pool_base;     /**< this process's mapping of that pool (pool_base + offset of another
                              local rank's buffer is that buffer here, once mapped) */
} coll_mem_info_t;

/**
 * @brief What @p ptr is: its memory kind, device and place in the job's pools, so a caller
 *        (a bucketer, a framework's backend) can tell device buffers from host buffers.
 * @param [out] info Filled on COLL_OK.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL when @p ptr is not inside an allocation of this rank
 *         (coll_mem_alloc(), coll_mem_alloc_on()), a NULL @p ptr included; COLL_ERR_INVALID for
 *         a NULL @p comm or @p info.
 *         Thread-safe.
 */
COLL_API coll_status_t coll_mem_query(coll_comm_t *comm, const void *ptr, coll_mem_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_MEMORY_H */
