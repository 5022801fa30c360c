/**
 * @file internal.h
 * @brief The parameter service's state on one node, shared by the files of ps/ (not by other
 *        layers: they use ps.h).
 *
 * A job's service (coll_ps_job_t) holds the registration, the optimizer's settings as the
 * kernels take them, the schedule, and per bucket the chunk this node owns (the ring's chunk of
 * the node in the plan of the bucket's operations) with the spans that cut it into pieces of one
 * layer and one pipeline segment each. The optimizer state is one allocation in the job's pool:
 * nstate arrays of shard_elems floats, each the node's chunks of every bucket in bucket order.
 * Everything runs on the loop thread.
 */
#ifndef COLL_PS_INTERNAL_H
#define COLL_PS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/schedule.h"
#include "core/job.h"
#include "engine/op.h"
#include "engine/plan.h"
#include "engine/stage.h"
#include "kernels/optim.h"
#include "proto/ps_records.h"

/** Sums of squares kept per span: weights, the update direction (LARS: the gradient; LAMB:
 *  r), the gradient (global clipping). */
enum { PS_W = 0, PS_U = 1, PS_G = 2, PS_SUMS = 3 };

/** The elements of one layer inside one segment of this node's chunk of a bucket. */
typedef struct {
    uint64_t off;   /**< bucket-relative */
    uint64_t len;
    uint32_t layer; /**< index among the bucket's layers */
} ps_span_t;

/** A bucket and this node's chunk of it. */
typedef struct {
    uint64_t off, count;        /**< in the flat parameter layout */
    uint32_t first_layer, nlayers;
    coll_plan_t plan;           /**< of its operations (the ring's, or one node's) */
    coll_range_t chunk;         /**< this node's, bucket-relative */
    uint64_t state_off;         /**< the chunk's first element in each state array */
    ps_span_t *spans;           /**< in position order */
    uint32_t nspans;
    uint32_t *seg_span;         /**< [plan.nseg + 1]: first span of each segment */
    uint64_t step;              /**< steps done */
    struct coll_op *busy;       /**< its step in flight, or NULL */
} ps_bucket_t;

/** What every bucket of one step contributes to global clipping. */
typedef struct {
    uint64_t step;              /**< the step being collected (0: none) */
    uint32_t known;             /**< buckets whose gradient sum of squares is in */
    double *sumsq;              /**< [num_buckets] */
    struct coll_op **waiting;   /**< [num_buckets] their operations, until all are in */
    struct coll_op **ready;     /**< [num_buckets] the same, while they are let go */
} ps_clip_t;

/** A job's parameter service on this node. */
typedef struct coll_ps_job {
    coll_job_t *job;
    coll_ps_reg_t reg;          /**< the registration's head */
    coll_ps_reg_layer_t *layers;
    uint64_t fingerprint;
    coll_optim_sgd_params_t sgd;
    coll_optim_adamw_params_t adamw;
    coll_optim_lars_params_t lars;
    coll_optim_lamb_params_t lamb;
    coll_schedule_t sched;
    ps_bucket_t *buckets;
    uint32_t nstate;            /**< state arrays */
    uint64_t shard_elems;       /**< elements of this node's chunks together */
    float *state[2];            /**< in the pool; NULL when nstate is 0 */
    uint64_t state_pool_off;    /**< pool offset of state[0] */
    ps_clip_t clip;
    uint64_t steps_ok;          /**< bucket steps completed */
    uint64_t exchange_bytes;    /**< bytes this node sent in the exchanges of sums */
} coll_ps_job_t;

/** One bucket's step in flight: the state of its operation's stage (coll_stage_state()). */
typedef struct {
    coll_ps_job_t *ps;
    ps_bucket_t *b;
    uint32_t bucket;
    coll_optim_step_t st;       /**< lr and step number */
    double (*sums)[PS_SUMS];    /**< [b->nspans] */
    double *vec;                /**< [nnodes][kmax]: each node's sums of the current round */
    double *total;              /**< [kmax]: their sum in node order */
    uint32_t kmax;              /**< doubles per node of the largest round */
    uint32_t k;                 /**< doubles per node of the current round */
    uint32_t round;             /**< 0: the gradient's sum (clipping); 1: per-layer sums */
    uint32_t pending;           /**< transfers of the round not completed */
    coll_xfer_t *xs;            /**< [2 * (nnodes - 1)] */
    float clip_scale;           /**< the gradients' factor from clipping (1: none) */
} ps_op_t;

/* ---- shard.c ----------------------------------------------------------------------------- */

/**
 * @brief Cut this node's shard of the registered buckets: each bucket's plan, chunk and spans,
 *        and the state offsets. @return COLL_OK; COLL_ERR_NOMEM.
 */
coll_status_t coll_ps_shard_cut(coll_ps_job_t *ps);

/** @brief Free what coll_ps_shard_cut() allocated. */
void coll_ps_shard_free(coll_ps_job_t *ps);

/** @return The layer flags of span @p sp of bucket @p b as the kernels take them. */
unsigned coll_ps_span_flags(const coll_ps_job_t *ps, const ps_bucket_t *b, const ps_span_t *sp);

/** @return The segment of this node's chunk of @p b that starts at bucket element @p off. */
uint64_t coll_ps_segment_of(const ps_bucket_t *b, uint64_t off);

/* ---- register.c -------------------------------------------------------------------------- */

/**
 * @brief PS_REGISTER on this node: check the local ranks' registrations, take the settings,
 *        lay out the shard and allocate the state in the pool (job->ps).
 * @return COLL_OK; COLL_ERR_INVALID, COLL_ERR_POOL_FULL, COLL_ERR_NOMEM with the text in @p err.
 */
coll_status_t coll_ps_register(coll_op_t *op, char *err, size_t errlen);

/** @brief Free a service (its state goes with the pool). Safe with NULL. */
void coll_ps_free(coll_ps_job_t *ps);

/* ---- update.c ---------------------------------------------------------------------------- */

/** @return 1 when the optimizer needs the norms of whole layers (LARS, LAMB). */
int coll_ps_needs_norms(const coll_ps_job_t *ps);

/** @brief The first pass over span @p i of a step: its sums, and the moments (LAMB) or the whole
 *         update (SGD and AdamW without clipping; see step.c). */
void coll_ps_update_first(coll_op_t *op, ps_op_t *s, uint32_t i);

/** @brief The second pass over span @p i, with every sum reduced: the update of LARS and LAMB,
 *         and of SGD and AdamW under clipping. */
void coll_ps_update_second(coll_op_t *op, ps_op_t *s, uint32_t i);

/* ---- exchange.c -------------------------------------------------------------------------- */

/**
 * @brief Send this node's @p k sums of round @p round (s->vec[node]) to every other node and
 *        receive theirs; coll_ps_exchanged() follows when all are in (at once on one node).
 */
void coll_ps_exchange(coll_op_t *op, ps_op_t *s, uint32_t round, uint32_t k);

/** @brief A transfer of the exchange completed (the stage's on_xfer). */
void coll_ps_exchange_xfer(coll_op_t *op, coll_xfer_t *x);

/** @brief Every node's sums of the round are in s->total (step.c). */
void coll_ps_exchanged(coll_op_t *op, ps_op_t *s);

/* ---- clip.c ------------------------------------------------------------------------------ */

/**
 * @brief Bucket @p s's gradient sum of squares of its step is known (every node's, added): when
 *        every bucket of the step is in, each of them goes on with coll_ps_clip_ready().
 */
void coll_ps_clip_add(coll_op_t *op, ps_op_t *s, double sumsq);

/** @brief Forget @p op in the clipping record (it ended). */
void coll_ps_clip_drop(coll_ps_job_t *ps, const coll_op_t *op);

/** @brief Every bucket's sum is in: scale the bucket's gradients, then its first pass (step.c). */
void coll_ps_clip_ready(coll_op_t *op, ps_op_t *s, double grad_sumsq);

/* ---- step.c ------------------------------------------------------------------------------ */

/** @brief PS_STEP on this node: check the bucket and the step, attach the stage.
 *  @return COLL_OK; COLL_ERR_INVALID, COLL_ERR_NOMEM with the text in @p err. */
coll_status_t coll_ps_step_start(coll_op_t *op, coll_stage_t *stage, char *err, size_t errlen);

/** @brief Fail the job: a sum of squares of step @p s is not finite (a NaN or infinity in the
 *         gradients, or in the weights). @p what names where. */
void coll_ps_fail_nonfinite(coll_op_t *op, const ps_op_t *s, const char *what);

/* ---- ckpt.c ------------------------------------------------------------------------------ */

/** @brief PS_SAVE on this node: the checkpoint head into every local rank's reply. */
coll_status_t coll_ps_save_node(coll_op_t *op, char *err, size_t errlen);

/** @brief PS_LOAD on this node: the state and the step from local rank 0's image. */
coll_status_t coll_ps_load_node(coll_op_t *op, char *err, size_t errlen);

/** @return The steps done, when every bucket has done the same number and none is in flight;
 *          UINT64_MAX otherwise. */
uint64_t coll_ps_quiet_step(const coll_ps_job_t *ps);

#endif
