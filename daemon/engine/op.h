/**
 * @file op.h
 * @brief One collective operation of a communicator (the job's world or a group, core/group.h)
 *        on this node: the submissions of its local ranks, matched by (group, key), and the
 *        algorithm that runs it once all of them are in. The algorithms see only the group:
 *        its nodes (coll_op_send() and coll_op_recv() take group node indices), its ranks and
 *        its local members (members, in and out are indexed by local member).
 *
 *        The core: op.c (an operation's life: create, start, complete, hold and release,
 *        free), match.c (submissions matched by key), xfer.c (transfers, the descriptor check,
 *        where each completion goes). It keeps what every operation needs; what only some
 *        carry (compression, the parameter service's stage, the node-reduced path) are features
 *        with a slot each (engine/feature.h), and the algorithm comes from the table of
 *        engine/algo.h.
 */
#ifndef COLL_ENGINE_OP_H
#define COLL_ENGINE_OP_H

#include <stdint.h>
#include <ucp/api/ucp.h>

#include "base/list.h"
#include "core/job.h"
#include "engine/plan.h"
#include "net/transport.h"
#include "proto/ctl.h"
#include "proto/desc.h"

struct coll_op;
struct coll_xfer;

/** The algorithm checks a descriptor carried in each of its own messages, and their lengths
 * (coll_op_check_msg()): its receives are used at once, not parked until the ring descriptor
 * arrived. */
#define COLL_IMPL_SELF_CHECK 2u
/** Transfer errors and short receives go to the implementation instead of failing the job. */
#define COLL_IMPL_OWN_ERRORS 4u

/** An implementation of an algorithm: how an operation moves and reduces data once every
 *  local rank submitted. */
typedef struct coll_impl {
    const char *name;
    unsigned flags;            /**< COLL_IMPL_* */
    /** Start moving data; returns an error to fail the job. */
    coll_status_t (*start)(struct coll_op *op);
    /** The previous node's descriptor was checked after start() (NULL: nothing to do). An
     *  algorithm that writes outputs from the first data it receives posts those receives
     *  here, so nothing is written before the agreement. */
    void (*on_desc)(struct coll_op *op);
    /** A transfer of the operation completed successfully (NULL: the algorithm sends nothing). */
    void (*on_xfer)(struct coll_op *op, struct coll_xfer *x);
    /** Free the algorithm state once the operation ended and nothing is in flight (or NULL). */
    void (*cleanup)(struct coll_op *op);
    /** A barrier stage resumed the operation (stage.h): distribute the reduced chunk (NULL:
     *  the algorithm runs no stages). */
    void (*resume)(struct coll_op *op);
    /** Set op->plan as start() will (NULL: the algorithm does not work by the plan's
     *  columns). An algorithm with this hook reads the inputs of pipeline column j (piece j
     *  of every chunk, plan.h) and writes its outputs only while it runs that column, and
     *  honours op->gate (coll_op_gate_t): it starts no column the gate has not let in, and
     *  reports each column whose outputs are final. */
    void (*plan)(struct coll_op *op);
    /** The gate let more columns in (coll_op_gate_opened()): start those it can. NULL
     *  without plan. */
    void (*opened)(struct coll_op *op);
} coll_impl_t;

/** Which pipeline columns of op->plan an algorithm with a plan hook (coll_impl_t) may start,
 *  and the news of those it finished: set by a feature that fills the inputs while the
 *  algorithm runs and empties the outputs column by column (the staged path's copies,
 *  engine/dev_staged.h); NULL: every column is in. Loop thread. */
typedef struct coll_op_gate {
    /** @return How many columns, from column 0 on, have their inputs in op->in: the algorithm
     *          starts none beyond (it asks again after coll_op_gate_opened()). */
    uint64_t (*ready)(const struct coll_op *op);
    /** Column @p j's outputs are final in op->out: the algorithm reads and writes none of its
     *  bytes any more. May fail the job (coll_job_fail()). */
    void (*final)(struct coll_op *op, uint64_t j);
} coll_op_gate_t;

/** One local member's part in an operation. */
typedef struct {
    coll_session_t *session; /**< NULL before submission or after the rank left */
    uint32_t req_id;
    uint64_t send_off;
    uint64_t recv_off;
    uint32_t pool;           /**< the pool of its buffers (core/dev_pools.h: 0 the host pool) */
    uint64_t *table;         /**< an all-to-all's count table (proto/a2a.h), copied from the
                                  pool at submission and owned by the operation; else NULL */
    uint64_t sync_off;       /**< its stream words in the host pool (engine/dev_sync.h) */
    uint64_t sync_value;     /**< the value they wait for and get */
    uint32_t sync_flags;     /**< COLL_SYNC_* (proto/submission.h); 0: none */
} coll_op_member_t;

/** @return The member entry of rank session @p s for its submission @p sub, with the count
 *          table @p table (an all-to-all's, which the entry then owns; else NULL). */
coll_op_member_t coll_op_member_of(coll_session_t *s, const Coll__Wire__Submit *sub,
                                   uint64_t *table);

/** Per-operation slots of the features registered in engine/feature.c (at most this many). */
#define COLL_OP_FEATURES 5

typedef struct coll_op {
    coll_list_t link;          /**< in job->engine.ops */
    coll_job_t *job;
    coll_group_t *grp;         /**< its communicator (job->world or a group) */
    coll_desc_t desc;          /**< this node's descriptor */
    coll_plan_t plan;
    size_t esize;
    uint32_t nsubmitted;
    coll_op_member_t *members; /**< by local member of grp */
    uint32_t nbufs;            /**< local members whose buffers the algorithm reads and writes:
                                    the group's nlocal, or 1 when a feature gave it one buffer
                                    (the node-reduced path, node_op.h) */
    const void **in;           /**< daemon addresses of the inputs, by local member (host
                                    memory once the features attached: the staged path gives
                                    device buffers host copies, engine/dev_staged.h) */
    void **out;                /**< daemon addresses of the outputs, by local member (as in) */
    const struct coll_impl *impl;
    const coll_op_gate_t *gate; /**< the columns the algorithm may start (NULL: all) */
    void *algo_state;
    void *feature[COLL_OP_FEATURES]; /**< each registered feature's state, NULL where it is not
                                          attached (engine/feature.h) */
    uint64_t inflight;         /**< transfers posted and not completed */
    uint32_t holds;            /**< coll_op_hold() not yet released */
    coll_list_t posted;        /**< transfers in flight (to cancel them) */
    coll_list_t parked;        /**< receives completed before the descriptor check */
    int algo_done;             /**< the algorithm finished moving data */
    int stall_warned;          /**< the stall warning was logged (health.c) */
    int blame_asked;           /**< the other nodes were asked which of their ranks did not
                                    submit it (health.c, before the stall warning) */
    coll_status_t algo_status; /**< how it finished (COLL_OK unless coll_op_algo_failed()) */
    char algo_error[256];
    int done;                  /**< completed or failed; freed once nothing holds it
                                    (inflight == 0, holds == 0, not finishing) */
    uint8_t attach_next;       /**< the feature whose attach comes next once one that held the
                                    start back calls coll_op_attached() */
    uint8_t finish_next;       /**< the same for finish and coll_op_finished() */
    int finishing;             /**< done, but a feature's finish holds the ranks' answer back
                                    (coll_op_finished() not called yet) */
    /* Descriptor check with the previous node of the ring. */
    coll_desc_t peer_desc;
    coll_xfer_t desc_send;
    coll_xfer_t desc_recv;
    int desc_ok;
    uint64_t t_submit_ns;      /**< first local submission (coll_stats_now_ns()) */
    uint64_t t_start_ns;       /**< every local rank submitted; 0 before (stats.h) */
    uint64_t t_peers_ns;       /**< the previous node's descriptor was checked */
    uint64_t t_reduced_ns;     /**< the reduction finished (coll_op_mark_reduced()) */
    uint32_t nsteps;           /**< records in @c steps (coll_op_mark_step()) */
    uint64_t steps[COLL_CTL_MAX_STEPS]; /**< the algorithm's steps, coll_ctl_step_pack() */
    uint64_t sent_bytes;       /**< data this node sent for it (not descriptors) */
} coll_op_t;

/** @brief A new operation of group @p grp of @p job described by @p desc, linked into
 *         job->engine.ops (it holds @p grp until freed); its creator fills its members and
 *         their buffers. NULL: no memory. */
coll_op_t *coll_op_create(coll_job_t *job, coll_group_t *grp, const coll_desc_t *desc);

/** @return The bytes @p op counts in the metrics and /status: coll_stats_op_bytes() of its
 *          descriptor, but an all-to-all's (whose descriptor has no count) from the count table
 *          of its first local member that submitted: the bytes of that rank's send blocks, as
 *          nccl-tests count a rank's send buffer (0 before any member submitted). */
uint64_t coll_op_bytes(const coll_op_t *op);

/** @return The operation of group @p grp with key @p key that is not done (not a
 *          point-to-point transfer), or NULL. */
coll_op_t *coll_op_find(coll_job_t *job, const coll_group_t *grp, uint64_t key);

/** @brief Every local member submitted @p op (their buffers mapped in @c in and @c out), whose
 *         descriptors agree: attach its features, choose its implementation (algo.h) unless a
 *         feature did, post the descriptor exchange with the previous node and the features'
 *         transfers, start the algorithm. @p op may be freed on return. */
void coll_op_start(coll_op_t *op);

/** @brief The feature whose attach hook answered COLL_INPROGRESS for @p op is ready: the later
 *         features attach and the operation starts as coll_op_start() goes on. @p op may be
 *         freed on return. Loop thread only. */
void coll_op_attached(coll_op_t *op);

/** @brief @p op's gate (op->gate) let more columns in: its algorithm starts those it can
 *         (coll_impl_t.opened) and the transfers it posted go out. Not on a done operation.
 *         Hold @p op across the call (a failure fails the job). Loop thread, outside the
 *         transport's callbacks. */
void coll_op_gate_opened(coll_op_t *op);

/**
 * @brief Handle a client's Submit: validate it (its group must be one the rank registered),
 *        match it with the other local members' submissions of the same group and key and
 *        start the operation when all are in. Errors complete the request.
 */
void coll_op_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub);

/** @brief Record that the operation's reduction finished (the phase before distribution). */
void coll_op_mark_reduced(coll_op_t *op);

/**
 * @brief Record that step @p step (0-based) of @p phase (coll_step_phase_t), one of @p nsteps
 *        steps of that phase, and every step before it are done on this node. Steps beyond a
 *        phase's @p budget records merge with their neighbours (coll_ctl_step_ends_record());
 *        records beyond COLL_CTL_MAX_STEPS are dropped. Call in step order.
 */
void coll_op_mark_step(coll_op_t *op, uint32_t phase, uint32_t step, uint32_t nsteps,
                       uint32_t budget);

/** @brief The algorithm finished; the operation completes once the descriptor check passed. */
void coll_op_algo_done(coll_op_t *op);

/**
 * @brief The algorithm ends the operation with @p status and @p error on every local rank,
 *        once the descriptor check passed (so disagreeing ranks still see the mismatch).
 */
void coll_op_algo_failed(coll_op_t *op, coll_status_t status, const char *error);

/** @brief A coll_impl_t cleanup for an algorithm whose state is one malloc'ed block (freed,
 *         op->algo_state NULL after). */
void coll_op_free_algo_state(coll_op_t *op);

/** @brief Complete the operation on every local rank with @p status (COLL_OK or an error).
 *         A feature's finish hook may hold a successful completion back (feature.h): the
 *         ranks are told when it calls coll_op_finished(). Does nothing on a done operation. */
void coll_op_complete(coll_op_t *op, coll_status_t status, const char *error);

/** @brief The feature whose finish hook answered COLL_INPROGRESS for @p op finished with
 *         @p status (COLL_OK, or the error with which it failed the job): the later features
 *         finish and the ranks are told. @p op may be freed on return. Loop thread only. */
void coll_op_finished(coll_op_t *op, coll_status_t status);

/**
 * @brief Post a send of @p len bytes at @p buf to node @p node of the operation's group (tag
 *        by proto/tag.h): the transfer counts as in flight for @p op until its completion
 *        reaches the engine. The transfer's peer is the job node (coll_xfer_t.peer).
 * @return COLL_OK, or the transport's error (the caller fails the job).
 */
coll_status_t coll_op_send(coll_op_t *op, uint32_t node, uint64_t tag, const void *buf,
                           size_t len, coll_xfer_t *x);

/** @brief Post a receive of up to @p len bytes into @p buf from group node @p from, as
 *         coll_op_send(). */
coll_status_t coll_op_recv(coll_op_t *op, uint32_t from, uint64_t tag, void *buf, size_t len,
                           coll_xfer_t *x);

/**
 * @brief The engine's part of a job with other nodes: opens its transport, whose completions
 *        come back into the engine. @return COLL_OK or COLL_ERR_TRANSPORT (logged).
 */
coll_status_t coll_engine_job_open(coll_job_t *job);

/** @brief End the job's operations (failing those pending, cancelling their receives) and close
 *         its transport; the closed hook follows once that is done (net/transport.h). */
void coll_engine_job_close(coll_job_t *job);

/** @brief Fail every operation of @p job after a job failure; cancel their receives. */
void coll_op_fail_all(coll_job_t *job);

/** @brief Free every operation of @p job (its worker is destroyed: nothing is in flight). */
void coll_op_free_all(coll_job_t *job);

/** @brief Free @p op if it is done, nothing of it is in flight and nothing holds it. */
void coll_op_maybe_free(coll_op_t *op);

/**
 * @brief Keep @p op alive across a call that may complete it (a failure of the job completes
 *        every operation): it is not freed before the matching coll_op_release(), as Redis
 *        protects a client it is still using. Loop thread.
 */
void coll_op_hold(coll_op_t *op);

/** @brief End a coll_op_hold(): @p op is freed now when it is done and nothing else keeps it
 *         (do not look at it afterwards then). */
void coll_op_release(coll_op_t *op);

/** @brief Post a transfer to or from job node @p node (not a group node), as coll_op_send() and
 *         coll_op_recv(): point-to-point messages go between ranks, not group nodes. */
coll_status_t coll_op_post_job_node(coll_op_t *op, int send, uint32_t node, uint64_t tag,
                                    void *buf, size_t len, coll_xfer_t *x);

/**
 * @brief A transfer of @p op failed (x->status): mark its node lost and fail the job, naming
 *        the node, as the engine does for algorithms without COLL_IMPL_OWN_ERRORS.
 */
void coll_op_xfer_failed(coll_op_t *op, coll_xfer_t *x);

/** @brief A receive of @p op brought x->length bytes, not the x->expect it was posted for:
 *         fail the job with COLL_ERR_MISMATCH (the ranks disagree on the count). */
void coll_op_wrong_length(coll_op_t *op, const coll_xfer_t *x);

/**
 * @brief Check a descriptor carried in an algorithm's own message against the operation's;
 *        on a difference fail the job with both descriptors in the message.
 * @param [in] from Node that sent it.
 * @return 1 when equal, 0 when the job failed.
 */
int coll_op_check_desc(coll_op_t *op, const coll_desc_t *peer, uint32_t from);

/**
 * @brief Check a received message of a COLL_IMPL_SELF_CHECK algorithm that starts with the
 *        sender's descriptor @p peer: long enough for it, the same descriptor
 *        (coll_op_check_desc()), then exactly x->expect bytes. Post such receives with room to
 *        spare, so that a larger count shows as a descriptor mismatch naming both counts.
 * @return 1 when the message is usable, 0 when the job failed (COLL_ERR_MISMATCH).
 */
int coll_op_check_msg(coll_op_t *op, const struct coll_xfer *x, const coll_desc_t *peer);

/* ---- shared by the core's files (op.c, match.c, xfer.c) ---------------------------------- */

/** @return "allreduce #12" for messages, in @p buf. */
const char *coll__op_name(const coll_op_t *op, char *buf, size_t len);

/** @brief Post @p op's descriptor exchange with the previous and next node of its group (on
 *         one node: agreed at once). @return COLL_OK or the transport's error. */
coll_status_t coll__op_post_desc(coll_op_t *op);

/** @brief Complete @p op once the algorithm is done, the descriptor check passed and no
 *         feature holds it back. */
void coll__op_maybe_complete(coll_op_t *op);

#endif
