/**
 * @file optim.h
 * @brief The host's optimizer kernels (the host executor's optim_* entries, kernels/exec.h):
 *        partial sums of squares, the element loops of SGD, AdamW, LARS and LAMB on fp32
 *        master weights in host memory, and one-call updates for callers that own host buffers
 *        (the trainer, tests, benchmarks).
 *
 * The optimizers' semantics, inputs, sharding and precision: kernels/optim.h, which also builds
 * the coefficients every step function here takes. Every function is thread-safe on disjoint
 * buffers, allocates nothing and runs on the instruction set chosen once for every host kernel
 * (isa.h), each of which gives the same bits.
 */
#ifndef COLL_KERNELS_CPU_OPTIM_H
#define COLL_KERNELS_CPU_OPTIM_H

#include "kernels/optim.h"

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

/* ---- Element loops on a step's coefficients (kernels/optim.h) ---------------------------- */

/** @brief One SGD step on @p n elements in place: w, and buf as coll_optim_sgd_update(). */
void coll_optim_sgd_step(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                         size_t n);

/** @brief One AdamW step on @p n elements in place (w, m, v as coll_optim_adamw_update()). */
void coll_optim_adamw_step(const coll_optim_adamw_coef_t *k, float *w, const float *g, float *m,
                           float *v, size_t n);

/** @brief One LARS step on @p n elements in place (w, v as coll_optim_lars_update()). */
void coll_optim_lars_step(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v,
                          size_t n);

/** @brief LAMB phase 1 on @p n elements: moments in place, sums as coll_optim_lamb_moments(). */
void coll_optim_lamb_moments_step(const coll_optim_lamb_coef_t *k, const float *w,
                                  const float *g, float *m, float *v, size_t n,
                                  double sumsq[2]);

/** @brief LAMB phase 2 on @p n elements: w in place, as coll_optim_lamb_apply(). */
void coll_optim_lamb_apply_step(const coll_optim_lamb_coef_t *k, float *w, const float *m,
                                const float *v, size_t n);

/* ---- One-call updates: the coefficients (kernels/optim.h), then the step ------------------- */

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

/**
 * @brief One AdamW step on @p n elements in place.
 * @param [in] st lr and step (t >= 1; grad_sumsq unused).
 * @param [in,out] w Weights. @param [in] g Gradients.
 * @param [in,out] m, v First and second moments, zero before step 1.
 * Thread-safe; non-finite gradients propagate (see the file comment).
 */
void coll_optim_adamw_update(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                             float *w, const float *g, float *m, float *v, size_t n);

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
