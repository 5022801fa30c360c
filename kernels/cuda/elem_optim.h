/**
 * @file elem_optim.h
 * @brief The optimizers' element functions (hd.h): one element's update of SGD, AdamW, LARS and
 *        LAMB on a step's float coefficients (kernels/optim.h), and the terms of the sums of
 *        squares, with the host's operations in the host's order (kernels/cpu/optim_loops.h):
 *        the same bits. The loop-invariant choices (weight decay, momentum, Nesterov, ...) are
 *        arguments that the kernels pass as constants.
 *
 * The sums of squares themselves add in another order on the device (kernels/cuda/README.md):
 * squares are exact in double, so the sums agree to the accuracy kernels/optim.h states.
 */
#ifndef COLL_KERNELS_CUDA_ELEM_OPTIM_H
#define COLL_KERNELS_CUDA_ELEM_OPTIM_H

#include "kernels/cuda/hd.h"
#include "kernels/optim.h"

/** @return x^2 in double (exact): a term of a sum of squares. */
COLL_HD double coll_hd_sq(float x)
{
    double d = x;
    return COLL_DMUL(d, d);
}

/** @return Non-zero when @p x is an infinity or a NaN (its exponent all ones). */
COLL_HD int coll_hd_nonfinite(float x)
{
    return (coll_hd_f32_bits(x) & 0x7f800000u) == 0x7f800000u;
}

/* SGD, PyTorch's order: d = g + wd w; buf = buf mu + damp1 d (d on the first step);
 * u = d + mu buf (Nesterov) or buf; w - lr u. */
COLL_HD void coll_hd_sgd(const coll_optim_sgd_coef_t *k, float *w, float g, float *buf, int wd,
                         int mom, int first, int nesterov)
{
    float d = wd ? COLL_FADD(g, COLL_FMUL(k->wd, *w)) : g;
    float u = d;

    if (mom) {
        float b = first ? d : COLL_FADD(COLL_FMUL(*buf, k->mu), COLL_FMUL(k->damp1, d));
        *buf = b;
        u = nesterov ? COLL_FADD(d, COLL_FMUL(k->mu, b)) : b;
    }
    *w = COLL_FSUB(*w, COLL_FMUL(k->lr, u));
}

/* AdamW, PyTorch's order: w *= decay; m, v; w + neg_step * m / (sqrt(v) / sbc2 + eps). */
COLL_HD void coll_hd_adamw(const coll_optim_adamw_coef_t *k, float *w, float g, float *m,
                           float *v)
{
    float wi = COLL_FMUL(*w, k->decay);
    float mi = COLL_FADD(COLL_FMUL(*m, k->b1), COLL_FMUL(k->ob1, g));
    float vi = COLL_FADD(COLL_FMUL(*v, k->b2), COLL_FMUL(COLL_FMUL(k->ob2, g), g));
    float den = COLL_FADD(COLL_FDIV(COLL_FSQRT(vi), k->sbc2), k->eps);

    *m = mi;
    *v = vi;
    *w = COLL_FADD(wi, COLL_FDIV(COLL_FMUL(k->neg_step, mi), den));
}

/* LARS, MLPerf's order with v = -mom: v = v mu + d lr_s; w - v, or (w - v mu) - d lr_s. */
COLL_HD void coll_hd_lars(const coll_optim_lars_coef_t *k, float *w, float g, float *v, int wd,
                          int nesterov)
{
    float d = wd ? COLL_FADD(g, COLL_FMUL(k->wd, *w)) : g;
    float vi = COLL_FADD(COLL_FMUL(*v, k->mu), COLL_FMUL(d, k->lr_s));

    *v = vi;
    *w = nesterov ? COLL_FSUB(COLL_FSUB(*w, COLL_FMUL(vi, k->mu)), COLL_FMUL(d, k->lr_s))
                  : COLL_FSUB(*w, vi);
}

/** @return LAMB's update direction r of one element from its weight and new moments. */
COLL_HD float coll_hd_lamb_r(const coll_optim_lamb_coef_t *k, float w, float m, float v, int wd,
                             int eps_in)
{
    float mh = COLL_FMUL(m, k->c1), vh = COLL_FMUL(v, k->c2);
    float den = eps_in ? COLL_FSQRT(COLL_FADD(vh, k->eps)) : COLL_FADD(COLL_FSQRT(vh), k->eps);
    float r = COLL_FDIV(mh, den);
    return wd ? COLL_FADD(r, COLL_FMUL(k->wd, w)) : r;
}

/** @return LAMB phase 1 of one element: the moments in place, r returned (for its square). */
COLL_HD float coll_hd_lamb_moments(const coll_optim_lamb_coef_t *k, float w, float g, float *m,
                                   float *v, int wd, int wd_g, int eps_in)
{
    float gi = COLL_FMUL(g, k->ginv);
    gi = wd_g ? COLL_FADD(gi, COLL_FMUL(k->wd, w)) : gi;
    float mi = COLL_FADD(COLL_FMUL(*m, k->b1), COLL_FMUL(k->b3, gi));
    float vi = COLL_FADD(COLL_FMUL(*v, k->b2), COLL_FMUL(COLL_FMUL(k->ob2, gi), gi));

    *m = mi;
    *v = vi;
    return coll_hd_lamb_r(k, w, mi, vi, wd, eps_in);
}

/** @return LAMB phase 2 of one element: w - coef * r, r recomputed from w, m and v. */
COLL_HD float coll_hd_lamb_apply(const coll_optim_lamb_coef_t *k, float w, float m, float v,
                                 int wd, int eps_in)
{
    return COLL_FSUB(w, COLL_FMUL(k->coef, coll_hd_lamb_r(k, w, m, v, wd, eps_in)));
}

#endif
