/**
 * @file submission.h
 * @brief The submission record: one operation as a rank submits it, in one fixed-size shape
 *        from the library to the daemon's engine. The control block's submission ring
 *        (proto/ctl.h) carries it, and so does every post of the local ranks' shared-memory
 *        area (proto/shm_area.h); only the socket carries it as protobuf (the wire's Submit,
 *        proto/collective.proto), converted in one place each way (coll_submission_to_wire(),
 *        coll_submission_from_wire()). Every field is read in place by processes of one host
 *        (little-endian); the layout is part of the wire protocol (COLL_WIRE_VERSION), and
 *        proto/README.md lists every offset (`ctest -L layers` checks it).
 */
#ifndef COLL_PROTO_SUBMISSION_H
#define COLL_PROTO_SUBMISSION_H

#include <stdint.h>

#include "proto/collective.pb-c.h"

/** One submission. Offsets are from the start of the job's pool; counts are in elements per
 *  rank, as the API counts them. */
typedef struct {
    uint64_t key;         /**< operation key, matched across ranks */
    uint64_t count;       /**< elements */
    uint64_t send_offset; /**< the send buffer in the pool */
    uint64_t recv_offset; /**< the receive buffer in the pool */
    uint64_t layout;      /**< fingerprint of the buffer's tensor layout (coll_op_params_t
                               .layout; 0: none); a parameter-service step's step number; an
                               alltoallv's count table, its offset in the host pool
                               (proto/a2a.h; the alltoallv's count is 0) */
    uint64_t compression; /**< compression spec (proto/cspec.h); 0: none */
    uint32_t req_id;      /**< the submitting rank's request, which the completion names */
    uint32_t coll;        /**< coll_kind_t (the wire's Collective) */
    uint32_t dtype;       /**< coll_dtype_t */
    uint32_t redop;       /**< coll_redop_t */
    uint32_t root;        /**< broadcast, reduce: root rank of the communicator */
    uint32_t peer;        /**< send, recv: the other rank; 0 otherwise */
    uint32_t algo;        /**< coll_algo_t asked for; 0: auto */
    uint32_t group;       /**< the communicator: 0 the job's world, else a group id */
    uint32_t bucket;      /**< compression: the residual it uses */
    uint32_t warmup;      /**< compression: operations of the bucket that run uncompressed */
    uint32_t flags;       /**< COLL_SUBMISSION_*; 0 for a rank's own submission */
    uint32_t pool;        /**< the pool of both buffers: 0 the job's host pool, 1 + d the pool
                               of device d (MemAllocReply.pool); its kind is the pool's */
} coll_submission_t;

/** Flag: one submission for every local rank, whose posts of @c key wait in the job's
 *  shared-memory area (proto/shm_area.h); the daemon takes them from there. Only @c key,
 *  @c coll and @c req_id (the submitting rank's) are meaningful. */
#define COLL_SUBMISSION_NODE 1u
/** Flag, with COLL_SUBMISSION_NODE on an allreduce: the local ranks reduced their inputs into
 *  the node buffer of local rank 0's post (coll_shm_rec_t.node_off); the daemon runs the
 *  inter-node phase on that buffer alone and leaves the posts to the ranks, which distribute
 *  the result once the home post's node word says so (proto/shm_area.h). */
#define COLL_SUBMISSION_REDUCED 2u

/** Stream words of a submission (the wire's Submit.sync_flags; engine/dev_sync.h): the daemon
 *  reads the inputs once the ready word holds the submission's value. */
#define COLL_SYNC_READY 1u
/** ... and stores the value into the done word when the operation completes. */
#define COLL_SYNC_DONE 2u

/** @brief The wire's Submit of @p s (initialised here; no pointer into @p s is kept). */
void coll_submission_to_wire(const coll_submission_t *s, Coll__Wire__Submit *m);

/** @brief The record of the wire's Submit @p m, field by field and unchecked (the decoder,
 *         proto/wire.h, checks it next). */
void coll_submission_from_wire(const Coll__Wire__Submit *m, coll_submission_t *s);

#endif
