/*
 * Recursive doubling allreduce among the nodes of a group, for small buffers (Thakur,
 * Rabenseifner & Gropp 2005, "Optimization of collective communication operations in MPICH",
 * section 4.4). With p the largest power of two <= N and rem = N - p:
 *   fold:    among the first 2*rem nodes, each even node sends its partial result to the odd
 *            node after it and sits out;
 *   doubling: the p remaining nodes exchange their whole partial result with the node whose
 *            virtual rank differs in bit k, k = 0 .. log2(p)-1, and combine;
 *   unfold:  each odd node of the first 2*rem sends the result back to its even partner.
 * log2(p) + 2 message latencies instead of the ring's 2(N-1).
 *
 * Every message is the sender's descriptor followed by its partial result, both in one staging
 * half; the receiver checks the descriptor before combining, so partners check each other
 * directly (a spanning tree of checks covers every node whose data reaches a result). Pairwise
 * combination is commutative in IEEE arithmetic, so every node ends with bitwise the same
 * result. The partial starts as the sum of the local ranks' inputs (raw), in float32 for 16-bit
 * floats (combine.h), and the result is written to the outputs only at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "core/staging.h"
#include "engine/algos/algos.h"
#include "engine/combine.h"
#include "engine/op.h"
#include "net/transport.h"
#include "proto/rd_plan.h"
#include "proto/tag.h"

enum { PH_FOLD, PH_ROUND, PH_UNFOLD };

typedef struct {
    coll_rd_plan_t pl;    /* its part in the doubling (proto/rd_plan.h) */
    int phase;
    uint32_t round;       /* doubling round */
    uint8_t *mine;        /* descriptor + partial result */
    uint8_t *theirs;      /* descriptor + partner's partial */
    coll_xfer_t send, recv;
    int sent, received;   /* completions of the current exchange */
    size_t bytes;         /* payload bytes: the partial result (coll_combine_partial_esize) */
} rd_t;

static void combine_theirs(coll_op_t *op, rd_t *d)
{
    uint8_t *mine = d->mine + sizeof(coll_desc_t);
    coll_combine_pair(op, mine, mine, d->theirs + sizeof(coll_desc_t), op->desc.count);
}

static coll_status_t exchange(coll_op_t *op, rd_t *d, uint32_t peer, uint32_t step, int send,
                              int recv)
{
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_RS, step, 0);
    size_t len = sizeof(coll_desc_t) + d->bytes;
    coll_status_t st = COLL_OK;

    d->sent = !send;
    d->received = !recv;
    d->send = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .is_send = 1, .step = step};
    d->recv = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .step = step};
    if (recv) {
        /* Room for the whole staging half: a partner with a larger count is then a
         * descriptor mismatch naming both counts, not a truncated receive. */
        st = coll_op_recv(op, peer, tag, d->theirs, op->job->engine.staging_bytes / 2, &d->recv);
        d->recv.expect = len;
    }
    if (send && st == COLL_OK) {
        st = coll_op_send(op, peer, tag, d->mine, len, &d->send);
    }
    return st;
}

/* The result is in mine: write every local rank's output. */
static void finish(coll_op_t *op, rd_t *d)
{
    size_t out_bytes = (size_t)(op->desc.count * op->esize);

    coll_combine_finish(op, op->out[0], d->mine + sizeof(coll_desc_t), op->desc.count);
    /* An empty operation has no buffers (NULL), which memcpy must not be given even for 0. */
    for (uint32_t l = 1; l < op->nbufs && out_bytes > 0; l++) {
        memcpy(op->out[l], op->out[0], out_bytes);
    }
    coll_op_algo_done(op);
}

static coll_status_t next_round(coll_op_t *op, rd_t *d)
{
    if ((1u << d->round) < d->pl.p) {
        uint32_t partner = coll_rd_partner(&d->pl, d->round);
        return exchange(op, d, partner, COLL_RD_STEP_ROUND0 + d->round, 1, 1);
    }
    if (coll_rd_folds(&d->pl)) { /* an odd node of the fold gives the result back */
        d->phase = PH_UNFOLD;
        return exchange(op, d, d->pl.r - 1, COLL_RD_STEP_UNFOLD, 1, 0);
    }
    finish(op, d);
    return COLL_OK;
}

/* The current exchange completed: combine and go on. */
static coll_status_t step_done(coll_op_t *op, rd_t *d)
{
    static const uint32_t phase_step[] = {
        [PH_FOLD] = COLL_STEP_RD_FOLD, [PH_ROUND] = COLL_STEP_RD_ROUND,
        [PH_UNFOLD] = COLL_STEP_RD_UNFOLD};
    uint32_t rounds = (uint32_t)__builtin_ctz(d->pl.p);

    if (d->phase == PH_ROUND) {
        coll_op_mark_step(op, COLL_STEP_RD_ROUND, d->round, rounds, COLL_CTL_MAX_STEPS);
    } else {
        coll_op_mark_step(op, phase_step[d->phase], 0, 1, 1);
    }
    switch (d->phase) {
    case PH_FOLD:
        if (d->pl.vrank < 0) { /* sat out: wait for the result */
            d->phase = PH_UNFOLD;
            return exchange(op, d, d->pl.r + 1, COLL_RD_STEP_UNFOLD, 0, 1);
        }
        combine_theirs(op, d);
        d->phase = PH_ROUND;
        return next_round(op, d);
    case PH_ROUND:
        combine_theirs(op, d);
        d->round++;
        return next_round(op, d);
    default:
        if (d->pl.vrank < 0) {
            memcpy(d->mine + sizeof(coll_desc_t), d->theirs + sizeof(coll_desc_t), d->bytes);
        }
        finish(op, d);
        return COLL_OK;
    }
}

static void rd_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    rd_t *d = op->algo_state;
    coll_status_t st;

    if (x->is_send) {
        d->sent = 1;
    } else {
        if (!coll_op_check_msg(op, x, (const coll_desc_t *)(const void *)d->theirs)) {
            return;
        }
        d->received = 1;
    }
    if (d->sent && d->received && (st = step_done(op, d)) != COLL_OK) {
        coll_job_fail(op->job, st, 1, "recursive doubling: posting a transfer failed");
    }
}

static coll_status_t rd_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    rd_t *d = calloc(1, sizeof(*d));

    if (d == NULL || (d->mine = coll_staging_get(job)) == NULL) {
        free(d);
        return COLL_ERR_NOMEM;
    }
    op->algo_state = d;
    d->theirs = d->mine + job->engine.staging_bytes / 2;
    d->pl = coll_rd_plan(op->grp->nnodes, op->grp->node_rank);
    d->bytes = (size_t)(op->desc.count * coll_combine_partial_esize(op));
    memcpy(d->mine, &op->desc, sizeof(coll_desc_t));
    coll_combine_locals(op, 0, op->desc.count, d->mine + sizeof(coll_desc_t), NULL, 0);
    if (coll_rd_folds(&d->pl)) {
        /* fold: even nodes send to the odd node after them, which receives */
        d->phase = PH_FOLD;
        return d->pl.vrank < 0 ? exchange(op, d, d->pl.r + 1, COLL_RD_STEP_FOLD, 1, 0)
                               : exchange(op, d, d->pl.r - 1, COLL_RD_STEP_FOLD, 0, 1);
    }
    d->phase = PH_ROUND;
    return next_round(op, d);
}

static void rd_cleanup(coll_op_t *op)
{
    rd_t *d = op->algo_state;
    if (d != NULL) {
        coll_staging_put(op->job, d->mine);
        free(d);
        op->algo_state = NULL;
    }
}

const coll_impl_t coll_impl_rd = {
    .name = "rd",
    .flags = COLL_IMPL_SELF_CHECK,
    .start = rd_start,
    .on_xfer = rd_on_xfer,
    .cleanup = rd_cleanup,
};
