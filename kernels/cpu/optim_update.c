/*
 * One-call optimizer updates on host memory (optim.h): a step's coefficients (kernels/optim.h),
 * then the host's element loop. For callers that own host buffers; the parameter service goes
 * through the executor of its pool's memory kind instead (kernels/exec.h).
 */
#include "kernels/cpu/optim.h"

void coll_optim_sgd_update(const coll_optim_sgd_params_t *p, const coll_optim_step_t *st,
                           float *w, const float *g, float *buf, size_t n)
{
    coll_optim_sgd_coef_t k;

    coll_optim_sgd_coef(p, st, &k);
    coll_optim_sgd_step(&k, w, g, buf, n);
}

void coll_optim_adamw_update(const coll_optim_adamw_params_t *p, const coll_optim_step_t *st,
                             float *w, const float *g, float *m, float *v, size_t n)
{
    coll_optim_adamw_coef_t k;

    coll_optim_adamw_coef(p, st, &k);
    coll_optim_adamw_step(&k, w, g, m, v, n);
}

void coll_optim_lars_update(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                            const coll_optim_layer_t *l, float *w, const float *g, float *v,
                            size_t n)
{
    coll_optim_lars_coef_t k;

    coll_optim_lars_coef(p, st, l, &k);
    coll_optim_lars_step(&k, w, g, v, n);
}

void coll_optim_lamb_moments(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                             unsigned flags, const float *w, const float *g, float *m, float *v,
                             size_t n, double sumsq[2])
{
    coll_optim_lamb_coef_t k;

    coll_optim_lamb_coef(p, st, flags, &k);
    coll_optim_lamb_moments_step(&k, w, g, m, v, n, sumsq);
}

void coll_optim_lamb_apply(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                           const coll_optim_layer_t *l, float *w, const float *m, const float *v,
                           size_t n)
{
    coll_optim_lamb_coef_t k;

    coll_optim_lamb_apply_coef(p, st, l, &k);
    coll_optim_lamb_apply_step(&k, w, m, v, n);
}
