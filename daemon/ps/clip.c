/*
 * Global gradient-norm clipping across the buckets of a step (collective_ps.h): each bucket's
 * operation brings its gradients' sum of squares (every node's, added); when every bucket of
 * the step has, their sum in bucket order is the step's, the same on every node, and each
 * waiting bucket goes on (step.c coll_ps_clip_ready()). A bucket of step t + 1 cannot start
 * before every bucket finished step t, so one record is enough.
 */
#include "common/assert.h"
#include "ps/internal.h"

void coll_ps_clip_add(coll_op_t *op, ps_op_t *s, double sumsq)
{
    ps_clip_t *c = &s->ps->clip;
    uint32_t nb = s->ps->reg.num_buckets;
    double total = 0.0;

    if (c->known == 0) {
        c->step = s->st.step;
    }
    COLL_ASSERT(c->step == s->st.step && c->waiting[s->bucket] == NULL);
    c->sumsq[s->bucket] = sumsq;
    c->waiting[s->bucket] = op;
    if (++c->known < nb) {
        return;
    }
    for (uint32_t b = 0; b < nb; b++) {
        total += c->sumsq[b];
        c->ready[b] = c->waiting[b];
        c->waiting[b] = NULL;
        coll_op_hold(c->ready[b]); /* a failure on the way completes them */
    }
    c->known = 0;
    c->step = 0;
    for (uint32_t b = 0; b < nb; b++) {
        if (!c->ready[b]->done) {
            coll_ps_clip_ready(c->ready[b], coll_stage_state(c->ready[b]), total);
        }
    }
    for (uint32_t b = 0; b < nb; b++) {
        coll_op_release(c->ready[b]);
    }
}

void coll_ps_clip_drop(coll_ps_job_t *ps, const coll_op_t *op)
{
    ps_op_t *s = coll_stage_state(op);

    if (ps->clip.waiting[s->bucket] == op) {
        ps->clip.waiting[s->bucket] = NULL;
        ps->clip.known--;
    }
}
