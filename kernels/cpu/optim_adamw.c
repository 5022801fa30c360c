/*
 * AdamW in torch.optim.AdamW's semantics (optim.h): per-step scalars in double as PyTorch's
 * Python code computes them, rounded to float32 once, then the element loop.
 */
#include <math.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

void coll_optim_adamw_params_init(coll_optim_adamw_params_t *p)
{
    *p = (coll_optim_adamw_params_t){
        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2};
}

static int beta_ok(double b)
{
    return b >= 0 && b < 1;
}

static int nonneg_finite(double x)
{
    return x >= 0 && isfinite(x);
}

coll_status_t coll_optim_adamw_params_check(const coll_optim_adamw_params_t *p)
{
    if (!beta_ok(p->beta1) || !beta_ok(p->beta2) || !nonneg_finite(p->eps) ||
        !nonneg_finite(p->weight_decay)) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

void coll_optim_adamw_update(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                             float *w, const float *g, float *m, float *v, size_t n)
{
    const double t = (double)st->step;
    const double bc1 = 1.0 - pow(p->beta1, t), bc2 = 1.0 - pow(p->beta2, t);
    const coll__optim_adamw_k_t k = {
        .decay = (float)(1.0 - st->lr * p->weight_decay),
        .b1 = (float)p->beta1,
        .ob1 = (float)(1.0 - p->beta1),
        .b2 = (float)p->beta2,
        .ob2 = (float)(1.0 - p->beta2),
        .sbc2 = (float)sqrt(bc2),
        .eps = (float)p->eps,
        .neg_step = (float)-(st->lr / bc1),
    };

    if (n > 0) {
        coll__isa()->optim.adamw(&k, w, g, m, v, n);
    }
}
