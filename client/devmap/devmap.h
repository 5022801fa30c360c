/**
 * @file devmap.h
 * @brief This rank's mappings of the job's device pools (daemon/core/dev_pools.h) and its
 *        allocations in them: a range of device addresses reserved per pool, and the pool's
 *        chunks imported and mapped into it, in order, as allocation replies bring them with
 *        their fds; the allocations' records, which the API's calls on them keep
 *        (api/devmem.c).
 *        Every function: the connection's lock held.
 */
#ifndef COLL_CLIENT_DEVMAP_DEVMAP_H
#define COLL_CLIENT_DEVMAP_DEVMAP_H

#include <stddef.h>
#include <stdint.h>

#include "client/base/objects.h"
#include "device/dev.h"

/** One device pool as this rank maps it. */
typedef struct {
    int device;       /**< this process's index of the device; -1: not mapped */
    uint64_t va;      /**< the reservation (the daemon's pool_bytes of addresses) */
    size_t bytes;
    size_t mapped;    /**< [va, va + mapped) holds the chunks received so far */
    size_t nchunks;
    size_t chunk_end[COLL_FRAME_MAX_FDS]; /**< where each chunk ends (they follow each other) */
} coll_devmap_t;

/** One allocation of this rank in a device pool. */
typedef struct {
    uint32_t pool;    /**< 1 + the daemon's device */
    uint64_t offset, bytes;
} coll_devalloc_t;

/** The device side of a connection. */
struct coll_devmem {
    const coll_dev_ops_t *ops;
    coll_devmap_t map[COLL_DEV_MAX]; /**< by pool id - 1 (the daemon's device) */
    coll_devalloc_t *allocs;
    size_t nallocs, cap;
};

/**
 * @brief Take the fds of a device allocation's reply @p m (always, closing what is not kept)
 *        and, when it succeeded, import and map its chunks; an allocation this rank cannot map
 *        is freed again at the daemon.
 * @return COLL_OK; COLL_ERR_PROTOCOL (chunks out of order or without fds, a pool of another
 *         size, an allocation outside what is mapped, a reply nobody asked for); the device's
 *         error (the message names the call). The last error is set.
 */
coll_status_t coll__devmap_reply(coll_comm_t *c, const Coll__Wire__MemAllocReply *m);

/**
 * @brief Which device pool [p, p + len) lies in, as far as mapped.
 * @param [out] pool_p   Its id (1 + the daemon's device).
 * @param [out] offset_p The offset of @p p in it.
 * @return 1 when it does, 0 otherwise.
 */
int coll__devmap_find(const coll_comm_t *c, const void *p, size_t len, uint32_t *pool_p,
                      uint64_t *offset_p);

/** @return This process's address of @p offset in pool @p pool (which must be mapped). */
void *coll__devmap_ptr(const coll_comm_t *c, uint32_t pool, uint64_t offset);

/** @brief Unmap every device pool and forget the allocations (the connection closes). */
void coll__devmap_close(coll_comm_t *c);

/** Bytes of the host-pool allocation that holds a rank's stream words (coll__sync_open()). */
#define COLL_SYNC_WORDS_BYTES (1024u * 16u + 65536u)

/**
 * @brief The stream words of device requests (devmap/sync.c), taken at the first device
 *        allocation of @p c (the world) with its device layer @p ops: @p bytes at pool offset
 *        @p off (an allocation of the library's in the host pool, COLL_SYNC_WORDS_BYTES, or
 *        @p st, the status of its allocation, when it could not be had) registered with the
 *        device layer. Where that fails, requests go without and a stream given is refused
 *        with the reason. Lock held. @return COLL_OK; COLL_ERR_NOMEM.
 */
coll_status_t coll__sync_open(coll_comm_t *c, const coll_dev_ops_t *ops, coll_status_t st,
                              uint64_t off);

/**
 * @brief Forget the words of coll__sync_open() (the pool goes later): every done word is
 *        stored at the last value given out, so no stream wait is left behind. Where a stream
 *        may still touch them (a ready word not yet written, a stream wait queued: a request
 *        the job ended before its stream got there, a stream the trainer did not synchronize),
 *        they stay registered and mapped for the life of the process, and *@p keep_p and
 *        *@p keep_bytes_p say which bytes of the pool the caller must not unmap; else those
 *        are NULL and 0 and the words are unregistered. Lock not needed (the last user goes).
 */
void coll__sync_close(coll_comm_t *c, uint8_t **keep_p, size_t *keep_bytes_p);

/**
 * @brief Give request @p r (on device buffers, not yet sent) a pair of stream words: the done
 *        word, and with @p stream (NULL: none) the ready word, whose write is queued on
 *        *@p stream (NULL there: CUDA's default stream). Lock held of @p c, the world.
 * @return COLL_OK (also with no pair free and no stream: then it has none); with a stream,
 *         COLL_ERR_BUSY when every pair is in flight, COLL_ERR_UNSUPPORTED when the process
 *         has no words (the reason in the message), the device layer's error when the write
 *         could not be queued.
 */
coll_status_t coll__sync_take(coll_comm_t *c, coll_request_t *r, void *const *stream);

/** @brief Store @p r's done word (streams waiting on it go on), its pair still held: the
 *         library's verdict on a request the daemon never answered. Lock held. */
void coll__sync_release(coll_request_t *r);

/** @brief @p r ends with @p status (COLL_INPROGRESS: freed unfinished, or never sent): its done
 *         word stored, its pair free again. COLL_OK says its stream wrote the ready word (the
 *         daemon finished the work only behind it). Lock held. */
void coll__sync_end(coll_request_t *r, coll_status_t status);

#endif
