/**
 * @file shm_watch.h
 * @brief How the daemon sees the collectives its local ranks run in the shared-memory area
 *        (proto/shm_area.h) without it: the ones still waiting there (for /status, stall warnings,
 *        timeouts and blame) and the counters of the completed ones (for /metrics).
 */
#ifndef COLL_ENGINE_SHM_WATCH_H
#define COLL_ENGINE_SHM_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"

/** Most waiting collectives coll_shm_waiting() reports. */
#define COLL_SHM_WATCH_MAX 64u

/** One collective posted in the area and neither completed nor taken by the daemon. */
typedef struct {
    uint64_t key;
    uint64_t count;
    uint32_t coll;      /**< coll_kind_t */
    uint32_t dtype;
    uint32_t algo;      /**< coll_algo_t asked for (0: auto) */
    uint32_t op;        /**< coll_redop_t */
    uint64_t since_ns;  /**< its first post (CLOCK_MONOTONIC, as uv_hrtime()) */
    uint64_t posted;    /**< bit l: local rank l posted it (local ranks below 64) */
    uint64_t busy;      /**< bit l: local rank l is running one of its chunks */
    uint32_t wait_node; /**< its direct rounds: 1 + the node whose leader the node's leader
                             waits for (its home post's direct_wait), 0: none */
} coll_shm_wait_t;

/**
 * @brief The collectives waiting in @p job's area, oldest first, at most @p max of them; not
 *        the node-reduced allreduces whose inter-node phase the daemon runs (its operations
 *        stand for them then).
 * @return How many were written to @p out (0 for a job that is not ready).
 */
size_t coll_shm_waiting(const coll_job_t *job, coll_shm_wait_t *out, size_t max);

/**
 * @brief The waiting collective of key @p key.
 * @return 1 with it in @p w, 0 when no local rank posted it (or it completed, or was taken).
 */
int coll_shm_waiting_key(const coll_job_t *job, uint64_t key, coll_shm_wait_t *w);

/**
 * @brief Describe what waiting collective @p w waits for: the local ranks that have not posted
 *        it ("rank 3 (pid N, node 0, not submitted)", as job/blame.c names them), or when all
 *        have, those running it; with none running it, an allreduce of the direct path waits
 *        for the node's leader (local rank 0) in its rounds with the other nodes' leaders.
 * @return The number of ranks named as not having submitted it.
 */
uint32_t coll_shm_describe(const coll_job_t *job, const coll_shm_wait_t *w, char *buf,
                           size_t len);

/**
 * @brief Whether a local rank submitted another collective with @p w's key to the daemon, or
 *        the same one on buffers in a device pool: the world's collectives of one key meet in
 *        the area or in the daemon by their kind and where their buffers are (the area takes
 *        host buffers only), so ranks that disagree on the kind (an allreduce against a
 *        gather) or on the pool (host memory against a device) would each wait for the others
 *        on its own path until the timeout.
 * @return 1 with that operation's collective (coll_kind_t) in @p kind_p and in @p ranks_p the
 *         local ranks that submitted it to the daemon (bit l: local rank l; of the same
 *         collective, those whose buffers are in a device pool), else 0.
 */
int coll_shm_conflict(const coll_job_t *job, const coll_shm_wait_t *w, uint32_t *kind_p,
                      uint64_t *ranks_p);

/**
 * @brief Append ", rank R (pid P, node N, @p what)" to @p buf for every local rank whose bit in
 *        @p mask is @p set (local ranks below 64): the form in which job/blame.c names the
 *        ranks missing from the daemon's operations, so that a job's error names a culprit
 *        alike whichever path found it.
 * @return The number of ranks named.
 */
uint32_t coll_shm_name_ranks(const coll_job_t *job, uint64_t mask, int set, const char *what,
                             char *buf, size_t len);

/**
 * @return 1 when waiting collective @p w runs in shared memory once every local rank posted
 *         it (a single-node job, no forced algorithm, at most the crossover; on several nodes,
 *         an allreduce reduced and distributed there, up to the node crossover with several
 *         local ranks, possibly: local rank 0 may have no node buffer free; or up to
 *         direct_max_bytes, its inter-node phase between the nodes' leaders), 0 when it goes
 *         to the daemon.
 */
int coll_shm_runs_there(const coll_job_t *job, const coll_shm_wait_t *w);

/**
 * @return 1 when waiting collective @p w runs on the direct path: an allreduce of a multi-node
 *         job up to direct_max_bytes whose inter-node rounds the nodes' leaders run between
 *         themselves (client/direct/), not the daemons.
 */
int coll_shm_is_direct(const coll_job_t *job, const coll_shm_wait_t *w);

/** @brief Add what the ranks counted since the last harvest to the daemon's counters (and to
 *         the job's shm totals). */
void coll_shm_harvest(coll_job_t *job);

#endif
