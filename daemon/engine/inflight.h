/**
 * @file inflight.h
 * @brief Which of a rank's allocations an operation in flight still reads or writes, so that a
 *        free of one is refused: the operation would write into whatever the pool gives out
 *        next (to this rank or to another local rank).
 */
#ifndef COLL_ENGINE_INFLIGHT_H
#define COLL_ENGINE_INFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "core/session.h"

/**
 * @brief Whether the allocation of session @p s at offset @p off of the job's pool of id
 *        @p pool (core/dev_pools.h: 0 the host pool, 1 + d device d's) holds a byte that an
 *        operation not yet complete reads or writes: one of the engine's operations with @p s
 *        as a member, an all-to-all's blocks by its count table (also one done whose device
 *        buffers the staged path still copies back into, or whose transfers are in flight), or a post of
 *        @p s in the shared-memory area that nobody completed yet. Loop thread.
 * @param [out] what The operation, for a message ("allreduce key 7"), when it does.
 * @return 1 when it does, 0 when it does not (or @p off is not an allocation of @p s).
 */
int coll_inflight_uses(coll_job_t *job, const coll_session_t *s, uint32_t pool, uint64_t off,
                       char *what, size_t len);

#endif
