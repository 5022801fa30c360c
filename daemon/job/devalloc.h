/**
 * @file devalloc.h
 * @brief A rank's allocations in the job's device pools (core/dev_pools.h): which device it
 *        means, refusals that say why (no device layer, another layer than the rank's, no such
 *        device, one that cannot share memory, a budget or a device that has no room), and the
 *        reply with the chunks the rank has not mapped yet, their fds attached.
 */
#ifndef COLL_JOB_DEVALLOC_H
#define COLL_JOB_DEVALLOC_H

#include "core/session.h"
#include "proto/frame.h"
#include "proto/wire.h"

/** What a device allocation's reply carries besides its fields: the chunks and their fds. */
typedef struct {
    Coll__Wire__PoolChunk chunk[COLL_FRAME_MAX_FDS];
    Coll__Wire__PoolChunk *chunk_p[COLL_FRAME_MAX_FDS];
    int fds[COLL_FRAME_MAX_FDS];  /**< owned by the pool: sent, not closed */
    unsigned nfds;
} coll_devalloc_out_t;

/**
 * @brief Serve @p a (a device kind) for @p s, whose job is ready: fill @p r (offset, pool,
 *        pool_bytes, chunks) and @p out, or say why not in @p err.
 * @return COLL_OK; COLL_ERR_UNSUPPORTED (no device layer, the rank's layer differs, no such
 *         device, a device that cannot share memory, a device out of service after a fault
 *         of its work: coll_device_fault()); COLL_ERR_INVALID for 0 bytes;
 *         COLL_ERR_POOL_FULL (the device's budget or the pool's range); COLL_ERR_NOMEM or the
 *         device's error when its memory could not be taken.
 */
coll_status_t coll_devalloc(coll_session_t *s, const Coll__Wire__MemAlloc *a,
                            Coll__Wire__MemAllocReply *r, coll_devalloc_out_t *out, char *err,
                            size_t errlen);

/** @brief Free @p s's allocation at @p offset of the job's pool @p pool (1 + device); one it
 *         does not own is logged. */
void coll_devalloc_free(coll_session_t *s, uint32_t pool, uint64_t offset);

#endif
