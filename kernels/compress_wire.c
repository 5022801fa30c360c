/*
 * Message layout of the compressors (compress_wire.h): sizes, header encoding and the
 * receiver's checks. Sizes of received messages are checked by division, never by computing
 * 16 + size * count, which could wrap for a hostile count.
 */
#include <math.h>
#include <string.h>

#include "kernels/compress.h"
#include "kernels/compress_wire.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
               "compress_wire.h: the kernels write host order, which must be little-endian");

size_t coll_cast_wire_bytes(size_t count)
{
    return COLL_WIRE_HDR_BYTES + 2 * count;
}

size_t coll_topk_index_bytes(uint64_t count)
{
    return count <= 1ull << 8 ? 1 : count <= 1ull << 16 ? 2 : count <= 1ull << 24 ? 3 : 4;
}

size_t coll_topk_wire_bytes(size_t k, uint64_t count)
{
    return COLL_WIRE_HDR_BYTES + (4 + coll_topk_index_bytes(count)) * k;
}

size_t coll_topk_wire_buffer_bytes(size_t k)
{
    return COLL_WIRE_HDR_BYTES + 8 * k;
}

size_t coll_topk_wire_indices_offset(size_t k)
{
    return COLL_WIRE_HDR_BYTES + 4 * k;
}

/* Forward: index j's w bytes land at j * w <= 4 * j, at or before its u32, which is read first. */
void coll_topk_wire_pack(void *indices, size_t k, uint64_t count)
{
    size_t w = coll_topk_index_bytes(count);
    uint8_t *b = indices;

    for (size_t j = 0; j < k; j++) {
        uint32_t v;
        memcpy(&v, b + 4 * j, sizeof(v));
        memcpy(b + w * j, &v, w); /* little-endian: the low w bytes */
    }
}

/* Backward: index j's u32 lands at 4 * j >= j * w, after every packed index still unread. */
void coll_topk_wire_unpack(void *indices, size_t k, uint64_t count)
{
    size_t w = coll_topk_index_bytes(count);
    uint8_t *b = indices;

    for (size_t j = k; j-- > 0;) {
        uint32_t v = 0;
        memcpy(&v, b + w * j, w);
        memcpy(b + 4 * j, &v, sizeof(v));
    }
}

size_t coll_onebit_wire_bytes(size_t count)
{
    return COLL_WIRE_HDR_BYTES + coll_onebit_sign_bytes(count);
}

size_t coll_lowrank_wire_bytes(size_t len, unsigned rank)
{
    return COLL_WIRE_HDR_BYTES + sizeof(float) * len * rank;
}

size_t coll_f32_wire_bytes(size_t count)
{
    return COLL_WIRE_HDR_BYTES + sizeof(float) * count;
}

void coll_wire_hdr_write(void *buf, const coll_wire_hdr_t *hdr)
{
    uint8_t *b = buf;
    uint16_t flags = 0;

    b[0] = (uint8_t)hdr->method;
    b[1] = COLL_COMPRESS_WIRE_VERSION;
    memcpy(b + 2, &flags, sizeof(flags));
    memcpy(b + 4, &hdr->param, sizeof(hdr->param));
    memcpy(b + 8, &hdr->count, sizeof(hdr->count));
}

/* Whether @p payload bytes are exactly @p n elements of @p esize bytes (no overflow). */
static int payload_is(uint64_t payload, uint64_t n, uint64_t esize)
{
    return payload % esize == 0 && payload / esize == n;
}

/* The method-specific checks of a header whose payload has @p payload bytes. */
static int method_ok(const coll_wire_hdr_t *h, uint64_t payload)
{
    int32_t exp;

    switch (h->method) {
    case COLL_WIRE_FP16:
    case COLL_WIRE_BF16:
        memcpy(&exp, &h->param, sizeof(exp));
        return exp >= COLL_CAST_EXP_MIN && exp <= COLL_CAST_EXP_MAX &&
               payload_is(payload, h->count, 2);
    case COLL_WIRE_TOPK:
        return h->count <= COLL_TOPK_MAX_COUNT && h->param <= h->count &&
               payload_is(payload, h->param, 4 + coll_topk_index_bytes(h->count));
    case COLL_WIRE_ONEBIT: {
        float scale;
        memcpy(&scale, &h->param, sizeof(scale));
        return isfinite(scale) && !signbit(scale) &&
               payload == h->count / 8 + (h->count % 8 != 0);
    }
    case COLL_WIRE_LOWRANK_P:
    case COLL_WIRE_LOWRANK_Q:
        return h->param >= 1 && h->param <= COLL_LOWRANK_MAX_RANK &&
               payload_is(payload, h->count, 4 * (uint64_t)h->param);
    case COLL_WIRE_F32:
        return h->param == 0 && payload_is(payload, h->count, 4);
    default: return 0;
    }
}

coll_status_t coll_wire_hdr_read(const void *buf, size_t bytes, coll_wire_hdr_t *hdr)
{
    const uint8_t *b = buf;
    coll_wire_hdr_t h;
    uint16_t flags;

    if (bytes < COLL_WIRE_HDR_BYTES) {
        return COLL_ERR_PROTOCOL;
    }
    if (b[1] != COLL_COMPRESS_WIRE_VERSION) {
        return COLL_ERR_VERSION;
    }
    memcpy(&flags, b + 2, sizeof(flags));
    h.method = (coll_wire_method_t)b[0];
    memcpy(&h.param, b + 4, sizeof(h.param));
    memcpy(&h.count, b + 8, sizeof(h.count));
    if (flags != 0 || !method_ok(&h, (uint64_t)(bytes - COLL_WIRE_HDR_BYTES))) {
        return COLL_ERR_PROTOCOL;
    }
    *hdr = h;
    return COLL_OK;
}
