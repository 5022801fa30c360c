/*
 * The parameter service's steps over compression (engine/stage.h, docs/parameter-service.md):
 * compressed gradients in, exact parameters out. A step is an allreduce whose reduced chunk
 * goes through the optimizer (the stage) before the all-gather; compressed, rounds.c runs it
 * in the codec's reduction rounds and one more:
 *
 *   reduction   fp16, bf16, 1-bit (twosided.c): round 0 of the compressed allreduce of 1-bit
 *               Adam. Node r encodes each chunk c of x = g + e (its local ranks' sum plus its
 *               worker residual), keeps the worker error x - decode(encode(x)) and sends chunk
 *               c to node c; node c sums the N decoded contributions to its chunk in rank
 *               order, each times 1/world, into local rank 0's gradient buffer. No server
 *               error and no second encoding: that sum is what the optimizer sees, and what
 *               goes back to the nodes is the parameters, not the gradient.
 *               TopK (topk.c): its one round, every node's set to every node, summed over the
 *               whole bucket in rank order; each node uses its own chunk of the sum.
 *   stage       this node's chunk, piece by piece as the ring cuts it (the segments of
 *               coll_plan_init(count, nodes, 4, the job's segment bytes)): reduced(); with a
 *               barrier all_reduced() and, once the stage released the chunk, distribute().
 *   all-gather  the last round: this node's updated chunk of the parameters (op->out[0]),
 *               float32 and exact (COLL_WIRE_F32 behind the rounds' prefix), to every other
 *               node; every chunk into local rank 0's output, then every local rank's.
 *
 * A node sends per step the codec's reduction ((N - 1) encoded chunks, or (N - 1) TopK sets)
 * plus (N - 1) x (144 + 16 + 4 x its chunk) bytes of the all-gather.
 */
#include "engine/codec/internal.h"
#include "engine/stage.h"

coll_status_t coll__staged_sizes(coll_cx_t *cx, coll_slot_sizes_t *sz)
{
    uint64_t mine = coll_plan_chunk(&cx->plan, cx->r).len;
    coll_status_t st = cx->codec->sizes(cx, sz);

    if (st != COLL_OK) {
        return st;
    }
    sz->srv_elems = 0; /* no server side: the owner's sum is not encoded again */
    cx->ag_send_off = coll__cx_align(sz->send_bytes);
    cx->ag_recv_off = coll__cx_align(sz->recv_bytes);
    sz->send_bytes = cx->ag_send_off + coll__dense_msg_bytes(mine, cx->n);
    sz->recv_bytes = cx->ag_recv_off + coll__dense_msg_bytes(cx->count, cx->n);
    return COLL_OK;
}

void coll__staged_place(coll_cx_t *cx)
{
    if (cx->round + 1 < cx->rounds) {
        cx->codec->place(cx);
        return;
    }
    coll__dense_ag_place(cx, cx->count, cx->slot->send + cx->ag_send_off,
                          cx->slot->recv + cx->ag_recv_off);
}

/* The pieces of this node's chunk, as the ring hands them to a stage (stage.h). */
static coll_plan_t pieces(const coll_cx_t *cx)
{
    coll_plan_t p;

    coll_plan_init(&p, cx->count, cx->n, sizeof(float), cx->op->job->params.segment_bytes);
    return p;
}

static float *params(const coll_cx_t *cx)
{
    return (float *)cx->op->out[0];
}

coll_status_t coll__staged_round_done(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;
    coll_range_t mine = coll_plan_chunk(&cx->plan, cx->r);
    coll_plan_t pl;
    coll_status_t st;

    if (cx->round + 1 == cx->rounds) {
        return coll__dense_ag_collect(cx, params(cx) + mine.off, cx->count, params(cx));
    }
    if (cx->round + 2 < cx->rounds || cx->codec->staged_done == NULL) {
        st = cx->codec->round_done(cx);
    } else {
        st = cx->codec->staged_done(cx);
    }
    if (st != COLL_OK || cx->round + 2 < cx->rounds) {
        return st;
    }
    pl = pieces(cx);
    for (uint64_t j = 0; j < pl.nseg && !op->done; j++) {
        coll_range_t s = coll_plan_segment(&pl, cx->r, j);
        coll_op_stage(op)->calls->reduced(op, s.off, s.len);
    }
    return COLL_OK;
}

void coll__staged_distribute(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;
    coll_range_t mine = coll_plan_chunk(&cx->plan, cx->r);
    coll_plan_t pl = pieces(cx);

    for (uint64_t j = 0; j < pl.nseg && !op->done; j++) {
        coll_range_t s = coll_plan_segment(&pl, cx->r, j);
        coll_op_stage(op)->calls->distribute(op, s.off, s.len);
    }
    if (!op->done) {
        coll__dense_ag_write(cx, params(cx) + mine.off, cx->count,
                             cx->slot->send + cx->ag_send_off);
    }
}
