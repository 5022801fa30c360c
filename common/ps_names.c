/*
 * The parameter service's names and defaults (include/collective_ps.h), shared by the client
 * library and the daemon. The defaults are those of the kernels' references
 * (kernels/cpu/optim.h coll_optim_*_params_init(); tests/unit/common/test_ps_names.c checks
 * that they agree).
 */
#include <math.h>
#include <string.h>

#include <collective.h>

#include "common/arg.h"

static const char *const names[COLL_PS_OPTIMIZER_COUNT] = {"sgd", "adamw", "lars", "lamb"};

const char *coll_ps_optimizer_name(coll_ps_optimizer_t kind)
{
    return (unsigned)kind < COLL_PS_OPTIMIZER_COUNT ? names[kind] : "unknown";
}

coll_status_t coll_ps_optimizer_parse(const char *name, coll_ps_optimizer_t *kind)
{
    COLL_ARG_NONNULL(name, COLL_ERR_INVALID);
    COLL_ARG_NONNULL(kind, COLL_ERR_INVALID);
    for (unsigned k = 0; k < COLL_PS_OPTIMIZER_COUNT; k++) {
        if (strcmp(name, names[k]) == 0) {
            *kind = (coll_ps_optimizer_t)k;
            return COLL_OK;
        }
    }
    return COLL_ERR_INVALID;
}

void coll_ps_optim_init(coll_ps_optimizer_t kind, coll_ps_optim_t *o)
{
    COLL_ARG_NONNULL(o, );
    memset(o, 0, sizeof(*o));
    o->kind = kind;
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->trust_max = INFINITY;
    o->phi_max = INFINITY;
    o->grad_averaging = 1;
    o->lamb_bias = COLL_PS_LAMB_BIAS_PAPER;
    switch (kind) {
    case COLL_PS_ADAMW: /* torch.optim.AdamW */
        o->eps = 1e-8;
        o->weight_decay = 1e-2;
        break;
    case COLL_PS_LARS: /* the MLPerf reference */
        o->momentum = 0.9;
        o->weight_decay = 1e-4;
        o->eta = 1e-3;
        o->eps = 1e-7;
        break;
    case COLL_PS_LAMB: /* the paper */
        o->eps = 1e-6;
        o->weight_decay = 1e-2;
        break;
    default: /* torch.optim.SGD: plain SGD */
        break;
    }
}

/* Each optimizer's lr at the demo's global batch of 256 (include/collective_ps.h says where
 * each comes from): the references' values, square-root scaled to that batch as You et al.
 * (2020) scale LAMB's. */
static const double default_lr[COLL_PS_OPTIMIZER_COUNT] = {
    [COLL_PS_SGD] = 0.05,
    [COLL_PS_ADAMW] = 1e-3,
    [COLL_PS_LARS] = 1.77,  /* 10 x sqrt(256 / 8192) */
    [COLL_PS_LAMB] = 0.014, /* 0.02 x sqrt(256 / 512) */
};

double coll_ps_optim_default_lr(coll_ps_optimizer_t kind)
{
    return (unsigned)kind < COLL_PS_OPTIMIZER_COUNT ? default_lr[kind] : 0.0;
}

void coll_ps_schedule_constant(double lr, coll_ps_schedule_t *s)
{
    COLL_ARG_NONNULL(s, );
    memset(s, 0, sizeof(*s));
    s->base_lr = lr;
    s->warmup_start_lr = -1.0;
    s->gamma = 1.0;
}
