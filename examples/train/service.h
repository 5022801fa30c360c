/**
 * @file service.h
 * @brief coll-train --service: the optimizer runs in the daemons' parameter service
 *        (include/collective_ps.h, docs/parameter-service.md) instead of in the trainer.
 *
 * Layout. The network's parameters and its flat gradients live in the job's pool, both in the
 * parameter layout of mlp.h. Each weight matrix and each bias is one layer of the service
 * (tensor 2l "fc<l>.weight", 2l+1 "fc<l>.bias", as optimizer.h numbers them), the biases
 * flagged COLL_PS_EXCLUDE when the trainer's optimizer excludes them (--exclude). Network layer
 * l (its weight and its bias) is bucket l: backward reports each layer as it finishes and
 * train_service_grad_ready() submits its bucket (coll_ps_step_bucket_async()), so the reduce-
 * scatter, the update of the node's shard and the all-gather of the layers above overlap the
 * backward of the layers below.
 *
 * Settings. The trainer's optimizer (optimizer.h) and the service run the same kernels
 * (kernels/cpu/optim.h), so every setting maps one to one (train_service_optim()): SGD with
 * dampening 0, LAMB with the paper's bias correction, eps outside the square root, gradient
 * averaging, no clamp of ||w||, and the clipping of optimizer.h (clip_eps 0). The schedule is
 * the trainer's coll_schedule_t field by field; the service's step t uses the lr of t - 1, as
 * the trainer does.
 *
 * Compression (--compression fp16, bf16, onebit, topk:RATIO, with ,noef and ,warmup=N): every
 * bucket's step compresses its gradients between nodes (collective_ps.h: the compressed
 * reduce-scatter with error feedback, the optimizer on the owner's decoded sum, a float32
 * all-gather of the parameters); the epoch lines show the bytes each node sent for the steps.
 *
 * The mlp_t's layers point at the pool's parameters after train_service_init(); mlp->params
 * keeps the initial values and is not updated (dump.h reads the layers). Not thread-safe.
 */
#ifndef COLL_TRAIN_SERVICE_H
#define COLL_TRAIN_SERVICE_H

#include "dist.h"
#include "mlp.h"
#include "optimizer.h"

#include "common/schedule.h"

#include <collective.h>

/** A network registered with the parameter service; zero it, then train_service_init(). */
typedef struct train_service {
    dist_t *dist;
    mlp_t *mlp;
    coll_ps_t *ps;
    float *params;  /**< the parameters in the pool (n_params floats); owned */
    float *grads;   /**< the gradients in the pool, same layout; owned */
    coll_request_t *reqs[MLP_MAX_LAYERS]; /**< this step's request per bucket, or NULL */
    coll_status_t submit_st; /**< first submission error of this step, COLL_OK if none */
} train_service_t;

/**
 * @brief The service's optimizer for the trainer's settings @p o (see above).
 * @param [out] p Every field set.
 */
void train_service_optim(const train_optim_opts_t *o, coll_ps_optim_t *p);

/** @brief The service's schedule for the trainer's @p s (field_mask's defaults resolved). */
void train_service_schedule(const coll_schedule_t *s, coll_ps_schedule_t *p);

/**
 * @brief Move the parameters of @p mlp into the pool, bind its gradients to a pool buffer and
 *        register both with the service (coll_ps_create(), collective over the job).
 * @param [in] compression How every step's gradients travel between nodes; NULL: exactly.
 * @return 0; 2 after printing why for a standalone run (a usage error: the service lives in
 *         the daemons) or settings the service refuses; 1 after printing the libcollective
 *         error.
 */
int train_service_init(train_service_t *s, dist_t *dist, mlp_t *mlp,
                       const train_optim_opts_t *optim, const coll_schedule_t *sched,
                       const coll_compression_t *compression);

/** @brief mlp_grad_ready_fn: submit bucket @p layer of the step (@p arg: the service). A
 *         failure is kept for train_service_wait(). */
void train_service_grad_ready(void *arg, const mlp_t *mlp, int layer);

/**
 * @brief Wait for every bucket of the step (each at most dist->timeout_ms): the network's
 *        parameters are then updated on this rank.
 * @param [out] wire  Bytes this node sent for the step's buckets (coll_req_wire_bytes()).
 * @param [out] dense What the uncompressed ring would have sent for them.
 * @return 0; -1 after printing the first error (the job is over then).
 */
int train_service_wait(train_service_t *s, uint64_t *wire, uint64_t *dense);

/** @brief Free the service and the pool buffers. Safe on a zeroed train_service_t. */
void train_service_fini(train_service_t *s);

#endif /* COLL_TRAIN_SERVICE_H */
