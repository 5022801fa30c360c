/*
 * The optimizer on one span of this node's chunk (internal.h): a layer's elements inside one
 * segment, updated in place by the optimizer steps of the executor of the pool's memory kind
 * (engine/exec.h) on the coefficients of kernels/optim.h: the parameters in local rank 0's
 * output (the master weights), the averaged gradient in its input, the state in the pool.
 *
 * Two passes, as the kernels' two-phase contract (optim.h) asks for norms of whole layers:
 *   first   LARS: the span's sums of squares of w and g; LAMB: the moments and the sums of w
 *           and r; SGD, AdamW: the whole update, unless global clipping makes them wait for
 *           the norm of every gradient of the step;
 *   second  with the layer's sums added over every span and node: the LARS and LAMB updates,
 *           and SGD's and AdamW's under clipping.
 * A span's update is a function of its own elements and the layer's reduced sums only, so the
 * shard updates exactly as the whole layer would (the kernels' guarantee), whatever the cut.
 */
#include <stdio.h>

#include "engine/exec.h"
#include "ps/internal.h"

int coll_ps_needs_norms(const coll_ps_job_t *ps)
{
    return ps->reg.optim.kind == COLL_PS_LARS || ps->reg.optim.kind == COLL_PS_LAMB;
}

/* The span's elements in the operation's buffers and in the state arrays, and their executor. */
typedef struct {
    float *w, *g, *s0, *s1;
    size_t n;
    unsigned flags;
    const coll_exec_t *ex;
} span_view_t;

static span_view_t view(coll_op_t *op, const ps_op_t *s, uint32_t i)
{
    const ps_bucket_t *b = s->b;
    const ps_span_t *sp = &b->spans[i];
    uint64_t at = b->state_off + (sp->off - b->chunk.off);
    span_view_t v = {(float *)op->out[0] + sp->off, (float *)(void *)op->in[0] + sp->off,
                     NULL, NULL, (size_t)sp->len, coll_ps_span_flags(s->ps, b, sp),
                     coll_op_exec(op)};

    v.s0 = s->ps->state[0] != NULL ? s->ps->state[0] + at : NULL;
    v.s1 = s->ps->state[1] != NULL ? s->ps->state[1] + at : NULL;
    return v;
}

static double decay_of(double wd, unsigned flags)
{
    return (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0.0 : wd;
}

/* SGD and AdamW: the whole update of the span (their flags only drop the weight decay). */
static void elementwise(const ps_op_t *s, const span_view_t *v)
{
    const coll_ps_job_t *ps = s->ps;

    if (ps->reg.optim.kind == COLL_PS_SGD) {
        coll_optim_sgd_params_t p = ps->sgd;
        coll_optim_sgd_coef_t k;
        p.weight_decay = decay_of(p.weight_decay, v->flags);
        coll_optim_sgd_coef(&p, &s->st, &k);
        v->ex->optim_sgd(&k, v->w, v->g, v->s0, v->n);
    } else {
        coll_optim_adamw_params_t p = ps->adamw;
        coll_optim_adamw_coef_t k;
        p.weight_decay = decay_of(p.weight_decay, v->flags);
        coll_optim_adamw_coef(&p, &s->st, &k);
        v->ex->optim_adamw(&k, v->w, v->g, v->s0, v->s1, v->n);
    }
}

void coll_ps_update_first(coll_op_t *op, ps_op_t *s, uint32_t i)
{
    span_view_t v = view(op, s, i);
    double *sums = s->sums[i];
    coll_optim_lamb_coef_t k;

    switch (s->ps->reg.optim.kind) {
    case COLL_PS_LARS:
        v.ex->optim_sumsq2(v.w, v.g, v.n, sums);
        break;
    case COLL_PS_LAMB:
        coll_optim_lamb_coef(&s->ps->lamb, &s->st, v.flags, &k);
        v.ex->optim_lamb_moments(&k, v.w, v.g, v.s0, v.s1, v.n, sums);
        break;
    default:
        if (s->ps->reg.optim.clip_grad_norm > 0) {
            break; /* the update waits for the step's gradient norm */
        }
        if (!v.ex->optim_all_finite(v.g, v.n)) {
            char what[48];
            snprintf(what, sizeof(what), "the gradient of layer %u",
                     s->b->first_layer + s->b->spans[i].layer);
            coll_ps_fail_nonfinite(op, s, what);
            return;
        }
        elementwise(s, &v);
        break;
    }
}

/* The layer's sums, added over every span and node (s->total, round 1). */
static coll_optim_layer_t layer_of(const ps_op_t *s, uint32_t i, unsigned flags)
{
    uint32_t l = s->b->spans[i].layer;
    return (coll_optim_layer_t){flags, s->total[2 * l], s->total[2 * l + 1]};
}

void coll_ps_update_second(coll_op_t *op, ps_op_t *s, uint32_t i)
{
    span_view_t v = view(op, s, i);
    coll_optim_layer_t layer;
    coll_optim_lars_coef_t lars;
    coll_optim_lamb_coef_t lamb;

    switch (s->ps->reg.optim.kind) {
    case COLL_PS_LARS:
        layer = layer_of(s, i, v.flags);
        coll_optim_lars_coef(&s->ps->lars, &s->st, &layer, &lars);
        v.ex->optim_lars(&lars, v.w, v.g, v.s0, v.n);
        break;
    case COLL_PS_LAMB:
        layer = layer_of(s, i, v.flags);
        coll_optim_lamb_apply_coef(&s->ps->lamb, &s->st, &layer, &lamb);
        v.ex->optim_lamb_apply(&lamb, v.w, v.s0, v.s1, v.n);
        break;
    default:
        elementwise(s, &v);
        break;
    }
}
