/*
 * Registration on this node (PS_REGISTER): every local rank's registration is read from its pool
 * buffer, checked to be the one its fingerprint says (the descriptor carries the fingerprint to the
 * other nodes, so equal descriptors everywhere mean equal registrations), and taken apart into the
 * kernels' settings, the schedule and the shard; the optimizer state is allocated in the job's pool
 * and zeroed, as every reference starts.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/pool.h"
#include "kernels/exec.h"
#include "ps/internal.h"

/* The settings the kernels take; their own checks decide what is valid. */
static coll_status_t take_optim(coll_ps_job_t *ps, char *err, size_t errlen)
{
    const coll_ps_reg_optim_t *o = &ps->reg.optim;
    coll_status_t st = COLL_ERR_INVALID;

    ps->sgd = (coll_optim_sgd_params_t){.momentum = o->momentum, .dampening = o->dampening,
                                        .weight_decay = o->weight_decay,
                                        .nesterov = (int)o->nesterov};
    ps->adamw = (coll_optim_adamw_params_t){.beta1 = o->beta1, .beta2 = o->beta2,
                                            .eps = o->eps, .weight_decay = o->weight_decay};
    ps->lars = (coll_optim_lars_params_t){.momentum = o->momentum,
                                          .weight_decay = o->weight_decay, .eta = o->eta,
                                          .eps = o->eps, .nesterov = (int)o->nesterov};
    /* Clipping is the service's own (every optimizer alike, ps.h): the kernel's is off. */
    ps->lamb = (coll_optim_lamb_params_t){
        .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .weight_decay = o->weight_decay,
        .bias = (coll_optim_lamb_bias_t)o->lamb_bias, .eps_inside_sqrt = (int)o->eps_inside_sqrt,
        .trust_min = o->trust_min, .trust_max = o->trust_max, .phi_min = o->phi_min,
        .phi_max = o->phi_max, .max_grad_norm = 0.0, .clip_eps = 0.0,
        .grad_averaging = (int)o->grad_averaging, .l2 = (int)o->l2};
    switch (o->kind) {
    case COLL_PS_SGD: st = coll_optim_sgd_params_check(&ps->sgd); break;
    case COLL_PS_ADAMW: st = coll_optim_adamw_params_check(&ps->adamw); break;
    case COLL_PS_LARS: st = coll_optim_lars_params_check(&ps->lars); break;
    default: st = coll_optim_lamb_params_check(&ps->lamb); break;
    }
    if (st == COLL_OK && (!(o->clip_grad_norm >= 0) || !isfinite(o->clip_grad_norm) ||
                          !(o->clip_eps >= 0) || !isfinite(o->clip_eps))) {
        st = COLL_ERR_INVALID;
    }
    if (st != COLL_OK) {
        snprintf(err, errlen, "the settings of optimizer %s are out of range (momentum %g, "
                 "dampening %g, weight decay %g, betas %g %g, eps %g, eta %g, trust [%g, %g], "
                 "phi [%g, %g], clipping %g + %g)",
                 coll_ps_optimizer_name((coll_ps_optimizer_t)o->kind), o->momentum,
                 o->dampening, o->weight_decay, o->beta1, o->beta2, o->eps, o->eta,
                 o->trust_min, o->trust_max, o->phi_min, o->phi_max, o->clip_grad_norm,
                 o->clip_eps);
    }
    return st;
}

static coll_status_t take_schedule(coll_ps_job_t *ps, char *err, size_t errlen)
{
    const coll_ps_reg_sched_t *r = &ps->reg.sched;
    coll_schedule_t *s = &ps->sched;

    memset(s, 0, sizeof(*s));
    s->base_lr = r->base_lr;
    if (r->base_batch != 0 && r->global_batch != 0) {
        s->field_mask |= COLL_SCHEDULE_FIELD_SCALING;
        s->base_batch = r->base_batch;
        s->global_batch = r->global_batch;
    }
    s->field_mask |= r->warmup_steps != 0 ? COLL_SCHEDULE_FIELD_WARMUP : 0;
    s->warmup_steps = r->warmup_steps;
    s->field_mask |= r->warmup_start_lr >= 0 ? COLL_SCHEDULE_FIELD_WARMUP_START : 0;
    s->warmup_start_lr = r->warmup_start_lr;
    s->field_mask |= r->decay != COLL_PS_DECAY_CONSTANT ? COLL_SCHEDULE_FIELD_DECAY : 0;
    s->decay = (coll_schedule_decay_t)r->decay;
    memcpy(s->milestones, r->milestones, sizeof(s->milestones));
    s->num_milestones = r->num_milestones;
    s->gamma = r->gamma;
    s->total_steps = r->total_steps;
    s->final_lr = r->final_lr;
    if (coll_schedule_check(s) != COLL_OK) {
        snprintf(err, errlen, "invalid learning-rate schedule (base lr %g, batches %" PRIu64
                 "/%" PRIu64 ", warmup %" PRIu64 " steps from %g, decay %u, gamma %g, %u "
                 "milestones, total %" PRIu64 " steps, final lr %g)", r->base_lr,
                 r->global_batch, r->base_batch, r->warmup_steps, r->warmup_start_lr,
                 r->decay, r->gamma, r->num_milestones, r->total_steps, r->final_lr);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

/* Local rank @p l's registration, copied out of the pool after its fingerprint was checked. */
static coll_status_t read_reg(const coll_op_t *op, uint32_t l, void **copy_p, char *err,
                              size_t errlen)
{
    size_t len = (size_t)op->desc.count;
    void *copy = malloc(len);

    if (copy == NULL) {
        snprintf(err, errlen, "daemon out of memory for a registration of %zu bytes", len);
        return COLL_ERR_NOMEM;
    }
    memcpy(copy, op->in[l], len);
    if (coll_ps_fingerprint(copy, len) != op->desc.layout) {
        snprintf(err, errlen, "rank %u's registration is not the one its fingerprint "
                 "%016" PRIx64 " names", op->job->ranks[l], op->desc.layout);
        free(copy);
        return COLL_ERR_INVALID;
    }
    *copy_p = copy;
    return COLL_OK;
}

/* Every local rank registered the same bytes; the head and layers are kept. */
static coll_status_t take_reg(coll_ps_job_t *ps, const coll_op_t *op, char *err, size_t errlen)
{
    void *reg = NULL;
    coll_status_t st = COLL_OK;

    for (uint32_t l = 0; l < op->job->local_size && st == COLL_OK; l++) {
        void *other = NULL;
        st = read_reg(op, l, l == 0 ? &reg : &other, err, errlen);
        if (st == COLL_OK && other != NULL && memcmp(reg, other, op->desc.count) != 0) {
            snprintf(err, errlen, "ranks %u and %u registered different parameters",
                     op->job->ranks[0], op->job->ranks[l]);
            st = COLL_ERR_MISMATCH;
        }
        free(other);
    }
    if (st == COLL_OK) {
        st = coll_ps_reg_check(reg, op->desc.count, err, errlen);
    }
    if (st == COLL_OK) {
        memcpy(&ps->reg, reg, sizeof(ps->reg));
        ps->layers = malloc(ps->reg.num_layers * sizeof(*ps->layers));
        st = ps->layers != NULL ? COLL_OK : COLL_ERR_NOMEM;
    }
    if (st == COLL_OK) {
        memcpy(ps->layers, (const coll_ps_reg_t *)reg + 1,
               ps->reg.num_layers * sizeof(*ps->layers));
        ps->fingerprint = op->desc.layout;
    }
    free(reg);
    return st;
}

static coll_status_t alloc_state(coll_ps_job_t *ps, char *err, size_t errlen)
{
    coll_pool_t *pool = ps->job->pool;
    size_t bytes = (size_t)ps->nstate * ps->shard_elems * sizeof(float), off;
    coll_status_t st;

    if (bytes == 0) {
        return COLL_OK;
    }
    st = coll_pool_alloc(pool, bytes, ps, &off);
    if (st != COLL_OK) {
        snprintf(err, errlen, "node %u needs %zu bytes of optimizer state for its shard of %"
                 PRIu64 " parameters; the pool of job %s has %zu of %zu bytes free (set its "
                 "size with COLL_POOL_SIZE)", ps->job->node_rank, bytes, ps->shard_elems,
                 ps->job->id, coll_pool_free_bytes(pool), coll_pool_size(pool));
        return st;
    }
    ps->state_pool_off = off;
    ps->state[0] = (float *)(void *)(coll_pool_base(pool) + off);
    ps->state[1] = ps->nstate == 2 ? ps->state[0] + ps->shard_elems : NULL;
    coll_exec_get(coll_pool_kind(pool))->zero(ps->state[0], bytes);
    return COLL_OK;
}

static coll_status_t clip_alloc(coll_ps_job_t *ps)
{
    ps->clip.sumsq = calloc(ps->reg.num_buckets, sizeof(*ps->clip.sumsq));
    ps->clip.waiting = calloc(ps->reg.num_buckets, sizeof(*ps->clip.waiting));
    ps->clip.ready = calloc(ps->reg.num_buckets, sizeof(*ps->clip.ready));
    return ps->clip.sumsq != NULL && ps->clip.waiting != NULL && ps->clip.ready != NULL
               ? COLL_OK
               : COLL_ERR_NOMEM;
}

coll_status_t coll_ps_register(coll_op_t *op, char *err, size_t errlen)
{
    coll_job_t *job = op->job;
    coll_ps_job_t *ps;
    coll_status_t st;

    if (job->ps != NULL) {
        snprintf(err, errlen, "job %s has a parameter service already (one per job)", job->id);
        return COLL_ERR_INVALID;
    }
    if ((ps = calloc(1, sizeof(*ps))) == NULL) {
        snprintf(err, errlen, "daemon out of memory");
        return COLL_ERR_NOMEM;
    }
    ps->job = job;
    st = take_reg(ps, op, err, errlen);
    st = st == COLL_OK ? take_optim(ps, err, errlen) : st;
    st = st == COLL_OK ? take_schedule(ps, err, errlen) : st;
    if (st == COLL_OK && (coll_ps_shard_cut(ps) != COLL_OK || clip_alloc(ps) != COLL_OK)) {
        snprintf(err, errlen, "daemon out of memory for the layout of %u layers",
                 ps->reg.num_layers);
        st = COLL_ERR_NOMEM;
    }
    ps->nstate = coll_ps_state_arrays(ps->reg.optim.kind, ps->reg.optim.momentum);
    st = st == COLL_OK ? alloc_state(ps, err, errlen) : st;
    if (st != COLL_OK) {
        coll_ps_free(ps);
        return st;
    }
    job->ps = ps;
    coll_info(COLL_SUB_JOB, "job %s: parameter service of %" PRIu64 " parameters in %u layers, "
              "%u buckets, %s; this node's shard: %" PRIu64 " parameters, %zu bytes of state",
              job->id, ps->reg.count, ps->reg.num_layers, ps->reg.num_buckets,
              coll_ps_optimizer_name((coll_ps_optimizer_t)ps->reg.optim.kind), ps->shard_elems,
              (size_t)ps->nstate * ps->shard_elems * sizeof(float));
    return COLL_OK;
}

void coll_ps_free(coll_ps_job_t *ps)
{
    if (ps == NULL) {
        return;
    }
    coll_ps_shard_free(ps);
    free(ps->layers);
    free(ps->clip.sumsq);
    free(ps->clip.waiting);
    free(ps->clip.ready);
    free(ps);
}
