/*
 * TopK (Stich, Cordonnier, Jaggi, NeurIPS 2018; Lin et al., Deep Gradient Compression, ICLR
 * 2018): each node selects the k = max(1, ceil(ratio x count)) largest magnitudes of its input
 * x = g + e exactly (kernels/cpu/topk.h: ties to the lower index), keeps the rest as its
 * residual (e' = x with the selected elements set to 0), and sends the (index, value) pairs to
 * every other node in one round (an all-gather of the sets). Every node then sums the N sets in
 * rank order, each value times the weight (1, or 1/world for COLL_AVG), into a zeroed result:
 * the same additions in the same order everywhere, so the same bits everywhere. A sum that
 * overflows float32 fails the operation on every node (each finds it in the same sets) before
 * the result or the residual is written.
 *
 * The all-gather is the simple sparse allreduce: a node sends (N - 1) x (16 + (4 + w) k) bytes
 * (w: 1 to 4 bytes per index, compress_wire.h) and the sets are never merged on the way, so the
 * bytes grow with the node count while a dense ring's stay at 2 (N - 1) / N of the bucket
 * (docs/compression.md measures where each wins). A message buffer has room for u32 indices:
 * the kernel writes them, they are packed in place before sending, unpacked in place on arrival.
 *
 * A parameter-service step (staged.c) runs the same round and sums every set over the whole
 * bucket; each node's optimizer takes its own chunk of the sum.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "engine/codec/internal.h"
#include "kernels/compress_wire.h"

static size_t k_of(const coll_cx_t *cx)
{
    return coll_topk_k(cx->count, cx->c->run.ratio);
}

/* What travels, and what a buffer holds (u32 indices). */
static size_t msg_bytes(size_t k, uint64_t count)
{
    return COLL_CX_PREFIX + coll_topk_wire_bytes(k, count);
}

static size_t buf_bytes(size_t k)
{
    return coll__cx_align(COLL_CX_PREFIX + coll_topk_wire_buffer_bytes(k));
}

static coll_status_t topk_sizes(coll_cx_t *cx, coll_slot_sizes_t *sz)
{
    size_t k = k_of(cx);

    sz->res_elems = cx->count;
    sz->send_bytes = buf_bytes(k);
    sz->recv_bytes = cx->n * buf_bytes(k);
    sz->scratch_bytes = cx->ex->topk_scratch_bytes(cx->count, k);
    return COLL_OK;
}

static void topk_place(coll_cx_t *cx)
{
    size_t k = k_of(cx);

    for (uint32_t p = 0; p < cx->n; p++) {
        cx->sendp[p] = cx->slot->send;
        cx->sendlen[p] = msg_bytes(k, cx->count);
        cx->recvp[p] = cx->slot->recv + p * buf_bytes(k);
        cx->recvlen[p] = msg_bytes(k, cx->count);
    }
}

static coll_status_t topk_begin(coll_cx_t *cx)
{
    size_t k = k_of(cx);
    uint8_t *m = coll__cx_payload(cx->slot->send);
    coll_wire_hdr_t h = {COLL_WIRE_TOPK, (uint32_t)k, cx->count};
    coll_topk_args_t a = {.grad = cx->in, .residual = NULL, .count = cx->count, .k = k,
                          .select = COLL_TOPK_SELECT_AUTO, .scratch = cx->slot->scratch,
                          .scratch_bytes = cx->slot->sz.scratch_bytes,
                          .indices = (uint32_t *)(void *)(m + coll_topk_wire_indices_offset(k)),
                          .values = (float *)(void *)(m + COLL_WIRE_HDR_BYTES)};
    coll_status_t st = cx->ex->topk_compress(&a);

    if (st != COLL_OK) {
        return COLL_ERR_PROTOCOL; /* the arguments are the engine's own: a bug */
    }
    coll_wire_hdr_write(m, &h);
    for (size_t j = 0; cx->slot->ef && j < k; j++) {
        cx->in[a.indices[j]] = 0.0f; /* the residual: what was not sent */
    }
    coll_topk_wire_pack(a.indices, k, cx->count);
    return COLL_OK;
}

/* Node @p s's set: its indices (u32 once unpacked) and values. */
static uint8_t *set_of(const coll_cx_t *cx, uint32_t s, size_t k, uint32_t **idx, float **val)
{
    uint8_t *m = coll__cx_payload(s == cx->r ? cx->slot->send : cx->recvp[s]);

    *idx = (uint32_t *)(void *)(m + coll_topk_wire_indices_offset(k));
    *val = (float *)(void *)(m + COLL_WIRE_HDR_BYTES);
    return m;
}

/* Every node's set checked and unpacked in its buffer: the header, indices strictly ascending
 * below the count (what the merge of sums_overflow() relies on). */
static coll_status_t unpack_sets(coll_cx_t *cx, size_t k)
{
    for (uint32_t s = 0; s < cx->n; s++) {
        uint32_t *idx;
        float *val;
        uint8_t *m = set_of(cx, s, k, &idx, &val);
        coll_wire_hdr_t h;

        if (coll_wire_hdr_read(m, coll_topk_wire_bytes(k, cx->count), &h) != COLL_OK ||
            h.method != COLL_WIRE_TOPK || h.count != cx->count || h.param != k) {
            return COLL_ERR_PROTOCOL;
        }
        coll_topk_wire_unpack(idx, k, cx->count);
        for (size_t j = 0; j < k; j++) {
            if (idx[j] >= cx->count || (j > 0 && idx[j] <= idx[j - 1])) {
                return COLL_ERR_PROTOCOL;
            }
        }
    }
    return COLL_OK;
}

/* The sum at element @p i as coll_topk_accumulate() forms it: from 0, each set that holds i
 * adds weight x its value, in rank order (one float32 product and one addition each). */
static float sum_at(const coll_cx_t *cx, size_t k, uint32_t i)
{
    float acc = 0.0f;

    for (uint32_t s = 0; s < cx->n; s++) {
        uint32_t *idx;
        float *val;
        size_t lo = 0, hi = k;
        set_of(cx, s, k, &idx, &val);
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (idx[mid] < i) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo < k && idx[lo] == i) {
            acc += cx->weight * val[lo];
        }
    }
    return acc;
}

/* Whether a sum of the sets overflows float32. Unless the largest magnitudes of all sets add up
 * to half of FLT_MAX (no sum can then come near it), each element any set holds is summed as
 * the result will be. Every node has the same sets, so every node answers alike. */
static int sums_overflow(const coll_cx_t *cx, size_t k)
{
    double bound = 0;

    for (uint32_t s = 0; s < cx->n; s++) {
        uint32_t *idx;
        float *val, big = 0.0f;
        set_of(cx, s, k, &idx, &val);
        for (size_t j = 0; j < k; j++) {
            big = fabsf(val[j]) > big ? fabsf(val[j]) : big;
        }
        bound += fabs((double)cx->weight) * big;
    }
    for (uint32_t s = 0; bound >= FLT_MAX / 2 && s < cx->n; s++) {
        uint32_t *idx;
        float *val;
        set_of(cx, s, k, &idx, &val);
        for (size_t j = 0; j < k; j++) {
            if (!isfinite(sum_at(cx, k, idx[j]))) {
                return 1;
            }
        }
    }
    return 0;
}

/* Every node's set, in rank order, into the zeroed result; nothing is written when a sum
 * overflows (COLL_ERR_INVALID: the operation fails on every node, the residual is kept). */
static coll_status_t topk_round_done(coll_cx_t *cx)
{
    size_t k = k_of(cx);
    coll_status_t st = unpack_sets(cx, k);

    if (st != COLL_OK) {
        return st;
    }
    if (sums_overflow(cx, k)) {
        return COLL_ERR_INVALID;
    }
    cx->ex->zero(cx->outf, cx->count * sizeof(float));
    for (uint32_t s = 0; s < cx->n; s++) {
        uint32_t *idx;
        float *val;
        set_of(cx, s, k, &idx, &val);
        if (cx->ex->topk_accumulate(idx, val, k, cx->weight, cx->outf, cx->count) != COLL_OK) {
            return COLL_ERR_PROTOCOL;
        }
    }
    return COLL_OK;
}

static double topk_wire(uint64_t count, uint32_t n, const coll_compression_t *run,
                        const coll_tensor_layout_t *layout)
{
    (void)layout;
    return (double)(n - 1) * (double)msg_bytes(coll_topk_k(count, run->ratio), count);
}

const coll_cx_codec_t coll__cx_topk = {
    .method = COLL_COMPRESS_TOPK,
    .rounds = 1,
    .sizes = topk_sizes,
    .place = topk_place,
    .begin = topk_begin,
    .round_done = topk_round_done,
    .wire_bytes = topk_wire,
    .staged_rounds = 1,
};
