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
 *   last failure on a communicator (which rank, which sizes), without the status's text.
 * - The library prints on stderr only what no return value tells, as set by COLL_DEBUG (after
 *   NCCL_DEBUG): NONE nothing; WARN (default) waiting for a daemon or for the other ranks, a
 *   timeline switched off; INFO also every error as it is returned, once.
 * - Counts are in elements of the datatype, sizes in bytes, times in milliseconds.
 * - Output parameters come last and are written only on success.
 * - A communicator may be used from several threads: each call takes the communicator's lock.
 *   Operations are matched across ranks by key (coll_op_params_t.key); without one, by call
 *   order, which only the thread that created the communicator has: an operation without a key
 *   from any other thread is refused (COLL_ERR_INVALID), so that no two threads' operations are
 *   ever paired by timing. Give concurrent operations keys.
 * - A submission refused here or by the daemon (a buffer outside the pool, a bad root, peer,
 *   count, datatype or key, an operation without a key from another thread) fails the whole
 *   job on every rank with the reason ("<function>: rank <r>: <the bad value>"), since the
 *   other ranks could never complete that operation. The refusing rank gets the refusal's code
 *   (COLL_ERR_INVALID, COLL_ERR_NOT_IN_POOL, ...) from that call, its pending requests and its
 *   later calls; every other rank gets COLL_ERR_JOB naming the refusing rank and the reason.
 * - NULL: a pointer that must not be NULL (a handle, an output, a buffer of more than 0
 *   elements, a name) gives COLL_ERR_INVALID (-1, 0, "" or nothing where no status is returned,
 *   as each function says) and "<function>: <argument> must not be NULL" in
 *   coll_comm_last_error() of the call's communicator (a request's, bucketer's or service's),
 *   or of NULL without one. A call that every rank makes is refused so and fails the job.
 *   Freeing NULL is a no-op, as free(NULL) (coll_mem_free() too).
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
    X(ERR_BUSY, -16, "resource busy (a buffer still in use by a pending request)")                 \
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
 * - COLL_BAND, COLL_BOR, COLL_BXOR: bitwise and, or, exclusive or of the integer dtypes (int8,
 *   uint8, int32, int64) only; a collective that asks one of them of a float dtype is refused
 *   with COLL_ERR_INVALID before anything is posted.
 */
typedef enum {
    COLL_SUM = 0,
    COLL_AVG = 1,
    COLL_PROD = 2,
    COLL_MIN = 3,
    COLL_MAX = 4,
    COLL_BAND = 5,
    COLL_BOR = 6,
    COLL_BXOR = 7,
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
    COLL_COMM_PARAM_CONNECT_TIMEOUT = 1u << 8, /**< connect_timeout_ms */
};

/** The default of coll_comm_params_t::connect_timeout_ms (COLL_CONNECT_TIMEOUT_MS): how long
 *  a rank waits for its node's daemon to accept, and its daemon for the root daemon to accept,
 *  before coll_comm_create() fails saying which is missing. */
#define COLL_CONNECT_TIMEOUT_DEFAULT_MS 10000

/**
 * Parameters of coll_comm_create(). A field whose bit is not set in @c field_mask is read from
 * the environment (torchrun-style): COLL_SOCKET, COLL_JOB, COLL_RANK, COLL_WORLD_SIZE,
 * COLL_LOCAL_RANK, COLL_LOCAL_SIZE, COLL_ROOT, COLL_TIMEOUT_MS, COLL_POOL_SIZE, COLL_JOB_TOKEN,
 * COLL_CONNECT_TIMEOUT_MS; else, for the ranks, torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, and for the root torchrun's MASTER_ADDR at port COLL_ROOT_PORT (default
 * 29510, the daemon's default listen port) when no launcher below names one; else from the
 * launcher: Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE, and a job
 * id from its PMIX_NAMESPACE) or a Slurm step's srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS,
 * SLURM_LOCALID, SLURM_STEP_TASKS_PER_NODE; job id "slurm-<job>.<step>"; root the step's first
 * node at port COLL_ROOT_PORT, default 29510).
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
                                  configured); outside 100..86400000 coll_comm_create() fails
                                  with COLL_ERR_INVALID */
    uint64_t pool_bytes;     /**< size of the job's shared pool per node; default chosen by daemon */
    const char *job_token;   /**< secret shared by the job's ranks (at most 256 bytes): a rank
                                  with another one cannot join the job, nor see its memory */
    int connect_timeout_ms;  /**< how long connecting may wait (ms): for the node's daemon to
                                  accept on its socket, and for the root daemon to accept this
                                  node's daemon; at most the job's timeout; 0: no bound of its
                                  own (the job's timeout); default
                                  COLL_CONNECT_TIMEOUT_DEFAULT_MS */
} coll_comm_params_t;

/**
 * @brief Connect to the node's daemon and join a job; blocks until every rank of the job has
 *        joined (rendezvous) or the timeout expires.
 * @param [in]  params  Parameters, may be NULL (everything from the environment).
 * @param [out] comm_p  The new communicator; the caller frees it with coll_comm_destroy().
 * @return COLL_OK on success;
 *         COLL_ERR_INVALID for missing or inconsistent parameters (message names the field), a
 *         NULL string whose bit is set (a NULL job_token: no token) or a NULL @p comm_p;
 *         COLL_ERR_CONNREFUSED when no daemon listens on the socket within the connect timeout
 *         (connect_timeout_ms, 10 s by default, or the job's timeout when shorter): the
 *         library tries again meanwhile, as a daemon may be starting, and says on stderr after
 *         1 s that it waits (COLL_DEBUG=WARN, the default); the job's timeout bounds the whole
 *         call, connecting and rendezvous together (plus 1 s for the daemon's answer), and a
 *         rendezvous that waits says after 1 s what for (a local rank not started, a root
 *         daemon that cannot be reached);
 *         COLL_ERR_VERSION when the daemon speaks another protocol version;
 *         COLL_ERR_RENDEZVOUS when the job's ranks disagree (world size, duplicate rank), or the
 *         root daemon refused this node's daemon for the connect timeout or cannot be reached;
 *         COLL_ERR_TIMEDOUT when not all ranks joined in time;
 *         COLL_ERR_DENIED when the job's token differs (or the daemon requires one), or the
 *         socket's permissions keep this user out (not in the daemon's socket group);
 *         COLL_ERR_NOMEM. On failure a message naming what was wrong is kept for
 *         coll_comm_last_error(NULL) (and printed with COLL_DEBUG=INFO).
 */
COLL_API coll_status_t coll_comm_create(const coll_comm_params_t *params, coll_comm_t **comm_p);

/**
 * @brief Free the communicator. Every request of the communicator, pending or finished, is
 *        freed (do not use them afterwards). A group (coll_comm_split()) leaves its daemon's
 *        group table. When it was the rank's last communicator (the world and every group split
 *        from it destroyed), the rank leaves the job and its pool memory is unmapped, so
 *        pointers from coll_mem_alloc() become invalid. Safe to call with NULL.
 */
COLL_API void coll_comm_destroy(coll_comm_t *comm);

/** @return This rank's rank in @p comm (its global rank in the world); -1 for NULL. Thread-safe. */
COLL_API int coll_comm_rank(const coll_comm_t *comm);
/** @return How many ranks @p comm has (the world size for the world); -1 for NULL. Thread-safe. */
COLL_API int coll_comm_world_size(const coll_comm_t *comm);
/** @return This rank's place among the ranks of @p comm on its node; -1 for NULL. Thread-safe. */
COLL_API int coll_comm_local_rank(const coll_comm_t *comm);
/** @return The number of ranks of @p comm on this node; -1 for a NULL @p comm. Thread-safe. */
COLL_API int coll_comm_local_size(const coll_comm_t *comm);

/**
 * @brief End the job on every rank: each pending and later operation of every rank fails with
 *        COLL_ERR_JOB and a message naming this rank and @p reason (as ncclCommAbort or
 *        MPI_Abort, but the communicator stays to be destroyed). For a trainer that found
 *        something fatal (a NaN loss, a failed checkpoint) and must not leave the others
 *        waiting. Thread-safe.
 * @param [in] reason Text for every rank (cut at 1023 bytes); copied.
 * @return COLL_OK once the daemon was told; COLL_ERR_CLOSED when the link to the daemon is
 *         gone (the job fails anyway then); COLL_ERR_INVALID for a NULL @p comm or @p reason.
 */
COLL_API coll_status_t coll_comm_abort(coll_comm_t *comm, const char *reason);

/**
 * @brief The largest collective that the local ranks of @p comm run among themselves in shared
 *        memory, without the daemon on the data path (coll_req_algo() then says "shm"): in a
 *        job on a single node, with algorithm COLL_ALGO_AUTO. Larger ones, those with a forced
 *        algorithm and every collective of a job over several nodes go to the daemon (whose
 *        multi-threaded path takes over above this size). The size counts as coll-perf's does:
 *        one rank's buffer, the whole (world-sized) buffer of reduce-scatter and all-gather.
 *        It is the daemon's shm_max_bytes (collectived --help), the same on every local rank.
 * @return Bytes; 0 when no collective runs there (several nodes, or a daemon without the
 *         shared-memory area), and for a NULL @p comm. Thread-safe.
 */
COLL_API uint64_t coll_comm_shm_max_bytes(const coll_comm_t *comm);

/**
 * @brief The largest allreduce that a job over several nodes reduces among the local ranks of
 *        @p comm in shared memory before the daemons' inter-node algorithm, which then runs on
 *        one buffer per node, and distributes among them after it (coll_req_algo() then says
 *        "shm+rd" or "shm+ring"): with COLL_ALGO_AUTO, on a node with more than one rank of
 *        the job, for every dtype and reduction whose partial results keep the dtype (all but
 *        float16 and bfloat16 with COLL_SUM, COLL_AVG and COLL_PROD, which the daemons
 *        accumulate in float32). Local rank 0 keeps four node buffers of this size in the
 *        pool, taken on first use: an allreduce that finds none free, or a pool without room
 *        for them, runs in the daemon whole, with the same result. The size counts one rank's
 *        buffer. It is the daemon's shm_node_max_bytes (collectived --help), the same on every
 *        local rank.
 * @return Bytes; 0 when no allreduce runs so (a single node, one local rank, or a daemon
 *         without it), and for a NULL @p comm. Thread-safe.
 */
COLL_API uint64_t coll_comm_shm_node_max_bytes(const coll_comm_t *comm);

/**
 * @brief The direct path's crossover of @p comm's job over several nodes: allreduces of the
 *        world communicator with COLL_ALGO_AUTO, up to this size, of the dtypes and reductions
 *        of coll_comm_shm_node_max_bytes(), run their inter-node rounds between the nodes'
 *        leader ranks (local rank 0 of each) over their own UCX workers, without the daemons
 *        on the data path; coll_req_algo() says "shm+direct" ("direct" on a node of one rank).
 *        It is the root daemon's direct_max_bytes (collectived --help), the same on every rank.
 * @return Bytes; 0 when no allreduce runs so (a single node, or a job without the path), and
 *         for a NULL @p comm. Thread-safe.
 */
COLL_API uint64_t coll_comm_direct_max_bytes(const coll_comm_t *comm);

/**
 * @brief Detailed message of the last error on @p comm (e.g. both descriptors of a mismatch),
 *        whichever thread met it; with @p comm NULL, the calling thread's last one without a
 *        communicator (a failed coll_comm_create(), a NULL argument, a bad value of a call
 *        that has none: coll_layout_init(), coll_layout_coords(), coll_layout_group()).
 *        Thread-safe.
 * @return A copy owned by the library, per calling thread, valid until the thread's next call
 *         of this function (with NULL: its next call of the library); "" when there was none.
 */
COLL_API const char *coll_comm_last_error(const coll_comm_t *comm);

/**
 * @brief Allocate @p bytes in the job's shared memory pool. Buffers passed to collectives must
 *        come from here: the daemon reads and writes them in place (zero copy).
 * @param [in]  comm   Communicator.
 * @param [in]  bytes  Size in bytes, > 0; rounded up to 64 bytes.
 * @param [out] ptr_p  Start of the buffer, 64-byte aligned; owned by @p comm until
 *                     coll_mem_free() or coll_comm_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for 0 bytes or a NULL @p comm or @p ptr_p;
 *         COLL_ERR_POOL_FULL when the pool has no room (the message gives pool size and free
 *         bytes); once the job failed, the status it
 *         failed with; COLL_ERR_CLOSED, COLL_ERR_TIMEDOUT (no answer in 30 s), COLL_ERR_NOMEM.
 */
COLL_API coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr_p);

/**
 * @brief Return a buffer from coll_mem_alloc() or coll_mem_alloc_on() to its pool, once no
 *        pending request uses it. A NULL @p ptr frees nothing (COLL_OK), as free(NULL).
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p comm; COLL_ERR_NOT_IN_POOL when @p ptr is
 *         not the start of an allocation;
 *         COLL_ERR_BUSY when a pending request reads or writes a byte of it (nothing changes;
 *         the message names the operation); COLL_ERR_CLOSED when the daemon is gone.
 */
COLL_API coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr);

#include <collective_memory.h>

/* The algorithms, an operation's parameters, the collectives and point-to-point transfers,
 * which give the requests below: collective_ops.h, after the compression its parameters carry. */
#include <collective_compress.h>
#include <collective_ops.h>

/**
 * @brief Check a request without blocking.
 * @return COLL_INPROGRESS while pending; COLL_OK when it completed successfully; its error when
 *         it failed (see the collectives, collective_ops.h); COLL_ERR_TIMEDOUT, as coll_req_wait(), for a
 *         collective the daemon has answered nothing about for the job's timeout + 1 s since
 *         its submit (a stopped or hung daemon), the request staying valid; COLL_ERR_INVALID: NULL.
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
 * @brief The algorithm that ran a completed request, e.g. "ring", "rd", "local" (the daemon on
 *        a single node), "shm" (the local ranks among themselves in shared memory,
 *        coll_comm_shm_max_bytes()), "shm+rd" and "shm+ring" (reduced and distributed among
 *        the local ranks around the daemons' algorithm, coll_comm_shm_node_max_bytes()); a
 *        compressed allreduce names its method: "fp16", "bf16", "topk", "onebit", "powersgd"
 *        (with auto, the one chosen); a collective on device buffers (coll_mem_alloc_on())
 *        names the staged path and the algorithm it ran on the host copies: "staged+ring",
 *        "staged+rd", "staged+chain", "staged+local", "staged+direct", "staged+p2p" (a send or
 *        a receive), "staged+pipelined+ring" and "staged+pipelined+local" (the copies
 *        overlapping the algorithm), "nccl" (NCCL between the daemons), "device+local" (one
 *        node, on one device) or "device+peers" (one node, on several peer devices); "direct"
 *        for gather, scatter and all-to-all; "none" for a forced algorithm that could not run
 *        it (COLL_ERR_UNSUPPORTED); "" while pending and for requests that failed before an
 *        algorithm was chosen (a mismatch, a refusal). Valid until the request is freed. A
 *        NULL @p req gives
 *        "unknown" (as the *_name() functions give for a value out of range) and the calling
 *        thread's message that it must not be NULL (coll_comm_last_error(NULL)).
 */
COLL_API const char *coll_req_algo(const coll_request_t *req);

/**
 * @brief Make the work queued on CUDA stream @p stream (of this process; NULL: the default
 *        stream) from now on wait until @p req completes, without blocking this thread
 *        (ProcessGroupNCCL's Work.wait()): the daemon stores a word when the operation ends,
 *        which the stream waits on (cuStreamWaitValue64). On success the results are in the
 *        buffers for that work; on failure the stream goes on too, and coll_req_wait() or
 *        coll_req_test() gives the error. Any thread; may be called before or after the
 *        request completed, and more than once.
 * @param req A request on buffers in a device pool (any collective, send, receive or
 *        parameter-service step of coll_mem_alloc_on() buffers), not yet freed.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p req, or a request without stream words (host
 *         buffers; one submitted while 1024 of them were in flight without a stream); the
 *         device layer's error when the wait could not be queued (COLL_ERR_UNSUPPORTED where
 *         the device lacks 64-bit stream memory operations).
 */
COLL_API coll_status_t coll_req_stream_wait(coll_request_t *req, void *stream);

/**
 * @brief Free a request. A request still in progress is detached: its result is discarded and
 *        its buffers stay in use by the daemon until it ends. Safe with NULL.
 */
COLL_API void coll_req_free(coll_request_t *req);

/* A completed request's bytes, phase times and steps: collective_trace.h; the gradient
 * bucketer and the timeline: collective_bucketer.h; the parameter service: collective_ps.h;
 * groups (communicator split, 3D-parallel layouts): collective_groups.h (all included here). */

#ifdef __cplusplus
}
#endif

#include <collective_trace.h>
#include <collective_bucketer.h>
#include <collective_ps.h>
#include <collective_groups.h>

#endif /* COLLECTIVE_H */
