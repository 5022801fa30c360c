/**
 * @file job.h
 * @brief A job (communicator) as seen by one daemon: its local ranks, its pools, its nodes, and
 *        the parts each layer keeps; how it fails.
 *
 * Life: GATHERING (local ranks join) -> RENDEZVOUS (this node registered at the root) -> READY
 * (operations run) -> FAILED (an error reached every rank; new submits fail at once). The job
 * layer (job/lifecycle.c) creates and frees jobs; coll_job_fail() is here, below every layer that
 * finds failures, and reaches the layers above through the hooks (core/hooks.h).
 */
#ifndef COLL_CORE_JOB_H
#define COLL_CORE_JOB_H

#include <stdint.h>
#include <sys/types.h>
#include <ucp/api/ucp.h>
#include <uv.h>

#include <collective.h>

#include "base/list.h"
#include "core/daemon.h"
#include "core/group.h"
#include "core/pool.h"
#include "core/session.h"
#include "proto/desc.h"
#include "proto/wire.h"

struct coll_peer_link;
struct coll_transport_hooks;
struct coll_codec_job;

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
    void *leader_address;  /**< its local rank 0's own UCX worker address, for the direct path
                                (owned; NULL: none) */
    size_t leader_address_len;
    ucp_ep_h ep;           /**< created on first use; NULL for this node */
    int ep_forceable;      /**< @c ep reports its peer's failure (UCP_ERR_HANDLING_MODE_PEER):
                                UCX closes it by force, cancelling its sends; UCX 1.13 refuses
                                a forced close of the others (net/teardown.c) */
    void *flush_req;       /**< UCX request of a failed job's flush of @c ep, until it ends */
    void *close_req;       /**< UCX request of the endpoint's close, until it ends */
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

/** One size range of the automatic algorithm choice (engine/crossover.h): a @c kind
 *  operation of at most @c max_bytes per rank (and more than the previous range's of the same
 *  kind) runs @c algo. */
typedef struct {
    uint32_t kind;      /**< coll_kind_t */
    uint32_t algo;      /**< coll_algo_t */
    uint64_t max_bytes; /**< UINT64_MAX for the last range of a kind */
} coll_job_choice_t;

/** Size ranges a job's parameters hold at most. */
#define COLL_JOB_CHOICES 24

/** What every node of a job must share; decided by the root daemon's configuration. */
typedef struct coll_job_params {
    uint64_t timeout_ms;     /**< bound of every wait (health.h) */
    size_t segment_bytes;    /**< pipeline segment */
    uint32_t pipeline_depth; /**< columns in flight per operation */
    size_t rd_max_bytes;     /**< allreduce up to this size: recursive doubling, when the
                                  choices below name no allreduce */
    uint32_t nchoices;       /**< of choices: 0 when the root has no cost model */
    coll_job_choice_t choices[COLL_JOB_CHOICES]; /**< the automatic choice, by the root's cost
                                                      model, kind by kind, sizes rising */
    int nccl;                /**< 1: collectives on device buffers may run through NCCL
                                  between the nodes (net/rdv_nccl.h; 0 for a job alone) */
    uint64_t direct_max_bytes; /**< allreduces up to this size run between the nodes' leaders
                                    (the direct path, client/direct/); 0: none */
    uint64_t direct_token;   /**< random per job, carried by every direct message */
} coll_job_params_t;

/** The transport's part of a job (net/transport.c, net/teardown.c, net/control.c): its UCX
 *  worker, what UCX completed, the control messages it sent and received. */
typedef struct {
    ucp_worker_h worker;          /**< NULL for a job with no other node */
    uv_poll_t poll;               /**< on the worker's event fd */
    uv_timer_t timer;             /**< drives a worker left busy; polls the close */
    const struct coll_transport_hooks *hooks; /**< what the engine wants called (transport.h) */
    void *worker_address;
    size_t worker_address_len;
    ucp_mem_h pool_memh;          /**< the pool's UCX registration */
    uint64_t inflight;            /**< transfers not yet handed back to the engine */
    coll_list_t posted;           /**< transfers UCX has not completed (their link) */
    coll_list_t events;           /**< completed transfers waiting for the engine */
    coll_list_t owned;            /**< control messages sent from buffers of their own that
                                       did not complete at once (net/control.c): each one
                                       malloc'ed block whose first member is its link, freed
                                       with the worker */
    int driving;                  /**< inside coll_transport_drive() */
    uint32_t busy_streak;         /**< re-drives in a row that found nothing to do */
    coll_status_t pending_status; /**< failure seen inside a UCX callback, acted on later */
    char pending_msg[512];
    char control_msg[540];        /**< payload of the abort or goodbye this node sent */
    char heartbeat_msg[32];       /**< payload of its heartbeats */
    coll_blame_query_t blame_queries[COLL_BLAME_QUERIES]; /**< to answer (job/blame.h) */
    uint32_t nblame_queries;
    coll_blame_t blames[COLL_BLAMES]; /**< answers received, the newest replacing the oldest */
    uint32_t nblames;             /**< answers received in all (the next slot: % COLL_BLAMES) */
    uint64_t bytes_sent;          /**< data-path bytes sent to other nodes (tagged messages:
                                       descriptors, segments, the stages' exchanges) */
    uint64_t close_deadline;      /**< loop time (ms) when closing stops waiting */
    int close_flushing;           /**< a failed job flushes its endpoints before closing them */
} coll_job_net_t;

/** The rendezvous' part of a job on the node side (net/rdv.c). */
typedef struct {
    struct coll_peer_link *link;  /**< to the root, while registering */
    uv_timer_t retry_timer;       /**< reconnects to a root that is not up yet */
    char error[320];              /**< why the last connection to the root failed */
    uint64_t since_ms;            /**< loop time of the first attempt to reach the root */
} coll_job_rdv_t;

/** A direct-path allreduce of this node whose key a descriptor of the daemons' path from the
 *  previous node carries too (engine/shm_route.h). */
typedef struct {
    uint64_t key;      /**< its key */
    uint64_t gen;      /**< its home post's generation (coll_shm_gen()) */
    uint64_t since_ns; /**< when first seen so (uv_hrtime()); 0: none */
    coll_desc_t peer;  /**< that descriptor, taken when the job fails with it (UCX may write it
                            until the worker is destroyed) */
} coll_shm_route_t;

/** The engine's part of a job (engine/). */
typedef struct {
    coll_list_t ops;              /**< coll_op_t in flight */
    coll_list_t staging;          /**< free staging blocks (core/staging.h) */
    size_t staging_bytes;         /**< size of one block */
    struct coll_codec_job *codec; /**< compression: layouts, residuals (engine/codec/); NULL
                                       until first used */
    uint64_t shm_done;            /**< collectives its ranks completed in shared memory */
    uint64_t shm_posted;          /**< collectives its ranks posted there (every one) */
    struct coll_nccl_group *nccl; /**< its NCCL communicators, one per group that ran an NCCL
                                       operation, linked by their next (engine/algos/nccl.h);
                                       NULL until the first */
    coll_shm_route_t route;       /**< a route disagreement suspected (engine/shm_route.h) */
} coll_job_engine_t;

/** A job on this node. The job layer (job/lifecycle.c) owns its life and the fields at the top;
 *  each layer below owns its sub-struct. */
typedef struct coll_job {
    coll_list_t link;             /**< in d->jobs */
    coll_daemon_t *d;
    char id[COLL_JOB_ID_MAX + 1];
    coll_job_state_t state;
    coll_status_t error;          /**< why it failed */
    char errmsg[512];
    coll_status_t culprit_error;  /**< the code its culprit sees (coll_job_fail_by()); COLL_OK:
                                       none, every rank sees @c error */
    uint32_t culprit;             /**< the global rank that ended it, with culprit_error */
    uint32_t world_size;
    uint32_t local_size;
    uint32_t njoined;
    char left[96];                /**< "rank R (pid P)": the first rank that left while ready */
    char root[256];
    coll_session_t **locals;      /**< by local rank; NULL when not (or no longer) joined */
    uint32_t *ranks;              /**< global rank by local rank */
    uint32_t timeout_ms;          /**< bound of the rendezvous (and the job, when alone) */
    void *leader_address;         /**< local rank 0's own UCX worker address from its join
                                       (owned; NULL: none), sent in the NodeJoin */
    size_t leader_address_len;
    uint32_t requested_timeout_ms; /**< what the ranks asked for with COLL_TIMEOUT_MS (0: none) */
    uint32_t connect_timeout_ms;  /**< how long the root may refuse this node before the join
                                       fails (COLL_CONNECT_TIMEOUT_MS; 0: the job's timeout) */
    uint8_t token_digest[32];     /**< names the job with its id: of the job token its first
                                       rank here gave, or of that rank's uid (base/auth.h) */
    uid_t owner_uid;              /**< the uid of that first rank (job/formation.c) */
    uv_timer_t join_timer;        /**< fails the join when the job has not met in time */
    uv_timer_t health_timer;      /**< heartbeats, stalls, timeouts (job/health.c) */
    coll_pool_t *pool;
    struct coll_dev_pool *dev_pools[COLL_DEV_MAX]; /**< by device: the job's device pools on
                                                        this node (core/dev_pools.h), NULL
                                                        until its first allocation there */
    struct coll_dev_sync_pages *sync_pages; /**< pages of the host pool registered with the
                                                 device layer for device waits on the ranks'
                                                 ready words (engine/dev_sync.h), NULL: none */
    struct coll_dev_parked *dev_parked; /**< operations freed while their device work
                                             waited on a ready word, kept until the job ends
                                             here (engine/dev_sync.h) */
    uint32_t node_rank;
    uint32_t nnodes;
    coll_node_t *nodes;
    coll_job_params_t params;     /**< valid from READY on */
    uint32_t *rank_node;          /**< node of every global rank (from READY on) */
    uint32_t *rank_local;         /**< index of every global rank among its node's ranks */
    coll_group_t *world;          /**< group 0, every rank (from READY on) */
    coll_list_t groups;           /**< coll_group_t split from it, known on this node */
    uint32_t group_next;          /**< lowest group id no split on this node has used yet */
    int doorbell_fd;              /**< eventfd the ranks ring (job/doorbell.c), -1 when none */
    uv_poll_t doorbell;
    uint64_t epoch;               /**< this incarnation of the job, from the root */
    int handles;                  /**< uv handles not yet closed */
    uint32_t holds;               /**< work off the loop thread that writes into the job's
                                       memory (the engine's kernel-thread tasks): freed at 0 */
    uint64_t shm_warned[8];       /**< keys of collectives stalled in shared memory that were
                                       warned about (job/health.c), the newest replacing */
    uint32_t nshm_warned;
    uint32_t shm_left_ticks;      /**< health ticks in a row that found collectives waiting in
                                       shared memory after a local rank left (job/health.c) */
    int closing;
    coll_job_net_t net;
    coll_job_rdv_t rdv;
    coll_job_engine_t engine;
    struct coll_ps_job *ps;       /**< the parameter service (ps/ps.h), NULL when none */
} coll_job_t;

/** @brief The job parameters this daemon's configuration gives (as root, or alone), with no
 *         choices (the job layer's params hook adds them, core/hooks.h). */
void coll_job_params_from_config(const coll_config_t *cfg, coll_job_params_t *params);

/**
 * @brief The wire form of @p p, for the rendezvous' answer. Pointers only: @p w points into
 *        @p store and @p ptrs (COLL_JOB_CHOICES each), which must outlive it.
 * @param [out] w Initialised and filled.
 */
void coll_job_params_to_wire(const coll_job_params_t *p, Coll__Wire__JobParams *w,
                             Coll__Wire__AlgoChoice *store, Coll__Wire__AlgoChoice **ptrs);

/**
 * @brief The parameters the root sent in @p w.
 * @param [out] p Set only on success.
 * @return COLL_OK; COLL_ERR_PROTOCOL for no parameters (@p w NULL) or more than
 *         COLL_JOB_CHOICES choices.
 */
coll_status_t coll_job_params_from_wire(const Coll__Wire__JobParams *w, coll_job_params_t *p);

/**
 * @brief Mark @p node lost (COLL_ERR_PEER, shown as "lost" among the job's peers in /status)
 *        with a reason (printf format); no-op when it already left or was lost.
 */
void coll_node_lost(coll_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * @brief Fail the job: record why, log it once, count it, and call the daemon's failed hook
 *        (core/hooks.h), which ends every pending operation with @p status on every local rank,
 *        refuses later submits and (when @p tell_peers) tells every other node, synchronously.
 *        Only the first failure counts.
 */
void coll_job_fail(coll_job_t *job, coll_status_t status, int tell_peers, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/**
 * @brief Rank @p rank of this node ended the job with @p status (a call of it refused by its
 *        library or by this daemon, or coll_comm_abort()): the job fails as coll_job_fail()
 *        (the other nodes told) with COLL_ERR_JOB and the message (printf format), which must
 *        name the rank and why. Every other rank sees COLL_ERR_JOB, since its own calls were
 *        right; @p rank itself keeps @p status (coll_job_status_for()). A COLL_ERR_MISMATCH is
 *        every rank's: the job fails with it everywhere. Only the first failure counts.
 */
void coll_job_fail_by(coll_job_t *job, uint32_t rank, coll_status_t status, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

/**
 * @brief The status that global rank @p rank of this node should get for @p status of the job:
 *        the code of its own refusal where it ended the failed job (coll_job_fail_by()) and
 *        @p status is the job's error; @p status otherwise. Every place that tells a local
 *        rank the job's error passes it through here.
 */
coll_status_t coll_job_status_for(const coll_job_t *job, uint32_t rank, coll_status_t status);

/** @brief Close callback of the job's uv handles (every layer's): the job struct is freed with
 *         the last one. */
void coll_job_handle_closed(uv_handle_t *h);

#endif
