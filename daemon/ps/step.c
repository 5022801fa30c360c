/*
 * One bucket's step on this node: the stage (engine/stage.h) of a PS_STEP operation.
 *
 *   SGD, AdamW                 each reduced piece is checked (finite) and updated at once; the
 *                              ring sends it on (no barrier)
 *   LARS, LAMB                 each reduced piece gets its first pass (update.c: sums; LAMB's
 *                              moments); once the whole chunk is reduced, the per-layer sums
 *                              go to every node (exchange.c, round 1), and with every node's
 *                              sums added the chunk is released: the second pass runs on each
 *                              piece before its all-gather
 *   global clipping (any)      each piece's gradient sum of squares; the bucket's sum goes to
 *                              every node (round 0), every bucket of the step waits for the
 *                              others (clip.c), the chunk's gradients are scaled, then as above
 * A sum that is not finite fails the job on every rank before any piece of the bucket is
 * distributed: no rank reports a step whose parameters took a NaN. A compressed step
 * (engine/codec/staged.c) hands the stage the decoded, averaged gradient the same way; a node
 * whose own gradients are not finite fails the job before it sends them (stage_nonfinite()).
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "engine/exec.h"
#include "engine/stage.h"
#include "ps/internal.h"

static int clipping(const coll_ps_job_t *ps)
{
    return ps->reg.optim.clip_grad_norm > 0;
}

void coll_ps_fail_nonfinite(coll_op_t *op, const ps_op_t *s, const char *what)
{
    coll_job_fail(op->job, COLL_ERR_INVALID, 1,
                  "job %s: parameter service step %" PRIu64 ", bucket %u: %s is not finite "
                  "(NaN or infinity; found on node %u); no rank completes this step",
                  op->job->id, s->st.step, s->bucket, what, op->job->node_rank);
}

static void stage_reduced(coll_op_t *op, uint64_t off, uint64_t len)
{
    ps_op_t *s = coll_stage_state(op);
    uint64_t j;

    if (len == 0) {
        return;
    }
    j = coll_ps_segment_of(s->b, off);
    for (uint32_t i = s->b->seg_span[j]; i < s->b->seg_span[j + 1] && !op->done; i++) {
        if (clipping(s->ps)) {
            const ps_span_t *sp = &s->b->spans[i];
            s->sums[i][PS_G] = coll_op_exec(op)->optim_sumsq(
                (const float *)op->in[0] + sp->off, (size_t)sp->len);
        } else {
            coll_ps_update_first(op, s, i);
        }
    }
}

/* Round 1: this node's sums of each layer of the bucket, added in position order. */
static void layer_round(coll_op_t *op, ps_op_t *s)
{
    double *mine = s->vec + (size_t)op->job->node_rank * s->kmax;

    for (uint32_t k = 0; k < 2 * s->b->nlayers; k++) {
        mine[k] = 0.0;
    }
    for (uint32_t i = 0; i < s->b->nspans; i++) {
        uint32_t l = s->b->spans[i].layer;
        mine[2 * l] += s->sums[i][PS_W];
        mine[2 * l + 1] += s->sums[i][PS_U];
    }
    coll_ps_exchange(op, s, 1, 2 * s->b->nlayers);
}

static void stage_all_reduced(coll_op_t *op)
{
    ps_op_t *s = coll_stage_state(op);
    double *mine = s->vec + (size_t)op->job->node_rank * s->kmax;

    if (!clipping(s->ps)) {
        layer_round(op, s);
        return;
    }
    mine[0] = 0.0;
    for (uint32_t i = 0; i < s->b->nspans; i++) {
        mine[0] += s->sums[i][PS_G];
    }
    coll_ps_exchange(op, s, 0, 1);
}

void coll_ps_clip_ready(coll_op_t *op, ps_op_t *s, double grad_sumsq)
{
    const coll_ps_reg_optim_t *o = &s->ps->reg.optim;
    double q = (sqrt(grad_sumsq) + o->clip_eps) / o->clip_grad_norm;
    float *g = (float *)(void *)op->in[0] + s->b->chunk.off;

    s->st.grad_sumsq = grad_sumsq;
    if (q > 1.0) {
        /* As the trainer's clipping (collective_ps.h): one float factor for every gradient. */
        s->clip_scale = (float)(1.0 / q);
        for (uint64_t i = 0; i < s->b->chunk.len; i++) {
            g[i] *= s->clip_scale;
        }
    }
    if (!coll_ps_needs_norms(s->ps)) {
        coll_stage_resume(op);
        return;
    }
    for (uint32_t i = 0; i < s->b->nspans; i++) {
        coll_ps_update_first(op, s, i);
    }
    layer_round(op, s);
}

void coll_ps_exchanged(coll_op_t *op, ps_op_t *s)
{
    char what[80];

    if (s->round == 0) {
        if (!isfinite(s->total[0])) {
            coll_ps_fail_nonfinite(op, s, "the norm of its gradients");
            return;
        }
        coll_ps_clip_add(op, s, s->total[0]);
        return;
    }
    for (uint32_t l = 0; l < s->b->nlayers; l++) {
        if (!isfinite(s->total[2 * l]) || !isfinite(s->total[2 * l + 1])) {
            snprintf(what, sizeof(what), "the norm of the %s of layer %u",
                     isfinite(s->total[2 * l]) ? "update" : "weights", s->b->first_layer + l);
            coll_ps_fail_nonfinite(op, s, what);
            return;
        }
    }
    coll_stage_resume(op);
}

static void stage_distribute(coll_op_t *op, uint64_t off, uint64_t len)
{
    ps_op_t *s = coll_stage_state(op);
    uint64_t j;

    if (!coll_op_stage(op)->barrier || len == 0) {
        return;
    }
    j = coll_ps_segment_of(s->b, off);
    for (uint32_t i = s->b->seg_span[j]; i < s->b->seg_span[j + 1]; i++) {
        coll_ps_update_second(op, s, i);
    }
}

/* A compressed step: this node's gradients hold a NaN or infinity at bucket element @p elem. */
static void stage_nonfinite(coll_op_t *op, uint64_t elem)
{
    ps_op_t *s = coll_stage_state(op);
    uint32_t l = s->b->first_layer;
    char what[48];

    for (uint64_t start = 0; elem >= start + s->ps->layers[l].count; l++) {
        start += s->ps->layers[l].count;
    }
    snprintf(what, sizeof(what), "the gradient of layer %u", l);
    coll_ps_fail_nonfinite(op, s, what);
}

static void stage_done(coll_op_t *op, coll_status_t status)
{
    ps_op_t *s = coll_stage_state(op);

    COLL_ASSERT(s->b->busy == op);
    s->b->busy = NULL;
    coll_ps_clip_drop(s->ps, op);
    if (status == COLL_OK) {
        s->b->step = s->st.step;
        s->ps->steps_ok++;
    }
}

static void stage_end(coll_op_t *op)
{
    free(coll_stage_state(op));
}

static const coll_stage_calls_t ps_stage = {
    .reduced = stage_reduced,
    .all_reduced = stage_all_reduced,
    .distribute = stage_distribute,
    .on_xfer = coll_ps_exchange_xfer,
    .done = stage_done,
    .end = stage_end,
    .nonfinite = stage_nonfinite,
};

/* One allocation: the state, the sums per span, the exchange's vectors and transfers. */
static ps_op_t *op_state_new(const coll_job_t *job, ps_bucket_t *b)
{
    uint32_t kmax = 2 * b->nlayers, n = job->nnodes;
    size_t sums = (size_t)b->nspans * sizeof(double[PS_SUMS]);
    size_t vecs = ((size_t)n + 1) * kmax * sizeof(double);
    ps_op_t *s = calloc(1, sizeof(*s) + sums + vecs + 2 * (size_t)(n - 1) * sizeof(coll_xfer_t));

    if (s != NULL) {
        s->sums = (double(*)[PS_SUMS])(void *)(s + 1);
        s->vec = (double *)(void *)((uint8_t *)s->sums + sums);
        s->total = s->vec + (size_t)n * kmax;
        s->xs = (coll_xfer_t *)(void *)(s->total + kmax);
        s->kmax = kmax;
        s->b = b;
    }
    return s;
}

coll_status_t coll_ps_step_start(coll_op_t *op, coll_stage_t *stage, char *err, size_t errlen)
{
    coll_ps_job_t *ps = op->job->ps;
    uint32_t k = op->desc.root;
    ps_bucket_t *b = &ps->buckets[k];
    uint64_t t = op->desc.layout;
    ps_op_t *s;

    if (b->busy != NULL || b->step + 1 != t) {
        snprintf(err, errlen, "bucket %u: step %" PRIu64 " submitted while the service has done "
                 "%" PRIu64 " steps of it%s", k, t, b->step,
                 b->busy != NULL ? " and one is in flight" : "");
        return COLL_ERR_INVALID;
    }
    if ((s = op_state_new(op->job, b)) == NULL) {
        snprintf(err, errlen, "daemon out of memory for a step of bucket %u", k);
        return COLL_ERR_NOMEM;
    }
    s->ps = ps;
    s->bucket = k;
    s->st = (coll_optim_step_t){.lr = coll_schedule_lr(&ps->sched, t - 1), .step = t};
    s->clip_scale = 1.0f;
    *stage = (coll_stage_t){&ps_stage, s, coll_ps_needs_norms(ps) || clipping(ps)};
    b->busy = op;
    return COLL_OK;
}
