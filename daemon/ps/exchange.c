/*
 * The small allreduce of a step's sums (step.c): every node sends its k doubles to every other
 * node and receives theirs, then each node adds the vectors in node order, 0 first, so every
 * node gets the same bits for a layer's norm whichever node owns which part of it. A message is
 * 8 k bytes (16 per layer of the bucket); with N nodes a node sends N - 1 of them per round,
 * one round for LARS and LAMB (two under global clipping), beside the allreduce's bytes.
 */
#include <string.h>

#include "engine/stage.h"
#include "proto/tag.h"
#include "ps/internal.h"

static void add_up(const coll_job_t *job, ps_op_t *s)
{
    for (uint32_t k = 0; k < s->k; k++) {
        double t = 0.0;
        for (uint32_t n = 0; n < job->nnodes; n++) {
            t += s->vec[(size_t)n * s->kmax + k];
        }
        s->total[k] = t;
    }
}

/* Post the receives from, and the sends to, every other node. @return 0 when one failed (the
 * job failed then, and @p op may be gone). */
static int post_all(coll_op_t *op, ps_op_t *s)
{
    coll_job_t *job = op->job;
    uint32_t me = job->node_rank, i = 0;
    size_t len = (size_t)s->k * sizeof(double);
    coll_status_t st = COLL_OK;

    for (uint32_t n = 0; n < job->nnodes && st == COLL_OK; n++) {
        if (n == me) {
            continue;
        }
        s->xs[i] = (coll_xfer_t){.kind = COLL_XFER_STAGE, .step = s->round};
        st = coll_stage_post(op, 0, n, coll_tag_stage(op->grp->id, op->desc.key, s->round, n),
                             s->vec + (size_t)n * s->kmax, len, &s->xs[i++]);
    }
    for (uint32_t n = 0; n < job->nnodes && st == COLL_OK; n++) {
        if (n == me) {
            continue;
        }
        s->xs[i] = (coll_xfer_t){.kind = COLL_XFER_STAGE, .is_send = 1, .step = s->round};
        st = coll_stage_post(op, 1, n, coll_tag_stage(op->grp->id, op->desc.key, s->round, me),
                             s->vec + (size_t)me * s->kmax, len, &s->xs[i++]);
        s->ps->exchange_bytes += st == COLL_OK ? len : 0;
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "job %s: parameter service: posting the exchange of sums "
                      "failed: %s", job->id, coll_strerror(st));
        return 0;
    }
    return 1;
}

void coll_ps_exchange(coll_op_t *op, ps_op_t *s, uint32_t round, uint32_t k)
{
    s->round = round;
    s->k = k;
    if (op->job->nnodes == 1) {
        memcpy(s->total, s->vec, k * sizeof(double));
        coll_ps_exchanged(op, s);
        return;
    }
    s->pending = 2 * (op->job->nnodes - 1);
    (void)post_all(op, s);
}

void coll_ps_exchange_xfer(coll_op_t *op, coll_xfer_t *x)
{
    ps_op_t *s = coll_stage_state(op);

    (void)x;
    if (--s->pending == 0) {
        add_up(op->job, s);
        coll_ps_exchanged(op, s);
    }
}
