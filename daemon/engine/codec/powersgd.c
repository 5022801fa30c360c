/*
 * PowerSGD (Vogels, Karimireddy, Jaggi, NeurIPS 2019, arXiv 1905.13727), as PyTorch's DDP hook
 * does it (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py, powerSGD_hook()): the
 * bucket's registered layout cuts it into tensors, each an n x m matrix (shapes.c). A matrix is
 * compressed at rank r = min(n, m, rank) when (n + m) r x 2 < n m (min_compression_rate 2);
 * the other tensors (vectors, small matrices) travel uncompressed, in one batch with the P's.
 * For M = g + e of every compressed matrix (g: the local ranks' sum; e: this node's residual):
 *
 *   Q orthonormalized (drawn from a seed the nodes share the first time, coll_lowrank_init_q();
 *     warm-started from the last step after that)
 *   P = M Q                                            begin
 *   rounds 0, 1: allreduce [every P | every uncompressed tensor] (sum for the P's: their scale
 *     is irrelevant; the uncompressed tensors times the weight, 1/world for COLL_AVG)
 *   P orthonormalized; Q = M^T P                       after round 1
 *   rounds 2, 3: allreduce [every Q] times the weight (the mean for COLL_AVG, as PyTorch
 *     divides by the world size)
 *   result = P Q^T; e' = M - a P Q^T; Q kept for the next step    after round 3
 *
 * PowerSGD's averaging (where implementations differ): as PyTorch's hook, a rank's error is its
 * M minus the averaged reconstruction P Qbar^T (Qbar the mean of the Q's), not minus its own
 * share P Q_w^T. A node holds the sum of its L local ranks, so its error is their sum,
 * M - L P Qbar^T: with the result P Q^T = weight x the sum of contributions, a = L / (weight x
 * world), which is 1 for COLL_AVG of float32 with one rank per node (PyTorch's case), L for
 * COLL_AVG and 1 / N for COLL_SUM. So the nodes' errors and the result add up to the inputs
 * (error feedback's identity).
 *
 * Both allreduces are dense.c's (a reduce-scatter of chunks summed by their owner in rank
 * order, then an all-gather), so every node has the same P and Q bits. A sum that overflows
 * float32 (or a P or Q that did) is found by its chunk's owner and fails the operation on
 * every node before any of the result is written; so does a Q whose reconstruction P Q^T could
 * overflow (psgd_too_large(), the same answer on every node). Orthonormalization is
 * the kernel's Gram-Schmidt with epsilon 0 (PyTorch's default orthogonalization_epsilon): an
 * all-zero column stays zero instead of becoming NaN (kernels/cpu/lowrank.h).
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/codec/internal.h"
#include "kernels/compress.h"

#define MIN_RATE 2.0

/* A tensor of the layout: where it is, and where its factors are. */
typedef struct {
    uint64_t off, rows, cols;
    unsigned rank;   /* 0: not compressed */
    uint64_t p_off;  /* compressed: P in A; else: its values in A */
    uint64_t q_off;  /* compressed: Q in the Q array */
} tensor_t;

/* Tensor @p t of @p l, with the sums of the factor sizes before it in @p lp, @p ld, @p lb. */
static tensor_t tensor_at(const coll_tensor_layout_t *l, size_t t, unsigned rank, uint64_t *off,
                          uint64_t *lp, uint64_t *ld, uint64_t *lb)
{
    tensor_t x = {*off, l->shape[2 * t], l->shape[2 * t + 1], 0, 0, 0};
    unsigned r = coll_lowrank_rank(x.rows, x.cols, rank);

    if (coll_lowrank_should_compress(x.rows, x.cols, r, MIN_RATE)) {
        x.rank = r;
        x.p_off = *lp;
        x.q_off = *lb;
        *lp += x.rows * r;
        *lb += x.cols * r;
    } else {
        x.p_off = *ld; /* relative to the end of the P's */
        *ld += x.rows * x.cols;
    }
    *off += x.rows * x.cols;
    return x;
}

/* The sizes of A = [P's | uncompressed tensors] and of the Q array. */
static void totals(const coll_tensor_layout_t *l, unsigned rank, uint64_t *lp, uint64_t *la,
                   uint64_t *lb)
{
    uint64_t off = 0, ld = 0;

    *lp = *lb = 0;
    for (size_t t = 0; t < l->ntensors; t++) {
        tensor_at(l, t, rank, &off, lp, &ld, lb);
    }
    *la = *lp + ld;
}

typedef struct {
    uint64_t lp, la, lb;
    float *a, *ar, *red, *qloc; /* in the slot's work area */
} psgd_t;

static psgd_t state_of(const coll_cx_t *cx)
{
    psgd_t s;

    totals(cx->c->layout, cx->c->run.rank, &s.lp, &s.la, &s.lb);
    s.a = cx->slot->work;
    s.ar = s.a + s.la;
    s.qloc = s.ar + s.la;
    s.red = s.qloc + s.lb;
    return s;
}

static coll_status_t psgd_sizes(coll_cx_t *cx, coll_slot_sizes_t *sz)
{
    psgd_t s = state_of(cx);
    uint64_t big = s.la > s.lb ? s.la : s.lb;

    sz->res_elems = cx->count;
    sz->q_elems = s.lb;
    sz->work_elems = 2 * s.la + s.lb + big / cx->n + 16;
    sz->send_bytes = coll__dense_msg_bytes(big, cx->n);
    sz->recv_bytes = coll__dense_msg_bytes(big, cx->n);
    return COLL_OK;
}

static void psgd_place(coll_cx_t *cx)
{
    psgd_t s = state_of(cx);
    uint64_t len = cx->round < 2 ? s.la : s.lb;

    if (cx->round % 2 == 0) {
        coll__dense_rs_place(cx, len, cx->slot->send, cx->slot->recv);
    } else {
        coll__dense_ag_place(cx, len, cx->slot->send, cx->slot->recv);
    }
}

/* The seed of tensor @p t's first Q: the same on every node of the job. */
static uint64_t seed_of(const coll_cx_t *cx, size_t t)
{
    uint64_t h = 0xcbf29ce484222325ull;

    for (const char *p = cx->op->job->id; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    }
    return h ^ ((uint64_t)cx->op->desc.bucket << 32) ^ t;
}

/* Q orthonormalized (drawn first), P = M Q; the uncompressed tensors copied into A. */
static coll_status_t psgd_begin(coll_cx_t *cx)
{
    const coll_tensor_layout_t *l = cx->c->layout;
    psgd_t s = state_of(cx);
    uint64_t off = 0, lp = 0, ld = 0, lb = 0;

    for (size_t t = 0; t < l->ntensors; t++) {
        tensor_t x = tensor_at(l, t, cx->c->run.rank, &off, &lp, &ld, &lb);
        float *m = cx->in + x.off, *q = cx->slot->q + x.q_off;
        if (x.rank == 0) {
            cx->ex->copy(s.a + s.lp + x.p_off, m, x.rows * x.cols * sizeof(float));
            cx->ex->zero(m, x.rows * x.cols * sizeof(float)); /* exact: nothing left over */
            continue;
        }
        if (cx->slot->fresh) {
            cx->ex->lowrank_init_q(q, x.cols, x.rank, seed_of(cx, t));
        }
        cx->ex->lowrank_orthonormalize(q, x.cols, x.rank, 0.0f);
        cx->ex->lowrank_mul_q(m, x.rows, x.cols, q, x.rank, s.a + x.p_off);
    }
    cx->slot->fresh = 0;
    coll__dense_rs_write(cx, s.a, s.la, cx->slot->send);
    return COLL_OK;
}

/* After round 1: P orthonormalized; Q = M^T P. (The uncompressed tensors' sums wait in A until
 * the last round: nothing of the result is written before every sum was found finite.) */
static void psgd_q(coll_cx_t *cx, const psgd_t *s)
{
    const coll_tensor_layout_t *l = cx->c->layout;
    uint64_t off = 0, lp = 0, ld = 0, lb = 0;

    for (size_t t = 0; t < l->ntensors; t++) {
        tensor_t x = tensor_at(l, t, cx->c->run.rank, &off, &lp, &ld, &lb);
        if (x.rank == 0) {
            continue;
        }
        cx->ex->lowrank_orthonormalize(s->ar + x.p_off, x.rows, x.rank, 0.0f);
        cx->ex->lowrank_mul_mt(cx->in + x.off, x.rows, x.cols, s->ar + x.p_off, x.rank,
                               s->qloc + x.q_off);
    }
}

/* a of the file comment: this node's part of the result. The weight is 1 / world for an
 * average of float32 and 1 otherwise (a sum, or 16-bit inputs scaled before the sum). */
static float share_of(const coll_cx_t *cx)
{
    uint32_t local = cx->op->job->local_size;
    return cx->weight != 1.0f ? (float)local : (float)local / (float)cx->op->desc.world_size;
}

/* Whether a reconstruction P Q^T could overflow float32: P's columns are orthonormal (every
 * |p| <= 1), so |(P Q^T)_ij| <= the sum of row j of Q. Q is the same on every node, and so is
 * the answer. */
static int psgd_too_large(const coll_cx_t *cx)
{
    const coll_tensor_layout_t *l = cx->c->layout;
    uint64_t off = 0, lp = 0, ld = 0, lb = 0;

    for (size_t t = 0; t < l->ntensors; t++) {
        tensor_t x = tensor_at(l, t, cx->c->run.rank, &off, &lp, &ld, &lb);
        const float *q = cx->slot->q + x.q_off; /* column-major, cols x rank */
        for (uint64_t j = 0; j < x.cols && x.rank > 0; j++) {
            double row = 0;
            for (unsigned r = 0; r < x.rank; r++) {
                row += fabs((double)q[r * x.cols + j]);
            }
            if (row >= FLT_MAX / 2) {
                return 1;
            }
        }
    }
    return 0;
}

/* After round 3: result = P Q^T (the uncompressed tensors: their sums), e' = M - a P Q^T. */
static void psgd_finish(coll_cx_t *cx, const psgd_t *s)
{
    const coll_tensor_layout_t *l = cx->c->layout;
    uint64_t off = 0, lp = 0, ld = 0, lb = 0;
    float a = share_of(cx);

    for (size_t t = 0; t < l->ntensors; t++) {
        tensor_t x = tensor_at(l, t, cx->c->run.rank, &off, &lp, &ld, &lb);
        float *m = cx->in + x.off, *out = cx->outf + x.off;
        const float *p = s->ar + x.p_off, *q = cx->slot->q + x.q_off;
        if (x.rank == 0) {
            cx->ex->copy(out, s->ar + s->lp + x.p_off, x.rows * x.cols * sizeof(float));
        } else if (a == 1.0f) {
            cx->ex->lowrank_residual(p, q, x.rows, x.cols, x.rank, m, out);
        } else if (x.rank > 0) {
            cx->ex->lowrank_reconstruct(p, q, x.rows, x.cols, x.rank, out);
            for (uint64_t i = 0; i < x.rows * x.cols; i++) {
                m[i] -= a * out[i];
            }
        }
    }
}

static coll_status_t psgd_round_done(coll_cx_t *cx)
{
    psgd_t s = state_of(cx);
    coll_status_t st = COLL_OK;

    switch (cx->round) {
    case 0:
        if ((st = coll__dense_rs_reduce(cx, s.a, s.la, s.lp, cx->weight, s.red)) == COLL_OK) {
            coll__dense_ag_write(cx, s.red, s.la, cx->slot->send);
        }
        break;
    case 1:
        if ((st = coll__dense_ag_collect(cx, s.red, s.la, s.ar)) == COLL_OK) {
            psgd_q(cx, &s);
            coll__dense_rs_write(cx, s.qloc, s.lb, cx->slot->send);
        }
        break;
    case 2:
        if ((st = coll__dense_rs_reduce(cx, s.qloc, s.lb, 0, cx->weight, s.red)) == COLL_OK) {
            coll__dense_ag_write(cx, s.red, s.lb, cx->slot->send);
        }
        break;
    default:
        if ((st = coll__dense_ag_collect(cx, s.red, s.lb, cx->slot->q)) == COLL_OK) {
            st = psgd_too_large(cx) ? COLL_ERR_INVALID : COLL_OK;
        }
        if (st == COLL_OK) {
            psgd_finish(cx, &s);
        }
        break;
    }
    return st;
}

static double psgd_wire(uint64_t count, uint32_t n, const coll_compression_t *run,
                        const coll_tensor_layout_t *layout)
{
    uint64_t lp, la, lb;

    (void)count;
    totals(layout, run->rank, &lp, &la, &lb);
    return 2.0 * (n - 1) / n * 4.0 * (double)(la + lb) +
           4.0 * (n - 1) * (COLL_CX_PREFIX + 16 + 64);
}

const coll_cx_codec_t coll__cx_powersgd = {
    .method = COLL_COMPRESS_POWERSGD,
    .rounds = 4,
    .sizes = psgd_sizes,
    .place = psgd_place,
    .begin = psgd_begin,
    .round_done = psgd_round_done,
    .wire_bytes = psgd_wire,
};
