/**
 * @file optimizer.h
 * @brief The trainer's optimizer: SGD (momentum, Nesterov), AdamW, LARS or LAMB from the
 *        coll_optim kernels (kernels/cpu/optim.h), applied to the fp32 master weights of an
 *        mlp_t tensor by tensor.
 *
 * Tensors. Each weight matrix and each bias of the network is one layer of the optimizer:
 * tensor 2l is "fc<l>.weight", tensor 2l+1 "fc<l>.bias", as the gradient bucketer names them
 * (dist.c). LARS and LAMB compute one trust ratio per tensor from its norms; excluded tensors
 * (COLL_OPTIM_EXCLUDE: the biases by default for LARS and LAMB) get neither a trust ratio nor
 * weight decay, and for SGD and AdamW exclusion means no weight decay.
 *
 * Every rank holds the whole model and, after the allreduce, the same averaged gradients, so
 * every rank computes the same norms and applies the same update: no communication here.
 *
 * Gradient clipping (clip_grad_norm > 0): with N the norm of all gradients of the step and
 * q = N / clip_grad_norm, every gradient is multiplied by (float)(1 / q) when q > 1, in place,
 * before the update. This is apex FusedLAMB's global pre-normalization (the kernels'
 * max_grad_norm with clip_eps 0) and torch.nn.utils.clip_grad_norm_ without its 1e-6, the same
 * for every optimizer.
 *
 * Not thread-safe: one thread uses a train_optim_t at a time.
 */
#ifndef COLL_TRAIN_OPTIMIZER_H
#define COLL_TRAIN_OPTIMIZER_H

#include "mlp.h"
#include "kernels/cpu/optim.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** Most tensors of a network: a weight matrix and a bias per layer. */
#define TRAIN_MAX_TENSORS (2 * MLP_MAX_LAYERS)

/** Which optimizer (--optimizer). */
typedef enum {
    TRAIN_OPTIM_SGD = 0, /**< torch.optim.SGD (the trainer's default, momentum 0.9) */
    TRAIN_OPTIM_ADAMW,   /**< torch.optim.AdamW */
    TRAIN_OPTIM_LARS,    /**< LARS, the MLPerf reference */
    TRAIN_OPTIM_LAMB,    /**< LAMB, the paper's Algorithm 2 */
    TRAIN_OPTIM_KINDS    /**< number of kinds */
} train_optim_kind_t;

/** Settings of the optimizer; train_optim_defaults() gives every field a value. */
typedef struct train_optim_opts {
    train_optim_kind_t kind;
    double momentum;       /**< SGD, LARS: in [0, 1) */
    int nesterov;          /**< SGD, LARS: Nesterov momentum (needs momentum > 0) */
    double weight_decay;   /**< >= 0: SGD's L2, AdamW's and LAMB's decoupled decay, LARS's */
    double beta1, beta2;   /**< AdamW, LAMB: in [0, 1) */
    double eps;            /**< AdamW, LARS, LAMB: >= 0 */
    double lars_eta;       /**< LARS: the trust coefficient eta, > 0 */
    double trust_min;      /**< LAMB: clamp of the trust ratio (DeepSpeed's min_coeff); 0: none */
    double trust_max;      /**< LAMB: upper clamp (max_coeff); INFINITY: none */
    double clip_grad_norm; /**< > 0: global gradient-norm clipping (see above); 0: off */
    int exclude_bias;      /**< nonzero: the biases are excluded (see above) */
} train_optim_opts_t;

/** What one step did to one tensor (train_optim_step() with stats). */
typedef struct train_tensor_stats {
    double w_norm;      /**< ||w|| before the step */
    double g_norm;      /**< ||g||, the gradient the update used (after clipping) */
    double trust;       /**< the LARS or LAMB trust ratio; 1 for SGD, AdamW, excluded tensors */
    double update_norm; /**< ||w_after - w_before|| */
} train_tensor_stats_t;

/** An optimizer and its state; zero it, then train_optim_init(). */
typedef struct train_optim {
    train_optim_opts_t opts;
    int n_tensors;                      /**< 2 x the network's layers */
    unsigned flags[TRAIN_MAX_TENSORS];  /**< per tensor: COLL_OPTIM_EXCLUDE or 0 */
    float *state[2];   /**< in the parameter layout (mlp.h): [0] the momentum (SGD, LARS) or
                            the first moment (AdamW, LAMB), [1] the second moment (AdamW,
                            LAMB) or NULL; owned */
    float *before;     /**< the largest tensor's weights before a step, for update_norm; owned,
                            NULL unless stats were asked for at init */
    uint64_t steps;    /**< updates done; the next is step steps + 1 */
} train_optim_t;

/** @return "sgd", "adamw", "lars" or "lamb". */
const char *train_optim_name(train_optim_kind_t kind);

/**
 * @brief The defaults of @p kind, those of the kernels' references: momentum 0.9 (SGD: no
 *        weight decay; LARS: weight decay 1e-4, eta 1e-3, eps 1e-7); AdamW: betas 0.9, 0.999,
 *        eps 1e-8, weight decay 0.01; LAMB: betas 0.9, 0.999, eps 1e-6, weight decay 0.01, no
 *        clamp; no clipping; biases excluded for LARS and LAMB only.
 * @param [out] o Every field set.
 */
void train_optim_defaults(train_optim_kind_t kind, train_optim_opts_t *o);

/**
 * @brief The lr of @p kind when --lr is not given: coll_ps_optim_default_lr()'s (the
 *        references' values at the demo's global batch of 256, with their sources in
 *        include/collective_ps.h): sgd 0.05, adamw 1e-3, lars 1.77, lamb 0.014.
 */
double train_optim_default_lr(train_optim_kind_t kind);

/** @brief One phrase naming the optimizer and the settings it uses ("lars, momentum 0.9,
 *         ...") to @p out. */
void train_optim_describe(const train_optim_opts_t *o, FILE *out);

/** @brief Name of tensor @p t ("fc0.weight", "fc0.bias", ...) into @p buf of @p len bytes. */
void train_tensor_name(int t, char *buf, size_t len);

/**
 * @brief Allocate the state (zeroed, as every reference starts) for the tensors of @p mlp.
 * @param [in] opts        Settings; the kernels' checks must pass.
 * @param [in] want_stats  Nonzero: train_optim_step() may be asked for statistics.
 * @return 0; -1 after printing why to stderr (invalid settings, out of memory).
 */
int train_optim_init(train_optim_t *o, const train_optim_opts_t *opts, const mlp_t *mlp,
                     int want_stats);

/**
 * @brief One update of every tensor of @p mlp from its bound gradients (which clipping may
 *        scale in place), as step o->steps + 1 of the kernels.
 * @param [in]  lr     Learning rate of this step (coll_schedule_lr()), >= 0.
 * @param [out] stats  NULL, or o->n_tensors entries filled for this step; ignored when the
 *                     optimizer was initialised without want_stats.
 */
void train_optim_step(train_optim_t *o, mlp_t *mlp, double lr, train_tensor_stats_t *stats);

/** @brief Free the state. Safe on a zeroed or finished train_optim_t. */
void train_optim_fini(train_optim_t *o);

#endif /* COLL_TRAIN_OPTIMIZER_H */
