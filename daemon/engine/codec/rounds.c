/*
 * The compressed allreduce: rounds in which every node sends one message to each other node
 * and receives one from each; the codec (internal.h) says what the messages hold.
 *
 * Life of an operation, on each node:
 *   1. in = (the local ranks' inputs summed, engine/combine.c) + the bucket's residual, in
 *      float32 (the slot's spare residual buffer). A non-finite value poisons the operation.
 *   2. The codec compresses in (begin) into round 0's messages; this file writes the
 *      descriptor and a cx header in front of every message and posts them (receives first).
 *   3. When every transfer of a round completed, the codec uses what arrived and writes the
 *      next round; after the last it has written the result in float32 (outf), which this file
 *      rounds to the output's datatype and copies to every local rank.
 *
 * Agreement: every message starts with its sender's descriptor, checked before anything is
 * used (COLL_IMPL_SELF_CHECK): a node that asked for other compression, count or layout fails
 * the job with COLL_ERR_MISMATCH naming both. Message sizes follow from the descriptor, so a
 * receive is exactly the size expected; one that is larger (its sender disagrees) is reported
 * by UCX as truncated and is a mismatch too (COLL_IMPL_OWN_ERRORS). Outputs are written only
 * after the last round, whose messages left every node only after it had checked what it had
 * received.
 *
 * Non-finite values: a node whose input has a NaN or an infinity, or a codec that cannot encode
 * or sum (a sum that overflows float32), sends every remaining message of the operation without
 * a payload and with the error in its cx header; every node that receives one does the same.
 * Every node still completes every round (nobody waits for a message that does not come), then
 * fails the operation (not the job) with COLL_ERR_INVALID, outputs untouched. A codec finds an
 * overflow before it writes anything of the result: in the last round every node decides alike
 * from the same messages (TopK's sets, PowerSGD's factors). The residual is never committed by
 * a failed operation (internal.h), so it stays as it was on every node.
 *
 * A parameter-service step (one with a stage, staged.c) runs the codec's reduction rounds, hands
 * this node's chunk of the reduced gradient to the stage, and once the stage let it go (at once, or
 * after a barrier stage resumed it: cx_resume()) all-gathers the updated parameters in one more
 * round, float32. A non-finite value in a node's input fails the job there (the stage names the
 * layer), before anything is sent, as the ring's steps do; a poisoned reduction (a codec that
 * cannot encode) fails the job too: a step that fails ends it.
 *
 * Tags: (key, reduce-scatter kind, step = sending node, column = round).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/stats.h"
#include "engine/codec/internal.h"
#include "engine/combine.h"
#include "engine/stage.h"
#include "proto/tag.h"

static double now_s(void)
{
    return (double)coll_stats_now_ns() * 1e-9;
}

uint64_t coll__cx_first_nonfinite(const float *x, uint64_t n)
{
    const uint32_t *b = (const uint32_t *)(const void *)x;

    for (uint64_t i = 0; i < n; i += 1024) {
        uint64_t end = n - i < 1024 ? n : i + 1024;
        uint32_t bad = 0;
        for (uint64_t j = i; j < end; j++) {
            bad |= (b[j] & 0x7f800000u) == 0x7f800000u;
        }
        for (uint64_t j = i; bad && j < end; j++) {
            if ((b[j] & 0x7f800000u) == 0x7f800000u) {
                return j;
            }
        }
    }
    return n;
}

static void poison(coll_cx_t *cx, coll_status_t st, const char *msg)
{
    if (cx->poison == COLL_OK) {
        cx->poison = st;
        snprintf(cx->poison_msg, sizeof(cx->poison_msg), "%s", msg);
    }
}

/* The descriptor and cx header in front of a message. */
static void write_prefix(coll_cx_t *cx, uint8_t *buf, coll_status_t st)
{
    coll_cx_hdr_t h = {(int32_t)st, cx->round, cx->r, 0};

    memcpy(buf, &cx->op->desc, sizeof(coll_desc_t));
    memcpy(buf + sizeof(coll_desc_t), &h, sizeof(h));
}

static coll_status_t post_round(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;
    int bad = cx->poison != COLL_OK;
    coll_status_t st = COLL_OK;

    if (cx->staged) {
        coll__staged_place(cx);
    } else {
        cx->codec->place(cx);
    }
    write_prefix(cx, cx->poison_buf, bad ? cx->poison : COLL_OK);
    for (uint32_t p = 0; p < cx->n && !bad; p++) {
        if (p != cx->r) {
            write_prefix(cx, cx->sendp[p], COLL_OK);
        }
    }
    cx->waiting = 2 * (cx->n - 1);
    for (uint32_t p = 0; p < cx->n && st == COLL_OK; p++) {
        coll_xfer_t *x = &cx->xs[p];
        if (p != cx->r) {
            *x = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .slot = (uint16_t)p,
                               .step = cx->round};
            uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_RS, p, cx->round);
            st = coll_op_recv(op, p, tag, cx->recvp[p], cx->recvlen[p], x);
        }
    }
    for (uint32_t p = 0; p < cx->n && st == COLL_OK; p++) {
        coll_xfer_t *x = &cx->xs[cx->n + p];
        if (p != cx->r) {
            *x = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .is_send = 1,
                               .slot = (uint16_t)p, .step = cx->round};
            uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_RS, cx->r, cx->round);
            st = coll_op_send(op, p, tag, bad ? cx->poison_buf : cx->sendp[p],
                              bad ? COLL_CX_PREFIX : cx->sendlen[p], x);
        }
    }
    return st;
}

/* The result is in outf: round it to the output's datatype and copy it to every local rank. */
static void write_outputs(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;
    size_t bytes = (size_t)(cx->count * op->esize);

    if (bytes == 0) {
        return; /* an empty operation has no buffers (NULL) */
    }
    if (op->desc.dtype != COLL_FLOAT32) {
        coll_combine_finish(op, op->out[0], cx->outf, cx->count);
    }
    for (uint32_t l = 1; l < op->job->local_size; l++) {
        if (op->out[l] != op->out[0]) {
            cx->ex->copy(op->out[l], op->out[0], bytes);
        }
    }
}

static void finish(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;

    if (cx->poison != COLL_OK) {
        coll_op_algo_failed(op, cx->poison, cx->poison_msg);
        return;
    }
    write_outputs(cx);
    cx->c->commit = 1;
    coll_op_algo_done(op);
}

static void overflowed(coll_cx_t *cx)
{
    char msg[160];

    snprintf(msg, sizeof(msg), "compression bucket %u: a sum overflows float32 on node %u",
             cx->op->desc.bucket, cx->r);
    poison(cx, COLL_ERR_INVALID, msg);
}

/* A staged operation's chunk may go (the stage resumed it, or at once without a barrier): the
 * stage's output, then the all-gather. */
static void cx_resume(coll_op_t *op)
{
    coll_cx_t *cx = op->algo_state;
    coll_status_t st;

    coll__staged_distribute(cx);
    if (!op->done && (st = post_round(cx)) != COLL_OK) {
        coll_job_fail(op->job, st, 1, "%s: posting the all-gather failed", op->impl->name);
    }
}

/* A staged operation's reduction is over and its chunk with the stage. */
static void staged_handoff(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;

    coll_op_mark_reduced(op);
    if (cx->poison != COLL_OK) {
        coll_job_fail(op->job, cx->poison, 1, "job %s: parameter service step: %s", op->job->id,
                      cx->poison_msg);
    } else if (coll_op_stage(op)->barrier) {
        coll_op_stage(op)->calls->all_reduced(op); /* it resumes now or later (cx_resume()) */
    } else {
        cx_resume(op);
    }
}

/* Every transfer of the round completed. */
static void round_complete(coll_cx_t *cx)
{
    coll_status_t st = COLL_OK;
    double t0 = now_s();

    if (cx->poison == COLL_OK &&
        (st = cx->staged ? coll__staged_round_done(cx) : cx->codec->round_done(cx)) ==
            COLL_ERR_INVALID) {
        overflowed(cx);
        st = COLL_OK;
    }
    cx->c->codec_s += now_s() - t0;
    if (st != COLL_OK) {
        coll_job_fail(cx->op->job, st, 1, "job %s: compressed allreduce (%s): a malformed "
                      "message", cx->op->job->id, cx->op->impl->name);
    } else if (cx->op->done) {
        return; /* the stage failed the job */
    } else if (++cx->round == cx->rounds) {
        finish(cx);
    } else if (cx->staged && cx->round + 1 == cx->rounds) {
        staged_handoff(cx);
    } else if ((st = post_round(cx)) != COLL_OK) {
        coll_job_fail(cx->op->job, st, 1, "%s: posting a transfer failed", cx->op->impl->name);
    }
}

/* A received message: the sender's descriptor, its cx header, its size. 0: the job failed. */
static int check_received(coll_cx_t *cx, coll_xfer_t *x)
{
    coll_job_t *job = cx->op->job;
    const uint8_t *buf = cx->recvp[x->slot];
    coll_cx_hdr_t h;
    char msg[256], nm[48];

    coll_desc_name(&cx->op->desc, nm, sizeof(nm));
    if (x->length < COLL_CX_PREFIX) {
        coll_job_fail(job, COLL_ERR_MISMATCH, 1, "%s: a message of %zu bytes from node %u, "
                      "without a descriptor (the nodes disagree on it)", nm, x->length, x->peer);
        return 0;
    }
    if (!coll_op_check_desc(cx->op, (const coll_desc_t *)(const void *)buf, x->peer)) {
        return 0;
    }
    memcpy(&h, buf + sizeof(coll_desc_t), sizeof(h));
    if (h.round != cx->round || h.from != x->peer ||
        (h.status == COLL_OK && x->length != cx->recvlen[x->slot])) {
        coll_job_fail(job, COLL_ERR_PROTOCOL, 1, "%s: node %u sent a malformed message (round "
                      "%u, %zu bytes; expected round %u, %zu bytes)", nm, x->peer, h.round,
                      x->length, cx->round, cx->recvlen[x->slot]);
        return 0;
    }
    if (h.status != COLL_OK) {
        snprintf(msg, sizeof(msg), "%s: node %u (ranks from %u): %s", nm, x->peer,
                 job->nodes[x->peer].ranks[0],
                 h.status == COLL_ERR_INVALID ? "a non-finite gradient (NaN or infinity) or "
                                                "a sum that overflows float32; the operation "
                                                "failed on every rank and the residuals are "
                                                "unchanged"
                                              : coll_strerror((coll_status_t)h.status));
        poison(cx, COLL_ERR_INVALID, msg);
    }
    return 1;
}

static void cx_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    coll_cx_t *cx = op->algo_state;
    char nm[48];

    if (x->status == UCS_ERR_MESSAGE_TRUNCATED && !x->is_send) {
        coll_desc_name(&op->desc, nm, sizeof(nm));
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: node %u sent more than the %zu bytes "
                      "this node expects (the nodes disagree on the count, datatype or "
                      "compression)", nm, x->peer, x->expect);
        return;
    }
    if (x->status != UCS_OK) {
        coll_op_xfer_failed(op, x);
        return;
    }
    if (!x->is_send && !check_received(cx, x)) {
        return;
    }
    if (--cx->waiting == 0) {
        round_complete(cx);
    }
}

/* Step 1: in = the local sum + the residual; a non-finite value poisons the operation. */
static void gather_input(coll_cx_t *cx)
{
    coll_op_t *op = cx->op;
    coll_slot_t *s = cx->slot;
    uint64_t bad;
    char msg[200];

    cx->in = s->res[s->cur ^ 1];
    coll_combine_locals(op, 0, cx->count, cx->in, s->ef ? s->res[s->cur] : NULL, 0);
    if ((bad = coll__cx_first_nonfinite(cx->in, cx->count)) < cx->count && cx->staged) {
        coll_op_stage(op)->calls->nonfinite(op, bad); /* a step fails the job, naming the layer */
    } else if (bad < cx->count) {
        snprintf(msg, sizeof(msg), "compression bucket %u: the gradient summed on node %u "
                 "(ranks from %u) has a non-finite value at element %" PRIu64 "; the "
                 "operation failed on every rank and the residuals are unchanged",
                 op->desc.bucket, cx->r, op->job->ranks[0], bad);
        poison(cx, COLL_ERR_INVALID, msg);
    }
}

static coll_cx_t *cx_new(coll_op_t *op)
{
    uint32_t n = op->job->nnodes;
    size_t per = 2 * sizeof(void *) + 2 * sizeof(size_t) + 2 * sizeof(coll_xfer_t);
    coll_cx_t *cx = calloc(1, sizeof(*cx) + n * per);

    if (cx == NULL) {
        return NULL;
    }
    cx->xs = (coll_xfer_t *)(void *)(cx + 1);
    cx->sendp = (uint8_t **)(void *)(cx->xs + 2 * n);
    cx->recvp = cx->sendp + n;
    cx->sendlen = (size_t *)(void *)(cx->recvp + n);
    cx->recvlen = cx->sendlen + n;
    cx->op = op;
    cx->ex = coll_op_exec(op);
    cx->c = coll__codec_op(op);
    cx->slot = cx->c->slot;
    cx->codec = coll__cx_codec(cx->c->run.method);
    cx->n = n;
    cx->r = op->job->node_rank;
    cx->count = op->desc.count;
    cx->staged = coll_op_stage(op) != NULL;
    cx->rounds = cx->staged ? cx->codec->staged_rounds + 1 : cx->codec->rounds;
    cx->weight = op->desc.op == COLL_AVG && !coll_combine_transforms_raw(op)
                     ? 1.0f / (float)op->desc.world_size
                     : 1.0f;
    coll_plan_init(&cx->plan, cx->count, n, sizeof(float), (size_t)1 << 30);
    return cx;
}

/* The slot's memory for this codec; the float32 result of a 16-bit output at its end. */
static coll_status_t cx_memory(coll_cx_t *cx)
{
    coll_slot_sizes_t sz = {0};
    int half = cx->op->desc.dtype != COLL_FLOAT32;
    coll_status_t st = cx->staged ? coll__staged_sizes(cx, &sz) : cx->codec->sizes(cx, &sz);

    sz.work_elems += half ? cx->count : 0;
    if (st == COLL_OK) {
        st = coll__slot_memory(cx->op, cx->slot, coll__cspec_of(&cx->c->run), &sz);
    }
    if (st == COLL_OK && cx->staged) {
        /* The reduced gradient goes where the ring's steps put it: the gradient buffer. */
        cx->outf = (float *)(void *)cx->op->in[0];
    } else if (st == COLL_OK) {
        cx->outf = half ? cx->slot->work + (sz.work_elems - cx->count)
                        : (float *)cx->op->out[0];
    }
    return st;
}

static coll_status_t cx_start(coll_op_t *op)
{
    coll_cx_t *cx = cx_new(op);
    coll_status_t st;
    double t0 = now_s();

    if (cx == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = cx;
    if ((st = cx_memory(cx)) != COLL_OK) {
        return st;
    }
    if (cx->count == 0) {
        finish(cx);
        return COLL_OK;
    }
    /* Held: a step whose input is not finite fails the job, which completes the operation. */
    coll_op_hold(op);
    gather_input(cx);
    if (op->done) {
        coll_op_release(op); /* op may be gone now; the caller does not look at it again */
        return COLL_OK;
    }
    coll_op_release(op);
    if (cx->poison == COLL_OK && cx->codec->begin(cx) == COLL_ERR_INVALID) {
        overflowed(cx);
    }
    cx->c->codec_s += now_s() - t0;
    return post_round(cx);
}

static void cx_cleanup(coll_op_t *op)
{
    free(op->algo_state);
    op->algo_state = NULL;
}

/* One implementation per method, so that completions name the method that ran. */
#define CX_IMPL(nm)                                                                                \
    {                                                                                              \
        .name = nm, .flags = COLL_IMPL_SELF_CHECK | COLL_IMPL_OWN_ERRORS, .start = cx_start,       \
        .on_xfer = cx_on_xfer, .cleanup = cx_cleanup                                               \
    }

static const coll_impl_t impls[COLL_COMPRESS_COUNT] = {
    [COLL_COMPRESS_FP16] = CX_IMPL("fp16"),     [COLL_COMPRESS_BF16] = CX_IMPL("bf16"),
    [COLL_COMPRESS_TOPK] = CX_IMPL("topk"),     [COLL_COMPRESS_ONEBIT] = CX_IMPL("onebit"),
    [COLL_COMPRESS_POWERSGD] = CX_IMPL("powersgd"),
};

/* The parameter service's steps: the same, and a barrier stage's resumption. */
#define CX_STAGED_IMPL(nm)                                                                         \
    {                                                                                              \
        .name = nm, .flags = COLL_IMPL_SELF_CHECK | COLL_IMPL_OWN_ERRORS, .start = cx_start,       \
        .on_xfer = cx_on_xfer, .cleanup = cx_cleanup, .resume = cx_resume                        \
    }

static const coll_impl_t staged_impls[COLL_COMPRESS_COUNT] = {
    [COLL_COMPRESS_FP16] = CX_STAGED_IMPL("fp16"),
    [COLL_COMPRESS_BF16] = CX_STAGED_IMPL("bf16"),
    [COLL_COMPRESS_TOPK] = CX_STAGED_IMPL("topk"),
    [COLL_COMPRESS_ONEBIT] = CX_STAGED_IMPL("onebit"),
};

const coll_impl_t *coll__cx_impl(coll_compress_method_t method)
{
    return coll__cx_codec(method) != NULL ? &impls[method] : NULL;
}

const coll_impl_t *coll__cx_staged_impl(coll_compress_method_t method)
{
    const coll_cx_codec_t *codec = coll__cx_codec(method);

    return codec != NULL && codec->staged_rounds > 0 ? &staged_impls[method] : NULL;
}

const coll_cx_codec_t *coll__cx_codec(coll_compress_method_t method)
{
    switch (method) {
    case COLL_COMPRESS_FP16: return &coll__cx_fp16;
    case COLL_COMPRESS_BF16: return &coll__cx_bf16;
    case COLL_COMPRESS_ONEBIT: return &coll__cx_onebit;
    case COLL_COMPRESS_TOPK: return &coll__cx_topk;
    case COLL_COMPRESS_POWERSGD: return &coll__cx_powersgd;
    default: return NULL;
    }
}
