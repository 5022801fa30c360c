/*
 * A float32 array allreduced without loss over two rounds (rounds.c): a reduce-scatter in
 * which node c sums every node's chunk c in rank order, and an all-gather of the sums. Every
 * node ends with the same bits (each chunk is summed once, by its owner); a sum that is not
 * finite is found by its owner, which fails the operation in the all-gather. PowerSGD's factors
 * and the tensors it does not compress travel so (powersgd.c). Chunks are coll_plan_init()'s,
 * whole cache lines; messages are COLL_WIRE_F32 spans behind the rounds' prefix, each
 * message buffer starting on a cache line.
 */

#include "engine/codec/internal.h"
#include "kernels/compress_wire.h"

static size_t msg_bytes(uint64_t elems)
{
    return COLL_CX_PREFIX + coll_f32_wire_bytes(elems);
}

static size_t slot_bytes(uint64_t elems)
{
    return coll__cx_align(msg_bytes(elems));
}

size_t coll__dense_msg_bytes(uint64_t len, uint32_t n)
{
    return (size_t)n * (COLL_CX_PREFIX + COLL_WIRE_HDR_BYTES + 128) + 4 * len;
}

static coll_plan_t plan_of(const coll_cx_t *cx, uint64_t len)
{
    coll_plan_t p;
    coll_plan_init(&p, len, cx->n, sizeof(float), (size_t)1 << 30);
    return p;
}

/* Write an F32 message of @p len elements of @p src at @p buf. */
static void write_msg(const coll_cx_t *cx, uint8_t *buf, const float *src, uint64_t len)
{
    coll_wire_hdr_t h = {COLL_WIRE_F32, 0, len};
    uint8_t *m = coll__cx_payload(buf);

    coll_wire_hdr_write(m, &h);
    if (len > 0) {
        cx->ex->copy(m + COLL_WIRE_HDR_BYTES, src, len * sizeof(float));
    }
}

/* The payload of a received F32 message of @p len elements; NULL when malformed. */
static const float *read_msg(uint8_t *buf, uint64_t len)
{
    coll_wire_hdr_t h;
    uint8_t *m = coll__cx_payload(buf);

    if (coll_wire_hdr_read(m, coll_f32_wire_bytes(len), &h) != COLL_OK ||
        h.method != COLL_WIRE_F32 || h.count != len) {
        return NULL;
    }
    return (const float *)(const void *)(m + COLL_WIRE_HDR_BYTES);
}

void coll__dense_rs_place(coll_cx_t *cx, uint64_t len, uint8_t *send, uint8_t *recv)
{
    coll_plan_t pl = plan_of(cx, len);
    coll_range_t mine = coll_plan_chunk(&pl, cx->r);

    for (uint32_t p = 0; p < cx->n; p++) {
        coll_range_t ch = coll_plan_chunk(&pl, p);
        if (p != cx->r) {
            cx->sendp[p] = send;
            cx->sendlen[p] = msg_bytes(ch.len);
            cx->recvp[p] = recv + (size_t)p * slot_bytes(mine.len);
            cx->recvlen[p] = msg_bytes(mine.len);
        }
        send += slot_bytes(ch.len);
    }
}

void coll__dense_rs_write(coll_cx_t *cx, const float *src, uint64_t len, uint8_t *send)
{
    coll_plan_t pl = plan_of(cx, len);

    for (uint32_t p = 0; p < cx->n; p++) {
        coll_range_t ch = coll_plan_chunk(&pl, p);
        if (p != cx->r) {
            write_msg(cx, send, src + ch.off, ch.len);
        }
        send += slot_bytes(ch.len);
    }
}

/* dst[j] (+)= v[j] times 1 below @p split - @p off (array positions below split), else w. */
static void add_weighted(float *dst, const float *v, uint64_t len, uint64_t off, uint64_t split,
                         float w, int first)
{
    uint64_t k = split > off ? (split - off < len ? split - off : len) : 0;

    for (uint64_t j = 0; j < k; j++) {
        dst[j] = first ? v[j] : dst[j] + v[j];
    }
    for (uint64_t j = k; j < len; j++) {
        dst[j] = first ? v[j] * w : dst[j] + v[j] * w;
    }
}

coll_status_t coll__dense_rs_reduce(coll_cx_t *cx, const float *own, uint64_t len,
                                    uint64_t split, float weight, float *dst)
{
    coll_plan_t pl = plan_of(cx, len);
    coll_range_t mine = coll_plan_chunk(&pl, cx->r);

    for (uint32_t s = 0; s < cx->n; s++) {
        const float *v = s == cx->r ? own + mine.off : read_msg(cx->recvp[s], mine.len);
        if (v == NULL) {
            return COLL_ERR_PROTOCOL;
        }
        add_weighted(dst, v, mine.len, mine.off, split, weight, s == 0);
    }
    return coll__cx_first_nonfinite(dst, mine.len) < mine.len ? COLL_ERR_INVALID : COLL_OK;
}

void coll__dense_ag_write(coll_cx_t *cx, const float *sums, uint64_t len, uint8_t *send)
{
    coll_plan_t pl = plan_of(cx, len);

    write_msg(cx, send, sums, coll_plan_chunk(&pl, cx->r).len);
}

void coll__dense_ag_place(coll_cx_t *cx, uint64_t len, uint8_t *send, uint8_t *recv)
{
    coll_plan_t pl = plan_of(cx, len);
    coll_range_t mine = coll_plan_chunk(&pl, cx->r);

    for (uint32_t p = 0; p < cx->n; p++) {
        coll_range_t ch = coll_plan_chunk(&pl, p);
        if (p != cx->r) {
            cx->sendp[p] = send;
            cx->sendlen[p] = msg_bytes(mine.len);
            cx->recvp[p] = recv;
            cx->recvlen[p] = msg_bytes(ch.len);
        }
        recv += slot_bytes(ch.len);
    }
}

coll_status_t coll__dense_ag_collect(coll_cx_t *cx, const float *sums, uint64_t len, float *dst)
{
    coll_plan_t pl = plan_of(cx, len);

    for (uint32_t p = 0; p < cx->n; p++) {
        coll_range_t ch = coll_plan_chunk(&pl, p);
        const float *v = p == cx->r ? sums : read_msg(cx->recvp[p], ch.len);
        if (v == NULL) {
            return COLL_ERR_PROTOCOL;
        }
        if (ch.len > 0 && dst + ch.off != v) {
            cx->ex->copy(dst + ch.off, v, ch.len * sizeof(float));
        }
    }
    return COLL_OK;
}
