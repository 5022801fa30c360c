/*
 * fp16, bf16 and 1-bit: the compressed allreduce of 1-bit Adam (Tang et al., ICML 2021, arXiv
 * 2102.02888, section 4.1; DeepSpeed deepspeed/runtime/comm/nccl.py compressed_allreduce), with
 * error compensation on both sides:
 *
 *   round 0 (compressed reduce-scatter): node r cuts its input x = g + e (the local sum plus
 *     its worker residual) into N chunks (coll_plan_init()), encodes each, keeps
 *     e' = x - decode(encode(x)) chunk by chunk, and sends chunk c to node c;
 *   between the rounds (the server): node r sums the N decoded contributions to its chunk in
 *     rank order, each times the weight (1, or 1/world for COLL_AVG), onto its server residual
 *     s: y = s + sum; encodes y and keeps s' = y - decode(encode(y));
 *   round 1 (compressed all-gather): node r sends its encoded y to every node; every node
 *     decodes all N chunks into the result.
 *
 * Every node ends with the same bits: each chunk's result is decoded from the one message its
 * owner encoded. 1-bit: the scale of a chunk of n elements is ||x||_2 / sqrt(n), sign(0) = +1
 * (kernels/cpu/onebit.h, COLL_ONEBIT_SCALE_L2: DeepSpeed's rule), one scale per chunk (our
 * variant; DeepSpeed has one worker scale per buffer), never diluted by padding (the chunks are
 * exact, there is none). fp16 and bf16: a power-of-two scale per chunk, so that no
 * 16-bit value overflows (kernels/cpu/cast.h); sums are float32.
 *
 * A parameter-service step (staged.c) runs round 0 only: node r's sum of the decoded
 * contributions, without its server residual and not encoded again, is the gradient its
 * optimizer sees; the parameters go back instead of round 1.
 */
#include <string.h>

#include "engine/codec/internal.h"
#include "kernels/compress_wire.h"

typedef struct {
    coll_wire_method_t wire;
    coll_cast_format_t cast; /* fp16 and bf16 only */
} fmt_t;

static const fmt_t fmt_fp16 = {COLL_WIRE_FP16, COLL_CAST_FP16};
static const fmt_t fmt_bf16 = {COLL_WIRE_BF16, COLL_CAST_BF16};
static const fmt_t fmt_onebit = {COLL_WIRE_ONEBIT, 0};

static const fmt_t *fmt_of(const coll_cx_t *cx)
{
    switch (cx->codec->method) {
    case COLL_COMPRESS_FP16: return &fmt_fp16;
    case COLL_COMPRESS_BF16: return &fmt_bf16;
    default: return &fmt_onebit;
    }
}

/* Message bytes (after the prefix) of a chunk of @p n elements. */
static size_t wire_of(const fmt_t *f, uint64_t n)
{
    return f->wire == COLL_WIRE_ONEBIT ? coll_onebit_wire_bytes(n) : coll_cast_wire_bytes(n);
}

static size_t slot_of(const fmt_t *f, uint64_t n)
{
    return coll__cx_align(COLL_CX_PREFIX + wire_of(f, n));
}

/* Encode @p n elements of @p x into the message at @p buf (no residual: the caller keeps it). */
static coll_status_t encode(const coll_cx_t *cx, const fmt_t *f, const float *x, uint64_t n,
                            uint8_t *buf)
{
    uint8_t *m = coll__cx_payload(buf);
    coll_wire_hdr_t h = {f->wire, 0, n};
    coll_status_t st;

    if (f->wire == COLL_WIRE_ONEBIT) {
        float scale;
        st = cx->ex->onebit_encode(COLL_ONEBIT_SCALE_L2, x, NULL, n, m + COLL_WIRE_HDR_BYTES,
                                   &scale);
        memcpy(&h.param, &scale, sizeof(scale));
    } else {
        int32_t p;
        st = cx->ex->cast_encode(f->cast, x, NULL, n,
                                 (uint16_t *)(void *)(m + COLL_WIRE_HDR_BYTES), &p);
        memcpy(&h.param, &p, sizeof(p));
    }
    if (st == COLL_OK) {
        coll_wire_hdr_write(m, &h);
    }
    return st;
}

/* acc += w x decode(message at @p buf of @p n elements), or acc = decode when @p set. */
static coll_status_t apply(const coll_cx_t *cx, const fmt_t *f, uint8_t *buf, uint64_t n,
                           float w, float *acc, int set)
{
    const uint8_t *m = coll__cx_payload(buf), *pay = m + COLL_WIRE_HDR_BYTES;
    coll_wire_hdr_t h;
    int32_t p;

    if (coll_wire_hdr_read(m, wire_of(f, n), &h) != COLL_OK || h.method != f->wire ||
        h.count != n) {
        return COLL_ERR_PROTOCOL;
    }
    if (f->wire == COLL_WIRE_ONEBIT) {
        float scale;
        memcpy(&scale, &h.param, sizeof(scale));
        return set ? cx->ex->onebit_decode(pay, n, scale, w, acc)
                   : cx->ex->onebit_accumulate(pay, n, scale, w, acc);
    }
    memcpy(&p, &h.param, sizeof(p));
    return set ? cx->ex->cast_decode(f->cast, (const uint16_t *)(const void *)pay, n, p, acc)
               : cx->ex->cast_accumulate(f->cast, (const uint16_t *)(const void *)pay, n, p, w,
                                         acc);
}

/* Bytes of the message slots of chunks 0 .. @p upto - 1. */
static size_t chunks_bytes(const coll_cx_t *cx, const fmt_t *f, uint32_t upto)
{
    size_t b = 0;
    for (uint32_t k = 0; k < upto; k++) {
        b += slot_of(f, coll_plan_chunk(&cx->plan, k).len);
    }
    return b;
}

/* Where round 0's message to node c, and the server's message, start in the send area. */
static uint8_t *send_at(const coll_cx_t *cx, const fmt_t *f, uint32_t c)
{
    return cx->slot->send + chunks_bytes(cx, f, c);
}

static uint8_t *server_msg(const coll_cx_t *cx, const fmt_t *f)
{
    return send_at(cx, f, cx->n);
}

/* Round 1 receives start after round 0's. */
static uint8_t *ag_recv_at(const coll_cx_t *cx, const fmt_t *f, uint32_t p)
{
    return cx->slot->recv + cx->n * slot_of(f, coll_plan_chunk(&cx->plan, cx->r).len) +
           chunks_bytes(cx, f, p);
}

static coll_status_t ts_sizes(coll_cx_t *cx, coll_slot_sizes_t *sz)
{
    const fmt_t *f = fmt_of(cx);
    uint64_t mine = coll_plan_chunk(&cx->plan, cx->r).len;

    sz->res_elems = cx->count;
    sz->srv_elems = mine;
    sz->send_bytes = chunks_bytes(cx, f, cx->n) + slot_of(f, mine);
    sz->recv_bytes = cx->n * slot_of(f, mine) + chunks_bytes(cx, f, cx->n);
    return COLL_OK;
}

static void ts_place(coll_cx_t *cx)
{
    const fmt_t *f = fmt_of(cx);
    uint64_t mine = coll_plan_chunk(&cx->plan, cx->r).len;

    for (uint32_t p = 0; p < cx->n; p++) {
        uint64_t len = coll_plan_chunk(&cx->plan, p).len;
        if (cx->round == 0) {
            cx->sendp[p] = send_at(cx, f, p);
            cx->sendlen[p] = COLL_CX_PREFIX + wire_of(f, len);
            cx->recvp[p] = cx->slot->recv + p * slot_of(f, mine);
            cx->recvlen[p] = COLL_CX_PREFIX + wire_of(f, mine);
        } else {
            cx->sendp[p] = server_msg(cx, f);
            cx->sendlen[p] = COLL_CX_PREFIX + wire_of(f, mine);
            cx->recvp[p] = ag_recv_at(cx, f, p);
            cx->recvlen[p] = COLL_CX_PREFIX + wire_of(f, len);
        }
    }
}

/* Round 0: every chunk encoded, the worker residual kept. */
static coll_status_t ts_begin(coll_cx_t *cx)
{
    const fmt_t *f = fmt_of(cx);
    coll_status_t st = COLL_OK;

    for (uint32_t c = 0; c < cx->n && st == COLL_OK; c++) {
        coll_range_t ch = coll_plan_chunk(&cx->plan, c);
        st = encode(cx, f, cx->in + ch.off, ch.len, send_at(cx, f, c));
        if (st == COLL_OK && cx->slot->ef) {
            st = apply(cx, f, send_at(cx, f, c), ch.len, -1.0f, cx->in + ch.off, 0);
        }
    }
    return st;
}

/* y (this node's chunk) += every node's decoded contribution times the weight, in rank order. */
static coll_status_t ts_add(coll_cx_t *cx, const fmt_t *f, float *y)
{
    uint64_t mine = coll_plan_chunk(&cx->plan, cx->r).len;
    coll_status_t st = COLL_OK;

    for (uint32_t k = 0; k < cx->n && st == COLL_OK; k++) {
        st = apply(cx, f, k == cx->r ? send_at(cx, f, k) : cx->recvp[k], mine, cx->weight, y, 0);
    }
    return st;
}

/* The server: y = s + the contributions in rank order; encode y; keep s' = y - decode. */
static coll_status_t ts_server(coll_cx_t *cx, const fmt_t *f)
{
    coll_slot_t *s = cx->slot;
    uint64_t mine = coll_plan_chunk(&cx->plan, cx->r).len;
    float *y = s->srv[s->cur ^ 1];
    coll_status_t st;

    if (s->ef) {
        cx->ex->copy(y, s->srv[s->cur], mine * sizeof(float));
    } else {
        cx->ex->zero(y, mine * sizeof(float));
    }
    st = ts_add(cx, f, y);
    if (st == COLL_OK) {
        st = encode(cx, f, y, mine, server_msg(cx, f));
    }
    if (st == COLL_OK && s->ef) {
        st = apply(cx, f, server_msg(cx, f), mine, -1.0f, y, 0);
    }
    return st;
}

static coll_status_t ts_round_done(coll_cx_t *cx)
{
    const fmt_t *f = fmt_of(cx);
    coll_status_t st = COLL_OK;

    if (cx->round == 0) {
        return ts_server(cx, f);
    }
    for (uint32_t p = 0; p < cx->n && st == COLL_OK; p++) {
        coll_range_t ch = coll_plan_chunk(&cx->plan, p);
        st = apply(cx, f, p == cx->r ? server_msg(cx, f) : cx->recvp[p], ch.len, 1.0f,
                   cx->outf + ch.off, 1);
    }
    return st == COLL_ERR_INVALID ? COLL_ERR_PROTOCOL : st;
}

/* A parameter-service step: this node's chunk of the sum (0 + the contributions in rank order,
 * as the server's without a residual) into the result, where the stage reads it. */
static coll_status_t ts_staged_done(coll_cx_t *cx)
{
    coll_range_t mine = coll_plan_chunk(&cx->plan, cx->r);
    float *y = cx->outf + mine.off;

    cx->ex->zero(y, mine.len * sizeof(float));
    return ts_add(cx, fmt_of(cx), y);
}

static double ts_wire(uint64_t count, uint32_t n, const coll_compression_t *run,
                      const coll_tensor_layout_t *layout)
{
    double per = run->method == COLL_COMPRESS_ONEBIT ? 1.0 / 8.0 : 2.0;
    (void)layout;
    return 2.0 * (n - 1) * ((double)count / n * per + COLL_CX_PREFIX + COLL_WIRE_HDR_BYTES);
}

#define TWOSIDED(m)                                                                                \
    {                                                                                              \
        .method = m, .rounds = 2, .sizes = ts_sizes, .place = ts_place, .begin = ts_begin,       \
        .round_done = ts_round_done, .wire_bytes = ts_wire, .staged_rounds = 1,                    \
        .staged_done = ts_staged_done                                                              \
    }

const coll_cx_codec_t coll__cx_fp16 = TWOSIDED(COLL_COMPRESS_FP16);
const coll_cx_codec_t coll__cx_bf16 = TWOSIDED(COLL_COMPRESS_BF16);
const coll_cx_codec_t coll__cx_onebit = TWOSIDED(COLL_COMPRESS_ONEBIT);
