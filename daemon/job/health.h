/**
 * @file health.h
 * @brief A ready job's periodic check: heartbeats to the next node, the previous node's
 *        liveness, operations that stall or run past the job's timeout, and receives stranded by
 *        a node that left or was lost.
 *
 * One timeout per job (job->params.timeout_ms: the client's COLL_TIMEOUT_MS, else the root's
 * `timeout`) bounds everything: an operation older than half of it is logged as stalled,
 * naming the local ranks that have not submitted (or whose stream has not written its ready
 * word, engine/dev_sync.h) or the nodes it waits for; at the full timeout the job fails on
 * every node with that message. Each node heartbeats the next one every tick;
 * a node that hears nothing from the previous one for half the timeout declares it lost and
 * fails the job, so a stopped or dead daemon is reported within the timeout even when no
 * operation runs. (Every node watches its predecessor: any set of dead nodes short of all has
 * a live successor.)
 */
#ifndef COLL_HEALTH_H
#define COLL_HEALTH_H

#include "job/lifecycle.h"

/** @brief Start the periodic check of a job that just became ready. */
void coll_health_start(coll_job_t *job);

/** @brief Stop it (the job failed or closes). */
void coll_health_stop(coll_job_t *job);

/** @return The check period of @p job in milliseconds: timeout / 8, 50 .. 250 ms
 *          (coll_job_tick_ms(), which its ranks use too). */
uint64_t coll_health_tick_ms(const coll_job_t *job);

#endif
