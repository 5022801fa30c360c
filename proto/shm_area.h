/**
 * @file shm_area.h
 * @brief The shared-memory area of a job's local ranks, right after the control blocks in the
 *        job's pool: where they agree on each collective and run the small ones among
 *        themselves, without the daemon on the data path.
 *
 * Layout at pool offset COLL_SHM_OFFSET(L) for L local ranks: a header (COLL_SHM_HDR_BYTES),
 * then one area per local rank (COLL_SHM_RANK_BYTES), each with its counters and a ring of
 * COLL_SHM_SLOTS posts.
 *
 * A rank posts every collective it submits: it writes its record into a free post of its
 * own ring, then publishes the post's state (generation and phase, sequentially consistent).
 * The posts of the local ranks meet by key. A rank that finds every local rank's post of a key
 * compares them; when they all agree, the operation either runs in shared memory (the ranks
 * claim its chunks through the home post, local rank 0's, and the one that finishes the last
 * chunk marks every post DONE) or goes to the daemon in one submission for all of them
 * (COLL_SUBMISSION_NODE, proto/submission.h), which marks the posts TAKEN when it has read them.
 *
 * An allreduce of a job over several nodes, up to the header's node_max_bytes, takes a third
 * way (COLL_SUBMISSION_REDUCED): the local ranks reduce their inputs into one of local rank 0's
 * node buffers (its post's node_off), in chunks as above; the rank that finishes the last of
 * those hands the operation to the daemon, which reads the posts without taking them, runs the
 * inter-node phase on that buffer alone (input and output) and writes the home post's node
 * word; the ranks then copy the buffer to every output, in chunks again, and the one that
 * finishes the last marks every post DONE.
 *
 * Writers: each post's record and its FREE and POSTED states only by its rank; DONE by the
 * rank that completed the operation (with the node word of the home post copied into each);
 * TAKEN and the home post's node word and steps by the daemon. The
 * header and the rank table only by the daemon. A reader copies a post's record between two
 * reads of its state and keeps the copy only when the state did not change (coll_shm_read()).
 *
 * Every field is read in place by processes of one host (little-endian, proto/desc.h); the
 * layout is part of the wire protocol (COLL_WIRE_VERSION).
 */
#ifndef COLL_PROTO_SHM_AREA_H
#define COLL_PROTO_SHM_AREA_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "proto/ctl.h"

/** Bytes of the header. */
#define COLL_SHM_HDR_BYTES 4096u
/** Bytes of one local rank's area. */
#define COLL_SHM_RANK_BYTES 32768u
/** Posts in a rank's ring: the collectives one rank may have in flight before the daemon took
 *  them or they completed. */
#define COLL_SHM_SLOTS 64u

/** @return The largest direct_max_bytes for a job whose smallest pool on a node is
 *          @p pool_bytes: the largest power of two whose COLL_SHM_SLOTS node buffers (local
 *          rank 0 keeps one per post for the direct path) take at most an eighth of the pool;
 *          0 below 64 bytes. */
static inline uint64_t coll_shm_direct_cap(uint64_t pool_bytes)
{
    uint64_t room = pool_bytes / 8 / COLL_SHM_SLOTS, cap = 64;

    if (room < cap) {
        return 0;
    }
    while (cap * 2 <= room) {
        cap *= 2;
    }
    return cap;
}
/** Kinds counted: allreduce .. barrier (coll_kind_t, proto/desc.h). */
#define COLL_SHM_KINDS 6u
/** Datatypes counted (coll_dtype_t). */
#define COLL_SHM_DTYPES 8u
/** Bounds of the duration histogram (the daemon's, core/stats.h COLL_STATS_BUCKETS). */
#define COLL_SHM_BUCKETS 18u
/** Bytes of the job's error message in the header. */
#define COLL_SHM_MSG_BYTES 512u
/** Bytes of the message naming a rank that left. */
#define COLL_SHM_LEFT_BYTES 128u
/** busy_key of a rank that runs no chunk. */
#define COLL_SHM_IDLE UINT64_MAX

/** Phases of a post: the low two bits of its state word, the generation above them. */
enum {
    COLL_SHM_FREE = 0,   /**< no operation */
    COLL_SHM_POSTED = 1, /**< submitted, waiting for the other local ranks or running */
    COLL_SHM_DONE = 2,   /**< completed in shared memory (every output written) */
    COLL_SHM_TAKEN = 3,  /**< read by the daemon, which completes the request */
};

/** @return A state word: generation @p gen (62 bits) and phase @p phase. */
static inline uint64_t coll_shm_state(uint64_t gen, uint32_t phase)
{
    return gen << 2 | (phase & 3u);
}

/** @return The phase of state word @p s. */
static inline uint32_t coll_shm_phase(uint64_t s)
{
    return (uint32_t)(s & 3u);
}

/** @return The generation of state word @p s. */
static inline uint64_t coll_shm_gen(uint64_t s)
{
    return s >> 2;
}

/** What one rank posts for one collective: its submission record (what every local rank must
 *  agree on, and its own buffers and request), and what only a post carries. */
typedef struct {
    coll_submission_t sub; /**< @c key is word 0; @c flags, @c group and @c compression are 0
                                (only the world's uncompressed collectives are posted) */
    uint64_t post_ns;      /**< CLOCK_MONOTONIC when posted (the daemon's stall clock) */
    uint64_t node_off;     /**< local rank 0's post of a multi-node allreduce: the node buffer
                                its local ranks reduce into (a pool offset, 0: none free, the
                                daemon runs it whole); 0 in every other post. Not compared */
} coll_shm_rec_t;

/** Node buffers local rank 0 keeps for node-reduced allreduces in flight at once: a further
 *  one goes to the daemon whole. */
#define COLL_SHM_NODE_BUFS 4u

/** Node word flag: the daemon completed the inter-node phase. */
#define COLL_SHM_NODE_DONE 0x80000000u

/**
 * @return The node word of a home post of generation @p gen (its low 32 bits are kept) whose
 *         inter-node phase the daemon completed with @p status (COLL_OK or a negative
 *         coll_status_t above -32768) by algorithm @p algo (coll_algo_t, below 256).
 */
static inline uint64_t coll_shm_node_word(uint64_t gen, int32_t status, uint32_t algo)
{
    return (uint64_t)(uint32_t)gen << 32 | COLL_SHM_NODE_DONE | (algo & 0xffu) << 16 |
           ((uint32_t)-status & 0xffffu);
}

/** @return The status of node word @p w (COLL_OK or negative). */
static inline int32_t coll_shm_node_status(uint64_t w)
{
    return -(int32_t)(w & 0xffffu);
}

/** @return The algorithm (coll_algo_t) of node word @p w. */
static inline uint32_t coll_shm_node_algo(uint64_t w)
{
    return (uint32_t)(w >> 16) & 0xffu;
}

/**
 * @return 1 when an allreduce of @p dtype and @p op (coll_dtype_t, coll_redop_t) is reduced
 *         among the local ranks before the inter-node phase of a multi-node job: every one
 *         whose partial results keep the dtype, that is all but the float16 and bfloat16 sum,
 *         average and product, whose partials travel between nodes in float32 (rounded once,
 *         at the end) and whose raw inputs an average scales.
 */
static inline int coll_shm_node_reducible(uint32_t dtype, uint32_t op)
{
    return dtype < COLL_DTYPE_COUNT && op < COLL_REDOP_COUNT &&
           !((dtype == COLL_FLOAT16 || dtype == COLL_BFLOAT16) &&
             (op == COLL_SUM || op == COLL_AVG || op == COLL_PROD));
}

/** Claim word flag: no more chunks may be claimed (the job failed); the low bits keep how many
 *  were claimed before. */
#define COLL_SHM_CLOSED 0x80000000u

/** One post. */
typedef struct {
    _Alignas(64) _Atomic uint64_t state; /**< coll_shm_state() */
    /** The record, copied in whole words (coll_shm_write_rec(), coll_shm_read()); the key is
     *  word 0. */
    uint64_t rec_words[sizeof(coll_shm_rec_t) / sizeof(uint64_t)];
    /* The home post's (local rank 0's) shared progress of its operation; the home rank resets
     * it before publishing the post. */
    _Alignas(64) _Atomic uint64_t claim; /**< generation (low 32 bits) << 32 | chunks claimed */
    _Atomic uint32_t chunks_done;        /**< chunks finished */
    /** The home post's direct rounds (local rank 0, the node's leader): 1 + the node whose
     *  leader they wait for now, 0 while none (the home rank resets it before publishing); the
     *  daemon names that leader when the operation stalls (engine/shm_watch.c). */
    _Atomic uint32_t direct_wait;
    uint64_t ready_ns; /**< set by the completer before DONE: when the last rank posted */
    _Atomic uint64_t done_ns; /**< 0 while POSTED; set by the completer before it moves any
                                   of the operation's posts to DONE: when the last chunk
                                   finished */
    /** The home post's inter-node phase of a node-reduced allreduce: 0 while it runs, then
     *  coll_shm_node_word() by the daemon (the home rank resets it before publishing); the
     *  completer copies it into every post of the operation before DONE. */
    _Atomic uint64_t node;
    /* Of a node-reduced allreduce, set by the daemon in the home post before the node word and
     * copied into every post by the completer: when the daemon checked the other nodes'
     * descriptors, and when its reduction ended (CLOCK_MONOTONIC ns, coll_req_timing()). */
    uint64_t peers_ns;
    uint64_t reduced_ns;
} coll_shm_post_t;

/** The inter-node steps of a node-reduced allreduce (coll_req_steps()), beside each post:
 *  written by the daemon for the home post before the node word, copied by the completer for
 *  every post of the operation before DONE, read by the post's rank once it sees DONE. */
typedef struct {
    uint64_t base_ns; /**< the daemon's start of the operation: the records count from it */
    uint32_t n;       /**< records in @c steps, at most COLL_CTL_MAX_STEPS */
    uint32_t reserved;
    uint64_t steps[COLL_CTL_MAX_STEPS]; /**< coll_ctl_step_pack() */
} coll_shm_steps_t;

/** What a rank's completions of operations in shared memory add to the daemon's counters; the
 *  daemon takes them with atomic_exchange() (coll_shm_harvest(), daemon/engine/shm_watch.c). */
typedef struct {
    _Atomic uint64_t ok[COLL_SHM_KINDS][COLL_SHM_DTYPES];    /**< completed */
    _Atomic uint64_t bytes[COLL_SHM_KINDS][COLL_SHM_DTYPES]; /**< nccl-tests' sizes of those */
    _Atomic uint64_t hist[COLL_SHM_KINDS][COLL_SHM_BUCKETS + 1]; /**< durations, by bound */
    _Atomic uint64_t sum_ns[COLL_SHM_KINDS];                 /**< their sum */
    _Atomic uint64_t posted;                                 /**< collectives posted */
    _Atomic uint64_t direct_refused; /**< the leader (local rank 0): direct messages it dropped
                                          for a wrong job token (client/direct/) */
} coll_shm_stats_t;

/** One local rank's area. */
typedef struct {
    _Alignas(64) uint32_t rank; /**< its global rank (the daemon's, at ready) */
    uint32_t pid;               /**< its process (the daemon's, at ready) */
    _Atomic uint32_t reach;     /**< how far (in slots) past coll_shm_slot_of() any of its
                                     posts in flight lies: a search looks no further. Raised
                                     before a post is published; lowered only when none is in
                                     flight */
    _Alignas(64) _Atomic uint64_t busy_key; /**< key of the operation whose chunk it runs, or
                                                 COLL_SHM_IDLE (named when that one stalls) */
    _Alignas(64) coll_shm_stats_t stats; /**< operations it completed (it ran the last chunk) */
    coll_shm_post_t post[COLL_SHM_SLOTS];
    coll_shm_steps_t steps[COLL_SHM_SLOTS]; /**< of the post in the same slot (kept apart: the
                                                 posts stay three cache lines each) */
} coll_shm_rank_t;

/** The header: what only the daemon writes. */
typedef struct {
    _Alignas(64) _Atomic uint32_t failed; /**< non-zero once the job failed: status and msg
                                               were written before */
    _Atomic uint32_t left;    /**< non-zero once a local rank left the ready job: left_msg */
    _Atomic uint32_t peer_left; /**< non-zero once another node's daemon said that a rank of
                                     it left the job (its goodbye): peer_left_msg. Only the
                                     direct path's rounds read it (a partner that completed
                                     and left is normal: a rooted collective's non-root) */
    _Atomic uint32_t node_taken; /**< on several nodes, non-zero once local rank 0 took its
                                      node buffers from the pool (or found no room): the other
                                      local ranks' coll_comm_create() waits for it, so that
                                      none of their allocations takes that room first */
    int32_t status;           /**< the job's error (coll_status_t) */
    uint32_t nlocal;          /**< local ranks */
    uint64_t max_bytes;       /**< collectives up to this size run here on a single node */
    uint64_t node_max_bytes;  /**< on several nodes, allreduces up to this size are reduced
                                   and distributed here (COLL_SUBMISSION_REDUCED); 0: none */
    uint64_t direct_max_bytes; /**< of those, allreduces up to this size run their inter-node
                                    phase between the nodes' leaders (local rank 0 of each),
                                    not in the daemons: the direct path; 0: none */
    uint64_t direct_token;     /**< the job's direct token (random, per job, from the root):
                                    every direct message carries it */
    double bounds[COLL_SHM_BUCKETS]; /**< the duration histogram's upper bounds, seconds */
    char msg[COLL_SHM_MSG_BYTES];      /**< why the job failed */
    char left_msg[COLL_SHM_LEFT_BYTES]; /**< "rank R (pid P)" of the first rank that left */
    char peer_left_msg[COLL_SHM_LEFT_BYTES]; /**< "rank R (pid P) on node N": the first one
                                                  another node's daemon said left */
    int32_t culprit_status;   /**< with failed: the code of the rank that ended the job (its
                                   call refused), which it sees instead of status; 0: none */
    uint32_t culprit;         /**< that rank's global rank */
} coll_shm_hdr_t;

_Static_assert(sizeof(coll_shm_hdr_t) <= COLL_SHM_HDR_BYTES, "header fits its slot");
_Static_assert(sizeof(coll_shm_rank_t) <= COLL_SHM_RANK_BYTES, "rank area fits its slot");

/** Pool offset of the area of a job with @p nlocal local ranks: after the control blocks. */
#define COLL_SHM_OFFSET(nlocal) COLL_CTL_TOTAL(nlocal)
/** Bytes of the area of a job with @p nlocal local ranks. */
#define COLL_SHM_TOTAL(nlocal) (COLL_SHM_HDR_BYTES + (size_t)(nlocal) * COLL_SHM_RANK_BYTES)
/** Bytes at the start of a pool that no allocation uses: control blocks and this area. */
#define COLL_POOL_PREFIX(nlocal) (COLL_SHM_OFFSET(nlocal) + COLL_SHM_TOTAL(nlocal))

/** @return The header in a pool mapped at @p base with @p nlocal local ranks. */
static inline coll_shm_hdr_t *coll_shm_hdr_of(void *base, uint32_t nlocal)
{
    return (coll_shm_hdr_t *)(void *)((char *)base + COLL_SHM_OFFSET(nlocal));
}

/** @return Local rank @p l's area in a pool mapped at @p base with @p nlocal local ranks. */
static inline coll_shm_rank_t *coll_shm_rank_of(void *base, uint32_t nlocal, uint32_t l)
{
    return (coll_shm_rank_t *)(void *)((char *)coll_shm_hdr_of(base, nlocal) +
                                       COLL_SHM_HDR_BYTES + (size_t)l * COLL_SHM_RANK_BYTES);
}

/** @return The status global rank @p rank gets for a job whose header @p h says failed: the
 *          code of its own refusal when it ended the job, else the job's error (COLL_ERR_JOB
 *          for a header without one). */
static inline coll_status_t coll_shm_failed_status(const coll_shm_hdr_t *h, uint32_t rank)
{
    if (h->culprit_status < 0 && h->culprit == rank) {
        return (coll_status_t)h->culprit_status;
    }
    return h->status < 0 ? (coll_status_t)h->status : COLL_ERR_JOB;
}

/** @return The slot where a post of @p key goes first, and where a search for it starts (a
 *          taken slot sends it to the next free one). */
static inline uint32_t coll_shm_slot_of(uint64_t key)
{
    return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 58) % COLL_SHM_SLOTS;
}

/** @brief The owner writes its record into post @p p (while the post is FREE). */
void coll_shm_write_rec(coll_shm_post_t *p, const coll_shm_rec_t *d);

/**
 * @brief Copy post @p p's record into @p d if its phase is @p phase, consistently: the
 *        state is read before and after the copy and must not have changed.
 * @param [out] state_p The state word the copy belongs to.
 * @return 1 with a consistent copy, 0 when the post is in another phase or changed meanwhile.
 */
int coll_shm_read(const coll_shm_post_t *p, uint32_t phase, uint64_t *state_p,
                  coll_shm_rec_t *d);

/**
 * @brief Find the post of key @p key in phase @p phase in rank area @p r, searching from
 *        coll_shm_slot_of(@p key) as far as the area's @c reach.
 * @param [out] slot_p, state_p, d Its slot, state word and a consistent copy.
 * @return 1 when found, 0 otherwise.
 */
int coll_shm_find(const coll_shm_rank_t *r, uint64_t key, uint32_t phase, uint32_t *slot_p,
                  uint64_t *state_p, coll_shm_rec_t *d);

/**
 * @brief Move post @p p from @p from (a full state word) to phase @p phase of the same
 *        generation. @return 1 when it moved, 0 when the post was no longer in @p from.
 */
int coll_shm_move(coll_shm_post_t *p, uint64_t from, uint32_t phase);

#endif
