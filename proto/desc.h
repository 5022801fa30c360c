/**
 * @file desc.h
 * @brief Descriptor of one operation, exchanged between neighbouring daemons before its data
 *        is used, so that ranks that disagree fail instead of reducing garbage.
 *
 * Fixed 128-byte little-endian layout (the daemons of one cluster share a byte order; the
 * build refuses big-endian hosts). Every node sends its descriptor to the next node of the ring
 * and checks the one of the previous node: equal neighbours all the way round means all equal.
 */
#ifndef COLL_DESC_H
#define COLL_DESC_H

#include <stdint.h>
#include <stdio.h>

#include "proto/submission.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "collectived's data path assumes a little-endian host"
#endif

#define COLL_DESC_MAGIC 0x43534544u /* "DESC" */

/** Kinds of operation, numbered as the wire's Collective enum. */
typedef enum {
    COLL_KIND_ALLREDUCE = 0,
    COLL_KIND_REDUCE_SCATTER = 1,
    COLL_KIND_ALLGATHER = 2,
    COLL_KIND_BROADCAST = 3,
    COLL_KIND_REDUCE = 4,
    COLL_KIND_BARRIER = 5,
    COLL_KIND_SEND = 6,
    COLL_KIND_RECV = 7,
    COLL_KIND_PS_REGISTER = 8, /**< the parameter service (proto/ps_records.h): registration */
    COLL_KIND_PS_STEP = 9,     /**< one bucket's optimizer step */
    COLL_KIND_PS_SAVE = 10,    /**< a node's shard of the optimizer state, out */
    COLL_KIND_PS_LOAD = 11,    /**< and in */
    COLL_KIND_GATHER = 12,     /**< every rank's block to the root, in rank order */
    COLL_KIND_SCATTER = 13,    /**< block r of the root's buffer to rank r */
    COLL_KIND_ALLTOALLV = 14,  /**< rank i's block j to rank j, sizes per pair (proto/a2a.h) */
} coll_kind_t;

/** The highest kind (a new kind goes after it, and this follows). */
#define COLL_KIND_LAST COLL_KIND_ALLTOALLV

/** @return 1 for point-to-point kinds (send, recv), which match by peer and key; every other
 *          kind is an operation of every rank of the job, matched by key. */
static inline int coll_kind_is_p2p(uint32_t kind)
{
    return kind == COLL_KIND_SEND || kind == COLL_KIND_RECV;
}

/** @return 1 for the kinds whose descriptor compares a root (the others carry root 0). */
static inline int coll_kind_is_rooted(uint32_t kind)
{
    return kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE || kind == COLL_KIND_GATHER ||
           kind == COLL_KIND_SCATTER;
}

/** @return 1 for the parameter service's kinds. */
static inline int coll_kind_is_ps(uint32_t kind)
{
    return kind >= COLL_KIND_PS_REGISTER && kind <= COLL_KIND_PS_LOAD;
}

/** A descriptor's algorithm at or above this is a forced one that cannot run the operation:
 *  COLL_ALGO_REFUSED + the forced coll_algo_t. */
#define COLL_ALGO_REFUSED 100u

/** What every rank of an operation must agree on. */
typedef struct {
    uint32_t magic;
    uint16_t version;    /**< COLL_WIRE_VERSION */
    uint16_t coll;       /**< Collective */
    uint64_t key;        /**< operation key */
    uint64_t count;      /**< elements */
    uint32_t dtype;      /**< coll_dtype_t */
    uint32_t op;         /**< coll_op_t */
    uint32_t seg_bytes;  /**< pipeline segment the plan was made with */
    uint32_t world_size; /**< ranks of its communicator (the world or a group) */
    uint32_t node;       /**< sender's node rank (not compared) */
    uint32_t first_rank; /**< sender's lowest global rank (not compared; for messages) */
    uint32_t root;       /**< broadcast, reduce: root rank (in the communicator) */
    uint32_t algo;       /**< coll_algo_t that runs it (resolved, never AUTO) */
    uint64_t epoch;      /**< the job's incarnation: stale operations never match */
    uint64_t layout;     /**< the buffer's tensor layout fingerprint (0 = none) */
    uint64_t compression; /**< compression asked for (proto/cspec.h; 0 = none) */
    uint64_t run;        /**< compression this operation runs (cspec; 0 = uncompressed): decided
                              when every local rank is in (warm-up, fallback, auto) */
    uint64_t shapes;     /**< digest of the layout's registered shapes (0 = none registered) */
    uint32_t bucket;     /**< compression: the residual */
    uint32_t warmup;     /**< compression: uncompressed operations of the bucket first */
    uint32_t group;      /**< its communicator: 0 the world, else a group (core/group.h) */
    uint8_t zero[20];    /**< zero: room for later fields (the descriptor heads small
                              messages, so it stays a whole number of cache lines) */
} coll_desc_t;

_Static_assert(sizeof(coll_desc_t) == 128, "descriptor is 128 bytes on the wire");

/** @return 1 when @p a and @p b describe the same operation, 0 otherwise. */
static inline int coll_desc_equal(const coll_desc_t *a, const coll_desc_t *b)
{
    return a->magic == b->magic && a->version == b->version && a->coll == b->coll &&
           a->key == b->key && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->seg_bytes == b->seg_bytes && a->world_size == b->world_size &&
           a->root == b->root && a->algo == b->algo && a->epoch == b->epoch &&
           a->layout == b->layout && a->compression == b->compression && a->run == b->run &&
           a->shapes == b->shapes && a->bucket == b->bucket && a->warmup == b->warmup &&
           a->group == b->group;
}

/** What a node adds to a submission record for its descriptor. */
typedef struct {
    uint32_t world_size; /**< ranks of the operation's communicator */
    uint32_t seg_bytes;  /**< the pipeline segment of its plan; 0 where there is none */
    uint32_t node;       /**< the sender's node rank (not compared) */
    uint32_t first_rank; /**< the sender's lowest global rank (not compared) */
    uint32_t algo;       /**< the algorithm that runs it: a daemon's resolved choice, or the
                              one asked for (the local ranks, which resolve none) */
    uint64_t epoch;      /**< the job's incarnation */
    uint64_t shapes;     /**< with compression: digest of the layout's registered shapes */
} coll_desc_ctx_t;

/**
 * @brief The descriptor of submission @p s as a node sees it in @p ctx: the one constructor
 *        of a descriptor, for the daemons' check between nodes and for the local ranks'
 *        agreement in shared memory, so that both compare the same fields the same way. A
 *        root counts only for the kinds that have one; compression, bucket, warm-up and shapes
 *        only with compression; every other byte is zero.
 */
void coll_desc_make(const coll_submission_t *s, const coll_desc_ctx_t *ctx, coll_desc_t *d);

/**
 * @brief Describe @p d in @p buf, e.g. "allreduce count=1000 dtype=float32 op=sum algo=ring
 *        segment=262144 world=8": only the fields that mean something for its kind (an
 *        operation for the reductions and a parameter service's step, a root for the rooted
 *        kinds and a step, whose root is its bucket; no count or dtype for a barrier), as a
 *        mismatch message quotes it. Truncated to @p len.
 */
void coll_desc_format(const coll_desc_t *d, char *buf, size_t len);

/** @return The name of @p kind, e.g. "reduce-scatter"; "operation" when out of range. */
const char *coll_kind_name(coll_kind_t kind);

/**
 * @brief Elements rank @p rank (of a communicator of @p world_size ranks, @p root one of them)
 *        reads from its send buffer and writes to its receive buffer in an operation of
 *        @p kind of @p count elements (per rank, as the API counts them). The library and the
 *        daemon check buffers with it, so they agree on every byte an operation may touch.
 */
void coll_kind_extent(coll_kind_t kind, uint64_t count, uint32_t world_size, uint32_t rank,
                      uint32_t root, uint64_t *send_p, uint64_t *recv_p);

/**
 * @brief Whether rank @p rank may place its send bytes [@p so, @p so + @p sbytes) and receive
 *        bytes [@p ro, @p ro + @p rbytes) of an operation of @p kind so: apart, or in place the
 *        one way the collective allows (the same buffer; for reduce-scatter the receive buffer
 *        is the rank's own block of the send buffer, for all-gather the other way round, for
 *        scatter as for reduce-scatter at the root, for gather as for all-gather; never
 *        for a parameter-service step). Empty ranges never overlap. Offsets and sizes are the
 *        pool's (no sum overflows). The library checks this at submission, before anything
 *        is posted, and every daemon again for what reaches it.
 * @return 1 when allowed, 0 when the ranges overlap otherwise.
 */
int coll_kind_overlap_ok(coll_kind_t kind, uint32_t rank, uint64_t so, uint64_t sbytes,
                         uint64_t ro, uint64_t rbytes);

/**
 * @brief Name an operation for messages: "allreduce #12" (the 13th collective a rank called
 *        without a key, counting from 0) or "allreduce key 4097" (a key the user gave).
 */
void coll_desc_name(const coll_desc_t *d, char *buf, size_t len);

/**
 * @brief The message of a mismatch: "allreduce #3: rank 0 submitted <a> but rank 1 submitted
 *        <b>" (coll_desc_format() of each), the operation named "operation #3" where the two
 *        are different collectives (neither is the operation's). @p who_a names the first
 *        ("rank 0", "an earlier rank"). Truncated to @p len bytes; never fails.
 */
void coll_desc_mismatch(const coll_desc_t *a, const char *who_a, const coll_desc_t *b,
                        uint32_t rank_b, char *buf, size_t len);

#endif
