/**
 * @file dev_wait.h
 * @brief The executor's work on one node behind device waits for the ranks' ready words
 *        (docs/gpu.md, "Streams"), as device+local and device+peers (dev_local.c) and
 *        device+peers split across the devices (dev_peers.c) queue it: where the words are not
 *        all there when the operation starts, each stream its work goes on becomes one of its
 *        own, taken from its device's pool (coll_dev_pool_wait_get()) and held on the device by
 *        waits for the words (coll_dev_sync_device_wait()), so the work is queued at once and
 *        starts at the words, not at the loop's poll of them, holding no other operation's work.
 *        Freed while that work still waits for a word (its job failed), the operation is parked
 *        until the job ends on the node (coll_dev_sync_park()); after, its streams go back to
 *        their pools where every word they waited for came, else are destroyed. Loop thread.
 */
#ifndef COLL_ENGINE_ALGOS_DEV_WAIT_H
#define COLL_ENGINE_ALGOS_DEV_WAIT_H

#include <stddef.h>

#include "core/dev_pools.h"
#include "core/dev_scratch.h"
#include "engine/dev_sync.h"
#include "engine/op.h"

/**
 * @brief Take a stream of @p dp's (on device @p device) for @p op's work into *@p own_p and
 *        queue on it device waits for the ready words of @p op's ranks not there yet.
 * @return COLL_OK (the work may be queued on *@p own_p now); COLL_ERR_UNSUPPORTED where the
 *         device layer refuses the waits (*@p own_p taken all the same: the caller polls the
 *         words, then queues the work on it); another status: *@p what_p and @p err say what
 *         failed (*@p own_p NULL where no stream was taken), for the caller to fail the job.
 */
coll_status_t coll_devw_gate(coll_op_t *op, coll_dev_pool_t *dp, int device,
                             coll_dev_stream_t *own_p, const char **what_p, char *err,
                             size_t errlen);

/** @brief Release a lane of @p job's operation: wait for its work on @p stream where
 *         @p pending (queued, not seen complete; the job failed meanwhile), free its
 *         @p scratch, give @p own (coll_devw_gate()'s, NULL: none) back to @p dp where @p keep
 *         (every word it waited for came), else destroy it (never given to a later
 *         operation). */
void coll_devw_release(coll_job_t *job, coll_dev_pool_t *dp, coll_dev_stream_t stream,
                       int pending, coll_dev_scratch_t *scratch, coll_dev_stream_t own,
                       int keep);

/**
 * @brief The cleanup of @p op, whose work (@p state) may still wait on the device for a ready
 *        word where @p waits (it took streams with coll_devw_gate()): parked where a word is
 *        not there (@p release(job, @p state) once the job ends on the node, its streams to be
 *        destroyed then).
 * @return 1 parked; 0: the caller releases @p state now, its streams kept (*@p keep_p 1: no
 *         wait or every word there) or destroyed (0: no memory to park it, the words stored).
 */
int coll_devw_park(coll_op_t *op, int waits, coll_dev_sync_release_fn release, void *state,
                   int *keep_p);

#endif
