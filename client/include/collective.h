/**
 * @file collective.h
 * @brief libcollective: the client library of collectived.
 *
 * A trainer process links this library, connects to the collectived daemon of its node, joins a
 * job (a communicator), allocates its bucket buffers in the job's shared memory pool and submits
 * collectives asynchronously. The daemon reduces the buffers of all local ranks, runs the
 * inter-node algorithm with the daemons of the other nodes and writes the result back into the
 * pool; the request then completes.
 *
 * Conventions:
 * - Every function returns a ::coll_status_t: ::COLL_OK, ::COLL_INPROGRESS or a negative error.
 *   coll_strerror() turns it into text; coll_comm_last_error() gives the detailed message of the
 *   last failure on a communicator (which rank, which sizes).
 * - Counts are in elements of the datatype, sizes in bytes, times in milliseconds.
 * - Output parameters come last and are written only on success.
 * - A communicator may be used from several threads: each call takes the communicator's lock.
 *   Operations are matched across ranks by key (coll_op_params_t.key); without one, by call
 *   order, which only the thread that created the communicator has: an operation without a key
 *   from any other thread is refused (COLL_ERR_INVALID), so that no two threads' operations are
 *   ever paired by timing. Give concurrent operations keys.
 * - A submission refused here or by the daemon (a buffer outside the pool, a bad root, peer,
 *   datatype or key, an operation without a key from another thread) fails the whole job on
 *   every rank with the reason, since the other ranks could never complete that operation.
 */
#ifndef COLLECTIVE_H
#define COLLECTIVE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the library's exported symbols (everything else in it is hidden). */
#define COLL_API __attribute__((visibility("default")))

/** Version of the library and of the wire protocol it speaks. */
#define COLL_VERSION_MAJOR 0
#define COLL_VERSION_MINOR 1

/**
 * Status codes. One table gives the enum, coll_strerror() and coll_err_name().
 * Negative errno values are used where one fits; the project's own codes live in -1000..-1099.
 */
#define COLL_STATUS_MAP(X)                                                                         \
    X(OK, 0, "success")                                                                            \
    X(INPROGRESS, 1, "operation in progress")                                                      \
    X(ERR_NOMEM, -12, "out of memory")                                                             \
    X(ERR_INVALID, -22, "invalid argument")                                                        \
    X(ERR_IO, -5, "input/output error")                                                            \
    X(ERR_CONNREFUSED, -111, "connection refused (is collectived running?)")                       \
    X(ERR_TIMEDOUT, -110, "timed out")                                                             \
    X(ERR_PROTOCOL, -1000, "malformed or unexpected protocol message")                             \
    X(ERR_VERSION, -1001, "incompatible protocol version")                                         \
    X(ERR_MISMATCH, -1002, "ranks submitted different descriptors for the same operation")         \
    X(ERR_PEER, -1003, "a peer daemon failed or is unreachable")                                   \
    X(ERR_JOB, -1004, "the job failed or was aborted")                                             \
    X(ERR_CLOSED, -1005, "connection to the daemon is closed")                                     \
    X(ERR_POOL_FULL, -1006, "the job's memory pool is full")                                       \
    X(ERR_NOT_IN_POOL, -1007, "buffer is not inside the job's memory pool")                        \
    X(ERR_UNSUPPORTED, -1008, "operation, datatype or reduction not supported")                    \
    X(ERR_TRANSPORT, -1009, "transport (UCX) error")                                               \
    X(ERR_RENDEZVOUS, -1010, "job rendezvous failed")                                             \
    X(ERR_DENIED, -1011, "access denied (wrong or missing job token)")

/** Result of every libcollective call. */
typedef enum {
#define COLL_STATUS_ENUM(name, value, text) COLL_##name = (value),
    COLL_STATUS_MAP(COLL_STATUS_ENUM)
#undef COLL_STATUS_ENUM
} coll_status_t;

/**
 * @brief Human-readable text of a status code.
 * @param [in] status Any value; unknown values give "unknown status".
 * @return A static string; thread-safe.
 */
COLL_API const char *coll_strerror(coll_status_t status);

/**
 * @brief Symbolic name of a status code, e.g. "COLL_ERR_MISMATCH".
 * @param [in] status Any value; unknown values give "COLL_ERR_UNKNOWN".
 * @return A static string; thread-safe.
 */
COLL_API const char *coll_err_name(coll_status_t status);

/**
 * Element datatypes. The numbering is part of the wire protocol.
 * 16-bit floats are reduced in float32 inside every kernel pass and rounded once per pass.
 */
typedef enum {
    COLL_FLOAT32 = 0,  /**< IEEE 754 binary32 */
    COLL_FLOAT64 = 1,  /**< IEEE 754 binary64 */
    COLL_FLOAT16 = 2,  /**< IEEE 754 binary16 */
    COLL_BFLOAT16 = 3, /**< bfloat16 (the upper half of a binary32) */
    COLL_INT8 = 4,
    COLL_UINT8 = 5,
    COLL_INT32 = 6,
    COLL_INT64 = 7,
    COLL_DTYPE_COUNT
} coll_dtype_t;

/**
 * Reduction operations. The numbering is part of the wire protocol.
 * - COLL_AVG: the sum divided by the world size. Float32 and float64 divide once at the end
 *   (correctly rounded means). Float16 and bfloat16 scale every rank's input by 1/world size in
 *   float32 before summing (as DDP's gradient pre-division), so an average whose true value is
 *   representable never overflows on the way. Integers: the sum in the integer type (wrapping
 *   modulo 2^bits on overflow, as NCCL), then divided by the world size rounding toward zero.
 * - COLL_MIN, COLL_MAX: a NaN on any rank gives NaN.
 * - Integer COLL_SUM and COLL_PROD wrap modulo 2^bits.
 */
typedef enum {
    COLL_SUM = 0,
    COLL_AVG = 1,
    COLL_PROD = 2,
    COLL_MIN = 3,
    COLL_MAX = 4,
    COLL_REDOP_COUNT
} coll_redop_t;

/**
 * @brief Size in bytes of one element of @p dtype.
 * @return The size, or 0 for an unknown datatype.
 */
COLL_API size_t coll_dtype_size(coll_dtype_t dtype);

/** @return The name of @p dtype, e.g. "float32"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_dtype_name(coll_dtype_t dtype);

/** @return The name of @p op, e.g. "sum"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_redop_name(coll_redop_t op);

/** Opaque communicator: one rank's membership in a job. */
typedef struct coll_comm coll_comm_t;

/** Opaque request of an asynchronous operation. */
typedef struct coll_request coll_request_t;

/** Fields of ::coll_comm_params_t that are set (UCX-style field mask). */
enum {
    COLL_COMM_PARAM_SOCKET = 1u << 0,     /**< socket_path */
    COLL_COMM_PARAM_JOB = 1u << 1,        /**< job */
    COLL_COMM_PARAM_RANK = 1u << 2,       /**< rank and world_size */
    COLL_COMM_PARAM_LOCAL_RANK = 1u << 3, /**< local_rank and local_size */
    COLL_COMM_PARAM_ROOT = 1u << 4,       /**< root */
    COLL_COMM_PARAM_TIMEOUT = 1u << 5,    /**< timeout_ms */
    COLL_COMM_PARAM_POOL_SIZE = 1u << 6,  /**< pool_bytes */
    COLL_COMM_PARAM_TOKEN = 1u << 7,      /**< job_token */
};

/**
 * Parameters of coll_comm_create(). A field whose bit is not set in @c field_mask is read from
 * the environment (torchrun-style): COLL_SOCKET, COLL_JOB, COLL_RANK, COLL_WORLD_SIZE,
 * COLL_LOCAL_RANK, COLL_LOCAL_SIZE, COLL_ROOT, COLL_TIMEOUT_MS, COLL_POOL_SIZE, COLL_JOB_TOKEN.
 */
typedef struct {
    uint64_t field_mask;
    const char *socket_path; /**< daemon client socket; default /run/collectived/collectived.sock */
    const char *job;         /**< job id, the same string on every rank of the job */
    int rank;                /**< global rank, 0 <= rank < world_size */
    int world_size;          /**< number of ranks in the job */
    int local_rank;          /**< rank among the ranks on this node, 0 <= local_rank < local_size */
    int local_size;          /**< number of ranks of the job on this node */
    const char *root;        /**< "host:port" control address of the rendezvous daemon (node 0) */
    int timeout_ms;          /**< the job's timeout (ms): the longest any wait may take (the
                                  rendezvous, each operation); 0: the daemon's (60000 unless
                                  configured) */
    uint64_t pool_bytes;     /**< size of the job's shared pool per node; default chosen by daemon */
    const char *job_token;   /**< secret shared by the job's ranks (at most 256 bytes): a rank
                                  with another one cannot join the job, nor see its memory */
} coll_comm_params_t;

/**
 * @brief Connect to the node's daemon and join a job; blocks until every rank of the job has
 *        joined (rendezvous) or the timeout expires.
 * @param [in]  params  Parameters, may be NULL (everything from the environment).
 * @param [out] comm_p  The new communicator; the caller frees it with coll_comm_destroy().
 * @return COLL_OK on success;
 *         COLL_ERR_INVALID for missing or inconsistent parameters (message names the field);
 *         COLL_ERR_CONNREFUSED when no daemon listens on the socket within the job's timeout
 *         (+ 1 s; 61 s without one): the library tries again meanwhile, as a daemon may be
 *         starting, and says on stderr after 1 s that it waits;
 *         COLL_ERR_VERSION when the daemon speaks another protocol version;
 *         COLL_ERR_RENDEZVOUS when the job's ranks disagree (world size, duplicate rank) or the
 *         root daemon cannot be reached; COLL_ERR_TIMEDOUT when not all ranks joined in time;
 *         COLL_ERR_DENIED when the job's token differs (or the daemon requires one), or the
 *         socket's permissions keep this user out (not in the daemon's socket group);
 *         COLL_ERR_NOMEM. On failure a message naming what was wrong is printed to stderr and
 *         kept for coll_comm_last_error(NULL).
 */
COLL_API coll_status_t coll_comm_create(const coll_comm_params_t *params, coll_comm_t **comm_p);

/**
 * @brief Leave the job and free the communicator. Every request of the communicator, pending or finished, is freed (do not use them afterwards);
 *        pool memory of this rank is unmapped, so pointers from coll_mem_alloc() become invalid.
 *        Safe to call with NULL.
 */
COLL_API void coll_comm_destroy(coll_comm_t *comm);

/** @return The global rank of @p comm. Thread-safe. */
COLL_API int coll_comm_rank(const coll_comm_t *comm);
/** @return The world size of @p comm. Thread-safe. */
COLL_API int coll_comm_world_size(const coll_comm_t *comm);
/** @return The local rank of @p comm on its node. Thread-safe. */
COLL_API int coll_comm_local_rank(const coll_comm_t *comm);
/** @return The number of ranks of the job on this node. Thread-safe. */
COLL_API int coll_comm_local_size(const coll_comm_t *comm);

/**
 * @brief End the job on every rank: each pending and later operation of every rank fails with
 *        COLL_ERR_JOB and a message naming this rank and @p reason (as ncclCommAbort or
 *        MPI_Abort, but the communicator stays to be destroyed). For a trainer that found
 *        something fatal (a NaN loss, a failed checkpoint) and must not leave the others
 *        waiting. Thread-safe.
 * @param [in] reason Text for every rank (cut at 1023 bytes); copied.
 * @return COLL_OK once the daemon was told; COLL_ERR_CLOSED when the link to the daemon is
 *         gone (the job fails anyway then); COLL_ERR_INVALID for NULL arguments.
 */
COLL_API coll_status_t coll_comm_abort(coll_comm_t *comm, const char *reason);

/**
 * @brief Detailed message of the last error on @p comm (e.g. both descriptors of a mismatch),
 *        whichever thread met it; with @p comm NULL, why the calling thread's last
 *        coll_comm_create() failed. Thread-safe.
 * @return A copy owned by the library, per calling thread, valid until the thread's next call
 *         of this function (or its next coll_comm_create()); "" when there was none.
 */
COLL_API const char *coll_comm_last_error(const coll_comm_t *comm);

/**
 * @brief Allocate @p bytes in the job's shared memory pool. Buffers passed to collectives must
 *        come from here: the daemon reads and writes them in place (zero copy).
 * @param [in]  comm   Communicator.
 * @param [in]  bytes  Size in bytes, > 0; rounded up to 64 bytes.
 * @param [out] ptr_p  Start of the buffer, 64-byte aligned; owned by @p comm until
 *                     coll_mem_free() or coll_comm_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for 0 bytes; COLL_ERR_POOL_FULL when the pool has no room
 *         (the message gives pool size and free bytes); COLL_ERR_CLOSED when the daemon is gone.
 */
COLL_API coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr_p);

/**
 * @brief Return a buffer from coll_mem_alloc() to the pool. It must not be in use by a pending
 *        request.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL when @p ptr is not the start of an allocation.
 */
COLL_API coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr);

/**
 * Algorithms. COLL_ALGO_AUTO lets the daemons choose by collective, size and node count (the
 * thresholds come from the job's root daemon, so every node chooses alike). The environment
 * variable COLL_ALGO (auto, ring, rd, chain, dissemination) forces one for a rank's collectives;
 * ranks of a job must agree (a disagreement fails the operation with COLL_ERR_MISMATCH).
 * A collective that an algorithm cannot run fails with COLL_ERR_UNSUPPORTED.
 */
typedef enum {
    COLL_ALGO_AUTO = 0,
    /** Ring (Patarasuk & Yuan 2009): pipelined reduce-scatter and all-gather; bandwidth
     *  optimal. Allreduce, reduce-scatter, all-gather. */
    COLL_ALGO_RING = 1,
    /** Recursive doubling (Thakur, Rabenseifner & Gropp 2005): log2(nodes) exchanges of the
     *  whole buffer; latency optimal for small allreduces. */
    COLL_ALGO_RD = 2,
    /** Pipelined chain in ring order from or to the root: broadcast and reduce. */
    COLL_ALGO_CHAIN = 3,
    /** Dissemination (Hensgen, Finkel & Manber 1988): barrier in ceil(log2(nodes)) rounds. */
    COLL_ALGO_DISSEMINATION = 4,
    COLL_ALGO_COUNT
} coll_algo_t;

/** Fields of ::coll_op_params_t that are set. */
enum {
    COLL_OP_PARAM_KEY = 1u << 0,  /**< key */
    COLL_OP_PARAM_ALGO = 1u << 1, /**< algo */
    COLL_OP_PARAM_LAYOUT = 1u << 2, /**< layout */
};

/**
 * Optional per-operation parameters.
 * @c key identifies the operation across ranks. Without it the library numbers collectives in
 * call order (every rank must then call collectives in the same order, as in MPI) and
 * point-to-point messages per peer in call order. With it, ranks may submit collectives in
 * different orders: operations with the same key are matched, e.g. a DDP bucket (bucket id,
 * iteration). Keys must be unique among the operations in flight; only the low 39 bits of a
 * collective's key and the low 22 bits of a point-to-point key are significant.
 * @c algo overrides COLL_ALGO for this operation.
 * @c layout is a fingerprint of how the buffer is made of tensors (e.g. a hash of each
 * tensor's name, count and dtype in order; the bucketer sets one per bucket). The daemons
 * compare it across ranks like the count and dtype: ranks whose buckets hold different
 * tensors fail with COLL_ERR_MISMATCH instead of summing unrelated gradients. 0 (the default)
 * means none and matches only 0.
 */
typedef struct {
    uint64_t field_mask;
    uint64_t key;
    coll_algo_t algo;
    uint64_t layout;
} coll_op_params_t;

/*
 * Collectives. Common to all of them:
 * - Buffers live in the job's pool (coll_mem_alloc()); the daemon reads and writes them in
 *   place. Send and receive buffers are either the same (in place) or do not overlap.
 * - Counts are in elements of @p dtype; 0 is allowed.
 * - The call returns COLL_INPROGRESS and a request in @p req_p (wait, test, free), or an error:
 *   COLL_ERR_INVALID (bad dtype, op, root, peer; overlapping buffers), COLL_ERR_NOT_IN_POOL (a
 *   buffer outside this rank's allocations), COLL_ERR_JOB (the job failed earlier; see
 *   coll_comm_last_error()), COLL_ERR_CLOSED (the daemon is gone), COLL_ERR_NOMEM.
 * - The request then completes with COLL_OK or: COLL_ERR_MISMATCH (ranks disagree on count,
 *   dtype, op, root or algorithm; no output was written), COLL_ERR_UNSUPPORTED (forced algorithm
 *   cannot run this collective), COLL_ERR_PEER, COLL_ERR_JOB, COLL_ERR_CLOSED.
 * - The buffers belong to the library until the request completes.
 * - Every collective is hierarchical: the daemon combines its local ranks' buffers in the same
 *   pass that serves the inter-node algorithm.
 */

/**
 * @brief Allreduce: every rank's @p recvbuf (count elements) receives the element-wise
 *        reduction over all ranks of their @p sendbuf (count elements).
 * Algorithms: COLL_ALGO_RD for small buffers, COLL_ALGO_RING otherwise.
 */
COLL_API coll_status_t coll_allreduce_async(coll_comm_t *comm, const void *sendbuf,
                                            void *recvbuf, size_t count, coll_dtype_t dtype,
                                            coll_redop_t op, const coll_op_params_t *params,
                                            coll_request_t **req_p);

/**
 * @brief Reduce-scatter: @p sendbuf holds world_size blocks of @p recvcount elements; rank r's
 *        @p recvbuf receives the reduction over all ranks of their block r.
 * In place when @p recvbuf is block r of @p sendbuf. Algorithm: COLL_ALGO_RING.
 */
COLL_API coll_status_t coll_reduce_scatter_async(coll_comm_t *comm, const void *sendbuf,
                                                 void *recvbuf, size_t recvcount,
                                                 coll_dtype_t dtype, coll_redop_t op,
                                                 const coll_op_params_t *params,
                                                 coll_request_t **req_p);

/**
 * @brief All-gather: @p recvbuf (world_size blocks of @p sendcount elements) receives every
 *        rank's @p sendbuf in rank order. In place when @p sendbuf is block r of @p recvbuf.
 * Algorithm: COLL_ALGO_RING.
 */
COLL_API coll_status_t coll_allgather_async(coll_comm_t *comm, const void *sendbuf,
                                            void *recvbuf, size_t sendcount, coll_dtype_t dtype,
                                            const coll_op_params_t *params,
                                            coll_request_t **req_p);

/**
 * @brief Broadcast: every rank's @p recvbuf receives @p count elements of rank @p root's
 *        @p sendbuf. @p sendbuf is read at the root only (may be NULL elsewhere).
 * Algorithm: COLL_ALGO_CHAIN.
 */
COLL_API coll_status_t coll_broadcast_async(coll_comm_t *comm, const void *sendbuf,
                                            void *recvbuf, size_t count, coll_dtype_t dtype,
                                            int root, const coll_op_params_t *params,
                                            coll_request_t **req_p);

/**
 * @brief Reduce: rank @p root's @p recvbuf receives the element-wise reduction over all ranks
 *        of their @p sendbuf. @p recvbuf is written at the root only (may be NULL elsewhere).
 * Algorithm: COLL_ALGO_CHAIN.
 */
COLL_API coll_status_t coll_reduce_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, coll_dtype_t dtype, coll_redop_t op,
                                         int root, const coll_op_params_t *params,
                                         coll_request_t **req_p);

/**
 * @brief Barrier: completes on a rank only after every rank of the job has entered it.
 * Algorithm: COLL_ALGO_DISSEMINATION.
 */
COLL_API coll_status_t coll_barrier_async(coll_comm_t *comm, const coll_op_params_t *params,
                                          coll_request_t **req_p);

/**
 * @brief Send @p count elements of @p buf to rank @p peer. Matched with the peer's
 *        coll_recv_async() for this rank by key (by default: the n-th send to a peer matches
 *        its n-th receive from this rank). Completes once the data has left @p buf.
 * @return As the collectives; COLL_ERR_INVALID when @p peer is this rank or out of range. When
 *         the receiver posted another size its request fails with COLL_ERR_MISMATCH (naming
 *         both sizes); the sender's fails too only when both ranks are on one node (a remote
 *         send completes once the data left).
 */
COLL_API coll_status_t coll_send_async(coll_comm_t *comm, const void *buf, size_t count,
                                       coll_dtype_t dtype, int peer,
                                       const coll_op_params_t *params, coll_request_t **req_p);

/** @brief Receive @p count elements from rank @p peer into @p buf; see coll_send_async(). */
COLL_API coll_status_t coll_recv_async(coll_comm_t *comm, void *buf, size_t count,
                                       coll_dtype_t dtype, int peer,
                                       const coll_op_params_t *params, coll_request_t **req_p);

/**
 * @brief Check a request without blocking.
 * @return COLL_INPROGRESS while pending; COLL_OK when it completed successfully; its error when
 *         it failed (see the collectives above); COLL_ERR_TIMEDOUT, as coll_req_wait(), for a
 *         collective the daemon has answered nothing about for the job's timeout + 1 s since
 *         its submit (a stopped or hung daemon), the request staying valid.
 */
COLL_API coll_status_t coll_req_test(coll_request_t *req);

/**
 * @brief Block until a request completes or @p timeout_ms expires (-1: no bound of the
 *        caller's, 0 polls). The thread sleeps in poll(2) while waiting; it does not spin.
 *        Whatever @p timeout_ms, a collective's wait ends at the job's timeout + 1 s after its
 *        submit: the daemon fails the operation within the timeout, and one that has not
 *        answered by then (stopped, hung) gets COLL_ERR_TIMEDOUT from the library.
 * @return As coll_req_test(); COLL_ERR_TIMEDOUT when the time expired first (with the caller's
 *         bound, the request stays valid and may be waited on again).
 */
COLL_API coll_status_t coll_req_wait(coll_request_t *req, int timeout_ms);

/**
 * @brief The algorithm that ran a completed request, e.g. "ring", "rd", "local" ("" while
 *        pending or for requests without one). Valid until the request is freed.
 */
COLL_API const char *coll_req_algo(const coll_request_t *req);

/**
 * When a request went through its phases: CLOCK_MONOTONIC nanoseconds (clock_gettime), which
 * the processes of one host share. A phase the operation did not have is 0.
 */
typedef struct {
    uint64_t submit_ns;   /**< the library sent the submission */
    uint64_t ready_ns;    /**< the daemon had every local rank's submission (wait for peers
                               on this node before) */
    uint64_t peers_ns;    /**< the daemon heard from the other nodes (their descriptor checked) */
    uint64_t reduced_ns;  /**< the reduction finished (reduce-scatter; distribution after) */
    uint64_t done_ns;     /**< the daemon finished */
    uint64_t complete_ns; /**< the library saw the completion */
} coll_req_timing_t;

/**
 * @brief The phase times of a completed request (for timelines and overlap measurements).
 * @param [out] timing Filled on COLL_OK.
 * @return COLL_OK; COLL_INPROGRESS while it is pending (nothing written).
 */
COLL_API coll_status_t coll_req_timing(const coll_request_t *req, coll_req_timing_t *timing);

/** Phases of an inter-node algorithm whose steps coll_req_steps() reports. */
typedef enum {
    COLL_STEP_REDUCE_SCATTER = 1, /**< ring reduce-scatter, N-1 steps for N nodes */
    COLL_STEP_ALLGATHER = 2,      /**< ring all-gather, N-1 steps */
    COLL_STEP_RD_FOLD = 3,        /**< recursive doubling: the nodes above a power of two p fold
                                       into their partners (one step, only on those nodes) */
    COLL_STEP_RD_ROUND = 4,       /**< recursive doubling: exchange rounds, log2(p) steps */
    COLL_STEP_RD_UNFOLD = 5,      /**< recursive doubling: the result goes back (one step) */
} coll_step_phase_t;

/** Most step records coll_req_steps() gives for one request. */
#define COLL_MAX_STEPS 32

/**
 * One step, or several consecutive steps of one phase, of the inter-node algorithm as this
 * node saw it: a step ends when its data arrived from the previous node. A record begins where
 * the previous one ended (the first at peers_ns, the first all-gather record at reduced_ns of
 * ::coll_req_timing_t); done_ns comes after the last step once this node's own last sends
 * completed too.
 */
typedef struct {
    uint64_t end_ns;    /**< CLOCK_MONOTONIC ns (1 us resolution) when this step and every
                             earlier one were done on this node */
    uint32_t phase;     /**< ::coll_step_phase_t */
    uint32_t first;     /**< first step of the phase covered, 0-based */
    uint32_t last;      /**< last step covered; > first only when a ring of more than 17 nodes
                             had its N-1 steps per phase merged into 16 records */
} coll_req_step_t;

/**
 * @brief The steps of the inter-node algorithm of a completed request (ring and recursive
 *        doubling; none for single-node jobs, broadcast, reduce, barrier and point-to-point),
 *        in order: where a slow peer or link shows in a timeline.
 * @param [out] steps  Room for ::COLL_MAX_STEPS records; the first @p *nsteps are filled.
 * @param [out] nsteps Number of records, 0 .. ::COLL_MAX_STEPS.
 * @return COLL_OK; COLL_INPROGRESS while it is pending (nothing written). Thread-safe.
 */
COLL_API coll_status_t coll_req_steps(const coll_request_t *req, coll_req_step_t *steps,
                                      uint32_t *nsteps);

/**
 * @brief Free a request. A request still in progress is detached: its result is discarded and
 *        its buffers stay in use by the daemon until it ends. Safe with NULL.
 */
COLL_API void coll_req_free(coll_request_t *req);

/**
 * @brief Blocking allreduce: coll_allreduce_async() then coll_req_wait() with no timeout.
 * @return As coll_allreduce_async() and coll_req_wait().
 */
COLL_API coll_status_t coll_allreduce(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, coll_dtype_t dtype, coll_redop_t op);

/** @return The name of @p algo, e.g. "ring"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_algo_name(coll_algo_t algo);

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
} coll_bucketer_params_t;

/**
 * @brief Create a bucketer on @p comm. Allocates nothing in the pool yet.
 * @param [in]  comm      Communicator; must outlive the bucketer.
 * @param [in]  params    Parameters, may be NULL (defaults and environment).
 * @param [out] bucketer_p The bucketer; free it with coll_bucketer_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for a cap of 0, a bad op, algorithm or key space, or a
 *         malformed COLL_BUCKET_CAP_MB / COLL_FIRST_BUCKET_CAP_MB (coll_comm_last_error() names
 *         it); COLL_ERR_NOMEM. Thread-safe.
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
 * @return COLL_OK; COLL_ERR_INVALID for a bad dtype or after the registration was sealed;
 *         COLL_ERR_NOMEM.
 */
COLL_API coll_status_t coll_bucketer_add_param(coll_bucketer_t *bucketer, size_t count,
                                               coll_dtype_t dtype, const char *name,
                                               size_t *index_p);

/**
 * @brief The gradient view of parameter @p param: @c count elements inside its bucket in the
 *        pool, owned by the bucketer. Seals the registration on first use.
 * @param [out] grad_p  The view. Valid until the first successful coll_bucketer_wait_all()
 *                      returns (the rebuild may move it: fetch it again after that call), then
 *                      until coll_bucketer_destroy(). For a parameter of 0 elements: a valid,
 *                      non-NULL pointer that must not be written.
 * @return COLL_OK; COLL_ERR_INVALID when @p param is not registered; COLL_ERR_POOL_FULL or
 *         COLL_ERR_NOMEM when sealing could not allocate the buckets (the message says how
 *         many bytes; nothing is allocated then, and the next call tries again).
 */
COLL_API coll_status_t coll_bucketer_param_grad(coll_bucketer_t *bucketer, size_t param,
                                                void **grad_p);

/**
 * @brief The gradient of @p param is final for this iteration. Submits its bucket
 *        (coll_allreduce_async() in place) when it was the bucket's last parameter not ready.
 * @return COLL_OK (also when the bucket was submitted); COLL_ERR_INVALID when @p param is not
 *         registered or was already reported this iteration; a submission error of
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
    /** Communication time: the union over buckets of [submit, done] (done: the daemon
     *  finished the allreduce), i.e. the wall time during which some bucket was in flight. */
    uint64_t comm_ns;
    uint64_t comm_sum_ns;       /**< the sum over buckets of done - submit (counts overlap of
                                     buckets twice) */
    /** Exposed communication: wait_end - wait_begin, the time the caller waited after
     *  backward for communication that backward did not hide. */
    uint64_t exposed_ns;
    /** 1 - exposed_ns / comm_ns, clamped to [0, 1]; 1 when comm_ns is 0. */
    double overlap_efficiency;
} coll_bucketer_stats_t;

/**
 * @brief Counters and overlap measurements of the last completed iteration.
 * @param [out] stats  Filled on COLL_OK.
 * @return COLL_OK. Thread-safe.
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
 * @return COLL_OK; COLL_ERR_INVALID for an unknown parameter; sealing errors as
 *         coll_bucketer_param_grad().
 */
COLL_API coll_status_t coll_bucketer_param_info(coll_bucketer_t *bucketer, size_t param,
                                                coll_bucketer_param_info_t *info);

/**
 * @brief Layout of bucket @p bucket, 0 .. num_buckets-1 (seals the registration).
 * @return COLL_OK; COLL_ERR_INVALID for an unknown bucket; sealing errors as
 *         coll_bucketer_param_grad().
 */
COLL_API coll_status_t coll_bucketer_bucket_info(coll_bucketer_t *bucketer, size_t bucket,
                                                 coll_bucketer_bucket_info_t *info);

/**
 * @brief Message of the bucketer's last error ("" when none); owned by the bucketer, valid
 *        until its next call.
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
 * doubling; and an instant event "submit". Args: collective, bytes, key, algorithm, bucket and iteration. coll_timeline_span()
 * adds spans of the caller's own (e.g. forward and backward); bucketers add their "exposed
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
 *         for NULL strings or end before begin. Thread-safe.
 */
COLL_API coll_status_t coll_timeline_span(coll_comm_t *comm, const char *track,
                                          const char *name, uint64_t begin_ns, uint64_t end_ns);

/** @return Nonzero when @p comm writes a timeline (COLL_TIMELINE was set and the file opened). */
COLL_API int coll_timeline_enabled(coll_comm_t *comm);

/**
 * @brief Write the buffered events now (the file is complete JSON afterwards).
 * @return COLL_OK (also without a timeline); COLL_ERR_IO when writing failed (the timeline is
 *         then switched off). Thread-safe.
 */
COLL_API coll_status_t coll_timeline_flush(coll_comm_t *comm);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_H */
