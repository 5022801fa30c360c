/**
 * @file optim_isa.h
 * @brief Internal interface between the optimizer front ends (optim_<name>.c), which turn
 *        hyper-parameters and per-step scalars into float coefficients, and the element loops
 *        of each instruction set (optim_loops.h, compiled per set: isa.h).
 *
 * The loops are plain C that the compiler vectorizes, plus GCC/Clang vector extensions for the
 * double-precision sums of squares (which a compiler may not vectorize itself, since that would
 * reorder additions). Every instruction set runs the same source, so all of them produce the
 * same bits; the build forbids fused multiply-add contraction (-ffp-contract=off).
 */
#ifndef COLL_KERNELS_OPTIM_ISA_H
#define COLL_KERNELS_OPTIM_ISA_H

#include <stddef.h>

/* Variant bits of the coefficient structs: loop-invariant choices, resolved outside the loop. */
#define COLL__OPTIM_WD 0x1u       /* weight decay term present (on g, or in r for LAMB) */
#define COLL__OPTIM_MOM 0x2u      /* SGD: momentum buffer in use */
#define COLL__OPTIM_FIRST 0x4u    /* SGD: step 1, buf = d */
#define COLL__OPTIM_NESTEROV 0x8u /* SGD, LARS: Nesterov momentum */
#define COLL__OPTIM_WD_G 0x10u    /* LAMB: L2 decay added to the gradient before the moments */
#define COLL__OPTIM_EPS_IN 0x20u  /* LAMB: eps inside the square root */

/** Sums of squares: lanes of double, element i of a call in lane i mod COLL__OPTIM_LANES. */
#define COLL__OPTIM_LANES 16

/** SGD: u from d = g (+ wd * w), buf; w -= lr * u. */
typedef struct {
    float lr, wd, mu, damp1; /* damp1 = 1 - dampening */
    unsigned variant;
} coll__optim_sgd_k_t;

/** AdamW in PyTorch's operation order. */
typedef struct {
    float decay;     /* 1 - lr * weight_decay */
    float b1, ob1;   /* beta1, 1 - beta1 */
    float b2, ob2;   /* beta2, 1 - beta2 */
    float sbc2;      /* sqrt(1 - beta2^t) */
    float eps;
    float neg_step;  /* -lr / (1 - beta1^t) */
} coll__optim_adamw_k_t;

/** LARS: lr_s = lr * trust (or lr), d = g (+ wd * w). */
typedef struct {
    float lr_s, wd, mu;
    unsigned variant;
} coll__optim_lars_k_t;

/** LAMB: moments from g * ginv (+ wd * w with WD_G), r = (m c1) / den (+ wd * w with WD). */
typedef struct {
    float b1, b3;   /* beta1, 1 - beta1 or 1 (grad_averaging off) */
    float b2, ob2;  /* beta2, 1 - beta2 */
    float c1, c2;   /* bias corrections as reciprocals; 1 when not corrected in r */
    float ginv;     /* 1 / clipping divisor, exactly 1 when not clipping */
    float eps, wd;
    float coef;     /* apply only: lr * trust (* DeepSpeed step size) */
    unsigned variant;
} coll__optim_lamb_k_t;

/** The element loops of one instruction set (a part of coll__isa_t). */
typedef struct {
    /* acc[j] += x[i]^2 for i = j mod LANES over n elements (acc of LANES doubles). */
    void (*sumsq)(double *acc, const float *x, size_t n);
    /* Non-zero when some element of x is infinite or NaN. */
    int (*any_nonfinite)(const float *x, size_t n);
    void (*sgd)(const coll__optim_sgd_k_t *k, float *w, const float *g, float *buf, size_t n);
    void (*adamw)(const coll__optim_adamw_k_t *k, float *w, const float *g, float *m, float *v,
                  size_t n);
    void (*lars)(const coll__optim_lars_k_t *k, float *w, const float *g, float *v, size_t n);
    /* Moments in place; accw, accr: LANES doubles each, as sumsq() of w and of r. */
    void (*lamb_moments)(const coll__optim_lamb_k_t *k, const float *w, const float *g,
                         float *m, float *v, size_t n, double *accw, double *accr);
    void (*lamb_apply)(const coll__optim_lamb_k_t *k, float *w, const float *m, const float *v,
                       size_t n);
} coll__optim_loops_t;

/** Fixed-order tree sum of LANES lane sums. */
double coll__optim_lanes_total(const double *acc);

#endif
