/*
 * Pipelined ring among the nodes of a group (the job's world or a split one, core/group.h), with
 * its local members folded in: allreduce
 * (reduce-scatter then all-gather), reduce-scatter alone, all-gather alone.
 *
 * Ring (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters of
 * workstations"): at reduce-scatter step s node r sends chunk r-1-s and receives chunk r-2-s,
 * adding its own contribution; after N-1 steps it holds the reduction of chunk r. At
 * all-gather step s it sends chunk r-s and receives chunk r-1-s. For reduce-scatter and
 * all-gather, chunk c is the blocks of node c's ranks (plan.h, blocked plans), so node r ends
 * with exactly its ranks' results.
 *
 * Hierarchy without an extra pass: the L local ranks' inputs are never summed on their own.
 * Every reduction adds all local inputs of the piece it touches in one multi-source pass, so
 * the node acts as one rank of the ring.
 *
 * Pipelining: each chunk is cut into segments; segment j of all chunks forms column j. Columns
 * are independent: up to W run at once, each with two staging buffers. Buffer b of a column
 * receives step s (s % 2 == b), is reduced in place and forwarded as step s+1, and is posted
 * for step s+2 once that send completed. Every node posts receive s+2 only after its send s+1
 * completed, which needs the next node's receive s+1, and so on down to steps 0 and 1 that
 * need nothing: no cycle of waits, whatever the timing, with 2 buffers per column.
 * Column j reads the inputs and writes the outputs of piece j of every chunk only, and only while
 * it runs: with a gate (op->gate, the staged path's copies in and back, engine/dev_staged.h) a
 * column starts once the gate let it in, and the gate hears of each column done. A node that
 * waits for its gate only delays its columns: the others' messages wait unexpected, as for a
 * slow node, and nothing on the wire changes.
 *
 * What is written where, and when (no output before agreement): reduce-scatter writes only
 * staging; its last step writes the node's own chunk into the outputs, which can only happen
 * after the data passed every node, each of which checked its predecessor's descriptor first.
 * All-gather receives land directly in local rank 0's output (copied to the other local ranks).
 *
 * A staged operation (the parameter service's step, engine/stage.h) is an allreduce whose own
 * chunk goes through its stage between the phases: the final reduce-scatter step writes a
 * piece into local rank 0's input instead of the outputs, the stage updates the outputs from it,
 * and the all-gather sends the outputs. With a barrier stage the ring runs in two passes over
 * the columns: every column's reduce-scatter, then (once the stage resumed the operation) every
 * column's all-gather; the bytes are those of the allreduce either way.
 */
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/staging.h"
#include "engine/algos/algos.h"
#include "engine/combine.h"
#include "engine/op.h"
#include "engine/stage.h"
#include "net/transport.h"
#include "proto/tag.h"

typedef struct {
    uint64_t j;               /* column index */
    int busy;                 /* runs column j (else the slot is free) */
    uint32_t events;          /* completed transfers of this column */
    uint8_t *buf[2];          /* staging, one segment each (reduce-scatter only) */
    coll_xfer_t rs_recv[2];   /* by buffer */
    coll_xfer_t rs_send[2];   /* forward of rs_recv[b] */
    coll_xfer_t send0;        /* reduce-scatter step 0: this node's own contribution */
    coll_xfer_t *ag_recv;     /* [N-1] by step */
    coll_xfer_t *ag_send;     /* [N-1] by step */
} ring_col_t;

typedef struct {
    uint32_t n, r, next, prev, nlocal;
    size_t partial_esize;     /* bytes of one element of a reduce-scatter message */
    int rs, ag;               /* phases this operation runs (in this pass) */
    const coll_stage_calls_t *stage; /* the own chunk goes through it (stage.h), or NULL */
    int split;                /* staged with a barrier: the all-gather is a second pass */
    uint32_t ag_step_base;    /* receive steps before the all-gather's (timeline) */
    int send0_staged;         /* step 0 sends a combination of the inputs, from buffer 1 */
    uint32_t col_events;      /* transfers per column */
    uint32_t ncols;           /* columns in flight at most */
    uint64_t next_col;        /* next column to start */
    uint64_t cols_reduced;    /* columns whose reduce-scatter finished */
    uint64_t cols_done;
    uint32_t nsteps;          /* receive steps of the operation: N-1 per phase */
    uint32_t steps_done;      /* steps received by every column (coll_op_mark_step()) */
    uint64_t *step_cols;      /* [nsteps] columns that received each step */
    ring_col_t *cols;
} ring_t;

static uint32_t mod_n(const ring_t *g, int64_t v)
{
    int64_t n = g->n;
    return (uint32_t)(((v % n) + n) % n);
}

static uint32_t rs_send_chunk(const ring_t *g, uint32_t s)
{
    return mod_n(g, (int64_t)g->r - 1 - s);
}

static uint32_t rs_recv_chunk(const ring_t *g, uint32_t s)
{
    return mod_n(g, (int64_t)g->r - 2 - s);
}

static uint32_t ag_recv_chunk(const ring_t *g, uint32_t s)
{
    return mod_n(g, (int64_t)g->r - 1 - s);
}

static size_t bytes(const coll_op_t *op, uint64_t elems)
{
    return (size_t)(elems * op->esize);
}

/* Reduce-scatter carries partial results: float32 for 16-bit sums (combine.h). */
static size_t partial_bytes(const coll_op_t *op, const ring_t *g, uint64_t elems)
{
    return (size_t)(elems * g->partial_esize);
}

static uint8_t *at(const void *base, const coll_op_t *op, uint64_t elems)
{
    return (uint8_t *)base + bytes(op, elems);
}

/* Local rank 0's output holds every all-gathered piece; the others get copies. */
static void copy_to_other_locals(coll_op_t *op, coll_piece_t p)
{
    for (uint32_t l = 1; l < op->nbufs; l++) {
        memcpy(at(op->out[l], op, p.off), at(op->out[0], op, p.off), bytes(op, p.len));
    }
}

static void xfer_init(coll_xfer_t *x, coll_op_t *op, unsigned kind, int is_send, uint32_t slot,
                      uint32_t step)
{
    x->op = op;
    x->kind = (uint8_t)kind;
    x->is_send = (uint8_t)is_send;
    x->slot = (uint16_t)slot;
    x->step = step;
}

static size_t xfer_bytes(const coll_op_t *op, const ring_t *g, const coll_xfer_t *x,
                         uint64_t elems)
{
    return x->kind == COLL_TAG_RS ? partial_bytes(op, g, elems) : bytes(op, elems);
}

static coll_status_t post_send(coll_op_t *op, ring_t *g, coll_xfer_t *x, ring_col_t *c,
                               const void *buf, uint64_t elems)
{
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, x->kind, x->step, c->j);
    return coll_op_send(op, g->next, tag, buf, xfer_bytes(op, g, x, elems), x);
}

static coll_status_t post_recv(coll_op_t *op, ring_t *g, coll_xfer_t *x, ring_col_t *c,
                               void *buf, uint64_t elems)
{
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, x->kind, x->step, c->j);
    return coll_op_recv(op, g->prev, tag, buf, xfer_bytes(op, g, x, elems), x);
}

static coll_status_t post_rs_recv(coll_op_t *op, ring_t *g, ring_col_t *c, uint32_t s)
{
    coll_piece_t p = coll_plan_piece(&op->plan, rs_recv_chunk(g, s), c->j);
    coll_xfer_t *x = &c->rs_recv[s % 2];
    xfer_init(x, op, COLL_TAG_RS, 0, (uint32_t)(c - g->cols), s);
    return post_recv(op, g, x, c, c->buf[s % 2], p.len);
}

static coll_status_t post_ag_send(coll_op_t *op, ring_t *g, ring_col_t *c, uint32_t s,
                                  const void *src, uint64_t elems)
{
    coll_xfer_t *x = &c->ag_send[s];
    xfer_init(x, op, COLL_TAG_AG, 1, (uint32_t)(c - g->cols), s);
    return post_send(op, g, x, c, src, elems);
}

/* Reduce-scatter step 0: this node's contribution to chunk r-1, summed over the local ranks. */
static coll_status_t post_send0(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_piece_t p = coll_plan_piece(&op->plan, rs_send_chunk(g, 0), c->j);
    const void *src = at(op->in[0], op, p.off);

    if (g->send0_staged) {
        coll_combine_locals(op, p.off, p.len, c->buf[1], NULL, 0);
        src = c->buf[1];
    }
    xfer_init(&c->send0, op, COLL_TAG_RS, 1, (uint32_t)(c - g->cols), 0);
    return post_send(op, g, &c->send0, c, src, p.len);
}

/* All-gather alone, step 0: this node's ranks' own blocks, straight from their inputs, also
 * copied into every local output. */
static coll_status_t post_ag_own(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_piece_t p = coll_plan_piece(&op->plan, g->r, c->j);
    const uint8_t *src = at(op->in[p.local], op, p.block_off);

    for (uint32_t l = 0; l < g->nlocal; l++) {
        uint8_t *dst = at(op->out[l], op, p.off);
        if (dst != src) {
            memcpy(dst, src, bytes(op, p.len));
        }
    }
    return post_ag_send(op, g, c, 0, src, p.len);
}

/* A staged operation's own piece of column c, updated by the stage, to every local output and
 * to the next node. */
static coll_status_t post_ag_updated(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_piece_t p = coll_plan_piece(&op->plan, g->r, c->j);

    g->stage->distribute(op, p.off, p.len);
    if (op->done) {
        return COLL_OK;
    }
    copy_to_other_locals(op, p);
    return post_ag_send(op, g, c, 0, at(op->out[0], op, p.off), p.len);
}

static coll_status_t post_ag_recvs(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_status_t st = COLL_OK;
    for (uint32_t s = 0; s + 1 < g->n && st == COLL_OK; s++) {
        coll_piece_t p = coll_plan_piece(&op->plan, ag_recv_chunk(g, s), c->j);
        coll_xfer_t *x = &c->ag_recv[s];
        xfer_init(x, op, COLL_TAG_AG, 0, (uint32_t)(c - g->cols), s);
        st = post_recv(op, g, x, c, at(op->out[0], op, p.off), p.len);
    }
    return st;
}

static coll_status_t col_start(coll_op_t *op, ring_t *g, ring_col_t *c, uint64_t j)
{
    coll_status_t st = COLL_OK;

    c->j = j;
    c->events = 0;
    if (g->ag) {
        st = post_ag_recvs(op, g, c);
    }
    if (!g->rs && st == COLL_OK) {
        return g->stage != NULL ? post_ag_updated(op, g, c) : post_ag_own(op, g, c);
    } else if (!g->rs) {
        return st;
    }
    if (st == COLL_OK) {
        st = post_rs_recv(op, g, c, 0);
    }
    if (st == COLL_OK) {
        st = post_send0(op, g, c);
    }
    /* Buffer 1 is free at once unless it holds the local sum being sent at step 0. */
    if (st == COLL_OK && g->n > 2 && !g->send0_staged) {
        st = post_rs_recv(op, g, c, 1);
    }
    return st;
}

/* The last reduce-scatter step: chunk r is final. Allreduce starts the all-gather from it;
 * reduce-scatter hands each block to its rank. */
static coll_status_t rs_final(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    coll_piece_t p = coll_plan_piece(&op->plan, g->r, c->j);
    uint8_t *dst;

    if (++g->cols_reduced == op->plan.nseg) {
        coll_op_mark_reduced(op);
    }
    if (g->stage != NULL) {
        void *grad = at(op->in[0], op, p.off);
        coll_combine_locals(op, p.off, p.len, grad, c->buf[x->step % 2], 1);
        g->stage->reduced(op, p.off, p.len);
        return g->split || op->done ? COLL_OK : post_ag_updated(op, g, c);
    }
    if (!g->ag) {
        coll_combine_locals(op, p.off, p.len, at(op->out[p.local], op, p.block_off),
                            c->buf[x->step % 2], 1);
        return COLL_OK;
    }
    dst = at(op->out[0], op, p.off);
    coll_combine_locals(op, p.off, p.len, dst, c->buf[x->step % 2], 1);
    copy_to_other_locals(op, p);
    return post_ag_send(op, g, c, 0, dst, p.len);
}

static coll_status_t on_rs_recv(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    uint32_t s = x->step, b = s % 2;
    coll_piece_t p;

    if (s + 2 == g->n) {
        return rs_final(op, g, c, x);
    }
    p = coll_plan_piece(&op->plan, rs_recv_chunk(g, s), c->j);
    coll_combine_locals(op, p.off, p.len, c->buf[b], c->buf[b], 0);
    xfer_init(&c->rs_send[b], op, COLL_TAG_RS, 1, (uint32_t)(c - g->cols), s + 1);
    return post_send(op, g, &c->rs_send[b], c, c->buf[b], p.len);
}

/* A reduce-scatter send completed: its buffer takes the receive two steps later. */
static coll_status_t on_rs_send(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    uint32_t s = x->step;
    if (s == 0) {
        return (g->send0_staged && g->n > 2) ? post_rs_recv(op, g, c, 1) : COLL_OK;
    }
    return s + 1 <= g->n - 2 ? post_rs_recv(op, g, c, s + 1) : COLL_OK;
}

static coll_status_t on_ag_recv(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    coll_piece_t p = coll_plan_piece(&op->plan, ag_recv_chunk(g, x->step), c->j);
    copy_to_other_locals(op, p);
    return x->step + 2 < g->n ? post_ag_send(op, g, c, x->step + 1, at(op->out[0], op, p.off),
                                             p.len)
                              : COLL_OK;
}

static void release_staging(coll_op_t *op, ring_t *g)
{
    for (uint32_t k = 0; k < g->ncols; k++) {
        if (g->cols[k].buf[0] != NULL) {
            coll_staging_put(op->job, g->cols[k].buf[0]);
            g->cols[k].buf[0] = g->cols[k].buf[1] = NULL;
        }
    }
}

/* Start the columns the gate let in (op->gate; every column without one) in the free slots.
 * @return COLL_OK or the transport's error. */
static coll_status_t start_columns(coll_op_t *op, ring_t *g)
{
    uint64_t in = op->gate != NULL ? op->gate->ready(op) : op->plan.nseg;
    coll_status_t st = COLL_OK;

    in = in < op->plan.nseg ? in : op->plan.nseg;
    for (uint32_t k = 0; k < g->ncols && g->next_col < in && st == COLL_OK && !op->done; k++) {
        if (!g->cols[k].busy) {
            g->cols[k].busy = 1;
            st = col_start(op, g, &g->cols[k], g->next_col++);
        }
    }
    return st;
}

static void col_done(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    c->busy = 0;
    g->cols_done++;
    if (op->gate != NULL && !(g->split && g->rs)) { /* a split's outputs wait for its stage */
        op->gate->final(op, c->j);                  /* may fail the job */
        if (op->done) {
            return;
        }
    }
    if (g->cols_done == op->plan.nseg && g->split && g->rs) {
        release_staging(op, g); /* the all-gather needs none, and the stage may wait long */
        g->stage->all_reduced(op);
    } else if (g->cols_done == op->plan.nseg) {
        coll_op_algo_done(op);
    } else if (start_columns(op, g) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "ring: posting column %llu failed",
                      (unsigned long long)g->next_col - 1);
    }
}

/* A column received step @p k (reduce-scatter steps first): record the steps that every
 * column has received, in order, for the timeline (coll_req_steps()). */
static void step_received(coll_op_t *op, ring_t *g, uint32_t k)
{
    uint32_t per_phase = g->n - 1;

    g->step_cols[k]++;
    while (g->steps_done < g->nsteps && g->step_cols[g->steps_done] == op->plan.nseg) {
        uint32_t s = g->steps_done++;
        int ag = s >= g->ag_step_base;
        coll_op_mark_step(op, ag ? COLL_STEP_ALLGATHER : COLL_STEP_REDUCE_SCATTER,
                          s % per_phase, per_phase, COLL_CTL_RING_PHASE_STEPS);
    }
}

static void ring_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    ring_t *g = op->algo_state;
    ring_col_t *c = &g->cols[x->slot];
    coll_status_t st;

    if (x->kind == COLL_TAG_RS) {
        st = x->is_send ? on_rs_send(op, g, c, x) : on_rs_recv(op, g, c, x);
    } else {
        st = x->is_send ? COLL_OK : on_ag_recv(op, g, c, x);
    }
    if (st != COLL_OK) {
        coll_job_fail(op->job, st, 1, "ring: posting a transfer failed");
        return;
    }
    if (!x->is_send) {
        step_received(op, g, x->step + (x->kind == COLL_TAG_AG ? g->ag_step_base : 0));
    }
    if (++c->events == g->col_events) {
        col_done(op, g, c);
    }
}

static coll_status_t ring_alloc(coll_op_t *op, ring_t **g_p)
{
    coll_job_t *job = op->job;
    uint32_t n = op->grp->nnodes;
    uint64_t depth = job->params.pipeline_depth;
    uint64_t ncols = op->plan.nseg < depth ? op->plan.nseg : depth;
    size_t xfers = 2 * (size_t)(n - 1);
    ring_t *g = calloc(1, sizeof(*g) + xfers * sizeof(uint64_t) +
                              ncols * (sizeof(ring_col_t) + xfers * sizeof(coll_xfer_t)));

    if (g == NULL) {
        return COLL_ERR_NOMEM;
    }
    *g_p = g;
    g->step_cols = (uint64_t *)(g + 1);
    g->cols = (ring_col_t *)(g->step_cols + xfers);
    for (uint64_t k = 0; k < ncols; k++) {
        coll_xfer_t *xs = (coll_xfer_t *)(g->cols + ncols) + k * xfers;
        g->cols[k].ag_recv = xs;
        g->cols[k].ag_send = xs + (n - 1);
        g->ncols = (uint32_t)k + 1;
        if (op->desc.coll != COLL_KIND_ALLGATHER) {
            if ((g->cols[k].buf[0] = coll_staging_get(job)) == NULL) {
                g->ncols = (uint32_t)k;
                return COLL_ERR_NOMEM;
            }
            g->cols[k].buf[1] = g->cols[k].buf[0] + job->engine.staging_bytes / 2;
        }
    }
    return COLL_OK;
}

/* Segments are cut by the size of a partial result, so a float32 partial of 16-bit data
 * fills one staging segment. The same plan on every call (coll_impl_t.plan). */
static void ring_plan(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    size_t es = coll_combine_partial_esize(op), seg = op->job->params.segment_bytes;
    if (op->desc.coll == COLL_KIND_ALLREDUCE || op->desc.coll == COLL_KIND_PS_STEP) {
        coll_plan_init(&op->plan, op->desc.count, grp->nnodes, es, seg);
    } else {
        coll_plan_init_blocked(&op->plan, op->desc.count, grp->nnodes, es, seg, grp->node_ranks,
                               grp->node_nranks);
    }
}

static coll_status_t ring_start(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    ring_t *g = NULL;
    coll_status_t st;

    ring_plan(op);
    st = ring_alloc(op, &g);
    op->algo_state = g;
    if (st != COLL_OK) {
        return st;
    }
    g->n = grp->nnodes;
    g->r = grp->node_rank;
    g->next = (g->r + 1) % g->n;
    g->prev = (g->r + g->n - 1) % g->n;
    g->nlocal = op->nbufs; /* 1 for a node-reduced allreduce: the node buffer */
    g->partial_esize = coll_combine_partial_esize(op);
    /* Step 0 sends a partial result: a combination of the inputs unless one raw input already
     * is one (a single local rank, no scaling, the input's own size). */
    g->send0_staged = g->nlocal > 1 || coll_combine_transforms_raw(op) ||
                      g->partial_esize != op->esize;
    g->rs = op->desc.coll != COLL_KIND_ALLGATHER;
    g->ag = op->desc.coll != COLL_KIND_REDUCE_SCATTER;
    g->stage = coll_op_stage(op) != NULL ? coll_op_stage(op)->calls : NULL;
    g->split = g->stage != NULL && coll_op_stage(op)->barrier;
    g->nsteps = (g->n - 1) * (uint32_t)(g->rs + g->ag);
    g->ag_step_base = g->rs ? g->n - 1 : 0;
    g->ag = g->ag && !g->split; /* the all-gather waits until the stage resumes it */
    g->col_events = 2 * (g->n - 1) * (uint32_t)(g->rs + g->ag);
    if (op->plan.nseg == 0) {
        coll_op_algo_done(op);
        return COLL_OK;
    }
    return start_columns(op, g);
}

/* The second pass of a split operation: every column's all-gather of the updated chunk. */
static void ring_resume(coll_op_t *op)
{
    ring_t *g = op->algo_state;

    g->rs = 0;
    g->ag = 1;
    g->col_events = 2 * (g->n - 1);
    g->cols_done = 0;
    g->next_col = 0;
    if (start_columns(op, g) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "ring: posting the all-gather failed");
    }
}

/* The gate let more columns in (coll_op_gate_opened()). */
static void ring_opened(coll_op_t *op)
{
    ring_t *g = op->algo_state;

    if (g != NULL && start_columns(op, g) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "ring: posting column %llu failed",
                      (unsigned long long)g->next_col - 1);
    }
}

static void ring_cleanup(coll_op_t *op)
{
    ring_t *g = op->algo_state;
    if (g == NULL) {
        return;
    }
    release_staging(op, g);
    free(g);
    op->algo_state = NULL;
}

const coll_impl_t coll_impl_ring = {
    .name = "ring",
    .start = ring_start,
    .on_xfer = ring_on_xfer,
    .cleanup = ring_cleanup,
    .resume = ring_resume,
    .plan = ring_plan,
    .opened = ring_opened,
};
