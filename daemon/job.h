/**
 * @file job.h
 * @brief A job (communicator) as seen by one daemon: its local ranks, its pool, its nodes and
 *        the operations in flight.
 *
 * Life: GATHERING (local ranks join) -> RENDEZVOUS (this node registered at the root) -> READY
 * (endpoints to every node; operations run) -> FAILED (an error reached every rank; new submits
 * fail at once). The job is freed when its last local rank left and no transfer is in flight.
 */
#ifndef COLL_JOB_H
#define COLL_JOB_H

#include <stdint.h>
#include <ucp/api/ucp.h>
#include <uv.h>

#include "collective.h"
#include "daemon.h"
#include "desc.h"
#include "list.h"
#include "plan.h"
#include "pool.h"
#include "session.h"
#include "wire.h"

/** Most local ranks of one job on one node (GPUs or trainer processes per node): with a
 * partial result they fill the 64 sources of one kernel call. */
#define COLL_MAX_LOCAL 63u

struct coll_peer_link;
struct coll_op;

typedef enum {
    COLL_JOB_GATHERING,
    COLL_JOB_RENDEZVOUS,
    COLL_JOB_READY,
    COLL_JOB_FAILED,
} coll_job_state_t;

/** A node of the job, in ring order. */
typedef struct {
    struct coll_job *job;
    uint32_t index;        /**< node rank */
    uint32_t nranks;
    uint32_t *ranks;       /**< global ranks by local rank */
    void *worker_address;  /**< UCX worker address (owned) */
    size_t worker_address_len;
    ucp_ep_h ep;           /**< created on first use; NULL for this node */
    void *close_req;       /**< UCX request of the endpoint's close, while closing */
    char host[64];
    coll_status_t gone;    /**< COLL_OK while reachable; why it left or was lost otherwise */
    int gone_seen;         /**< the engine has acted on @c gone */
    int left;              /**< it said goodbye: it completed every operation it took part in */
    char gone_why[160];
    uint64_t last_seen_ns; /**< its last heartbeat (uv_hrtime) */
    uint32_t pid;          /**< its daemon's process id (0: not told) */
    int same_kernel;       /**< it runs on this node's kernel, in its pid namespace */
    struct coll_peerwatch *watch; /**< on its daemon's process (peerwatch.h), or NULL */
} coll_node_t;

/** A node asked which of this node's ranks have not submitted operation @c key (blame.h). */
typedef struct {
    uint32_t node;
    uint64_t key;
} coll_blame_query_t;

/** What another node answered: its ranks that have not submitted operation @c key. */
typedef struct {
    uint64_t key;
    char text[240];
} coll_blame_t;

/** Queries kept until the next health tick answers them; answers kept per job. */
#define COLL_BLAME_QUERIES 16
#define COLL_BLAMES 8

/** What every node of a job must share; decided by the root daemon's configuration. */
typedef struct {
    uint64_t timeout_ms;     /**< bound of every wait (health.h) */
    size_t segment_bytes;    /**< pipeline segment */
    uint32_t pipeline_depth; /**< columns in flight per operation */
    size_t rd_max_bytes;     /**< allreduce up to this size: recursive doubling */
} coll_job_params_t;

typedef struct coll_job {
    coll_list_t link;             /**< in d->jobs */
    coll_daemon_t *d;
    char id[COLL_JOB_ID_MAX + 1];
    coll_job_state_t state;
    coll_status_t error;          /**< why it failed */
    char errmsg[512];
    uint32_t world_size;
    uint32_t local_size;
    uint32_t njoined;
    char left[96];                /**< "rank R (pid P)": the first rank that left while ready */
    char root[256];
    coll_session_t **locals;      /**< by local rank; NULL when not (or no longer) joined */
    uint32_t *ranks;              /**< global rank by local rank */
    uint32_t timeout_ms;          /**< bound of the rendezvous (and the job, when alone) */
    uint32_t requested_timeout_ms; /**< what the ranks asked for with COLL_TIMEOUT_MS (0: none) */
    uint8_t token_digest[32];     /**< of the job token its first rank here gave (auth.h) */
    uv_timer_t join_timer;        /**< fails the join when the job has not met in time */
    uv_timer_t retry_timer;       /**< reconnects to a root that is not up yet */
    uv_timer_t health_timer;      /**< heartbeats, stalls, timeouts (health.c); closing polls */
    coll_pool_t *pool;
    int pool_accounted;           /**< its size counts against the daemon's pool budget */
    ucp_mem_h pool_memh;          /**< the pool's UCX registration */
    uint32_t node_rank;
    uint32_t nnodes;
    coll_node_t *nodes;
    coll_job_params_t params;     /**< valid from READY on */
    uint32_t *rank_node;          /**< node of every global rank (from READY on) */
    uint32_t *rank_local;         /**< index of every global rank among its node's ranks */
    const uint32_t **node_ranks;  /**< nodes[n].ranks, as an array for blocked plans */
    uint32_t *node_nranks;        /**< nodes[n].nranks, likewise */
    /* transport */
    ucp_worker_h worker;
    uv_poll_t poll;               /**< on the worker's event fd */
    int doorbell_fd;              /**< eventfd the ranks ring (doorbell.c), -1 when none */
    uv_poll_t doorbell;
    void *worker_address;
    size_t worker_address_len;
    uint64_t inflight;            /**< UCX requests not yet completed */
    uint32_t tasks;               /**< kernel-thread tasks running on the job's memory */
    coll_list_t events;           /**< completed transfers waiting for the engine */
    int driving;                  /**< inside coll_transport_drive() */
    uv_timer_t drive_timer;       /**< drives a worker that was left busy (transport.c) */
    uint32_t busy_streak;         /**< re-drives in a row that found nothing to do */
    coll_status_t pending_status; /**< failure seen inside a UCX callback, acted on later */
    char pending_msg[512];
    char control_msg[540];        /**< payload of the abort or goodbye this node sent */
    char heartbeat_msg[32];       /**< payload of its heartbeats */
    coll_blame_query_t blame_queries[COLL_BLAME_QUERIES]; /**< to answer (blame.h) */
    uint32_t nblame_queries;
    coll_blame_t blames[COLL_BLAMES]; /**< answers received, the newest replacing the oldest */
    uint32_t nblames;             /**< answers received in all (the next slot: % COLL_BLAMES) */
    uint64_t epoch;               /**< this incarnation of the job, from the root */
    coll_list_t ops;              /**< coll_op_t in flight */
    coll_list_t staging;          /**< free staging blocks (coll_staging_t) */
    size_t staging_bytes;         /**< size of one block */
    struct coll_peer_link *rdv_link;
    char rdv_error[320];          /**< why the last connection to the root failed */
    int handles;                  /**< uv handles not yet closed */
    uint64_t close_deadline;      /**< loop time (ms) when closing stops waiting */
    int close_flushing;           /**< a failed job flushes its endpoints before closing them */
    int closing;
} coll_job_t;

/**
 * @brief Handle a client's JoinJob: find or create the job and add the session as a local rank.
 * The reply (with the pool fd) goes out once the whole job has met; errors are replied at once.
 */
void coll_job_join(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *join);

/** @brief The job parameters this daemon's configuration gives (as root, or alone). */
void coll_job_params_from_config(const coll_config_t *cfg, coll_job_params_t *params);

/** @brief The rendezvous ended: @p reply is the root's answer (success or error). */
void coll_job_rendezvous_done(coll_job_t *job, const Coll__Wire__NodeJoinReply *reply);

/**
 * @brief Local rank @p s ended the job (coll_comm_abort(), or a submission its library
 *        refused): fail it on every node with @p status and the rank's @p reason.
 */
void coll_job_abort(coll_job_t *job, coll_session_t *s, coll_status_t status, const char *reason);

/** @brief The session of local rank @p s->local_rank left the job. */
void coll_job_leave(coll_job_t *job, coll_session_t *s);

/**
 * @brief Mark @p node lost (COLL_ERR_PEER, shown as "lost" among the job's peers in /status)
 *        with a reason (printf format); no-op when it already left or was lost.
 */
void coll_node_lost(coll_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * @brief Fail the job: every pending operation completes with @p status on every local rank,
 *        later submits fail at once, and (when @p tell_peers) every other node is told.
 *        Only the first failure counts; it is logged once here.
 */
void coll_job_fail(coll_job_t *job, coll_status_t status, int tell_peers, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/** @brief Close every job (daemon shutdown). */
void coll_job_close_all(coll_daemon_t *d);

/** @return The job's endpoint to @p node, creating it on first use; NULL on error (job failed). */
ucp_ep_h coll_job_ep(coll_job_t *job, uint32_t node);

/** @brief Free the job's memory and handles once its transport is closed (transport.c). */
void coll_job_release(coll_job_t *job);

/** @brief Close callback of the job's uv handles: the job is freed with the last one. */
void coll_job_handle_closed(uv_handle_t *h);

/** @brief Free the job once nothing references it (no sessions, transfers or handles). */
void coll_job_maybe_free(coll_job_t *job);

#endif
