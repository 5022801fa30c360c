/*
 * LARS as in the MLPerf reference (optim.h): the trust ratio from the layer's reduced sums of
 * squares, in double, then the momentum loop with lr * trust rounded to float once.
 */
#include <math.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

void coll_optim_lars_params_init(coll_optim_lars_params_t *p)
{
    *p = (coll_optim_lars_params_t){
        .momentum = 0.9, .weight_decay = 1e-4, .eta = 1e-3, .eps = 1e-7, .nesterov = 0};
}

coll_status_t coll_optim_lars_params_check(const coll_optim_lars_params_t *p)
{
    if (!(p->momentum >= 0 && p->momentum <= 1) || !(p->eta > 0 && isfinite(p->eta)) ||
        !(p->weight_decay >= 0 && isfinite(p->weight_decay)) ||
        !(p->eps >= 0 && isfinite(p->eps))) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

/* The decay this layer gets: none when excluded from it. */
static double layer_wd(const coll_optim_lars_params_t *p, unsigned flags)
{
    return (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0.0 : p->weight_decay;
}

double coll_optim_lars_trust(const coll_optim_lars_params_t *p, const coll_optim_layer_t *l)
{
    if (l->flags & COLL_OPTIM_NO_TRUST) {
        return 1.0;
    }
    const double wn = sqrt(l->w_sumsq), gn = sqrt(l->u_sumsq);
    /* The reference's tf.where(w_norm > 0, tf.where(g_norm > 0, ..., 1), 1); NaN gives 1 too. */
    if (!(wn > 0 && gn > 0)) {
        return 1.0;
    }
    return p->eta * wn / (gn + layer_wd(p, l->flags) * wn + p->eps);
}

void coll_optim_lars_update(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                            const coll_optim_layer_t *l, float *w, const float *g, float *v,
                            size_t n)
{
    const double wd = layer_wd(p, l->flags);
    const coll__optim_lars_k_t k = {
        .lr_s = (float)(st->lr * coll_optim_lars_trust(p, l)),
        .wd = (float)wd,
        .mu = (float)p->momentum,
        .variant = (wd != 0 ? COLL__OPTIM_WD : 0) | (p->nesterov ? COLL__OPTIM_NESTEROV : 0),
    };

    if (n > 0) {
        coll__isa()->optim.lars(&k, w, g, v, n);
    }
}
