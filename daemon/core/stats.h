/**
 * @file stats.h
 * @brief Counters of the daemon's work for /metrics and /status: operations and bytes by
 *        collective and datatype, latency histograms, the bandwidth of the last large operation,
 *        errors by kind.
 *
 * The engine, the client link and the job layer call the coll_stats_* hooks (one line each,
 * with numbers, not their objects) at the points of an operation's or a job's life; they cost a
 * few additions. Only the loop thread calls them. The counters live in the daemon object.
 */
#ifndef COLL_CORE_STATS_H
#define COLL_CORE_STATS_H

#include <stdint.h>

#include <collective.h>

/** Kinds of operation counted (coll_kind_t: allreduce .. recv, the parameter service's, gather,
 *  scatter and alltoallv, whose bytes the engine counts from its count table). */
#define COLL_STATS_KINDS 15
/** Upper bounds of the latency histogram buckets, seconds (+Inf is implied). */
#define COLL_STATS_BUCKETS 18
/** Error kinds counted (room for the status table of collective.h). */
#define COLL_STATS_ERRORS 32

/** A Prometheus-style histogram: counts per bucket (not cumulative), total count and sum. */
typedef struct {
    uint64_t bucket[COLL_STATS_BUCKETS + 1]; /**< last: above the largest bound */
    uint64_t count;
    double sum;                              /**< seconds */
} coll_histogram_t;

/** Operations of one collective and datatype. */
typedef struct {
    uint64_t ok;     /**< completed successfully */
    uint64_t failed; /**< completed with an error */
    uint64_t bytes;  /**< bytes of the successful ones (nccl-tests' size) */
} coll_stats_cell_t;

/** The last successful operation of at least busbw_min_bytes. */
typedef struct {
    int valid;
    uint16_t kind;      /**< coll_kind_t */
    uint16_t dtype;     /**< coll_dtype_t */
    uint32_t world;     /**< ranks */
    uint64_t bytes;     /**< nccl-tests' size */
    double seconds;     /**< from start (every local rank submitted) to completion */
    double algbw;       /**< bytes / seconds */
    double busbw;       /**< algbw times the collective's bus factor */
} coll_stats_last_t;

/** Allreduces between nodes run by one compression method (collective.h). */
typedef struct {
    uint64_t ops;
    uint64_t wire_bytes;  /**< sent by this node */
    uint64_t dense_bytes; /**< what the uncompressed ring would have sent */
} coll_stats_compress_t;

/** The daemon's listeners, for the counts of connections they refused (net/accept.h). */
typedef enum {
    COLL_LISTENER_CLIENT,  /**< the client socket */
    COLL_LISTENER_STATUS,  /**< the status server (Unix socket and TCP) */
    COLL_LISTENER_CONTROL, /**< the control listener for peer daemons */
    COLL_LISTENERS
} coll_listener_t;

/** Why a connection was closed before it was served, or a listener held back (a limit hit). */
typedef enum {
    COLL_REFUSED_MAX_CONNECTIONS, /**< the listener had its most connections open: it waited */
    COLL_REFUSED_PER_ADDRESS,     /**< its address had peer_max_per_address open */
    COLL_REFUSED_FD_RESERVE,      /**< fewer descriptors were free than fd_reserve */
    COLL_REFUSED_EMFILE,          /**< the descriptor limit (EMFILE, ENFILE) */
    COLL_REFUSED_AUTH,            /**< it failed, or did not try, peer authentication */
    COLL_REFUSED_HANDSHAKE_BYTES, /**< it sent more than peer_handshake_bytes unauthenticated */
    COLL_REFUSED_HANDSHAKE_TIME,  /**< it did not authenticate within peer_handshake_ms */
    COLL_REFUSED_IDLE,            /**< silent for peer_idle_ms outside a rendezvous */
    COLL_REFUSED_PROTOCOL,        /**< a frame it sent was not a message it may send */
    COLL_REFUSED_WORKER_ADDRESS,  /**< its UCX worker address does not pass (ucx_address.h) */
    COLL_REFUSED_REASONS
} coll_refusal_t;

/** Everything counted since the daemon started. */
typedef struct coll_stats {
    uint64_t start_ns;  /**< uv_hrtime() at start */
    double start_wall;  /**< Unix time at start, seconds */
    uint64_t busbw_min_bytes;
    coll_stats_cell_t ops[COLL_STATS_KINDS][COLL_DTYPE_COUNT][COLL_COMPRESS_COUNT]; /**< by
                             collective, datatype and the compression method that ran */
    coll_histogram_t duration[COLL_STATS_KINDS]; /**< start to completion */
    coll_histogram_t wait[COLL_STATS_KINDS];     /**< first local submission to start */
    uint64_t request_errors[COLL_STATS_ERRORS];  /**< requests completed with each error */
    uint64_t job_failures[COLL_STATS_ERRORS];    /**< jobs failed with each error */
    uint64_t job_refusals[COLL_STATS_ERRORS];    /**< jobs this node refused, by error */
    uint64_t jobs_created;
    coll_stats_last_t last_large;
    coll_stats_compress_t compress[COLL_COMPRESS_COUNT]; /**< by method run (NONE: dense) */
    uint64_t shm_ops[COLL_STATS_KINDS]; /**< of ops[]: those the ranks ran in shared memory */
    uint64_t shm_posted;                /**< collectives the ranks posted in shared memory */
    uint64_t direct_refused;            /**< direct-path messages the local leaders dropped for
                                             a wrong job token */
    uint64_t refused[COLL_LISTENERS][COLL_REFUSED_REASONS]; /**< connections refused, by
                                                                 listener and reason */
} coll_stats_t;

/** @brief Start counting: zero @p st and record the start time. */
void coll_stats_init(coll_stats_t *st, uint64_t busbw_min_bytes);

/** @return The upper bound of histogram bucket @p i in seconds (i < COLL_STATS_BUCKETS). */
double coll_stats_bucket_bound(unsigned i);

/** @brief Add one observation of @p seconds to @p h. */
void coll_histogram_observe(coll_histogram_t *h, double seconds);

/** @return Name of collective kind @p kind as used in metrics ("allreduce", "reduce_scatter"). */
const char *coll_stats_kind_name(unsigned kind);

/**
 * @brief nccl-tests' bus bandwidth factor of @p kind on @p world ranks: 2(n-1)/n for
 *        allreduce, (n-1)/n for reduce-scatter, all-gather, gather and scatter, 1 otherwise.
 */
double coll_stats_bus_factor(unsigned kind, uint32_t world);

/**
 * @brief nccl-tests' size of an operation: the bytes of one rank's buffer, and for
 *        reduce-scatter, all-gather, gather and scatter the bytes of the large (world-sized) one.
 */
uint64_t coll_stats_op_bytes(unsigned kind, uint64_t count, size_t esize, uint32_t world);

/** @return Index of @p status in the error tables; the last index for unknown codes. */
unsigned coll_stats_error_index(coll_status_t status);

/** @return The status of error table index @p i (COLL_OK for the unknown slot). */
coll_status_t coll_stats_error_status(unsigned i);

/** @return Monotonic time in nanoseconds (the clock of op->t_submit_ns). */
uint64_t coll_stats_now_ns(void);

/** What the counters need of one operation. */
typedef struct {
    unsigned kind;      /**< coll_kind_t */
    unsigned dtype;     /**< coll_dtype_t */
    uint32_t world;     /**< ranks of the job */
    uint64_t bytes;     /**< nccl-tests' size (coll_stats_op_bytes()) */
    unsigned compression; /**< coll_compress_method_t that ran (NONE: uncompressed) */
} coll_stats_op_t;

/** @brief Hook: every local rank submitted a @p kind operation, @p seconds after the first. */
void coll_stats_op_waited(coll_stats_t *st, unsigned kind, double seconds);

/** @brief Hook: the operation @p op completed with @p status on every local rank, @p seconds
 *         after it started. */
void coll_stats_op_done(coll_stats_t *st, const coll_stats_op_t *op, double seconds,
                        coll_status_t status);

/** @brief Hook: the local ranks completed @p n @p kind operations of @p dtype (@p bytes in
 *         all) in shared memory, without the daemon (engine/shm_watch.h). */
void coll_stats_shm_done(coll_stats_t *st, unsigned kind, unsigned dtype, uint64_t n,
                         uint64_t bytes);

/** @brief Hook: durations of such operations, binned by the daemon's bounds (@p hist has
 *         COLL_STATS_BUCKETS + 1 counts), @p sum_ns their sum. */
void coll_stats_shm_durations(coll_stats_t *st, unsigned kind, const uint64_t *hist,
                              uint64_t sum_ns);

/** @brief Hook: the local ranks posted @p n collectives in shared memory. */
void coll_stats_shm_posted(coll_stats_t *st, uint64_t n);

/** @brief Hook: a local leader dropped @p n direct-path messages for a wrong job token. */
void coll_stats_direct_refused(coll_stats_t *st, uint64_t n);

/** @brief Hook: a request completed with @p status (errors are counted). */
void coll_stats_request_done(coll_stats_t *st, coll_status_t status);

/** @brief Hook: an allreduce between nodes that ran @p method (COLL_COMPRESS_NONE when
 *         uncompressed) completed, having sent @p wire bytes where the uncompressed ring sends
 *         @p dense. */
void coll_stats_compressed(coll_stats_t *st, unsigned method, uint64_t wire, uint64_t dense);

/** @brief Hook: a job was created on this node. */
void coll_stats_job_created(coll_stats_t *st);

/** @brief Hook: this node refused to create a job (budget, pool) with @p status. */
void coll_stats_job_refused(coll_stats_t *st, coll_status_t status);

/** @brief Hook: a job failed with @p status. */
void coll_stats_job_failed(coll_stats_t *st, coll_status_t status);

/** @brief Hook: listener @p listener refused a connection (or held back) for @p reason. */
void coll_stats_refused(coll_stats_t *st, coll_listener_t listener, coll_refusal_t reason);

/** @return The metric label of @p listener ("client", "status", "control"). */
const char *coll_stats_listener_name(unsigned listener);

/** @return The metric label of @p reason ("max_connections", "handshake_bytes", ...). */
const char *coll_stats_refusal_name(unsigned reason);

#endif
