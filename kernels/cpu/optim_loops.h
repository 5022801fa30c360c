/*
 * The element loops of the optimizer kernels (optim_isa.h), compiled once per instruction set by
 * isa_<set>.c (isa.h). Not a public header.
 *
 * Each loop computes one element from that element's inputs and the coefficients only, with
 * the same operations in the same order whether the compiler vectorizes it or not: splitting a
 * call anywhere gives the same bits. Loop-invariant choices (weight decay, Nesterov, ...) are
 * constant arguments of always-inlined loops, so every combination is a loop without branches.
 */
#ifndef COLL_KERNELS_OPTIM_LOOPS_H
#define COLL_KERNELS_OPTIM_LOOPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/optim_isa.h"

#define OB_INLINE static inline __attribute__((always_inline))

/* ---- Sums of squares ---- */

/* LANES lanes of double as OB_NV vectors of this instruction set's width (COLL__VBYTES): lane j
 * is element j of vector j / OB_VD whatever the width, so every width adds the same squares
 * into the same lanes in the same order. */
#define OB_VD (COLL__VBYTES / sizeof(double))
#define OB_NV (COLL__OPTIM_LANES / OB_VD)
typedef double ob_vd __attribute__((vector_size(COLL__VBYTES)));
typedef float ob_vf __attribute__((vector_size(COLL__VBYTES / 2)));

/* acc[j] += x[i]^2, i = j mod LANES: whole rows of LANES elements, then the tail into the lanes
 * its indices name. */
OB_INLINE void ob_sumsq(double *acc, const float *x, size_t n)
{
    ob_vd s[OB_NV];
    size_t i = 0;

    memcpy(s, acc, sizeof(s));
    for (; i + COLL__OPTIM_LANES <= n; i += COLL__OPTIM_LANES) {
        for (size_t k = 0; k < OB_NV; k++) {
            ob_vf f;
            memcpy(&f, x + i + k * OB_VD, sizeof(f));
            ob_vd d = __builtin_convertvector(f, ob_vd);
            s[k] += d * d;
        }
    }
    memcpy(acc, s, sizeof(s));
    for (size_t j = 0; i + j < n; j++) {
        double d = x[i + j];
        acc[j] += d * d;
    }
}

static void ob_isa_sumsq(double *acc, const float *x, size_t n)
{
    ob_sumsq(acc, x, n);
}

/* Exponent all ones: an infinity or a NaN. An integer OR reduction, which vectorizes. */
static int ob_any_nonfinite(const float *x, size_t n)
{
    uint32_t bad = 0;

    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, x + i, sizeof(u));
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad != 0;
}

/* ---- SGD (PyTorch order: d = g + wd w; buf = buf mu + damp1 d; u = d + mu buf; w + -lr u) -- */

OB_INLINE void ob_sgd_loop(const coll_optim_sgd_coef_t *k, float *restrict w,
                           const float *restrict g, float *restrict buf, size_t n, const int wd,
                           const int mom, const int first, const int nesterov)
{
    const float lr = k->lr, kwd = k->wd, mu = k->mu, damp1 = k->damp1;

    for (size_t i = 0; i < n; i++) {
        float d = wd ? g[i] + kwd * w[i] : g[i];
        float u = d;
        if (mom) {
            float b = first ? d : buf[i] * mu + damp1 * d;
            buf[i] = b;
            u = nesterov ? d + mu * b : b;
        }
        w[i] = w[i] - lr * u;
    }
}

OB_INLINE void ob_sgd_wd(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                         size_t n, const int wd)
{
    const unsigned var = k->variant;
    const int first = (var & COLL_OPTIM_COEF_FIRST) != 0;
    const int nest = (var & COLL_OPTIM_COEF_NESTEROV) != 0;

    if (!(var & COLL_OPTIM_COEF_MOM)) {
        ob_sgd_loop(k, w, g, buf, n, wd, 0, 0, 0);
    } else if (first) {
        nest ? ob_sgd_loop(k, w, g, buf, n, wd, 1, 1, 1)
             : ob_sgd_loop(k, w, g, buf, n, wd, 1, 1, 0);
    } else {
        nest ? ob_sgd_loop(k, w, g, buf, n, wd, 1, 0, 1)
             : ob_sgd_loop(k, w, g, buf, n, wd, 1, 0, 0);
    }
}

static void ob_isa_sgd(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                       size_t n)
{
    if (k->variant & COLL_OPTIM_COEF_WD) {
        ob_sgd_wd(k, w, g, buf, n, 1);
    } else {
        ob_sgd_wd(k, w, g, buf, n, 0);
    }
}

/* ---- AdamW (PyTorch order: w *= decay; m, v; w + neg_step * m / (sqrt(v) / sbc2 + eps)) ---- */

static void ob_isa_adamw(const coll_optim_adamw_coef_t *k, float *restrict w,
                         const float *restrict g, float *restrict m, float *restrict v, size_t n)
{
    const float decay = k->decay, b1 = k->b1, ob1 = k->ob1, b2 = k->b2, ob2 = k->ob2;
    const float sbc2 = k->sbc2, eps = k->eps, neg_step = k->neg_step;

    for (size_t i = 0; i < n; i++) {
        float gi = g[i];
        float wi = w[i] * decay;
        float mi = m[i] * b1 + ob1 * gi;
        float vi = v[i] * b2 + ob2 * gi * gi;
        float den = sqrtf(vi) / sbc2 + eps;
        m[i] = mi;
        v[i] = vi;
        w[i] = wi + neg_step * mi / den;
    }
}

/* ---- LARS (MLPerf order, v = -mom: v = v mu + d lr_s; w - v, or (w - v mu) - d lr_s) ---- */

OB_INLINE void ob_lars_loop(const coll_optim_lars_coef_t *k, float *restrict w,
                            const float *restrict g, float *restrict v, size_t n, const int wd,
                            const int nesterov)
{
    const float lr_s = k->lr_s, kwd = k->wd, mu = k->mu;

    for (size_t i = 0; i < n; i++) {
        float d = wd ? g[i] + kwd * w[i] : g[i];
        float vi = v[i] * mu + d * lr_s;
        v[i] = vi;
        w[i] = nesterov ? (w[i] - vi * mu) - d * lr_s : w[i] - vi;
    }
}

static void ob_isa_lars(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v,
                        size_t n)
{
    const int wd = (k->variant & COLL_OPTIM_COEF_WD) != 0;

    if (k->variant & COLL_OPTIM_COEF_NESTEROV) {
        wd ? ob_lars_loop(k, w, g, v, n, 1, 1) : ob_lars_loop(k, w, g, v, n, 0, 1);
    } else {
        wd ? ob_lars_loop(k, w, g, v, n, 1, 0) : ob_lars_loop(k, w, g, v, n, 0, 0);
    }
}

/* ---- LAMB ---- */

/* The update direction r of one element from its weight and new moments. */
OB_INLINE float ob_lamb_r(const coll_optim_lamb_coef_t *k, float w, float m, float v,
                          const int wd, const int eps_in)
{
    float mh = m * k->c1, vh = v * k->c2;
    float den = eps_in ? sqrtf(vh + k->eps) : sqrtf(vh) + k->eps;
    float r = mh / den;
    return wd ? r + k->wd * w : r;
}

/* Elements per block of phase 1: r of a block goes to the stack, then into the sums. A
 * multiple of LANES, so lanes follow the element index across blocks. */
#define OB_LAMB_BLOCK 512

OB_INLINE void ob_lamb_block(const coll_optim_lamb_coef_t *k, const float *restrict w,
                             const float *restrict g, float *restrict m, float *restrict v,
                             float *restrict r, size_t n, const int wd, const int wd_g,
                             const int eps_in)
{
    const float b1 = k->b1, b3 = k->b3, b2 = k->b2, ob2 = k->ob2, ginv = k->ginv, kwd = k->wd;

    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * ginv;
        gi = wd_g ? gi + kwd * w[i] : gi;
        float mi = m[i] * b1 + b3 * gi;
        float vi = v[i] * b2 + ob2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        r[i] = ob_lamb_r(k, w[i], mi, vi, wd, eps_in);
    }
}

OB_INLINE void ob_lamb_moments_loop(const coll_optim_lamb_coef_t *k, const float *w,
                                    const float *g, float *m, float *v, size_t n, double *accw,
                                    double *accr, const int wd, const int wd_g, const int eps_in)
{
    float r[OB_LAMB_BLOCK];

    for (size_t off = 0; off < n; off += OB_LAMB_BLOCK) {
        size_t len = n - off < OB_LAMB_BLOCK ? n - off : OB_LAMB_BLOCK;
        ob_lamb_block(k, w + off, g + off, m + off, v + off, r, len, wd, wd_g, eps_in);
        ob_sumsq(accw, w + off, len);
        ob_sumsq(accr, r, len);
    }
}

static void ob_isa_lamb_moments(const coll_optim_lamb_coef_t *k, const float *w, const float *g,
                                float *m, float *v, size_t n, double *accw, double *accr)
{
    const int eps_in = (k->variant & COLL_OPTIM_COEF_EPS_IN) != 0;

    /* Decay is in r (WD), on the gradient (WD_G) or absent; the front end never sets both. */
    if (k->variant & COLL_OPTIM_COEF_WD_G) {
        eps_in ? ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 0, 1, 1)
               : ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 0, 1, 0);
    } else if (k->variant & COLL_OPTIM_COEF_WD) {
        eps_in ? ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 1, 0, 1)
               : ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 1, 0, 0);
    } else {
        eps_in ? ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 0, 0, 1)
               : ob_lamb_moments_loop(k, w, g, m, v, n, accw, accr, 0, 0, 0);
    }
}

OB_INLINE void ob_lamb_apply_loop(const coll_optim_lamb_coef_t *k, float *restrict w,
                                  const float *restrict m, const float *restrict v, size_t n,
                                  const int wd, const int eps_in)
{
    const float coef = k->coef;

    for (size_t i = 0; i < n; i++) {
        w[i] = w[i] - coef * ob_lamb_r(k, w[i], m[i], v[i], wd, eps_in);
    }
}

static void ob_isa_lamb_apply(const coll_optim_lamb_coef_t *k, float *w, const float *m,
                              const float *v, size_t n)
{
    const int wd = (k->variant & COLL_OPTIM_COEF_WD) != 0;

    if (k->variant & COLL_OPTIM_COEF_EPS_IN) {
        wd ? ob_lamb_apply_loop(k, w, m, v, n, 1, 1) : ob_lamb_apply_loop(k, w, m, v, n, 0, 1);
    } else {
        wd ? ob_lamb_apply_loop(k, w, m, v, n, 1, 0) : ob_lamb_apply_loop(k, w, m, v, n, 0, 0);
    }
}

#endif
