/*
 * Pipelined chains in ring order for rooted collectives. The buffer is cut into segments and
 * up to W segments travel at once, so a chain of N nodes takes about (S + (N-1) * segment) /
 * bandwidth instead of (N-1) * S / bandwidth.
 *
 * Broadcast: the root's node sends every segment from the root rank's buffer; each following
 * node receives it straight into local rank 0's output, copies it to its other local ranks and
 * forwards it from there. A node posts those receives only after it checked its predecessor's
 * descriptor (on_desc), so no output is written before the agreement; the root's node, which
 * sends at once, copies into its own ranks' outputs only after its check too (ranks that name
 * different roots each take their own node for the root's: the check fails them all).
 *
 * Reduce: the chain starts at the node after the root's and ends at the root's node. The first
 * node sends the sum of its local inputs; each following node receives a partial result into
 * staging, adds its local inputs and forwards it; the root's node writes the result into the
 * root rank's output. Staging is freed as soon as a segment is forwarded, the root never waits
 * on a send, so the chain drains from the root backwards without a cycle of waits.
 */
#include <stdlib.h>
#include <string.h>

#include "core/staging.h"
#include "engine/algos/algos.h"
#include "engine/combine.h"
#include "engine/op.h"
#include "net/transport.h"
#include "proto/tag.h"

typedef struct {
    uint64_t j;          /* segment */
    int events;          /* completed transfers of this segment */
    uint8_t *buf;        /* reduce: staging for the partial result */
    coll_xfer_t recv, send;
} chain_col_t;

typedef struct {
    uint32_t pos, last;  /* this node's place in the chain, the last place */
    uint32_t next, prev;
    uint32_t root_local; /* local index of the root rank on its node */
    int bcast;
    size_t wire_esize;   /* bytes of an element on the wire: reduce sends partial results */
    int waiting_desc;    /* broadcast: receives wait for the descriptor check */
    int col_events;      /* transfers per segment on this node */
    uint32_t ncols;
    uint64_t next_seg, segs_done;
    chain_col_t *cols;
} chain_t;

static size_t bytes(const coll_op_t *op, uint64_t elems)
{
    return (size_t)(elems * op->esize);
}

static uint8_t *at(const void *base, const coll_op_t *op, uint64_t elems)
{
    return (uint8_t *)base + bytes(op, elems);
}

static coll_status_t post(coll_op_t *op, chain_t *ch, chain_col_t *c, int send, void *buf,
                          uint64_t elems)
{
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_RS, 0, c->j);
    coll_xfer_t *x = send ? &c->send : &c->recv;

    *x = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .is_send = (uint8_t)send,
                       .slot = (uint16_t)(c - ch->cols)};
    size_t len = (size_t)(elems * ch->wire_esize);

    return send ? coll_op_send(op, ch->next, tag, buf, len, x)
                : coll_op_recv(op, ch->prev, tag, buf, len, x);
}

static void copy_bcast(coll_op_t *op, const uint8_t *src, coll_range_t seg)
{
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        uint8_t *dst = at(op->out[l], op, seg.off);
        if (dst != src) {
            memcpy(dst, src, bytes(op, seg.len));
        }
    }
}

static coll_status_t bcast_col_start(coll_op_t *op, chain_t *ch, chain_col_t *c)
{
    coll_range_t seg = coll_plan_segment(&op->plan, 0, c->j);
    uint8_t *src;

    if (ch->pos == 0) {
        src = at(op->in[ch->root_local], op, seg.off);
        if (op->desc_ok) { /* else chain_on_desc() copies it */
            copy_bcast(op, src, seg);
        }
        return post(op, ch, c, 1, src, seg.len);
    }
    return post(op, ch, c, 0, at(op->out[0], op, seg.off), seg.len);
}

static coll_status_t reduce_col_start(coll_op_t *op, chain_t *ch, chain_col_t *c)
{
    coll_range_t seg = coll_plan_segment(&op->plan, 0, c->j);

    if (ch->pos == 0) {
        coll_combine_locals(op, seg.off, seg.len, c->buf, NULL, 0);
        return post(op, ch, c, 1, c->buf, seg.len);
    }
    return post(op, ch, c, 0, c->buf, seg.len);
}

static coll_status_t col_start(coll_op_t *op, chain_t *ch, chain_col_t *c, uint64_t j)
{
    c->j = j;
    c->events = 0;
    return ch->bcast ? bcast_col_start(op, ch, c) : reduce_col_start(op, ch, c);
}

/* A segment arrived from the previous node. */
static coll_status_t on_recv(coll_op_t *op, chain_t *ch, chain_col_t *c)
{
    coll_range_t seg = coll_plan_segment(&op->plan, 0, c->j);
    uint8_t *out0 = ch->bcast ? at(op->out[0], op, seg.off) : NULL;

    if (ch->bcast) {
        copy_bcast(op, out0, seg);
        return ch->pos < ch->last ? post(op, ch, c, 1, out0, seg.len) : COLL_OK;
    }
    if (ch->pos < ch->last) {
        coll_combine_locals(op, seg.off, seg.len, c->buf, c->buf, 0);
        return post(op, ch, c, 1, c->buf, seg.len);
    }
    coll_combine_locals(op, seg.off, seg.len, at(op->out[ch->root_local], op, seg.off), c->buf,
                        1);
    return COLL_OK;
}

static void seg_done(coll_op_t *op, chain_t *ch, chain_col_t *c)
{
    ch->segs_done++;
    if (ch->segs_done == op->plan.nseg) {
        coll_op_algo_done(op);
    } else if (ch->next_seg < op->plan.nseg && col_start(op, ch, c, ch->next_seg++) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "chain: posting a transfer failed");
    }
}

static void chain_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    chain_t *ch = op->algo_state;
    chain_col_t *c = &ch->cols[x->slot];

    if (!x->is_send && on_recv(op, ch, c) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "chain: posting a transfer failed");
        return;
    }
    if (++c->events == ch->col_events) {
        seg_done(op, ch, c);
    }
}

static coll_status_t start_columns(coll_op_t *op, chain_t *ch)
{
    coll_status_t st = COLL_OK;
    for (uint32_t k = 0; k < ch->ncols && st == COLL_OK; k++) {
        st = col_start(op, ch, &ch->cols[k], ch->next_seg++);
    }
    return st;
}

/* The root's node agreed: its local outputs get the segments it sent before. */
static void root_copy_sent(coll_op_t *op, const chain_t *ch)
{
    for (uint64_t j = 0; j < ch->next_seg; j++) {
        coll_range_t seg = coll_plan_segment(&op->plan, 0, j);
        copy_bcast(op, at(op->in[ch->root_local], op, seg.off), seg);
    }
}

static void chain_on_desc(coll_op_t *op)
{
    chain_t *ch = op->algo_state;
    if (ch != NULL && ch->bcast && ch->pos == 0) {
        root_copy_sent(op, ch);
    }
    if (ch != NULL && ch->waiting_desc) {
        ch->waiting_desc = 0;
        if (start_columns(op, ch) != COLL_OK) {
            coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "chain: posting a transfer failed");
        }
    }
}

static chain_t *chain_alloc(coll_op_t *op)
{
    coll_job_t *job = op->job;
    uint64_t ncols = op->plan.nseg < job->params.pipeline_depth ? op->plan.nseg
                                                                 : job->params.pipeline_depth;
    chain_t *ch = calloc(1, sizeof(*ch) + ncols * sizeof(chain_col_t));

    if (ch == NULL) {
        return NULL;
    }
    ch->cols = (chain_col_t *)(ch + 1);
    ch->bcast = op->desc.coll == COLL_KIND_BROADCAST;
    /* A staging block (two segments) holds a float32 partial of one 16-bit segment. */
    ch->wire_esize = ch->bcast ? op->esize : coll_combine_partial_esize(op);
    for (uint64_t k = 0; k < ncols; k++, ch->ncols++) {
        if (!ch->bcast && (ch->cols[k].buf = coll_staging_get(job)) == NULL) {
            break;
        }
    }
    return ch;
}

static coll_status_t chain_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    const coll_group_t *grp = op->grp;
    uint32_t n = grp->nnodes, root_node = grp->rank_node[op->desc.root];
    chain_t *ch;

    coll_plan_init(&op->plan, op->desc.count, 1, op->esize, job->params.segment_bytes);
    if ((ch = chain_alloc(op)) == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = ch;
    if (ch->ncols < (op->plan.nseg < job->params.pipeline_depth ? op->plan.nseg
                                                                  : job->params.pipeline_depth)) {
        return COLL_ERR_NOMEM;
    }
    ch->next = (grp->node_rank + 1) % n;
    ch->prev = (grp->node_rank + n - 1) % n;
    ch->last = n - 1;
    ch->root_local = grp->rank_local[op->desc.root];
    /* Broadcast starts at the root's node; reduce ends there. */
    ch->pos = ch->bcast ? (grp->node_rank + n - root_node) % n
                        : (grp->node_rank + n - root_node - 1) % n;
    ch->col_events = (ch->pos > 0) + (ch->pos < ch->last);
    if (op->plan.nseg == 0) {
        coll_op_algo_done(op);
        return COLL_OK;
    }
    if (ch->bcast && ch->pos > 0 && !op->desc_ok) {
        ch->waiting_desc = 1;
        return COLL_OK;
    }
    return start_columns(op, ch);
}

static void chain_cleanup(coll_op_t *op)
{
    chain_t *ch = op->algo_state;
    if (ch == NULL) {
        return;
    }
    for (uint32_t k = 0; k < ch->ncols; k++) {
        coll_staging_put(op->job, ch->cols[k].buf);
    }
    free(ch);
    op->algo_state = NULL;
}

const coll_impl_t coll_impl_chain_bcast = {
    .name = "chain",
    .start = chain_start,
    .on_desc = chain_on_desc,
    .on_xfer = chain_on_xfer,
    .cleanup = chain_cleanup,
};

const coll_impl_t coll_impl_chain_reduce = {
    .name = "chain",
    .start = chain_start,
    .on_xfer = chain_on_xfer,
    .cleanup = chain_cleanup,
};
