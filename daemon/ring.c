/*
 * Pipelined ring allreduce among the nodes of a job, with the local ranks folded in.
 *
 * Ring allreduce (Patarasuk & Yuan 2009, "Bandwidth optimal all-reduce algorithms for clusters
 * of workstations"): node r owns chunk r+1 after a reduce-scatter of N-1 steps, then an
 * all-gather of N-1 steps spreads the owned chunks. At reduce-scatter step s node r sends chunk
 * r-s and receives chunk r-s-1; at all-gather step s it sends chunk r+1-s and receives chunk r-s.
 *
 * Hierarchy without an extra pass: the L local ranks' buffers are never summed on their own.
 * Every reduction adds all L local inputs of the piece it touches (one pass over memory, a
 * multi-source kernel), so the node acts as one rank of the ring.
 *
 * Pipelining: each chunk is cut into segments (plan.h); segment j of all chunks forms column j.
 * Columns are independent: up to W run at once, each with two staging buffers. Buffer b of a
 * column receives step s (s % 2 == b), is reduced in place and forwarded as step s+1, and is
 * posted for step s+2 once that send completed. Every node posts receive s+2 only after its
 * send s+1 completed, which needs the next node's receive s+1, and so on down to steps 0 and 1
 * that need nothing: no cycle of waits, whatever the timing, with 2 buffers per column.
 *
 * What is written where, and when (no output before agreement): reduce-scatter writes only
 * staging; the last reduce-scatter step writes the node's owned piece into the outputs, and it
 * can only run after every node checked its predecessor's descriptor (the data has passed
 * through all of them). All-gather receives land directly in local rank 0's output.
 */
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "log.h"
#include "op.h"
#include "staging.h"
#include "tag.h"
#include "transport.h"

typedef struct {
    uint64_t j;               /* column index */
    uint32_t events;          /* completed transfers, of 4(N-1) */
    int active;
    uint8_t *buf[2];          /* staging, seg bytes each */
    coll_xfer_t rs_recv[2];   /* by buffer */
    coll_xfer_t rs_send[2];   /* forward of rs_recv[b] */
    coll_xfer_t send0;        /* reduce-scatter step 0: this node's own piece */
    coll_xfer_t *ag_recv;     /* [N-1] by step */
    coll_xfer_t *ag_send;     /* [N-1] by step */
} ring_col_t;

typedef struct {
    uint32_t n, r, next, prev, nlocal;
    uint32_t ncols;           /* columns in flight at most */
    uint64_t next_col;        /* next column to start */
    uint64_t cols_done;
    ring_col_t *cols;
} ring_t;

static uint32_t mod_n(const ring_t *g, int64_t v)
{
    int64_t n = g->n;
    return (uint32_t)(((v % n) + n) % n);
}

/* Chunk received at reduce-scatter step s, and at all-gather step s. */
static uint32_t rs_recv_chunk(const ring_t *g, uint32_t s)
{
    return mod_n(g, (int64_t)g->r - s - 1);
}

static uint32_t ag_recv_chunk(const ring_t *g, uint32_t s)
{
    return mod_n(g, (int64_t)g->r - s);
}

static size_t bytes(const coll_op_t *op, uint64_t elems)
{
    return (size_t)(elems * op->esize);
}

/* Combine @p extra (or nothing) with every local rank's input over @p seg into @p dst. The
 * kernel reduces in place only through its first source, so the one @p dst equals goes first. */
static void reduce_locals(coll_op_t *op, coll_range_t seg, void *dst, const void *extra,
                          int finalize)
{
    const void *srcs[1 + COLL_MAX_LOCAL];
    unsigned n = 0;
    size_t off = bytes(op, seg.off);

    if (extra != NULL) {
        srcs[n++] = extra;
    }
    for (uint32_t l = 0; l < op->job->local_size; l++) {
        srcs[n++] = (const uint8_t *)op->in[l] + off;
    }
    for (unsigned k = 1; k < n; k++) {
        if (srcs[k] == dst) {
            srcs[k] = srcs[0];
            srcs[0] = dst;
        }
    }
    coll_reduce(op->desc.dtype, op->desc.op, finalize, op->desc.world_size, dst, srcs, n,
                seg.len);
}

static void copy_to_other_locals(coll_op_t *op, coll_range_t seg)
{
    size_t off = bytes(op, seg.off);
    for (uint32_t l = 1; l < op->job->local_size; l++) {
        memcpy((uint8_t *)op->out[l] + off, (const uint8_t *)op->out[0] + off, bytes(op, seg.len));
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

static coll_status_t post_send(coll_op_t *op, ring_t *g, coll_xfer_t *x, ring_col_t *c,
                               const void *buf, uint64_t elems)
{
    uint64_t tag = coll_tag_make(op->desc.key, x->kind, x->step, c->j);
    return coll_transport_send(op->job, g->next, tag, buf, bytes(op, elems), x);
}

static coll_status_t post_recv(coll_op_t *op, coll_xfer_t *x, ring_col_t *c, void *buf,
                               uint64_t elems)
{
    const ring_t *g = op->algo_state;
    uint64_t tag = coll_tag_make(op->desc.key, x->kind, x->step, c->j);
    return coll_transport_recv(op->job, g->prev, tag, buf, bytes(op, elems), x);
}

static coll_status_t post_rs_recv(coll_op_t *op, ring_t *g, ring_col_t *c, uint32_t s)
{
    coll_range_t seg = coll_plan_segment(&op->plan, rs_recv_chunk(g, s), c->j);
    coll_xfer_t *x = &c->rs_recv[s % 2];
    xfer_init(x, op, COLL_TAG_RS, 0, (uint32_t)(c - g->cols), s);
    return post_recv(op, x, c, c->buf[s % 2], seg.len);
}

static coll_status_t post_ag_send(coll_op_t *op, ring_t *g, ring_col_t *c, uint32_t s,
                                  coll_range_t seg)
{
    coll_xfer_t *x = &c->ag_send[s];
    xfer_init(x, op, COLL_TAG_AG, 1, (uint32_t)(c - g->cols), s);
    return post_send(op, g, x, c, (uint8_t *)op->out[0] + bytes(op, seg.off), seg.len);
}

/* Reduce-scatter step 0: this node's own piece of chunk r, summed over the local ranks. */
static coll_status_t post_send0(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_range_t seg = coll_plan_segment(&op->plan, g->r, c->j);
    const void *src = (const uint8_t *)op->in[0] + bytes(op, seg.off);

    if (g->nlocal > 1) {
        reduce_locals(op, seg, c->buf[1], NULL, 0);
        src = c->buf[1];
    }
    xfer_init(&c->send0, op, COLL_TAG_RS, 1, (uint32_t)(c - g->cols), 0);
    return post_send(op, g, &c->send0, c, src, seg.len);
}

static coll_status_t col_start(coll_op_t *op, ring_t *g, ring_col_t *c, uint64_t j)
{
    coll_status_t st = COLL_OK;

    c->j = j;
    c->events = 0;
    c->active = 1;
    for (uint32_t s = 0; s + 1 < g->n && st == COLL_OK; s++) {
        coll_range_t seg = coll_plan_segment(&op->plan, ag_recv_chunk(g, s), j);
        coll_xfer_t *x = &c->ag_recv[s];
        xfer_init(x, op, COLL_TAG_AG, 0, (uint32_t)(c - g->cols), s);
        st = post_recv(op, x, c, (uint8_t *)op->out[0] + bytes(op, seg.off), seg.len);
    }
    if (st == COLL_OK) {
        st = post_rs_recv(op, g, c, 0);
    }
    if (st == COLL_OK) {
        st = post_send0(op, g, c);
    }
    /* Buffer 1 is free at once unless it holds the local sum being sent at step 0. */
    if (st == COLL_OK && g->n > 2 && g->nlocal == 1) {
        st = post_rs_recv(op, g, c, 1);
    }
    return st;
}

/* The last reduce-scatter step: the owned piece is final; all-gather starts from it. */
static coll_status_t rs_final(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    coll_range_t seg = coll_plan_segment(&op->plan, rs_recv_chunk(g, x->step), c->j);
    void *dst = (uint8_t *)op->out[0] + bytes(op, seg.off);

    reduce_locals(op, seg, dst, c->buf[x->step % 2], 1);
    copy_to_other_locals(op, seg);
    return post_ag_send(op, g, c, 0, seg);
}

static coll_status_t on_rs_recv(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    uint32_t s = x->step, b = s % 2;
    coll_range_t seg;

    if (s + 2 == g->n) {
        return rs_final(op, g, c, x);
    }
    seg = coll_plan_segment(&op->plan, rs_recv_chunk(g, s), c->j);
    reduce_locals(op, seg, c->buf[b], c->buf[b], 0);
    xfer_init(&c->rs_send[b], op, COLL_TAG_RS, 1, (uint32_t)(c - g->cols), s + 1);
    return post_send(op, g, &c->rs_send[b], c, c->buf[b], seg.len);
}

/* A reduce-scatter send completed: its buffer takes the receive two steps later. */
static coll_status_t on_rs_send(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    uint32_t s = x->step;
    if (s == 0) {
        return (g->nlocal > 1 && g->n > 2) ? post_rs_recv(op, g, c, 1) : COLL_OK;
    }
    return s + 1 <= g->n - 2 ? post_rs_recv(op, g, c, s + 1) : COLL_OK;
}

static coll_status_t on_ag_recv(coll_op_t *op, ring_t *g, ring_col_t *c, coll_xfer_t *x)
{
    coll_range_t seg = coll_plan_segment(&op->plan, ag_recv_chunk(g, x->step), c->j);
    copy_to_other_locals(op, seg);
    return x->step + 2 < g->n ? post_ag_send(op, g, c, x->step + 1, seg) : COLL_OK;
}

static void col_done(coll_op_t *op, ring_t *g, ring_col_t *c)
{
    coll_status_t st;

    c->active = 0;
    g->cols_done++;
    if (g->cols_done == op->plan.nseg) {
        coll_op_algo_done(op);
        return;
    }
    if (g->next_col < op->plan.nseg) {
        st = col_start(op, g, c, g->next_col++);
        if (st != COLL_OK) {
            coll_job_fail(op->job, st, 1, "ring: posting column %llu failed",
                          (unsigned long long)c->j);
        }
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
        coll_job_fail(op->job, st, 1, "ring: posting a transfer failed (key %llu)",
                      (unsigned long long)op->desc.key);
        return;
    }
    if (++c->events == 4 * (g->n - 1)) {
        col_done(op, g, c);
    }
}

static coll_status_t ring_alloc(coll_op_t *op, ring_t **g_p)
{
    coll_job_t *job = op->job;
    uint32_t n = job->nnodes;
    uint64_t ncols = op->plan.nseg < job->d->cfg.pipeline_depth ? op->plan.nseg
                                                                 : job->d->cfg.pipeline_depth;
    size_t xfers = 2 * (size_t)(n - 1);
    ring_t *g = calloc(1, sizeof(*g) + ncols * (sizeof(ring_col_t) + xfers * sizeof(coll_xfer_t)));

    if (g == NULL) {
        return COLL_ERR_NOMEM;
    }
    g->cols = (ring_col_t *)(g + 1);
    for (uint64_t k = 0; k < ncols; k++) {
        coll_xfer_t *xs = (coll_xfer_t *)(g->cols + ncols) + k * xfers;
        g->cols[k].ag_recv = xs;
        g->cols[k].ag_send = xs + (n - 1);
        g->cols[k].buf[0] = coll_staging_get(job);
        if (g->cols[k].buf[0] == NULL) {
            g->ncols = (uint32_t)k;
            *g_p = g;
            return COLL_ERR_NOMEM;
        }
        g->cols[k].buf[1] = g->cols[k].buf[0] + job->staging_bytes / 2;
    }
    g->ncols = (uint32_t)ncols;
    *g_p = g;
    return COLL_OK;
}

static coll_status_t ring_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    ring_t *g = NULL;
    coll_status_t st = ring_alloc(op, &g);

    op->algo_state = g;
    if (st != COLL_OK) {
        return st;
    }
    g->n = job->nnodes;
    g->r = job->node_rank;
    g->next = (g->r + 1) % g->n;
    g->prev = (g->r + g->n - 1) % g->n;
    g->nlocal = job->local_size;
    if (op->plan.nseg == 0) {
        coll_op_algo_done(op);
        return COLL_OK;
    }
    for (uint32_t k = 0; k < g->ncols && st == COLL_OK; k++) {
        st = col_start(op, g, &g->cols[k], g->next_col++);
    }
    return st;
}

static void ring_cleanup(coll_op_t *op)
{
    ring_t *g = op->algo_state;
    if (g == NULL) {
        return;
    }
    for (uint32_t k = 0; k < g->ncols; k++) {
        coll_staging_put(op->job, g->cols[k].buf[0]);
    }
    free(g);
    op->algo_state = NULL;
}

const coll_algo_t coll_algo_ring = {
    .name = "ring",
    .start = ring_start,
    .on_xfer = ring_on_xfer,
    .cleanup = ring_cleanup,
};
