/**
 * @file shm_route.h
 * @brief An allreduce that one node runs on the direct path (its leader's rounds with the other
 *        leaders, client/direct/) and another through the daemons: the one disagreement
 *        between nodes that neither descriptor check sees, since the leaders' rounds never
 *        meet the daemons' operation. Found where the two paths cross: the daemons' path
 *        sends its descriptor to the next node's daemon (engine/xfer.c), which posts no
 *        receive for a collective its ranks run on the direct path, so the descriptor waits
 *        in its worker, unexpected, while that node's leader waits in its rounds for a leader
 *        that never comes.
 */
#ifndef COLL_ENGINE_SHM_ROUTE_H
#define COLL_ENGINE_SHM_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "engine/shm_watch.h"

/** How long a direct allreduce must wait in its rounds with the previous node's descriptor of
 *  its key waiting unexpected before the job fails: the previous node may already run a later
 *  collective of that key (a key the user gave, used again) through the daemons while this
 *  node's leader still waits for the other leaders' last messages of the rounds that node's
 *  leader already finished. */
#define COLL_SHM_ROUTE_GRACE_MS 1000u

/**
 * @brief Once a health tick, with the collectives waiting in the area (@p w, @p n, from
 *        coll_shm_waiting()) at @p now (uv_hrtime()): a direct allreduce that every local rank
 *        posted, whose rounds have not ended, and whose key a descriptor from the previous node
 *        carries (the world's, waiting unexpected in the job's worker), seen so at ticks
 *        COLL_SHM_ROUTE_GRACE_MS apart with the same home post, fails the job with
 *        COLL_ERR_MISMATCH (told to every node) naming both descriptors. Only the loop calls it.
 * @return 1 when the job failed, else 0.
 */
int coll_shm_route_check(coll_job_t *job, const coll_shm_wait_t *w, size_t n, uint64_t now);

#endif
