/*
 * LAMB (optim.h): the paper's algorithm with the options in which apex FusedLAMB and DeepSpeed
 * FusedLamb differ. Per-step scalars in double, rounded to float once; phase 1 (moments and
 * partial sums) and phase 2 (apply with the reduced sums) recompute r with the same loop.
 */
#include <math.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

void coll_optim_lamb_params_init(coll_optim_lamb_params_t *p)
{
    *p = (coll_optim_lamb_params_t){
        .beta1 = 0.9,
        .beta2 = 0.999,
        .eps = 1e-6,
        .weight_decay = 0.01,
        .bias = COLL_OPTIM_LAMB_BIAS_PAPER,
        .eps_inside_sqrt = 0,
        .trust_min = 0,
        .trust_max = INFINITY,
        .phi_min = 0,
        .phi_max = INFINITY,
        .max_grad_norm = 0,
        .clip_eps = 0,
        .grad_averaging = 1,
        .l2 = 0,
    };
}

static int beta_ok(double b)
{
    return b >= 0 && b < 1;
}

static int nonneg_finite(double x)
{
    return x >= 0 && isfinite(x);
}

/* lo <= hi, both >= 0 and not NaN (hi may be +inf). */
static int bounds_ok(double lo, double hi)
{
    return lo >= 0 && hi >= 0 && lo <= hi;
}

coll_status_t coll_optim_lamb_params_check(const coll_optim_lamb_params_t *p)
{
    if (!beta_ok(p->beta1) || !beta_ok(p->beta2) || !nonneg_finite(p->eps) ||
        !nonneg_finite(p->weight_decay) || !nonneg_finite(p->max_grad_norm) ||
        !nonneg_finite(p->clip_eps)) {
        return COLL_ERR_INVALID;
    }
    if (p->bias != COLL_OPTIM_LAMB_BIAS_PAPER && p->bias != COLL_OPTIM_LAMB_BIAS_NONE &&
        p->bias != COLL_OPTIM_LAMB_BIAS_STEPSIZE) {
        return COLL_ERR_INVALID;
    }
    if (!bounds_ok(p->trust_min, p->trust_max) || !bounds_ok(p->phi_min, p->phi_max)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

double coll_optim_lamb_clip(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st)
{
    if (!(p->max_grad_norm > 0)) {
        return 1.0;
    }
    const double q = (sqrt(st->grad_sumsq) + p->clip_eps) / p->max_grad_norm;
    return q > 1 ? q : 1.0;
}

/* The coefficients shared by both phases; coef (phase 2 only) is left 0. */
static coll__optim_lamb_k_t lamb_coeffs(const coll_optim_lamb_params_t *p,
                                        const coll_optim_step_t *st, unsigned flags)
{
    const double t = (double)st->step;
    const int corrected = p->bias == COLL_OPTIM_LAMB_BIAS_PAPER;
    const int decays = p->weight_decay != 0 && !(flags & COLL_OPTIM_NO_WEIGHT_DECAY);
    coll__optim_lamb_k_t k = {
        .b1 = (float)p->beta1,
        .b3 = p->grad_averaging ? (float)(1.0 - p->beta1) : 1.0f,
        .b2 = (float)p->beta2,
        .ob2 = (float)(1.0 - p->beta2),
        .c1 = corrected ? (float)(1.0 / (1.0 - pow(p->beta1, t))) : 1.0f,
        .c2 = corrected ? (float)(1.0 / (1.0 - pow(p->beta2, t))) : 1.0f,
        .ginv = (float)(1.0 / coll_optim_lamb_clip(p, st)),
        .eps = (float)p->eps,
        .wd = (float)p->weight_decay,
    };

    if (decays) {
        k.variant |= p->l2 ? COLL__OPTIM_WD_G : COLL__OPTIM_WD;
    }
    k.variant |= p->eps_inside_sqrt ? COLL__OPTIM_EPS_IN : 0;
    return k;
}

void coll_optim_lamb_moments(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                             unsigned flags, const float *w, const float *g, float *m, float *v,
                             size_t n, double sumsq[2])
{
    const coll__optim_lamb_k_t k = lamb_coeffs(p, st, flags);
    double accw[COLL__OPTIM_LANES] = {0}, accr[COLL__OPTIM_LANES] = {0};

    if (n > 0) {
        coll__isa()->optim.lamb_moments(&k, w, g, m, v, n, accw, accr);
    }
    sumsq[0] = coll__optim_lanes_total(accw);
    sumsq[1] = coll__optim_lanes_total(accr);
}

double coll_optim_lamb_trust(const coll_optim_lamb_params_t *p, const coll_optim_layer_t *l)
{
    if (l->flags & COLL_OPTIM_NO_TRUST) {
        return 1.0;
    }
    const double wn = sqrt(l->w_sumsq), rn = sqrt(l->u_sumsq);
    if (!(wn > 0 && rn > 0)) {
        return 1.0;
    }
    const double phi = fmin(fmax(wn, p->phi_min), p->phi_max);
    return fmin(fmax(phi / rn, p->trust_min), p->trust_max);
}

void coll_optim_lamb_apply(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                           const coll_optim_layer_t *l, float *w, const float *m, const float *v,
                           size_t n)
{
    coll__optim_lamb_k_t k = lamb_coeffs(p, st, l->flags);
    double scale = 1.0;

    if (p->bias == COLL_OPTIM_LAMB_BIAS_STEPSIZE) {
        /* DeepSpeed's step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t). */
        const double t = (double)st->step;
        scale = sqrt(1.0 - pow(p->beta2, t)) / (1.0 - pow(p->beta1, t));
    }
    k.coef = (float)(st->lr * coll_optim_lamb_trust(p, l) * scale);
    if (n > 0) {
        coll__isa()->optim.lamb_apply(&k, w, m, v, n);
    }
}
