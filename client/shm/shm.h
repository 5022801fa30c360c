/**
 * @file shm.h
 * @brief The local ranks' side of the shared-memory path (proto/shm_area.h): every collective is
 *        posted there and agreed on by the local ranks; single-node collectives up to the
 *        daemon's shm_max_bytes then run among the ranks; allreduces of a multi-node job up to
 *        its shm_node_max_bytes are reduced and distributed among them around the daemon's
 *        inter-node phase (node.c); the others go to the daemon in one submission for the
 *        node. The area's set-up is area.c, posting submit.c, the post protocol post.c,
 *        agreement and completion progress.c, the data chunks.c. Internal to libcollective;
 *        every function is called with the communicator's lock held unless it says otherwise.
 */
#ifndef COLL_CLIENT_SHM_SHM_H
#define COLL_CLIENT_SHM_SHM_H

#include <stdint.h>

#include "client/direct/direct.h"
#include "client/link/link.h"
#include "kernels/exec.h"
#include "proto/desc.h"
#include "proto/shm_area.h"

/** How an agreed collective runs. */
typedef enum {
    COLL_SHM_ROUTE_LOCAL,  /**< among the local ranks, in shared memory */
    COLL_SHM_ROUTE_DAEMON, /**< by the daemon, handed over in one node submission */
    COLL_SHM_ROUTE_NODE,   /**< a multi-node allreduce: reduced here into local rank 0's node
                                buffer, the inter-node phase by the daemon, distributed here */
} coll_shm_route_t;

/** One collective of this rank in the area: its post until it completed or the daemon took
 *  it. What the ranks share is in the posts; this is the rank's own bookkeeping. */
typedef struct coll_shm_op {
    struct coll_shm_op *prev, *next; /* in coll_shm_t.ops */
    coll_request_t *req;
    uint32_t slot;          /* its post in this rank's ring */
    uint64_t state;         /* the post's state word as published */
    coll_shm_rec_t rec;     /* what it posted */
    coll_desc_t desc;       /* what the local ranks' posts must agree on (coll__shm_desc()) */
    coll_shm_route_t route;
    uint32_t nchunks;       /* route NODE: the reduce's chunks, then as many to distribute */
    uint64_t node_off;      /* route NODE: the node buffer (from local rank 0's post) */
    int agreed;             /* every local rank's post found, all equal to this one */
    int reported;           /* a mismatch or a departed rank was reported to the daemon */
    int handed;             /* route DAEMON: the node submission went out (from some rank) */
    int direct;             /* route NODE: the inter-node phase runs between the nodes'
                               leaders (direct/), not in the daemons */
    coll_direct_op_t rounds; /* direct, local rank 0: its rounds */
    int rounds_over;        /* direct, local rank 0: they ended (well or not) */
    uint64_t rounds_fail_ns; /* direct, local rank 0: when they failed on UCX, while it waits
                                for the job's failure from the daemons (0: not) */
    uint64_t left_ns;       /* direct, local rank 0: when its rounds saw a rank had left */
    coll_status_t rounds_st; /* that failure, and its reason */
    char rounds_why[512];
    uint64_t ready_ns;      /* the last local rank posted */
    uint64_t fail_ns;       /* when this rank first saw the job failed with chunks running */
    /* Every local rank's post of the operation, found at agreement (by local rank). */
    uint32_t *peer_slot;
    uint64_t *peer_state;
    uint64_t *in_off, *out_off;
} coll_shm_op_t;

/** A communicator's view of its job's area. */
typedef struct coll_shm {
    coll_shm_hdr_t *hdr;
    uint8_t *base;          /* the pool */
    const coll_exec_t *exec; /* the executor of the pool's memory: the host's (a memfd) */
    uint32_t self, nlocal;
    uint32_t nnodes;
    uint64_t max_bytes;     /* the daemon's crossover */
    uint64_t node_off;      /* local rank 0: its node buffers (one allocation), 0 before: first
                               the direct path's, one per post of the ring (slot i's is the
                               i-th), then the daemons' path's COLL_SHM_NODE_BUFS */
    uint64_t direct_bytes;  /* bytes of each direct one (0: no direct path) */
    uint64_t node_bytes;    /* bytes of each of the daemons' path's (0: none) */
    uint32_t node_busy;     /* bit i: the daemons' path's buffer i holds an operation */
    int node_none;          /* the pool had no room for them: never ask again */
    int node_direct_only;   /* it had room for the direct path's alone (the daemons' path's
                               allreduces then go to the daemon whole) */
    uint64_t spin_ns;       /* how long a waiter polls before it sleeps */
    int oversubscribed;     /* more local ranks than CPUs this process may run on */
    int crowded;            /* several nodes, and the local ranks with the daemon outnumber the
                               CPUs: a waiter sleeps at once, it does not poll */
    uint32_t cursor;        /* where the search for a free post starts */
    int slot_freed;         /* a post became free (a full ring waits for this) */
    coll_shm_op_t ops;      /* list head */
    coll_shm_op_t *spare;   /* records to reuse */
} coll_shm_t;

/** @return Local rank @p l's area. */
static inline coll_shm_rank_t *coll__shm_area(const coll_shm_t *s, uint32_t l)
{
    return coll_shm_rank_of(s->base, s->nlocal, l);
}

/** @return Local rank @p l's post in slot @p slot. */
static inline coll_shm_post_t *coll__shm_post_of(const coll_shm_t *s, uint32_t l, uint32_t slot)
{
    return &coll__shm_area(s, l)->post[slot % COLL_SHM_SLOTS];
}

/** @return The inter-node steps beside local rank @p l's post in @p slot. */
static inline coll_shm_steps_t *coll__shm_steps_of(const coll_shm_t *s, uint32_t l,
                                                   uint32_t slot)
{
    return &coll__shm_area(s, l)->steps[slot % COLL_SHM_SLOTS];
}

/**
 * @brief Use the area when the daemon announced one of the size this library knows
 *        (@p shm_bytes from the join reply); leaves c->shm NULL otherwise.
 *        COLL_SPIN_US sets how long a waiter polls before it sleeps (microseconds, default 20).
 *        A node's leader on a job with the direct path then makes its handshake with the other
 *        leaders (coll__direct_connect(), within the job's timeout).
 * @return COLL_OK (with or without an area); COLL_ERR_NOMEM; COLL_ERR_INVALID (the error
 *         says why) when COLL_SPIN_US is not a number from 0 to 10000; the handshake's
 *         COLL_ERR_TRANSPORT or COLL_ERR_TIMEDOUT, or the job's error when it failed meanwhile.
 */
coll_status_t coll__shm_open(coll_comm_t *c, uint64_t shm_bytes, uint64_t max_bytes);

/** @brief Free the area's bookkeeping (after every request was released). Safe without one. */
void coll__shm_close(coll_comm_t *c);

/**
 * @brief Post collective @p m of request @p r (of public function @p func, which its messages
 *        name) and move it as far as it goes now: the last
 *        local rank to post agrees, and runs the operation or hands it to the daemon.
 *        Waits (up to the job's timeout) while this rank's ring is full.
 *        Once a health tick it looks whether the daemon is still there (coll__link_check()).
 * @return COLL_OK: posted (the request completes later, or already has); an error with the
 *         communicator's message set (nothing posted): COLL_ERR_JOB and the like when the job
 *         failed earlier or a local rank left it, COLL_ERR_CLOSED when the daemon is gone,
 *         COLL_ERR_NOT_IN_POOL for a buffer outside this rank's allocations,
 *         COLL_ERR_TIMEDOUT when the ring stayed full, COLL_ERR_NOMEM.
 */
coll_status_t coll__shm_post(coll_comm_t *c, const char *func, coll_request_t *r,
                             const coll_submission_t *m);

/** @brief Move every collective of this rank in the area on: agree, run chunks, complete,
 *         hand over, fail. @return The number of requests it finished. */
int coll__shm_progress(coll_comm_t *c);

/**
 * @brief The link to the daemon broke (its requests are about to fail): no more chunks of this
 *        rank's agreed collectives may be claimed, and those another rank runs get up to
 *        COLL_SHM_FAIL_GRACE_MS to finish, so that nothing writes this rank's outputs after
 *        its requests failed. Sleeps meanwhile (with the lock held). Safe without the area.
 */
void coll__shm_stop(coll_comm_t *c);

/** @brief Fill @p w with the states of this rank's posts that run in the area, which the rank
 *         completing them changes (waking the waiter only when it sleeps): what a waiter of
 *         @p c watches (the link's watch entry). Nothing without the area. */
void coll__shm_watch(coll_comm_t *c, coll__link_watch_t *w);

/** @brief Request @p r ends: drop its record and free its post (the request hook). */
void coll__shm_forget(coll_request_t *r);

/** @return A zeroed record for a collective (reused when one is spare), NULL without memory. */
coll_shm_op_t *coll__shm_op_new(coll_shm_t *s);

/** @brief Put @p op, new from coll__shm_op_new(), in the area's list of this rank's collectives. */
void coll__shm_op_add(coll_shm_t *s, coll_shm_op_t *op);

/** @brief Take @p op, in the list, out of it and keep it for reuse. */
void coll__shm_op_free(coll_shm_t *s, coll_shm_op_t *op);

/* ---- the post protocol (post.c): every change this rank makes to a post's words ---------- */

/** @return A FREE post of this rank's ring for @p key, searching from where it hashes to: its
 *          slot, or -1 when every one is in use. */
int coll__post_free_slot(const coll_shm_t *s, uint64_t key);

/** @brief Publish @p op's record in FREE post @p slot of this rank's ring (the next generation,
 *         POSTED), after letting the other ranks' searches reach it; local rank 0 first resets
 *         its home post's claims, chunk count and node word. Sets op->slot and op->state. */
void coll__post_publish(coll_shm_t *s, coll_shm_op_t *op, uint32_t slot);

/** @brief This rank's post of @p op is FREE again (its request ended). */
void coll__post_release(coll_shm_t *s, const coll_shm_op_t *op);

/** @return 1 when this rank won the hand-over of agreed route-DAEMON operation @p op (it sends
 *          the node submission), 0 when another rank did. */
int coll__post_claim_hand_over(const coll_shm_t *s, const coll_shm_op_t *op);

/** @return The next unclaimed chunk of agreed operation @p op below @p limit, or -1 when none
 *          is left or claims are closed. */
int64_t coll__post_claim(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t limit);

/** @return The chunks of @p op finished, one more counted (this rank finished one). */
uint32_t coll__post_chunk_done(const coll_shm_t *s, const coll_shm_op_t *op);

/** @brief The last chunk of @p op is done (by this rank): every rank's post gets the times
 *         (@p now, CLOCK_MONOTONIC ns) and, for route NODE, the daemons' node word @p node and
 *         their part from the home post, then moves to DONE. */
void coll__post_complete(coll_shm_t *s, const coll_shm_op_t *op, uint64_t now, uint64_t node);

/**
 * @return 1 when local rank @p l's post in @p slot, found POSTED, belongs to an operation that
 *         another rank is completing (its done_ns is set before any of the operation's posts
 *         moves to DONE): a rank that completed it may post the same key again meanwhile, and
 *         that post must not agree with this one.
 */
int coll__post_completed(const coll_shm_t *s, uint32_t l, uint32_t slot);

/** @brief The inter-node phase of route-NODE operation @p op ended in this rank (local rank 0,
 *         the direct path) with node word @p node: its times are @p start_ns (the rounds began)
 *         and @p end_ns (they ended); no daemon steps. */
void coll__post_node_done(coll_shm_t *s, const coll_shm_op_t *op, uint64_t node,
                          uint64_t start_ns, uint64_t end_ns);

/** @brief No more chunks of agreed operation @p op may be claimed (its job failed or its
 *         daemon is gone). @return 1 once no chunk of it runs any more. */
int coll__post_close_claims(const coll_shm_t *s, const coll_shm_op_t *op);

/**
 * @brief The daemon ended route-NODE operation @p op's inter-node phase with node word @p node,
 *        an error: every other local rank's post moves to DONE carrying the word, for a rank
 *        that has not agreed yet cannot find the others' posts once they end theirs (it would
 *        wait for the job's timeout). The word goes in first, by compare-and-swap from the 0 a
 *        post starts with, and is taken back when the post is no longer this operation's (its
 *        owner ended and reused it).
 */
void coll__post_fail_node(coll_shm_t *s, const coll_shm_op_t *op, uint64_t node);

/** @brief The descriptor of posted submission @p sub, as the daemons would make it (the algorithm
 *         the one asked for): what the local ranks' posts of one collective must agree on. */
void coll__shm_desc(const coll_comm_t *c, const coll_submission_t *sub, coll_desc_t *d);

/** @return The chunks of operation @p d on @p nlocal local ranks (at least 1). */
uint32_t coll__shm_nchunks(const coll_submission_t *d, uint32_t nlocal);

/** @brief Move and reduce the data of chunk @p k of agreed operation @p op (chunks.c); for
 *         route NODE, chunks below nchunks / 2 reduce a piece of every input into the node
 *         buffer, the others copy a piece of it to every output. */
void coll__shm_run_chunk(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t k,
                         uint32_t world_size);

/**
 * @return Whether collective @p d of a multi-node job takes the direct path (route NODE, its
 *         inter-node phase between the leaders): an allreduce of a reducible dtype and op
 *         without a forced algorithm, up to the header's direct_max_bytes, on any number of
 *         local ranks. Every node decides alike (the bound is the job's).
 */
int coll__shm_direct(const coll_shm_t *s, const coll_submission_t *d);

/**
 * @return Whether collective @p d of a multi-node job takes route NODE: one of the direct path
 *         (coll__shm_direct()), or an allreduce of a
 *         reducible dtype and op (coll_shm_node_reducible()) without a forced algorithm, up to
 *         the header's node_max_bytes, with more than one local rank.
 */
int coll__shm_node_route(const coll_shm_t *s, const coll_submission_t *d);

/**
 * @return The bytes of node buffers local rank 0 of a multi-node job should allocate when it
 *         joins: with the direct path one of direct_max_bytes per post, and with more than one
 *         local rank COLL_SHM_NODE_BUFS of node_max_bytes for the daemons' path (each rounded
 *         to cache lines); 0 when it has them, was refused them, or needs none.
 */
uint64_t coll__shm_node_wanted(const coll_shm_t *s);

/**
 * @brief Local rank 0 of a multi-node job: it took its node buffers (or found no room), so the
 *        other local ranks' creations may return (coll__shm_node_wait()). Connection lock held.
 */
void coll__shm_node_announce(coll_shm_t *s);

/**
 * @brief The other local ranks of a multi-node job: wait until local rank 0 took its node
 *        buffers, so that no allocation of theirs takes the room first; at most @p timeout_ms
 *        (-1: no limit). Returns at once where there is nothing to wait for, or the job failed
 *        or lost a rank (the next call reports it). Connection lock held.
 * @return COLL_OK, or COLL_ERR_TIMEDOUT (with the reason in the communicator's last error).
 */
coll_status_t coll__shm_node_wait(coll_comm_t *c, int timeout_ms);

/**
 * @brief Local rank 0: the pool had no room for both sets of node buffers; ask for the direct
 *        path's alone (coll__shm_node_wanted() then gives their size).
 * @return 1 when that is a smaller request worth making, 0 when there is none.
 */
int coll__shm_node_direct_only(coll_shm_t *s);

/** @brief Local rank 0 got its node buffers, @p bytes at pool offset @p off (0: the pool had no
 *         room; no allreduce is reduced here then, and none is asked again). */
void coll__shm_node_provide(coll_shm_t *s, uint64_t off, uint64_t bytes);

/**
 * @brief Local rank 0: a free node buffer for collective @p d (route NODE) posted in @p slot.
 * @return Its pool offset; 0 when every one is in use or there are none (the collective then
 *         goes to the daemon whole; nothing is reported). A direct one gets the slot's own,
 *         never in use (0 only before the buffers came or beyond their size).
 */
uint64_t coll__shm_node_get(const coll_comm_t *c, const coll_submission_t *d, uint32_t slot);

/** @brief Local rank 0: node buffer @p off is free again (0: nothing to do). */
void coll__shm_node_put(coll_shm_t *s, uint64_t off);

/**
 * @return The home post's node word for agreed route-NODE operation @p op (acquire: the node
 *         buffer as the daemon left it is visible), or 0 while its inter-node phase runs.
 */
uint64_t coll__shm_node_word(const coll_shm_t *s, const coll_shm_op_t *op);

/**
 * @return 1 while agreed route-NODE operation @p op is in the daemons' hands (its reduce done,
 *         the node word not yet written): a waiter then sleeps at once instead of polling,
 *         which would take the CPU from the daemons (a message between nodes and two wake-ups
 *         away); the daemon wakes it. 0 otherwise, or for any other operation.
 */
int coll__shm_node_with_daemon(const coll_shm_t *s, const coll_shm_op_t *op);

/**
 * @brief Local rank 0: move direct operation @p op's rounds between the leaders on (start them
 *        once the node sum is complete); when they end well, write the home post's node word
 *        and wake the local ranks; when they end in a mismatch or a transport error, or stay
 *        unfinished past the job's timeout, fail the job with the reason (coll__abort()), so
 *        that every rank of every node fails with it.
 */
void coll__shm_direct_progress(coll_comm_t *c, coll_shm_op_t *op);

/** @return 1 while local rank 0's direct operation @p op waits for messages of other leaders
 *          (a waiter then polls the worker's event fd, coll__direct_arm()). */
int coll__shm_direct_waiting(const coll_shm_t *s, const coll_shm_op_t *op);

/** @brief Hand agreed operation @p op to the daemon, from this rank: one node submission
 *         (@p flags COLL_SUBMISSION_NODE) for every local rank's post, or, with
 *         COLL_SUBMISSION_REDUCED too, the inter-node phase of a route-NODE operation whose
 *         reduce is complete. A broken link is no error here: it fails every request. */
void coll__shm_hand_over(coll_comm_t *c, const coll_shm_op_t *op, uint32_t flags);

/** @brief Count a completed operation in this rank's counters for the daemon. */
void coll__shm_count(const coll_shm_t *s, const coll_submission_t *d, uint32_t world_size,
                     uint64_t ns);

#endif
