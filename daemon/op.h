/**
 * @file op.h
 * @brief One collective operation of a job on this node: the submissions of the local ranks,
 *        matched by key, and the algorithm that runs it once all of them are in.
 */
#ifndef COLL_OP_H
#define COLL_OP_H

#include <stdint.h>
#include <ucp/api/ucp.h>

#include "ctl.h"
#include "desc.h"
#include "job.h"
#include "list.h"
#include "plan.h"

struct coll_op;
struct coll_xfer;

/** The algorithm checks a descriptor carried in each of its own messages: its receives are
 * used at once, not parked until the ring descriptor arrived. */
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
} coll_impl_t;

/** One local rank's part in an operation. */
typedef struct {
    coll_session_t *session; /**< NULL before submission or after the rank left */
    uint32_t req_id;
    uint64_t send_off;
    uint64_t recv_off;
} coll_op_member_t;

/** A message in flight on UCX. Embedded in algorithm state; no allocation per message. */
typedef struct coll_xfer {
    coll_list_t link;     /**< in job->events once completed */
    coll_list_t posted;   /**< in op->posted while in flight */
    struct coll_op *op;
    void *req;            /**< UCX request while in flight, else NULL */
    uint8_t kind;         /**< COLL_TAG_* */
    uint8_t is_send;
    uint8_t completed;    /**< UCX reported completion (it may still wait in job->events) */
    uint8_t suspect;      /**< a receive from a gone node seen pending by one check already */
    uint16_t slot;        /**< algorithm's own index (buffer, column) */
    uint32_t step;
    uint32_t peer;        /**< node sent to, or expected to send */
    size_t expect;        /**< bytes a receive must bring */
    ucs_status_t status;
    size_t length;        /**< bytes received */
} coll_xfer_t;

typedef struct coll_op {
    coll_list_t link;          /**< in job->ops */
    coll_job_t *job;
    coll_desc_t desc;          /**< this node's descriptor */
    coll_plan_t plan;
    size_t esize;
    uint32_t nsubmitted;
    coll_op_member_t *members; /**< by local rank */
    const void **in;           /**< daemon addresses of the inputs, by local rank */
    void **out;                /**< daemon addresses of the outputs, by local rank */
    const struct coll_impl *impl;
    void *algo_state;
    uint64_t inflight;         /**< transfers posted and not completed */
    coll_list_t posted;        /**< transfers in flight (to cancel them) */
    uint32_t self;             /**< point-to-point: the local rank that submitted it */
    coll_xfer_t p2p_xfer;      /**< point-to-point: its one message */
    coll_list_t parked;        /**< receives completed before the descriptor check */
    int algo_done;             /**< the algorithm finished moving data */
    int stall_warned;          /**< the stall warning was logged (health.c) */
    coll_status_t algo_status; /**< how it finished (COLL_OK unless coll_op_algo_failed()) */
    char algo_error[160];
    int done;                  /**< completed or failed; waits for inflight == 0 to be freed */
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
} coll_op_t;

/** @brief A new operation of @p job described by @p desc, linked into job->ops; NULL: no memory. */
coll_op_t *coll_op_create(coll_job_t *job, const coll_desc_t *desc);

/**
 * @brief Handle a client's Submit: validate it, match it with the other local ranks' submissions
 *        of the same key and start the operation when all are in. Errors complete the request.
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

/** @brief Complete the operation on every local rank with @p status (COLL_OK or an error). */
void coll_op_complete(coll_op_t *op, coll_status_t status, const char *error);

/** @brief A transfer of @p x->op completed (or failed); called by the job's event loop. */
void coll_op_on_xfer(coll_xfer_t *x);

/** @brief Fail every operation of @p job after a job failure; cancel their receives. */
void coll_op_fail_all(coll_job_t *job);

/** @brief Free every operation of @p job (its worker is destroyed: nothing is in flight). */
void coll_op_free_all(coll_job_t *job);

/** @brief Free @p op if it is done and nothing is in flight. */
void coll_op_maybe_free(coll_op_t *op);

/**
 * @brief Check a descriptor carried in an algorithm's own message against the operation's;
 *        on a difference fail the job with both descriptors in the message.
 * @param [in] from Node that sent it.
 * @return 1 when equal, 0 when the job failed.
 */
int coll_op_check_desc(coll_op_t *op, const coll_desc_t *peer, uint32_t from);

/** The pipelined ring: allreduce, reduce-scatter, all-gather (ring.c). */
extern const coll_impl_t coll_impl_ring;
/** Recursive doubling allreduce (rd.c). */
extern const coll_impl_t coll_impl_rd;
/** Pipelined chain broadcast (chain.c). */
extern const coll_impl_t coll_impl_chain_bcast;
/** Pipelined chain reduce (chain.c). */
extern const coll_impl_t coll_impl_chain_reduce;
/** Dissemination barrier (barrier.c). */
extern const coll_impl_t coll_impl_barrier;
/** Single node: every collective from the local ranks' buffers (local.c). */
extern const coll_impl_t coll_impl_local;

#endif
