/*
 * SGD with momentum in torch.optim.SGD's semantics (optim.h): the float coefficients PyTorch's
 * kernels would see (Python doubles rounded to float32), then the element loop.
 */
#include <math.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

coll_status_t coll_optim_sgd_params_check(const coll_optim_sgd_params_t *p)
{
    if (!(p->momentum >= 0 && isfinite(p->momentum)) ||
        !(p->weight_decay >= 0 && isfinite(p->weight_decay)) || !isfinite(p->dampening)) {
        return COLL_ERR_INVALID;
    }
    /* torch.optim.SGD: "Nesterov momentum requires a momentum and zero dampening". */
    if (p->nesterov && (p->momentum <= 0 || p->dampening != 0)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

void coll_optim_sgd_update(const coll_optim_sgd_params_t *p, const coll_optim_step_t *st,
                           float *w, const float *g, float *buf, size_t n)
{
    coll__optim_sgd_k_t k = {
        .lr = (float)st->lr,
        .wd = (float)p->weight_decay,
        .mu = (float)p->momentum,
        .damp1 = (float)(1.0 - p->dampening),
    };

    if (n == 0) {
        return;
    }
    /* PyTorch skips each term whose coefficient is 0 rather than adding a zero. */
    k.variant = (p->weight_decay != 0 ? COLL__OPTIM_WD : 0) |
                (p->momentum != 0 ? COLL__OPTIM_MOM : 0) |
                (st->step <= 1 ? COLL__OPTIM_FIRST : 0) |
                (p->nesterov ? COLL__OPTIM_NESTEROV : 0);
    coll__isa()->optim.sgd(&k, w, g, buf, n);
}
