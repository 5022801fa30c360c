/*
 * The optimizers' scalar arithmetic (optim.h): hyper-parameter defaults and checks, trust
 * ratios, clipping, and the float coefficients of a step. Per-step scalars are computed in
 * double, as PyTorch's Python code and the references compute them, and rounded to float32
 * once; the element loops that read them belong to the executors (kernels/exec.h).
 */
#include <math.h>

#include "kernels/optim.h"

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

/* A layer's norms ||w|| and ||u|| from its reduced sums. @return 0 when its trust ratio is 1:
 * the layer is excluded from it, or a norm is 0 or NaN. */
static int layer_norms(const coll_optim_layer_t *l, double *wn, double *un)
{
    if (l->flags & COLL_OPTIM_NO_TRUST) {
        return 0;
    }
    *wn = sqrt(l->w_sumsq);
    *un = sqrt(l->u_sumsq);
    return *wn > 0 && *un > 0;
}

/* ---- SGD (torch.optim.SGD) --------------------------------------------------------------- */

coll_status_t coll_optim_sgd_params_check(const coll_optim_sgd_params_t *p)
{
    if (!(p->momentum >= 0 && isfinite(p->momentum)) || !nonneg_finite(p->weight_decay) ||
        !isfinite(p->dampening)) {
        return COLL_ERR_INVALID;
    }
    /* torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening". */
    if (p->nesterov && (p->momentum <= 0 || p->dampening != 0)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

void coll_optim_sgd_coef(const coll_optim_sgd_params_t *p, const coll_optim_step_t *st,
                         coll_optim_sgd_coef_t *k)
{
    *k = (coll_optim_sgd_coef_t){
        .lr = (float)st->lr,
        .wd = (float)p->weight_decay,
        .mu = (float)p->momentum,
        .damp1 = (float)(1.0 - p->dampening),
    };
    /* PyTorch skips each term whose coefficient is 0 rather than adding a zero. */
    k->variant = (p->weight_decay != 0 ? COLL_OPTIM_COEF_WD : 0) |
                 (p->momentum != 0 ? COLL_OPTIM_COEF_MOM : 0) |
                 (st->step <= 1 ? COLL_OPTIM_COEF_FIRST : 0) |
                 (p->nesterov ? COLL_OPTIM_COEF_NESTEROV : 0);
}

/* ---- AdamW (torch.optim.AdamW) ----------------------------------------------------------- */

void coll_optim_adamw_params_init(coll_optim_adamw_params_t *p)
{
    *p = (coll_optim_adamw_params_t){
        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}

coll_status_t coll_optim_adamw_params_check(const coll_optim_adamw_params_t *p)
{
    if (!beta_ok(p->beta1) || !beta_ok(p->beta2) || !nonneg_finite(p->eps) ||
        !nonneg_finite(p->weight_decay)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

void coll_optim_adamw_coef(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                           coll_optim_adamw_coef_t *k)
{
    const double t = (double)st->step;
    const double bc1 = 1.0 - pow(p->beta1, t), bc2 = 1.0 - pow(p->beta2, t);

    *k = (coll_optim_adamw_coef_t){
        .decay = (float)(1.0 - st->lr * p->weight_decay),
        .b1 = (float)p->beta1,
        .ob1 = (float)(1.0 - p->beta1),
        .b2 = (float)p->beta2,
        .ob2 = (float)(1.0 - p->beta2),
        .sbc2 = (float)sqrt(bc2),
        .eps = (float)p->eps,
        .neg_step = (float)-(st->lr / bc1),
    };
}

/* ---- LARS (the MLPerf reference) ----------------------------------------------------------- */

void coll_optim_lars_params_init(coll_optim_lars_params_t *p)
{
    *p = (coll_optim_lars_params_t){
        .momentum = 0.9, .weight_decay = 1e-4, .eta = 1e-3, .eps = 1e-7, .nesterov = 0};
}

coll_status_t coll_optim_lars_params_check(const coll_optim_lars_params_t *p)
{
    if (!(p->momentum >= 0 && p->momentum <= 1) || !(p->eta > 0 && isfinite(p->eta)) ||
        !nonneg_finite(p->weight_decay) || !nonneg_finite(p->eps)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

/* The decay this layer gets: none when excluded from it. */
static double lars_layer_wd(const coll_optim_lars_params_t *p, unsigned flags)
{
    return (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0.0 : p->weight_decay;
}

double coll_optim_lars_trust(const coll_optim_lars_params_t *p, const coll_optim_layer_t *l)
{
    double wn, gn;

    /* The reference's tf.where(w_norm > 0, tf.where(g_norm > 0, ..., 1), 1); NaN gives 1 too. */
    if (!layer_norms(l, &wn, &gn)) {
        return 1.0;
    }
    return p->eta * wn / (gn + lars_layer_wd(p, l->flags) * wn + p->eps);
}

void coll_optim_lars_coef(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                          const coll_optim_layer_t *l, coll_optim_lars_coef_t *k)
{
    const double wd = lars_layer_wd(p, l->flags);

    *k = (coll_optim_lars_coef_t){
        .lr_s = (float)(st->lr * coll_optim_lars_trust(p, l)),
        .wd = (float)wd,
        .mu = (float)p->momentum,
        .variant = (wd != 0 ? COLL_OPTIM_COEF_WD : 0) |
                   (p->nesterov ? COLL_OPTIM_COEF_NESTEROV : 0),
    };
}

/* ---- LAMB (the paper, with apex's and DeepSpeed's options) -------------------------------- */

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

double coll_optim_lamb_trust(const coll_optim_lamb_params_t *p, const coll_optim_layer_t *l)
{
    double wn, rn;

    if (!layer_norms(l, &wn, &rn)) {
        return 1.0;
    }
    const double phi = fmin(fmax(wn, p->phi_min), p->phi_max);
    return fmin(fmax(phi / rn, p->trust_min), p->trust_max);
}

void coll_optim_lamb_coef(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                          unsigned flags, coll_optim_lamb_coef_t *k)
{
    const double t = (double)st->step;
    const int corrected = p->bias == COLL_OPTIM_LAMB_BIAS_PAPER;
    const int decays = p->weight_decay != 0 && !(flags & COLL_OPTIM_NO_WEIGHT_DECAY);

    *k = (coll_optim_lamb_coef_t){
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
        k->variant |= p->l2 ? COLL_OPTIM_COEF_WD_G : COLL_OPTIM_COEF_WD;
    }
    k->variant |= p->eps_inside_sqrt ? COLL_OPTIM_COEF_EPS_IN : 0;
}

void coll_optim_lamb_apply_coef(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                                const coll_optim_layer_t *l, coll_optim_lamb_coef_t *k)
{
    double scale = 1.0;

    coll_optim_lamb_coef(p, st, l->flags, k);
    if (p->bias == COLL_OPTIM_LAMB_BIAS_STEPSIZE) {
        /* DeepSpeed's step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t). */
        const double t = (double)st->step;
        scale = sqrt(1.0 - pow(p->beta2, t)) / (1.0 - pow(p->beta1, t));
    }
    k->coef = (float)(st->lr * coll_optim_lamb_trust(p, l) * scale);
}
