/**
 * @file nccl.h
 * @brief NCCL as a table of functions (coll_nccl_ops_t), loaded at run time as the driver is
 *        (device/nccl.c: dlopen of libnccl.so.2, entries by name), so the same binaries start
 *        on a machine without it. One communicator joins one rank per process: the daemons of
 *        a job, each on the device of its device pool.
 *
 * Communicators are non-blocking (NCCL's config blocking = 0), so that nothing waits on the
 * caller's thread (the daemon's loop): comm_init() and every collective return at once, and
 * comm_poll() answers COLL_INPROGRESS until the communicator is ready or the last call's work
 * is queued on its stream, COLL_OK then, or the error the communicator met (a peer's failure
 * included: NCCL's asynchronous error). A caller issues one call at a time per communicator and
 * polls until it is queued before the next; the work itself completes on the stream (an event
 * recorded after it, device/dev.h). Every rank of a communicator must issue the same
 * collectives in the same order.
 *
 * Errors: NCCL's ncclResult_t becomes a coll_status_t in nccl.c, once: an invalid argument or
 * usage COLL_ERR_INVALID, a peer's failure (ncclRemoteError) COLL_ERR_PEER, anything else
 * COLL_ERR_IO; the call and NCCL's words are in coll_dev_error() of the calling thread. Nothing
 * here logs.
 *
 * Threads: the functions of one communicator from one thread at a time (NCCL's rule); several
 * communicators may be used from different threads.
 */
#ifndef COLL_DEVICE_NCCL_H
#define COLL_DEVICE_NCCL_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "device/dev.h"

/** Bytes of a communicator's unique id (NCCL_UNIQUE_ID_BYTES): what its ranks must share. */
#define COLL_NCCL_ID_BYTES 128

/** A communicator's unique id, made by one rank and given to the others. */
typedef struct {
    uint8_t bytes[COLL_NCCL_ID_BYTES];
} coll_nccl_id_t;

/** A communicator (NCCL's ncclComm_t). */
typedef struct coll_nccl_comm *coll_nccl_comm_t;

/** NCCL's functions. Buffers are device addresses on the communicator's device (host memory
 *  under the fake device layer, whose stand-in NCCL the tests load). Counts are elements. */
typedef struct coll_nccl_ops {
    /** 1 for the tests' stand-in (tests/unit/device/fake_libnccl.c, which exports
     *  collective_nccl_host_memory): it works on host memory, the fake device layer's; 0 for
     *  NCCL, which works on a GPU's. */
    int host_memory;
    /** @brief A new unique id (ncclGetUniqueId). @return COLL_OK or NCCL's error. */
    coll_status_t (*unique_id)(coll_nccl_id_t *id);
    /**
     * @brief Join rank @p rank of @p nranks of the communicator @p id names, on device @p dev
     *        (made current on the calling thread for the call): non-blocking, poll with
     *        comm_poll() until COLL_OK. On an error the communicator is destroyed already.
     * @return COLL_OK (joining); COLL_ERR_INVALID for a rank or count out of range; NCCL's
     *         error.
     */
    coll_status_t (*comm_init)(int dev, int nranks, int rank, const coll_nccl_id_t *id,
                               coll_nccl_comm_t *comm_p);
    /** @return COLL_OK when @p comm is ready and its last call queued, COLL_INPROGRESS while
     *          not yet, else its error (ncclCommGetAsyncError). Never blocks. */
    coll_status_t (*comm_poll)(coll_nccl_comm_t comm);
    /** @brief Abort @p comm (ncclCommAbort): its queued work ends, its peers see an error; the
     *         handle is gone afterwards. May block until NCCL's threads stopped. NULL is a
     *         no-op. */
    void (*comm_abort)(coll_nccl_comm_t comm);
    /** @brief Destroy @p comm once its work is done (ncclCommDestroy, after the last call was
     *         polled to COLL_OK and its stream's work completed). NULL is a no-op. */
    void (*comm_destroy)(coll_nccl_comm_t comm);
    /** @brief recv = the reduction @p op of every rank's send, @p count elements, queued on
     *         @p s. COLL_AVG is NCCL's ncclAvg: the sum over the communicator's ranks divided
     *         by their number (not the job's world size; the engine averages itself, SUM then
     *         its own division). @return COLL_OK (poll), COLL_ERR_UNSUPPORTED for a dtype or
     *         reduction NCCL has not (the bitwise ones), NCCL's error. */
    coll_status_t (*allreduce)(uint64_t send, uint64_t recv, size_t count, coll_dtype_t dtype,
                               coll_redop_t op, coll_nccl_comm_t comm, coll_dev_stream_t s);
    /** @brief recv = rank r's block (@p count elements) of the reduction of every rank's send
     *         (nranks x @p count elements). @return As allreduce. */
    coll_status_t (*reduce_scatter)(uint64_t send, uint64_t recv, size_t count,
                                    coll_dtype_t dtype, coll_redop_t op, coll_nccl_comm_t comm,
                                    coll_dev_stream_t s);
    /** @brief On rank @p root only: recv = the reduction @p op of every rank's send, @p count
     *         elements (ncclReduce; recv is not touched on the other ranks, and may be send on
     *         every rank). @return As allreduce; COLL_ERR_INVALID for a root out of range. */
    coll_status_t (*reduce)(uint64_t send, uint64_t recv, size_t count, coll_dtype_t dtype,
                            coll_redop_t op, int root, coll_nccl_comm_t comm,
                            coll_dev_stream_t s);
    /** @brief recv = every rank's send (@p count elements each) in rank order. @return As
     *         allreduce. */
    coll_status_t (*allgather)(uint64_t send, uint64_t recv, size_t count, coll_dtype_t dtype,
                               coll_nccl_comm_t comm, coll_dev_stream_t s);
    /** @brief recv = @p root's send, @p count elements (send is read on the root only).
     *         @return As allreduce; COLL_ERR_INVALID for a root out of range. */
    coll_status_t (*broadcast)(uint64_t send, uint64_t recv, size_t count, coll_dtype_t dtype,
                               int root, coll_nccl_comm_t comm, coll_dev_stream_t s);
} coll_nccl_ops_t;

/**
 * @brief NCCL's table for this process, opened once (thread-safe; later calls return the same).
 * @param [out] ops_p The table, valid until the process ends.
 * @return COLL_OK; COLL_ERR_UNSUPPORTED when there is no usable NCCL: coll_nccl_probe() says
 *         why (no libnccl.so.2, an entry missing, built without CUDA).
 */
coll_status_t coll_nccl_open(const coll_nccl_ops_t **ops_p);

#endif
