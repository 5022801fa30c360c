/**
 * @file optim_isa.h
 * @brief Internal interface between the host's optimizer steps (optim_step.c), which take the
 *        float coefficients of a step (kernels/optim.h), and the element loops of each
 *        instruction set (optim_loops.h, compiled per set: isa.h).
 *
 * The loops are plain C that the compiler vectorizes, plus GCC/Clang vector extensions for the
 * double-precision sums of squares (which a compiler may not vectorize itself, since that would
 * reorder additions). Every instruction set runs the same source, so all of them produce the
 * same bits; the build forbids fused multiply-add contraction (-ffp-contract=off).
 */
#ifndef COLL_KERNELS_OPTIM_ISA_H
#define COLL_KERNELS_OPTIM_ISA_H

#include <stddef.h>

#include "kernels/optim.h"

/** Sums of squares: lanes of double, element i of a call in lane i mod COLL__OPTIM_LANES. */
#define COLL__OPTIM_LANES 16

/** The element loops of one instruction set (a part of coll__isa_t). */
typedef struct {
    /* acc[j] += x[i]^2 for i = j mod LANES over n elements (acc of LANES doubles). */
    void (*sumsq)(double *acc, const float *x, size_t n);
    /* Non-zero when some element of x is infinite or NaN. */
    int (*any_nonfinite)(const float *x, size_t n);
    void (*sgd)(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf, size_t n);
    void (*adamw)(const coll_optim_adamw_coef_t *k, float *w, const float *g, float *m, float *v,
                  size_t n);
    void (*lars)(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v, size_t n);
    /* Moments in place; accw, accr: LANES doubles each, as sumsq() of w and of r. */
    void (*lamb_moments)(const coll_optim_lamb_coef_t *k, const float *w, const float *g,
                         float *m, float *v, size_t n, double *accw, double *accr);
    void (*lamb_apply)(const coll_optim_lamb_coef_t *k, float *w, const float *m, const float *v,
                       size_t n);
} coll__optim_loops_t;

/** Fixed-order tree sum of LANES lane sums. */
double coll__optim_lanes_total(const double *acc);

#endif
