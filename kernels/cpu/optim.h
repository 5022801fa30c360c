/**
 * @file optim.h
 * @brief Optimizer kernels on fp32 master weights for a sharded (ZeRO-1 style) parameter
 *        service: SGD, AdamW, LARS and LAMB, plus the partial sums of squares their per-layer
 *        norms are built from. Static library coll_optim.
 *
 * Counts are in elements (float32), never bytes. Every kernel is a pure function of its
 * arguments: no global state except the instruction set chosen once (coll_cpu_isa()), so
 * concurrent calls on disjoint buffers are safe. Buffers are the caller's; no kernel allocates,
 * keeps a pointer or fails. Unless a function says otherwise, its arrays must not overlap.
 *
 * Sharding. A layer may be split across daemons. Everything an update needs beyond its own
 * elements is a scalar per layer (a sum of squares) or per step (the learning rate, the step
 * number, the global gradient sum of squares), so an update is two-phase where a norm is
 * involved:
 *   1. each shard computes partial sums of squares of its elements (coll_optim_sumsq(),
 *      coll_optim_sumsq2(), or the sums coll_optim_lamb_moments() returns);
 *   2. the caller adds the partial sums of every shard of the layer (an allreduce of doubles);
 *   3. each shard runs the update with the reduced sums (coll_optim_layer_t).
 * Each element's update is a function of its own values and those scalars only, computed with
 * the same operations in the same order in every code path (vector body, tail, every
 * instruction set; no fused multiply-add): a layer updated as any number of shards with the same
 * reduced sums is bit-for-bit the layer updated whole.
 *
 * Sums of squares are accumulated in double, in 16 lanes (element i of a call goes to lane
 * i mod 16), then combined in a fixed tree: every instruction set gives the same bits for the
 * same call. Squares of floats are exact in double, so the relative error of a sum of n squares
 * is at most about (n/16 + 4) * 2^-53: 1.9e-9 for 2^28 elements (1 GiB of fp32) in the worst
 * case, typically far less, and below float resolution (6e-8) either way.
 * Sums over different shardings of a layer therefore agree to that accuracy, not bit for bit.
 *
 * Non-finite values. The update kernels do not look for NaN or infinity: a non-finite gradient
 * propagates into the weights and the optimizer state, as in PyTorch. The caller decides before
 * updating. A sum of squares is finite exactly when every element summed is finite (squares of
 * finite floats cannot overflow a double), so the allreduced gradient sum of squares of phase 2
 * tells every shard the same answer at no extra cost; coll_optim_all_finite() checks a buffer
 * directly where no sum is computed (SGD, AdamW). To skip a step, skip every kernel of that step
 * on every shard: then weights and state stay exactly as they were.
 *
 * Precision. Element arithmetic is float32 as in PyTorch and the reference implementations;
 * per-call scalars (bias corrections, trust ratios, lr * trust) are computed in double and
 * rounded to float once, as PyTorch turns Python floats into float32 kernel scalars.
 */
#ifndef COLL_KERNELS_OPTIM_H
#define COLL_KERNELS_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/* ---- Per-step and per-layer inputs ------------------------------------------------------ */

/** One optimizer step, the same for every layer and shard. */
typedef struct {
    double lr;         /**< learning rate of this step, e.g. coll_schedule_lr() */
    uint64_t step;     /**< 1 for the first update, then 2, 3, ... (bias correction, SGD's
                            first momentum step); 0 is invalid */
    double grad_sumsq; /**< LAMB global gradient clipping only: the sum of squares of every
                            gradient element of the model (all layers, all shards); ignored by
                            the other optimizers and when clipping is off */
} coll_optim_step_t;

/** Layer flag: no weight decay for this layer (biases, normalization parameters). */
#define COLL_OPTIM_NO_WEIGHT_DECAY 0x1u
/** Layer flag (LARS, LAMB): no layer-wise trust ratio for this layer (trust = 1). */
#define COLL_OPTIM_NO_TRUST 0x2u
/** An excluded layer as in the MLPerf LARS skip_list: neither weight decay nor trust ratio. */
#define COLL_OPTIM_EXCLUDE (COLL_OPTIM_NO_WEIGHT_DECAY | COLL_OPTIM_NO_TRUST)

/** A layer of LARS or LAMB: its flags and the norms of the whole layer, as reduced sums. */
typedef struct {
    unsigned flags; /**< COLL_OPTIM_NO_WEIGHT_DECAY, COLL_OPTIM_NO_TRUST */
    double w_sumsq; /**< sum over every shard of the layer of the squared weights */
    double u_sumsq; /**< LARS: of the squared gradients; LAMB: of the squared update
                         directions r (coll_optim_lamb_moments()) */
} coll_optim_layer_t;

/* ---- Sums of squares and checks --------------------------------------------------------- */

/**
 * @brief Partial sum of squares of @p n floats, in double (16 lanes; see the file comment).
 * @param [in] x @p n elements; may be NULL when @p n is 0.
 * @return sum x[i]^2; 0 for n = 0; +inf or NaN when an element is not finite. Thread-safe.
 */
double coll_optim_sumsq(const float *x, size_t n);

/**
 * @brief Two partial sums of squares in one pass: out[0] = sum a[i]^2, out[1] = sum b[i]^2,
 *        each exactly what coll_optim_sumsq() returns for that array (LARS: weights and
 *        gradients of a shard).
 * @param [in] a, b @p n elements each; may overlap each other.
 * @param [out] out Two sums. Thread-safe.
 */
void coll_optim_sumsq2(const float *a, const float *b, size_t n, double out[2]);

/**
 * @brief Whether every element is finite (neither infinity nor NaN).
 * @param [in] x @p n elements; may be NULL when @p n is 0.
 * @return 1 when all are finite (also for n = 0), 0 otherwise. Reads all of @p x. Thread-safe.
 */
int coll_optim_all_finite(const float *x, size_t n);

/* ---- SGD -------------------------------------------------------------------------------- */

/**
 * SGD with momentum, PyTorch's torch.optim.SGD (1.13, maximize=False):
 *   d = g + weight_decay * w                      (only when weight_decay != 0)
 *   buf = d on step 1; buf = momentum * buf + (1 - dampening) * d later   (momentum != 0)
 *   u = d + momentum * buf with nesterov, else buf (momentum != 0); u = d when momentum == 0
 *   w = w - lr * u
 * Zero-initialized, every field is PyTorch's default (plain SGD).
 */
typedef struct {
    double momentum;     /**< >= 0; 0 disables the momentum buffer */
    double dampening;    /**< PyTorch's dampening; not applied on step 1 (buf = d) */
    double weight_decay; /**< L2 penalty added to the gradient, >= 0 */
    int nesterov;        /**< non-zero: Nesterov momentum (needs momentum > 0, dampening 0) */
} coll_optim_sgd_params_t;

/**
 * @brief Check SGD hyper-parameters as torch.optim.SGD does.
 * @return COLL_OK; COLL_ERR_INVALID for a negative or non-finite momentum or weight decay, a
 *         non-finite dampening, or nesterov without momentum > 0 and dampening 0.
 */
coll_status_t coll_optim_sgd_params_check(const coll_optim_sgd_params_t *p);

/**
 * @brief One SGD step on @p n elements in place.
 * @param [in] p Checked parameters. @param [in] st lr and step (grad_sumsq unused).
 * @param [in,out] w Weights. @param [in] g Gradients.
 * @param [in,out] buf Momentum buffer, written without being read on step 1; not touched (may
 *        be NULL) when momentum is 0.
 * Thread-safe; non-finite gradients propagate (see the file comment).
 */
void coll_optim_sgd_update(const coll_optim_sgd_params_t *p, const coll_optim_step_t *st,
                           float *w, const float *g, float *buf, size_t n);

/* ---- AdamW ------------------------------------------------------------------------------ */

/**
 * AdamW (Loshchilov & Hutter, "Decoupled Weight Decay Regularization", ICLR 2019) in
 * PyTorch's form (torch.optim.AdamW 1.13, amsgrad=False, maximize=False), step t:
 *   w = w * (1 - lr * weight_decay)
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
 *   w = w - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * eps is added outside the square root of the bias-corrected v (sqrt(v_hat) + eps), as
 * PyTorch and the Adam paper do.
 */
typedef struct {
    double beta1, beta2; /**< in [0, 1) */
    double eps;          /**< >= 0 */
    double weight_decay; /**< decoupled, multiplied by lr; >= 0 */
} coll_optim_adamw_params_t;

/** @brief PyTorch's defaults: betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2. */
void coll_optim_adamw_params_init(coll_optim_adamw_params_t *p);

/**
 * @return COLL_OK; COLL_ERR_INVALID for a beta outside [0, 1), a negative or non-finite eps or
 *         weight decay.
 */
coll_status_t coll_optim_adamw_params_check(const coll_optim_adamw_params_t *p);

/**
 * @brief One AdamW step on @p n elements in place.
 * @param [in] st lr and step (t >= 1; grad_sumsq unused).
 * @param [in,out] w Weights. @param [in] g Gradients.
 * @param [in,out] m, v First and second moments, zero before step 1.
 * Thread-safe; non-finite gradients propagate (see the file comment).
 */
void coll_optim_adamw_update(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                             float *w, const float *g, float *m, float *v, size_t n);

/* ---- LARS ------------------------------------------------------------------------------- */

/**
 * LARS (You, Gitman, Ginsburg, arXiv 1708.03888) exactly as the MLPerf reference
 * (mlcommons/training image_classification/tensorflow2/lars_optimizer.py, dense path):
 *   trust = eta * ||w|| / (||g|| + weight_decay * ||w|| + eps) when ||w|| > 0 and ||g|| > 0,
 *           else 1;   lr_s = lr * trust;   d = g + weight_decay * w
 *   excluded layers (COLL_OPTIM_EXCLUDE): lr_s = lr, d = g
 *   v = momentum * v + lr_s * d;   w = w - v   (w = w - momentum * v - lr_s * d with nesterov)
 * The learning rate is inside the momentum (the reference's mom = mom * mu - grad * lr_s, with
 * v = -mom), so a change of lr acts through v, unlike PyTorch SGD. Norms are those of the
 * whole layer before the step; the trust ratio is computed in double. COLL_OPTIM_NO_TRUST and
 * COLL_OPTIM_NO_WEIGHT_DECAY may also be given separately; a layer without decay has no decay
 * term in its trust ratio's denominator either.
 * The reference replaces epsilon = 0 by Keras' 1e-7 (`epsilon or backend_config.epsilon()`);
 * here eps is used as given, so pass 1e-7 to reproduce its default.
 */
typedef struct {
    double momentum;     /**< in [0, 1] */
    double weight_decay; /**< >= 0 */
    double eta;          /**< the LARS coefficient ("eeta"), > 0 */
    double eps;          /**< >= 0 */
    int nesterov;        /**< non-zero: the reference's use_nesterov */
} coll_optim_lars_params_t;

/** @brief The reference's defaults: momentum 0.9, weight_decay 1e-4, eta 1e-3, eps 1e-7. */
void coll_optim_lars_params_init(coll_optim_lars_params_t *p);

/**
 * @return COLL_OK; COLL_ERR_INVALID for momentum outside [0, 1], eta <= 0, a negative or
 *         non-finite weight decay or eps.
 */
coll_status_t coll_optim_lars_params_check(const coll_optim_lars_params_t *p);

/**
 * @brief The layer's trust ratio from its reduced sums (w_sumsq, u_sumsq = ||g||^2).
 * @return As in coll_optim_lars_params_t: 1 for excluded layers or a zero norm. Thread-safe.
 */
double coll_optim_lars_trust(const coll_optim_lars_params_t *p, const coll_optim_layer_t *l);

/**
 * @brief One LARS step on a shard of @p n elements of a layer, in place.
 * @param [in] l The layer's flags and reduced sums (coll_optim_sumsq2() of w and g over every
 *        shard, added); sums are not read for layers with COLL_OPTIM_NO_TRUST.
 * @param [in,out] w Weights. @param [in] g Gradients.
 * @param [in,out] v Momentum, zero before the first step (the reference's zero slot).
 * Thread-safe; non-finite gradients propagate (see the file comment).
 */
void coll_optim_lars_update(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                            const coll_optim_layer_t *l, float *w, const float *g, float *v,
                            size_t n);

/* ---- LAMB ------------------------------------------------------------------------------- */

/** How LAMB corrects the bias of its moments. */
typedef enum {
    /** The paper: m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t) inside r. */
    COLL_OPTIM_LAMB_BIAS_PAPER = 0,
    /** None: m_hat = m, v_hat = v (apex and DeepSpeed bias_correction=False). */
    COLL_OPTIM_LAMB_BIAS_NONE = 1,
    /**
     * DeepSpeed FusedLamb: r and its norm from the raw moments, and the whole step scaled by
     * sqrt(1 - beta2^t) / (1 - beta1^t) outside the trust ratio (its step_size), which also
     * scales the weight-decay term and, in effect, eps.
     */
    COLL_OPTIM_LAMB_BIAS_STEPSIZE = 2,
} coll_optim_lamb_bias_t;

/**
 * LAMB. Default (coll_optim_lamb_params_init()): the paper, You et al., "Large Batch
 * Optimization for Deep Learning: Training BERT in 76 minutes", arXiv 1904.00962v5,
 * Algorithm 2, with phi(z) = z, as tensorflow/addons LAMB implements it:
 *   m = beta1 * m + (1 - beta1) * g;   v = beta2 * v + (1 - beta2) * g * g
 *   r = m_hat / (sqrt(v_hat) + eps) + weight_decay * w      (the paper's r_t + lambda x_t)
 *   trust = ||w|| / ||r|| when both are > 0, else 1;   w = w - lr * trust * r
 * (The paper does not say what a zero norm gives; 1 is what tensorflow/addons, apex and
 * DeepSpeed do.)
 * Options, each with the implementation it reproduces and how that differs from the default:
 *   - bias: NONE (apex/DeepSpeed bias_correction=False), STEPSIZE (DeepSpeed, see above).
 *   - eps_inside_sqrt: sqrt(v_hat + eps) instead of sqrt(v_hat) + eps (DeepSpeed
 *     eps_inside_sqrt=True; apex and the paper add eps outside).
 *   - trust_min, trust_max: clamp the trust ratio to [trust_min, trust_max] when both norms
 *     are > 0 (DeepSpeed min_coeff 0.01, max_coeff 10; apex and the paper do not clamp).
 *   - phi_min, phi_max: the paper's scaling function phi(z) = min(max(z, gamma_l), gamma_u)
 *     applied to ||w|| (defaults 0 and infinity: phi(z) = z, as tensorflow/addons, apex and
 *     DeepSpeed, none of which bounds ||w||).
 *   - max_grad_norm > 0: global gradient-norm pre-normalization. With N = sqrt(grad_sumsq) of
 *     the step and q = (N + clip_eps) / max_grad_norm, every gradient is g / q when q > 1, before
 *     the moments. apex FusedLAMB: clip_eps 0 (its max_grad_norm defaults to 1.0, on); DeepSpeed
 *     FusedLamb: clip_eps 1e-6 (its max_grad_norm defaults to 0, off); the paper has none.
 *   - grad_averaging = 0: m = beta1 * m + g (apex grad_averaging=False; default on).
 *   - l2: weight decay as L2 on the gradient, g' = g + weight_decay * w before the moments and
 *     no decay term in r (apex adam_w_mode=False; default decoupled, as paper and DeepSpeed).
 *   - Exclusion: COLL_OPTIM_NO_WEIGHT_DECAY drops the decay term, COLL_OPTIM_NO_TRUST the trust
 *     ratio (tensorflow/addons exclude_from_weight_decay / exclude_from_layer_adaptation).
 *     apex applies the trust ratio only to layers with weight_decay != 0 unless use_nvlamb:
 *     give COLL_OPTIM_NO_TRUST to the layers apex would put in a zero-decay group.
 * Element arithmetic is float32; the bias corrections and 1/q are applied as multiplications by
 * float reciprocals computed in double (apex and tensorflow/addons divide: results differ by at
 * most an ulp per operation).
 */
typedef struct {
    double beta1, beta2;         /**< in [0, 1) */
    double eps;                  /**< >= 0 */
    double weight_decay;         /**< >= 0 */
    coll_optim_lamb_bias_t bias; /**< bias correction */
    int eps_inside_sqrt;         /**< non-zero: sqrt(v_hat + eps) */
    double trust_min, trust_max; /**< clamp of the trust ratio; 0 and INFINITY: none */
    double phi_min, phi_max;     /**< clamp of ||w||; 0 and INFINITY: phi(z) = z */
    double max_grad_norm;        /**< > 0: global gradient-norm clipping; 0: off */
    double clip_eps;             /**< added to the global norm before comparing */
    int grad_averaging;          /**< non-zero: (1 - beta1) * g in m (default) */
    int l2;                      /**< non-zero: L2 weight decay on g (apex adam_w_mode=False) */
} coll_optim_lamb_params_t;

/**
 * @brief The paper's algorithm: betas (0.9, 0.999), eps 1e-6, weight_decay 0.01, bias PAPER,
 *        eps outside, no clamps, no clipping, grad_averaging on, decoupled decay.
 */
void coll_optim_lamb_params_init(coll_optim_lamb_params_t *p);

/**
 * @return COLL_OK; COLL_ERR_INVALID for a beta outside [0, 1), a negative or non-finite eps,
 *         weight decay, max_grad_norm or clip_eps, an unknown bias mode, trust_min > trust_max,
 *         phi_min > phi_max, a negative or NaN bound.
 */
coll_status_t coll_optim_lamb_params_check(const coll_optim_lamb_params_t *p);

/**
 * @brief The gradient divisor q of global clipping for this step (see max_grad_norm).
 * @return q > 1 when clipping applies, else exactly 1 (also with clipping off). Thread-safe.
 */
double coll_optim_lamb_clip(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st);

/**
 * @brief LAMB phase 1 on a shard: update the moments in place and return the shard's partial
 *        sums of squares of the weights (before the step) and of the update direction r.
 * @param [in] st step (>= 1) and, when clipping, grad_sumsq; lr is not used.
 * @param [in] flags The layer's COLL_OPTIM_NO_WEIGHT_DECAY (COLL_OPTIM_NO_TRUST is read by
 *        coll_optim_lamb_apply() only; the sums are returned anyway).
 * @param [in] w Weights (not written). @param [in] g Gradients.
 * @param [in,out] m, v Moments, zero before step 1.
 * @param [out] sumsq sumsq[0] = sum w^2, sumsq[1] = sum r^2, as coll_optim_sumsq() would give.
 * r is not stored: coll_optim_lamb_apply() recomputes it bit for bit from w, m and v, which
 * costs as much memory traffic as writing and reading it back and needs no scratch buffer.
 * Thread-safe; non-finite gradients propagate into m, v and the sums.
 */
void coll_optim_lamb_moments(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                             unsigned flags, const float *w, const float *g, float *m, float *v,
                             size_t n, double sumsq[2]);

/**
 * @brief The layer's trust ratio from its reduced sums (w_sumsq, u_sumsq = ||r||^2): 1 with
 *        COLL_OPTIM_NO_TRUST or a zero norm, else phi(||w||) / ||r|| clamped to
 *        [trust_min, trust_max]. Thread-safe.
 */
double coll_optim_lamb_trust(const coll_optim_lamb_params_t *p, const coll_optim_layer_t *l);

/**
 * @brief LAMB phase 2 on a shard: w = w - lr * trust * r (times DeepSpeed's step size with
 *        COLL_OPTIM_LAMB_BIAS_STEPSIZE), r recomputed from w, m and v as in phase 1.
 * @param [in] st The same step as for coll_optim_lamb_moments(), now with lr.
 * @param [in] l The same flags, and the sums of phase 1 reduced over every shard of the layer.
 * @param [in,out] w Weights. @param [in] m, v Moments after phase 1 of this step.
 * Thread-safe.
 */
void coll_optim_lamb_apply(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                           const coll_optim_layer_t *l, float *w, const float *m, const float *v,
                           size_t n);

#endif
