/**
 * @file collective_ops.h
 * @brief The operations: the algorithms that run them, one operation's parameters (key,
 *        algorithm, layout, compression, stream), the collectives and point-to-point
 *        transfers (asynchronous, each giving a request: collective.h) and the blocking
 *        allreduce. Included by collective.h, after collective_compress.h (whose spec the
 *        parameters carry).
 */
#ifndef COLLECTIVE_OPS_H
#define COLLECTIVE_OPS_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Algorithms. COLL_ALGO_AUTO lets the daemons choose by collective, size and node count: the
 * one the root daemon's cost model predicts fastest (docs/cost-model.md), by size ranges the
 * root computes for the job and sends to every node, so every node chooses alike. COLL_ALGO
 * (auto, ring, rd, chain, dissemination, direct, nccl, device) in the environment forces one for
 * a rank's collectives; ranks of a job must agree (else COLL_ERR_MISMATCH). A collective an
 * algorithm cannot run fails with COLL_ERR_UNSUPPORTED.
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
    /** Direct: the root's node exchanges each rank's block with that rank's node, once every
     *  node's descriptor reached it (gather and scatter); every pair of nodes exchanges their
     *  ranks' blocks, once every node's counts reached every node (all-to-all). */
    COLL_ALGO_DIRECT = 5,
    /** NCCL between the daemons, one rank per node: the node's ranks' device buffers combined
     *  locally, one NCCL call, the result copied to each rank (docs/gpu.md); never on host. */
    COLL_ALGO_NCCL = 6,
    /** A group on one node: its ranks' device buffers combined on the device (docs/gpu.md). */
    COLL_ALGO_DEVICE = 7,
    COLL_ALGO_COUNT
} coll_algo_t;

/** Fields of ::coll_op_params_t that are set. */
enum {
    COLL_OP_PARAM_KEY = 1u << 0,  /**< key */
    COLL_OP_PARAM_ALGO = 1u << 1, /**< algo */
    COLL_OP_PARAM_LAYOUT = 1u << 2, /**< layout */
    COLL_OP_PARAM_COMPRESSION = 1u << 3, /**< compression */
    COLL_OP_PARAM_STREAM = 1u << 4, /**< stream */
};

/**
 * Optional per-operation parameters.
 * @c key identifies the operation across ranks. Without it the library numbers collectives in
 * call order (every rank must then call collectives in the same order, as in MPI) and
 * point-to-point messages per peer in call order. With it, ranks may submit collectives in
 * different orders: operations with the same key are matched, e.g. a DDP bucket (bucket id,
 * iteration). Keys must be unique among the operations in flight on a communicator; only the
 * low 27 bits of a collective's key (bit 39 is the library's mark of call-order numbers) and the
 * low 23 bits of a point-to-point key are significant; one submitted again while in flight (a
 * send or receive: to the same peer) is refused with COLL_ERR_INVALID, failing the job and the
 * pending request of that key. Operations of different communicators (a group and its parent,
 * two groups: collective_groups.h) never match, whatever their keys. @c algo overrides
 * COLL_ALGO for this operation (one outside ::coll_algo_t is refused: COLL_ERR_INVALID).
 * @c layout is a fingerprint of how the buffer is made of tensors (e.g. a hash of each
 * tensor's name, count and dtype in order; the bucketer sets one per bucket). The daemons
 * compare it across ranks like the count and dtype: ranks whose buckets hold different
 * tensors fail with COLL_ERR_MISMATCH instead of summing unrelated gradients. 0 (the default)
 * means none and matches only 0.
 * @c compression overrides the communicator's default (COLL_COMPRESSION, none when unset) for
 * this operation.
 * @c stream, for buffers in a device pool only: a CUDA stream of this process (a CUstream or
 * cudaStream_t, e.g. a framework's current stream; NULL is the default stream, as for CUDA,
 * not none: the mask says whether there is one). The operation reads its inputs only once
 * the work queued on it before the call is done, without blocking this thread: the call
 * queues the write of a word on the stream, and the daemon's work waits for the word (the
 * staged copies on the device; elsewhere its loop polls the word every millisecond). With host buffers it is refused (COLL_ERR_INVALID); with
 * 1024 requests with a stream in flight, COLL_ERR_BUSY; as any refused call, either ends the
 * job (the other ranks: COLL_ERR_JOB naming this rank). A stream whose work never ends holds
 * the operation as a rank that never submits would. The words live in the job's pool:
 * coll_comm_destroy() releases every stream wait on them, and keeps them mapped for the life
 * of the process (16 KiB) where a stream may still touch them. docs/gpu.md, "Streams".
 * A @c field_mask bit that names no field is refused (COLL_ERR_INVALID), as any refused call
 * ending the job.
 */
typedef struct {
    uint64_t field_mask;
    uint64_t key;
    coll_algo_t algo;
    uint64_t layout;
    coll_compression_t compression;
    void *stream;
} coll_op_params_t;

/*
 * Collectives. Common to all of them:
 * - Buffers live in the job's pool (coll_mem_alloc()); the daemon reads and writes them in
 *   place. Send and receive buffers are either the same (in place) or do not overlap. They may
 *   instead both be in the job's pool on a device (coll_mem_alloc_on()): allreduce,
 *   reduce-scatter, all-gather, broadcast, reduce, gather, scatter, the all-to-all (equal
 *   blocks or not), send and receive then run through host copies the daemon makes and copies
 *   back (docs/gpu.md, "The staged path"), allreduce compressed too, and so do the parameter
 *   service's steps (collective_ps.h); another collective compressed on device buffers
 *   completes with COLL_ERR_UNSUPPORTED, and a send buffer in one pool with a receive buffer in
 *   another is refused with COLL_ERR_INVALID. A send and its receive may each be in either
 *   pool; the ranks of one node hold a collective of the communicator of coll_comm_create() in
 *   one kind of pool (some in host memory, some on a device: COLL_ERR_MISMATCH on every rank).
 *   On device buffers a CUDA stream orders an operation after the work queued on it
 *   (coll_op_params_t.stream) and work queued after it on the operation
 *   (coll_req_stream_wait()).
 * - Counts are in elements of @p dtype; 0 is allowed.
 * - The call returns COLL_INPROGRESS and a request in @p req_p (wait, test, free), or an error:
 *   COLL_ERR_INVALID (bad dtype, op, root, peer, compression; a bitwise op of a float dtype; a
 *   count whose world_size blocks or bytes overflow size_t; overlapping buffers; a key in
 *   flight; a NULL @p comm, @p req_p or buffer of more than 0 elements: a
 *   buffer the call does not touch on this rank, e.g. a broadcast's off the root, may be NULL),
 *   COLL_ERR_NOT_IN_POOL (a buffer outside this rank's allocations), the job's error once it
 *   failed (coll_comm_last_error() says why), COLL_ERR_CLOSED (daemon gone), COLL_ERR_NOMEM.
 * - The request then completes with COLL_OK or: COLL_ERR_MISMATCH (ranks disagree on count,
 *   dtype, op, root or algorithm; no output was written), COLL_ERR_UNSUPPORTED (forced algorithm
 *   cannot run this collective), COLL_ERR_PEER, COLL_ERR_JOB (another rank ended the job: it
 *   aborted, left, or a call of it was refused), COLL_ERR_CLOSED, COLL_ERR_TIMEDOUT (the job's
 *   timeout), COLL_ERR_IO (device buffers: the device's work failed, e.g. a kernel's fault,
 *   docs/gpu.md "A device's fault"); or the code of a later call of this rank that was refused
 *   (which ends the job).
 * - The buffers belong to the library until the request completes.
 * - Every collective is hierarchical: the daemon combines its local ranks' buffers in the same
 *   pass that serves the inter-node algorithm.
 */

/**
 * @brief Allreduce: every rank's @p recvbuf (count elements) receives the element-wise
 *        reduction over all ranks of their @p sendbuf (count elements).
 * Algorithms: COLL_ALGO_RD for small buffers (below the cost model's crossover for the job's
 * node count, at most one pipeline segment), COLL_ALGO_RING otherwise.
 */
COLL_API coll_status_t coll_allreduce_async(coll_comm_t *comm, const void *sendbuf,
                                            void *recvbuf, size_t count, coll_dtype_t dtype,
                                            coll_redop_t op, const coll_op_params_t *params,
                                            coll_request_t **req_p);

/**
 * @brief Reduce-scatter: @p sendbuf holds world_size blocks of @p recvcount elements; rank r's
 *        @p recvbuf receives the reduction over all ranks of their block r.
 * In place when @p recvbuf is block r of @p sendbuf. Algorithm: COLL_ALGO_RING.
 * @return As above (COLL_ERR_INVALID for a @p recvcount whose world_size blocks overflow).
 */
COLL_API coll_status_t coll_reduce_scatter_async(coll_comm_t *comm, const void *sendbuf,
                                                 void *recvbuf, size_t recvcount,
                                                 coll_dtype_t dtype, coll_redop_t op,
                                                 const coll_op_params_t *params,
                                                 coll_request_t **req_p);

/**
 * @brief All-gather: @p recvbuf (world_size blocks of @p sendcount elements) receives every
 *        rank's @p sendbuf in rank order. In place when @p sendbuf is block r of @p recvbuf.
 * @return As above (COLL_ERR_INVALID for a @p sendcount whose world_size blocks overflow).
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
 * @brief Gather: rank @p root's @p recvbuf (world_size blocks of @p count elements) receives
 *        every rank's @p sendbuf (@p count elements) at that rank's block, in rank order.
 *        @p recvbuf is written at the root only (may be NULL elsewhere). In place at the root
 *        when its @p sendbuf is its own block of @p recvbuf.
 * Every rank must give the same @p count, @p dtype and @p root: the root's node compares every
 * node's descriptor before it writes a byte, so a disagreement fails the operation on every
 * rank with COLL_ERR_MISMATCH and the root's @p recvbuf untouched. Algorithm: COLL_ALGO_DIRECT.
 * @return As above (COLL_ERR_INVALID for a @p count whose world_size blocks overflow).
 */
COLL_API coll_status_t coll_gather_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                         size_t count, coll_dtype_t dtype, int root,
                                         const coll_op_params_t *params, coll_request_t **req_p);

/**
 * @brief Scatter: every rank r's @p recvbuf (@p count elements) receives block r of rank
 *        @p root's @p sendbuf (world_size blocks of @p count elements). @p sendbuf is read at
 *        the root only (may be NULL elsewhere). In place at the root when its @p recvbuf is its
 *        own block of @p sendbuf.
 * Every rank must give the same @p count, @p dtype and @p root: the root's node sends nothing
 * before it has compared every node's descriptor, so a disagreement fails the operation on
 * every rank with COLL_ERR_MISMATCH and no @p recvbuf written.
 * @return As coll_gather_async().
 * Algorithm: COLL_ALGO_DIRECT.
 */
COLL_API coll_status_t coll_scatter_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                          size_t count, coll_dtype_t dtype, int root,
                                          const coll_op_params_t *params,
                                          coll_request_t **req_p);

/**
 * @brief All-to-all with per-rank sizes, as MPI_Alltoallv: rank i's @p sendcounts[j] elements
 *        at @p sdispls[j] of its @p sendbuf land in rank j's @p recvbuf at j's @p rdispls[i],
 *        where j expects @p recvcounts[i] of them. Counts and displacements are in elements
 *        of @p dtype, world_size entries each (the communicator's ranks); a block of 0
 *        elements touches nothing, whatever its displacement. Blocks may overlap in
 *        @p sendbuf, not in @p recvbuf; the send and receive buffers must not overlap (no in
 *        place form). A buffer that no block touches may be NULL.
 * The four arrays are the caller's and are read during the call only: the library copies
 * them into a table of its own in the pool (4 x world_size x 8 bytes, allocated for the
 * request, given back when it completes), from which the daemon copies them at submission.
 * Every rank must give the same @p dtype, and every pair of ranks the same count (what i sends
 * j is what j expects from i): every node checks every rank's counts before a byte moves, so
 * a disagreement fails the operation on every rank with COLL_ERR_MISMATCH (the message names
 * the first pair) and no @p recvbuf written.
 * @return As the collectives above; COLL_ERR_INVALID also for a NULL array, a block whose
 *         end in bytes overflows or two non-empty receive blocks that overlap (which would
 *         make the result depend on the order of arrival), COLL_ERR_NOT_IN_POOL for a block
 *         outside this rank's allocations, COLL_ERR_UNSUPPORTED on more than 4096 ranks, and
 *         the errors of coll_mem_alloc() for the table (COLL_ERR_NOMEM when the pool is full).
 *         On a device pool (coll_mem_alloc_on()) it runs on the staged path; the table stays
 *         in the host pool. A refused call fails the job, as every refused submission.
 *         Compression (of @p params or the communicator) does not apply.
 * Algorithm: COLL_ALGO_DIRECT.
 */
COLL_API coll_status_t coll_alltoallv_async(coll_comm_t *comm, const void *sendbuf,
                                            const size_t *sendcounts, const size_t *sdispls,
                                            void *recvbuf, const size_t *recvcounts,
                                            const size_t *rdispls, coll_dtype_t dtype,
                                            const coll_op_params_t *params,
                                            coll_request_t **req_p);

/**
 * @brief All-to-all with equal blocks: block j (@p count elements) of rank i's @p sendbuf
 *        (world_size blocks) lands in block i of rank j's @p recvbuf (world_size blocks).
 *        coll_alltoallv_async() with every count @p count and displacements j x @p count.
 * @return As coll_alltoallv_async(), COLL_ERR_INVALID for world_size blocks that overflow.
 * Algorithm: COLL_ALGO_DIRECT.
 */
COLL_API coll_status_t coll_alltoall_async(coll_comm_t *comm, const void *sendbuf,
                                           void *recvbuf, size_t count, coll_dtype_t dtype,
                                           const coll_op_params_t *params,
                                           coll_request_t **req_p);

/**
 * @brief Barrier: completes on a rank only after every rank of the job has entered it.
 * Algorithm: COLL_ALGO_DISSEMINATION.
 */
COLL_API coll_status_t coll_barrier_async(coll_comm_t *comm, const coll_op_params_t *params,
                                          coll_request_t **req_p);

/**
 * @brief Send @p count elements of @p buf to rank @p peer of @p comm. Matched with the peer's
 *        coll_recv_async() for this rank on the same communicator by key (by default: the n-th
 *        send to a peer matches its n-th receive from this rank). Any size, pool to pool.
 *        Completes once the receiver has the data (across nodes, when its answer came back).
 * @return As the collectives; COLL_ERR_INVALID when @p peer is this rank or out of range. When
 *         the receiver posted another size both requests fail with COLL_ERR_MISMATCH (naming
 *         both sizes); a peer whose job failed (its death included) fails both.
 */
COLL_API coll_status_t coll_send_async(coll_comm_t *comm, const void *buf, size_t count,
                                       coll_dtype_t dtype, int peer,
                                       const coll_op_params_t *params, coll_request_t **req_p);

/** @brief Receive @p count elements from rank @p peer into @p buf; see coll_send_async(). */
COLL_API coll_status_t coll_recv_async(coll_comm_t *comm, void *buf, size_t count,
                                       coll_dtype_t dtype, int peer,
                                       const coll_op_params_t *params, coll_request_t **req_p);

/**
 * @brief Blocking allreduce: coll_allreduce_async() then coll_req_wait() with no timeout.
 * @return As coll_allreduce_async() and coll_req_wait().
 */
COLL_API coll_status_t coll_allreduce(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                      size_t count, coll_dtype_t dtype, coll_redop_t op);

/** @return The name of @p algo, e.g. "ring"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_algo_name(coll_algo_t algo);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_OPS_H */
