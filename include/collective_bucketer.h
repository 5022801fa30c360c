/**
 * @file collective_bucketer.h
 * @brief libcollective's gradient bucketer (DDP-style buckets that overlap backward) and its
 *        timeline (Chrome traces of every operation). Included by collective.h; not meant to be
 *        included alone.
 */
#ifndef COLLECTIVE_BUCKETER_H
#define COLLECTIVE_BUCKETER_H

#include <collective.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Gradient bucketing ======================================================================
 *
 * A bucketer reduces a model's gradients the way PyTorch DistributedDataParallel's Reducer does
 * (torch/csrc/distributed/c10d/reducer.cpp; S. Li et al., "PyTorch Distributed: Experiences on
 * Accelerating Data Parallel Training", PVLDB 13(12), 2020): gradients are grouped into buckets,
 * each bucket is one allreduce, and a bucket is submitted the moment its last gradient is
 * final, so that its communication overlaps the backward pass of the layers below.
 *
 * Life of a bucketer:
 *   1. coll_bucketer_create(); coll_bucketer_add_param() for every parameter, in forward order
 *      (the order the forward pass uses them, as model.parameters()).
 *   2. The first coll_bucketer_param_grad(), coll_bucketer_grad_ready(),
 *      coll_bucketer_mark_unused() or coll_bucketer_wait_all() seals the registration: the
 *      buckets are laid out and allocated in the job's pool (coll_mem_alloc()).
 *   3. Every iteration: backward writes each parameter's gradient into its view (the pointer of
 *      coll_bucketer_param_grad()) and calls coll_bucketer_grad_ready() as soon as it is final,
 *      or coll_bucketer_mark_unused() for a parameter without a gradient this iteration. Then
 *      coll_bucketer_wait_all(); afterwards the views hold the reduced gradients (the average
 *      over the ranks by default) for the optimizer.
 *
 * Layout. Buckets are formed by walking the parameters in reverse registration order (the
 * order in which backward usually produces their gradients) and closing a bucket as soon as
 * its size reaches the cap (DDP's compute_bucket_assignment_by_size): the first bucket closes at
 * first_bucket_cap_bytes (1 MiB by default) so that communication starts early, the others at
 * bucket_cap_bytes (25 MiB). A bucket may exceed its cap by its last parameter (a parameter
 * larger than the cap closes the bucket it joins). A bucket holds one datatype: parameters of
 * each datatype fill their own buckets, each with its own first cap. Buckets are numbered in
 * the order their first parameter was walked. Within a bucket, the views are contiguous, in
 * walk order, without padding; each bucket starts 64-byte aligned.
 *
 * Zero copy. A view is a slice of the bucket's pool buffer (DDP's gradient_as_bucket_view):
 * backward writes into it, the daemon reduces it in place, the optimizer reads it there.
 *
 * Rebuild. Once, in the first iteration's coll_bucketer_wait_all() when it succeeds (an
 * iteration that failed is not rebuilt from, and no later one is), the buckets are rebuilt
 * from the order in which the parameters became ready in that iteration (rank 0's order,
 * broadcast to every rank so that all ranks agree; parameters never reported are appended in
 * the order they were found), with the same caps, as DDP does after its first iteration. The
 * reduced gradients are moved (copied once) into the new buckets before wait_all returns, so the
 * optimizer step of the first iteration reads them from the new views: every pointer obtained
 * before that wait_all is invalid afterwards, and must be fetched again with
 * coll_bucketer_param_grad(). From then on the views stay where they are until
 * coll_bucketer_destroy(). (When the new layout equals the old one nothing moves, but the rule
 * above still holds.) The move briefly needs the pool to hold the gradients twice.
 *
 * Matching. Bucket b of iteration i is submitted with the key (key_space, i, b) (see
 * ::coll_op_params_t), so ranks whose gradients become ready in different orders still match
 * their buckets; at most one iteration may be in flight per bucketer.
 *
 * Unused parameters. A parameter marked with coll_bucketer_mark_unused() has its view zeroed
 * and counts as ready. A parameter neither ready nor marked when coll_bucketer_wait_all() runs
 * is detected: its view is zeroed and its bucket submitted by wait_all (counted in
 * ::coll_bucketer_stats_t). So a rank never waits for a gradient that does not come; a rank
 * that never reaches wait_all is covered by wait_all's timeout on the others.
 *
 * Thread safety: each call takes the bucketer's lock (then the communicator's), so backward
 * hooks on several threads may call coll_bucketer_grad_ready() at once; coll_bucketer_wait_all()
 * must not start before every grad_ready of the iteration has returned.
 */

/** Opaque gradient bucketer. */
typedef struct coll_bucketer coll_bucketer_t;

/** Default bucket cap: 25 MiB (DDP's bucket_cap_mb=25, 1 MB = 2^20 bytes as there). */
#define COLL_BUCKETER_DEFAULT_CAP_BYTES ((size_t)25 << 20)
/** Default cap of the first bucket: 1 MiB (DDP's _DEFAULT_FIRST_BUCKET_BYTES). */
#define COLL_BUCKETER_DEFAULT_FIRST_CAP_BYTES ((size_t)1 << 20)
/** Number of key spaces: bucketers of one communicator that are in flight together need
 *  different ones. */
#define COLL_BUCKETER_KEY_SPACES 8

/** Fields of ::coll_bucketer_params_t that are set. */
enum {
    COLL_BUCKETER_PARAM_CAP = 1u << 0,       /**< bucket_cap_bytes */
    COLL_BUCKETER_PARAM_FIRST_CAP = 1u << 1, /**< first_bucket_cap_bytes */
    COLL_BUCKETER_PARAM_OP = 1u << 2,        /**< op */
    COLL_BUCKETER_PARAM_REBUILD = 1u << 3,   /**< rebuild */
    COLL_BUCKETER_PARAM_KEY_SPACE = 1u << 4, /**< key_space */
    COLL_BUCKETER_PARAM_ALGO = 1u << 5,      /**< algo */
    COLL_BUCKETER_PARAM_NAME = 1u << 6,      /**< name */
    COLL_BUCKETER_PARAM_COMPRESSION = 1u << 7, /**< compression */
};

/**
 * Parameters of coll_bucketer_create(). A cap whose bit is not set comes from the environment,
 * in MiB (fractions allowed): COLL_BUCKET_CAP_MB (default 25) and COLL_FIRST_BUCKET_CAP_MB
 * (default 1).
 */
typedef struct {
    uint64_t field_mask;
    size_t bucket_cap_bytes;       /**< cap of every bucket but the first, bytes, >= 1 */
    size_t first_bucket_cap_bytes; /**< cap of the first bucket (of each datatype), bytes, >= 1 */
    coll_redop_t op;               /**< reduction of the buckets; default COLL_AVG */
    int rebuild;                   /**< rebuild after the first iteration (default 1); 0: never */
    unsigned key_space;            /**< 0 .. COLL_BUCKETER_KEY_SPACES-1 (default 0) */
    coll_algo_t algo;              /**< algorithm of the bucket allreduces (default: COLL_ALGO) */
    const char *name;              /**< label in timelines and messages (default "bucketer");
                                        copied, at most 23 characters are kept */
    /** How the buckets travel between nodes (collective.h, ::coll_compression_t); default:
     *  the communicator's (COLL_COMPRESSION). Its @c bucket is ignored: bucket b of key space s
     *  uses residual s x 65536 + b, kept by the daemons across iterations and reset when the
     *  rebuild changes the bucket. With PowerSGD or auto the bucketer registers each bucket's
     *  layout (coll_layout_register()) from the shapes of coll_bucketer_param_shape(). */
    coll_compression_t compression;
} coll_bucketer_params_t;

/**
 * @brief Create a bucketer on @p comm. Allocates nothing in the pool yet.
 * @param [in]  comm      Communicator; must outlive the bucketer.
 * @param [in]  params    Parameters, may be NULL (defaults and environment).
 * @param [out] bucketer_p The bucketer; free it with coll_bucketer_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for a cap of 0, a bad op, algorithm or key space, or a
 *         malformed COLL_BUCKET_CAP_MB / COLL_FIRST_BUCKET_CAP_MB (coll_comm_last_error() names
 *         it), or a NULL @p comm or @p bucketer_p; COLL_ERR_NOMEM. Thread-safe.
 */
COLL_API coll_status_t coll_bucketer_create(coll_comm_t *comm,
                                            const coll_bucketer_params_t *params,
                                            coll_bucketer_t **bucketer_p);

/**
 * @brief Register the next parameter, in forward order. Every rank must register the same
 *        parameters (count and datatype) in the same order.
 * @param [in]  count    Elements of its gradient (0 allowed).
 * @param [in]  dtype    Datatype of its gradient.
 * @param [in]  name     Name for messages and timelines, e.g. "fc1.weight"; may be NULL;
 *                       copied (at most 47 characters are kept).
 * @param [out] index_p  Its index (0, 1, ... in registration order), the handle of the other
 *                       calls; may be NULL.
 * @return COLL_OK; COLL_ERR_INVALID for a bad dtype, a float dtype in a bucketer of a bitwise
 *         reduction (coll_bucketer_params_t.op), after the registration was sealed, or for a
 *         NULL @p bucketer (the message in coll_comm_last_error(NULL)); COLL_ERR_NOMEM.
 */
COLL_API coll_status_t coll_bucketer_add_param(coll_bucketer_t *bucketer, size_t count,
                                               coll_dtype_t dtype, const char *name,
                                               size_t *index_p);

/**
 * @brief Give parameter @p param the shape PowerSGD sees: a matrix of @p rows x @p cols
 *        (a tensor (d0, d1, ...) is d0 x (d1 * ...)). Without it a parameter is a vector of
 *        its count, which PowerSGD sends uncompressed. Before the registration is sealed.
 * @return COLL_OK; COLL_ERR_INVALID for an unknown parameter, rows x cols other than its
 *         count, after sealing, or for a NULL @p bucketer.
 */
COLL_API coll_status_t coll_bucketer_param_shape(coll_bucketer_t *bucketer, size_t param,
                                                 uint64_t rows, uint64_t cols);

/**
 * @brief The gradient view of parameter @p param: @c count elements inside its bucket in the
 *        pool, owned by the bucketer. Seals the registration on first use.
 * @param [out] grad_p  The view. Valid until the first successful coll_bucketer_wait_all()
 *                      returns (the rebuild may move it: fetch it again after that call), then
 *                      until coll_bucketer_destroy(). For a parameter of 0 elements: a valid,
 *                      non-NULL pointer that must not be written.
 * @return COLL_OK; COLL_ERR_INVALID when @p param is not registered, or for a NULL
 *         @p bucketer or @p grad_p; COLL_ERR_POOL_FULL or
 *         COLL_ERR_NOMEM when sealing could not allocate the buckets (the message says how
 *         many bytes; nothing is allocated then, and the next call tries again).
 */
COLL_API coll_status_t coll_bucketer_param_grad(coll_bucketer_t *bucketer, size_t param,
                                                void **grad_p);

/**
 * @brief The gradient of @p param is final for this iteration. Submits its bucket
 *        (coll_allreduce_async() in place) when it was the bucket's last parameter not ready.
 * @return COLL_OK (also when the bucket was submitted); COLL_ERR_INVALID when @p param is not
 *         registered or was already reported this iteration, or for a NULL @p bucketer; a
 *         submission error of
 *         coll_allreduce_async() (e.g. COLL_ERR_JOB, COLL_ERR_CLOSED): the bucket counts as
 *         failed and coll_bucketer_wait_all() returns that error; sealing errors as
 *         coll_bucketer_param_grad().
 */
COLL_API coll_status_t coll_bucketer_grad_ready(coll_bucketer_t *bucketer, size_t param);

/**
 * @brief @p param has no gradient this iteration: its view is zeroed and it counts as ready
 *        (its bucket may be submitted). The other ranks may have a gradient for it; the
 *        reduction then takes 0 from this rank.
 * @return As coll_bucketer_grad_ready().
 */
COLL_API coll_status_t coll_bucketer_mark_unused(coll_bucketer_t *bucketer, size_t param);

/**
 * @brief End the iteration: submit every bucket not submitted yet (its parameters that were
 *        neither ready nor marked unused are zeroed and counted as detected unused), wait until
 *        every bucket completed, and, after the first successful iteration, rebuild the buckets
 *        (see above). Call it after backward, before the optimizer step.
 * @param [in] timeout_ms  Bound of the whole call in milliseconds; -1: no bound of its own
 *                         (the rebuild's two small collectives still wait at most 60 s).
 * @return COLL_OK: every view holds the reduced gradient.
 *         COLL_ERR_TIMEDOUT: some bucket did not complete in time (the message names the first
 *         one and how many are pending; typically another rank did not reach its wait_all);
 *         the iteration stays open and wait_all may be called again to keep waiting.
 *         The first error of the iteration otherwise, with its message in
 *         coll_bucketer_last_error() and coll_comm_last_error(): an error of a bucket's
 *         submission or completion (COLL_ERR_MISMATCH when ranks registered different
 *         parameters, COLL_ERR_PEER, COLL_ERR_JOB, COLL_ERR_CLOSED, ...), after waiting for the
 *         other buckets; the iteration is over and the views hold undefined values. Errors of
 *         the rebuild (its broadcast of the ready order, allocations): the views hold the
 *         reduced gradients in the old layout, which stays; no rebuild is tried again.
 *         COLL_ERR_INVALID for a NULL @p bucketer.
 */
COLL_API coll_status_t coll_bucketer_wait_all(coll_bucketer_t *bucketer, int timeout_ms);

/**
 * What the last iteration did, and how well its communication overlapped backward.
 * Times are CLOCK_MONOTONIC nanoseconds (see ::coll_req_timing_t).
 */
typedef struct {
    uint64_t iterations;        /**< iterations completed by coll_bucketer_wait_all() */
    size_t num_params;          /**< registered parameters */
    size_t num_buckets;         /**< buckets of the current layout (0 before sealing) */
    size_t bucket_bytes;        /**< bytes of all buckets together */
    int rebuilt;                /**< 1 once the rebuild ran (see above) */
    int layout_changed;         /**< 1 when the rebuild moved the views */
    size_t unused_marked;       /**< last iteration: parameters given to mark_unused() */
    size_t unused_detected;     /**< last iteration: parameters wait_all found not ready */
    uint64_t unused_detected_total; /**< detected unused parameters over all iterations */
    size_t buckets_late;        /**< last iteration: buckets that wait_all submitted */
    uint64_t first_ready_ns;    /**< last iteration: first grad_ready() or mark_unused() */
    uint64_t wait_begin_ns;     /**< last iteration: wait_all() entered (end of backward) */
    uint64_t wait_end_ns;       /**< last iteration: every bucket complete */
    /** Communication time, on this rank's clock: the union over buckets of [submit, seen]
     *  (submit_ns to complete_ns of ::coll_req_timing_t: from the library sending the
     *  submission to it seeing the completion, so the daemon's work, the completion's way
     *  back and the rank's wake-up), i.e. the wall time during which some bucket was in
     *  flight for this rank. */
    uint64_t comm_ns;
    uint64_t comm_sum_ns;       /**< the sum over buckets of seen - submit (counts overlap of
                                     buckets twice) */
    /** Exposed communication: the part of comm_ns inside [wait_begin, wait_end], the time the
     *  caller waited in wait_all() while some bucket was in flight (communication that
     *  backward did not hide). Never above comm_ns; the rest of the wait (submitting the late
     *  buckets before the first is in flight, the bookkeeping after the last is seen) is
     *  wait_end_ns - wait_begin_ns - exposed_ns. */
    uint64_t exposed_ns;
    /** 1 - exposed_ns / comm_ns, in [0, 1]; 1 when comm_ns is 0. */
    double overlap_efficiency;
    uint64_t wire_bytes;        /**< last iteration: bytes this node sent for its buckets
                                     (coll_req_wire_bytes()) */
    uint64_t dense_bytes;       /**< last iteration: what the uncompressed ring would have sent */
    uint64_t wire_bytes_total;  /**< over all iterations */
    uint64_t dense_bytes_total;
} coll_bucketer_stats_t;

/**
 * @brief Counters and overlap measurements of the last completed iteration.
 * @param [out] stats  Filled on COLL_OK.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p bucketer or @p stats. Thread-safe.
 */
COLL_API coll_status_t coll_bucketer_stats(coll_bucketer_t *bucketer,
                                           coll_bucketer_stats_t *stats);

/** Where a parameter's gradient lives. */
typedef struct {
    size_t bucket;       /**< its bucket */
    size_t offset;       /**< its first element's index in the bucket */
    size_t count;        /**< elements */
    coll_dtype_t dtype;
    const char *name;    /**< owned by the bucketer, valid until coll_bucketer_destroy() */
} coll_bucketer_param_info_t;

/** One bucket. */
typedef struct {
    size_t count;         /**< elements */
    coll_dtype_t dtype;
    size_t num_params;
    const size_t *params; /**< its parameters in layout order; owned by the bucketer, valid
                               until the layout changes (rebuild) or coll_bucketer_destroy() */
} coll_bucketer_bucket_info_t;

/**
 * @brief Layout of one parameter (seals the registration).
 * @return COLL_OK; COLL_ERR_INVALID for an unknown parameter, or a NULL @p bucketer or
 *         @p info; sealing errors as
 *         coll_bucketer_param_grad().
 */
COLL_API coll_status_t coll_bucketer_param_info(coll_bucketer_t *bucketer, size_t param,
                                                coll_bucketer_param_info_t *info);

/**
 * @brief Layout of bucket @p bucket, 0 .. num_buckets-1 (seals the registration).
 * @return COLL_OK; COLL_ERR_INVALID for an unknown bucket, or a NULL @p bucketer or @p info;
 *         sealing errors as
 *         coll_bucketer_param_grad().
 */
COLL_API coll_status_t coll_bucketer_bucket_info(coll_bucketer_t *bucketer, size_t bucket,
                                                 coll_bucketer_bucket_info_t *info);

/**
 * @brief Message of the bucketer's last error ("" when none); owned by the bucketer, valid
 *        until its next call. With @p bucketer NULL: coll_comm_last_error(NULL), where a call
 *        given a NULL bucketer left its message.
 */
COLL_API const char *coll_bucketer_last_error(const coll_bucketer_t *bucketer);

/**
 * @brief Free a bucketer and its buckets. Buckets still in flight (a wait_all that failed or
 *        timed out) are detached: their memory stays allocated until coll_comm_destroy(),
 *        because the daemon may still write it. Views become invalid. Safe with NULL.
 */
COLL_API void coll_bucketer_destroy(coll_bucketer_t *bucketer);

/* ==== Timeline ==================================================================================
 *
 * With COLL_TIMELINE set, every rank writes a trace of its collectives in the Chrome trace-event
 * format (JSON object format; opens in https://ui.perfetto.dev and chrome://tracing), as
 * Horovod's timeline does. The file name: "%r" in COLL_TIMELINE is replaced by the rank; a
 * directory (existing, or a value ending in '/') gets "rank<r>.json" inside; any other value is
 * used as it is with one rank, and with several the rank is inserted before a ".json" suffix
 * (or appended): "t.json" -> "t.3.json".
 *
 * Events (pid = rank, one tid per track): every completed collective is one "X" event on its
 * track (bucketer buckets: "<name> bucket <b>", others: "collectives") from submission to
 * completion, with its phases nested inside (from ::coll_req_timing_t): "wait local ranks"
 * (submit to ready), "wait other nodes" (ready to peers), "reduce" (to reduced: the ring's
 * reduce-scatter, or the whole reduction of other algorithms), "distribute" (to done: the
 * all-gather), "complete" (done until the library saw the completion); inside "reduce" and
 * "distribute" the algorithm's steps (coll_req_steps()), one event each: "reduce-scatter step
 * 2/3", "all-gather step 1/3" on the ring, "fold", "round 1/2", "unfold" with recursive
 * doubling; and an instant event "submit". Args: collective, bytes, key, algorithm, bucket and
 * iteration. coll_timeline_span() adds spans of the caller's own (e.g. forward and backward); bucketers add their "exposed
 * wait". Timestamps are CLOCK_MONOTONIC microseconds (comparable between the ranks of a host).
 *
 * Bounded buffering: events are formatted into a 64 KiB buffer, written when it fills, at least
 * once a second while events come, by coll_timeline_flush() and by coll_comm_destroy(). After
 * every write the file is a complete JSON document (the closing brackets are rewritten after
 * the last event), so a process that ends without coll_comm_destroy() leaves a valid trace of
 * everything up to the last write. A file that cannot be opened or written is reported once on
 * stderr and the timeline is switched off; the collectives are not affected.
 */

/**
 * @brief Add a span of the caller's to the timeline, e.g. ("step", "backward", t0, t1).
 * @param [in] track     Row of the span (tid), e.g. "step"; at most 31 characters kept.
 * @param [in] name      Label, at most 47 characters kept.
 * @param [in] begin_ns  CLOCK_MONOTONIC nanoseconds (clock_gettime()).
 * @param [in] end_ns    >= begin_ns.
 * @return COLL_OK (also when no timeline is enabled: nothing is recorded); COLL_ERR_INVALID
 *         for a NULL @p comm, @p track or @p name, or end before begin. Thread-safe.
 */
COLL_API coll_status_t coll_timeline_span(coll_comm_t *comm, const char *track,
                                          const char *name, uint64_t begin_ns, uint64_t end_ns);

/** @return Nonzero when @p comm writes a timeline (COLL_TIMELINE was set and the file opened);
 *          0 for a NULL @p comm. */
COLL_API int coll_timeline_enabled(coll_comm_t *comm);

/**
 * @brief Write the buffered events now (the file is complete JSON afterwards).
 * @return COLL_OK (also without a timeline); COLL_ERR_IO when writing failed (the timeline is
 *         then switched off); COLL_ERR_INVALID for a NULL @p comm. Thread-safe.
 */
COLL_API coll_status_t coll_timeline_flush(coll_comm_t *comm);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_BUCKETER_H */
