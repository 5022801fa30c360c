/**
 * @file optim.h
 * @brief The optimizers of a sharded (ZeRO-1 style) parameter service on fp32 master weights,
 *        SGD, AdamW, LARS and LAMB: their hyper-parameters, per-step and per-layer inputs, and
 *        the scalar arithmetic of a step (checks, trust ratios, clipping, the float
 *        coefficients its element loop reads), the same for every memory kind.
 *
 * The element loops and the partial sums of squares run through the executor of the buffers'
 * memory kind (kernels/exec.h: optim_* entries, which take the coefficients built here);
 * kernels/cpu/optim.h documents the host's, the reference, and its one-call updates.
 *
 * Counts are in elements (float32), never bytes. Every kernel is a pure function of its
 * arguments: no global state except the host's instruction set chosen once (coll_cpu_isa()),
 * so concurrent calls on disjoint buffers are safe. Buffers are the caller's; no kernel
 * allocates, keeps a pointer or fails. Unless a function says otherwise, its arrays must not
 * overlap.
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
 * @brief The layer's trust ratio from its reduced sums (w_sumsq, u_sumsq = ||r||^2): 1 with
 *        COLL_OPTIM_NO_TRUST or a zero norm, else phi(||w||) / ||r|| clamped to
 *        [trust_min, trust_max]. Thread-safe.
 */
double coll_optim_lamb_trust(const coll_optim_lamb_params_t *p, const coll_optim_layer_t *l);

/* ---- The coefficients of a step's element loop -------------------------------------------- */

/* Variant bits of the coefficient structs: loop-invariant choices, resolved outside the loop. */
#define COLL_OPTIM_COEF_WD 0x1u       /**< weight decay term present (on g, or in r for LAMB) */
#define COLL_OPTIM_COEF_MOM 0x2u      /**< SGD: momentum buffer in use */
#define COLL_OPTIM_COEF_FIRST 0x4u    /**< SGD: step 1, buf = d */
#define COLL_OPTIM_COEF_NESTEROV 0x8u /**< SGD, LARS: Nesterov momentum */
#define COLL_OPTIM_COEF_WD_G 0x10u    /**< LAMB: L2 decay added to the gradient first */
#define COLL_OPTIM_COEF_EPS_IN 0x20u  /**< LAMB: eps inside the square root */

/** SGD: u from d = g (+ wd * w), buf; w -= lr * u. */
typedef struct {
    float lr, wd, mu, damp1; /**< damp1 = 1 - dampening */
    unsigned variant;
} coll_optim_sgd_coef_t;

/** AdamW in PyTorch's operation order. */
typedef struct {
    float decay;     /**< 1 - lr * weight_decay */
    float b1, ob1;   /**< beta1, 1 - beta1 */
    float b2, ob2;   /**< beta2, 1 - beta2 */
    float sbc2;      /**< sqrt(1 - beta2^t) */
    float eps;
    float neg_step;  /**< -lr / (1 - beta1^t) */
} coll_optim_adamw_coef_t;

/** LARS: lr_s = lr * trust (or lr), d = g (+ wd * w). */
typedef struct {
    float lr_s, wd, mu;
    unsigned variant;
} coll_optim_lars_coef_t;

/** LAMB: moments from g * ginv (+ wd * w with WD_G), r = (m c1) / den (+ wd * w with WD). */
typedef struct {
    float b1, b3;   /**< beta1, 1 - beta1 or 1 (grad_averaging off) */
    float b2, ob2;  /**< beta2, 1 - beta2 */
    float c1, c2;   /**< bias corrections as reciprocals; 1 when not corrected in r */
    float ginv;     /**< 1 / clipping divisor, exactly 1 when not clipping */
    float eps, wd;
    float coef;     /**< phase 2 only: lr * trust (* DeepSpeed step size); 0 in phase 1 */
    unsigned variant;
} coll_optim_lamb_coef_t;

/**
 * @brief The coefficients of one SGD step: PyTorch's Python doubles rounded to float32 once,
 *        and the terms whose coefficient is 0 left out (PyTorch skips them).
 * @param [in] p Checked parameters. @param [in] st lr and step. @param [out] k The step.
 */
void coll_optim_sgd_coef(const coll_optim_sgd_params_t *p, const coll_optim_step_t *st,
                         coll_optim_sgd_coef_t *k);

/** @brief The coefficients of one AdamW step: bias corrections in double, rounded once. */
void coll_optim_adamw_coef(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                           coll_optim_adamw_coef_t *k);

/** @brief The coefficients of one LARS step of layer @p l, its trust ratio included. */
void coll_optim_lars_coef(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                          const coll_optim_layer_t *l, coll_optim_lars_coef_t *k);

/** @brief The coefficients of LAMB's phase 1 (the moments) for a layer with @p flags. */
void coll_optim_lamb_coef(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                          unsigned flags, coll_optim_lamb_coef_t *k);

/** @brief Phase 1's coefficients, and lr * trust of layer @p l (times DeepSpeed's step size
 *         with COLL_OPTIM_LAMB_BIAS_STEPSIZE) for LAMB's phase 2. */
void coll_optim_lamb_apply_coef(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                                const coll_optim_layer_t *l, coll_optim_lamb_coef_t *k);

#endif
