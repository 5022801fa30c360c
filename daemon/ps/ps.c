/*
 * The parameter service's hooks (ps.h, engine/stage.h): the checks of its submissions,
 * the start of its operations on this node, the end of a job's service and its description.
 */
#include "ps/ps.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "proto/cspec.h"
#include "ps/internal.h"

static coll_status_t refuse(char *err, size_t errlen, const coll_session_t *s, const char *what)
{
    snprintf(err, errlen, "rank %u: %s", s->rank, what);
    return COLL_ERR_INVALID;
}

/* Steps compress with the methods whose reduction leaves each node its chunk of the sum
 * (engine/codec/staged.c): PowerSGD needs matrix shapes the service has no notion of, and auto
 * chooses per allreduce. */
static coll_status_t check_compression(const coll_session_t *s, const Coll__Wire__Submit *sub,
                                       char *err, size_t errlen)
{
    coll_compression_t c;

    if (sub->compression == 0 || (coll_cspec_unpack(sub->compression, &c) &&
                                  (c.method == COLL_COMPRESS_FP16 ||
                                   c.method == COLL_COMPRESS_BF16 ||
                                   c.method == COLL_COMPRESS_ONEBIT ||
                                   c.method == COLL_COMPRESS_TOPK))) {
        return COLL_OK;
    }
    snprintf(err, errlen, "rank %u: parameter service steps compress with fp16, bf16, onebit "
             "or topk, not %s", s->rank, coll_compress_method_name(c.method));
    return COLL_ERR_UNSUPPORTED;
}

static coll_status_t check_step(const coll_ps_job_t *ps, const coll_session_t *s,
                                const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    if (sub->root >= ps->reg.num_buckets) {
        snprintf(err, errlen, "rank %u: parameter service step of bucket %u; it has %u buckets",
                 s->rank, sub->root, ps->reg.num_buckets);
        return COLL_ERR_INVALID;
    }
    if (sub->count != ps->buckets[sub->root].count || sub->dtype != COLL_FLOAT32 ||
        sub->op != COLL_AVG || sub->layout == 0) {
        snprintf(err, errlen, "rank %u: parameter service step %" PRIu64 " of bucket %u with %"
                 PRIu64 " %s elements (op %s); the bucket has %" PRIu64 " float32, averaged",
                 s->rank, sub->layout, sub->root, sub->count,
                 coll_dtype_name((coll_dtype_t)sub->dtype), coll_redop_name((coll_redop_t)sub->op),
                 ps->buckets[sub->root].count);
        return COLL_ERR_INVALID;
    }
    return check_compression(s, sub, err, errlen);
}

static coll_status_t ps_check(const coll_job_t *job, const coll_session_t *s,
                              const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    const coll_ps_job_t *ps = job->ps;

    if (sub->coll == COLL__WIRE__COLLECTIVE__PS_REGISTER) {
        return sub->dtype == COLL_UINT8 && sub->count >= sizeof(coll_ps_reg_t) &&
                       sub->layout != 0
                   ? COLL_OK
                   : refuse(err, errlen, s, "malformed parameter service registration");
    }
    if (ps == NULL) {
        return refuse(err, errlen, s, "no parameter service is registered in this job");
    }
    switch (sub->coll) {
    case COLL__WIRE__COLLECTIVE__PS_STEP: return check_step(ps, s, sub, err, errlen);
    case COLL__WIRE__COLLECTIVE__PS_SAVE:
        return sub->dtype == COLL_UINT8 &&
                       sub->count == coll_ps_ckpt_head_bytes(ps->reg.num_buckets)
                   ? COLL_OK
                   : refuse(err, errlen, s, "malformed parameter service save");
    default:
        return sub->count == 0 ? COLL_OK
                               : refuse(err, errlen, s, "malformed parameter service load");
    }
}

static coll_status_t ps_start(coll_op_t *op, coll_stage_t *stage, char *err, size_t errlen)
{
    switch (op->desc.coll) {
    case COLL_KIND_PS_REGISTER: return coll_ps_register(op, err, errlen);
    case COLL_KIND_PS_STEP: return coll_ps_step_start(op, stage, err, errlen);
    case COLL_KIND_PS_SAVE: return coll_ps_save_node(op, err, errlen);
    default: return coll_ps_load_node(op, err, errlen);
    }
}

const coll_stage_hooks_t coll_ps_hooks = {
    .check = ps_check,
    .start = ps_start,
};

void coll_ps_job_free(coll_job_t *job)
{
    coll_ps_free(job->ps);
    job->ps = NULL;
}

int coll_ps_job_info(const coll_job_t *job, coll_ps_info_t *info)
{
    const coll_ps_job_t *ps = job->ps;
    uint64_t step = UINT64_MAX;

    if (ps == NULL) {
        return 0;
    }
    for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
        step = ps->buckets[k].step < step ? ps->buckets[k].step : step;
    }
    *info = (coll_ps_info_t){
        .optimizer = coll_ps_optimizer_name((coll_ps_optimizer_t)ps->reg.optim.kind),
        .params = ps->reg.count,
        .layers = ps->reg.num_layers,
        .buckets = ps->reg.num_buckets,
        .step = step,
        .shard_params = ps->shard_elems,
        .state_bytes = (uint64_t)ps->nstate * ps->shard_elems * sizeof(float),
        .state_bytes_total = (uint64_t)ps->nstate * ps->reg.count * sizeof(float),
        .bucket_steps = ps->steps_ok,
        .exchange_bytes = ps->exchange_bytes,
        .lr = coll_schedule_lr(&ps->sched, step)};
    return 1;
}
