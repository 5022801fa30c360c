/*
 * Unit tests of the compressors' message layout (kernels/cpu/compress_wire.h): the sizes, the
 * header's bytes at their documented offsets (little-endian), a round trip for every method
 * with the kernels writing straight into the message, and the receiver's checks: every field out
 * of range, lengths one byte off, and counts chosen so that a size computed by multiplication
 * would wrap around.
 */
#include "compress_ref.h"

#include "kernels/cpu/cast.h"
#include "kernels/compress_wire.h"
#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/topk.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static void test_sizes(void **state)
{
    assert_int_equal(COLL_WIRE_HDR_BYTES, 16);
    assert_int_equal(coll_cast_wire_bytes(0), 16);
    assert_int_equal(coll_cast_wire_bytes(1001), 16 + 2002);
    assert_int_equal(coll_topk_index_bytes(0), 1);
    assert_int_equal(coll_topk_index_bytes(256), 1);
    assert_int_equal(coll_topk_index_bytes(257), 2);
    assert_int_equal(coll_topk_index_bytes(65536), 2);
    assert_int_equal(coll_topk_index_bytes(65537), 3);
    assert_int_equal(coll_topk_index_bytes(1u << 24), 3);
    assert_int_equal(coll_topk_index_bytes((1u << 24) + 1), 4);
    assert_int_equal(coll_topk_index_bytes(UINT32_MAX), 4);
    assert_int_equal(coll_topk_wire_bytes(10, 1000), 16 + 60);
    assert_int_equal(coll_topk_wire_bytes(10, 1000003), 16 + 70);
    assert_int_equal(coll_topk_wire_buffer_bytes(10), 16 + 80);
    assert_int_equal(coll_topk_wire_indices_offset(10), 16 + 40);
    assert_int_equal(coll_onebit_wire_bytes(0), 16);
    assert_int_equal(coll_onebit_wire_bytes(8), 17);
    assert_int_equal(coll_onebit_wire_bytes(9), 18);
    assert_int_equal(coll_lowrank_wire_bytes(100, 2), 16 + 800);
    assert_int_equal(coll_f32_wire_bytes(7), 16 + 28);
}

/* The header's bytes, at the documented offsets. */
static void test_header_layout(void **state)
{
    uint8_t b[16];
    const uint8_t want[16] = {3, 2, 0, 0, 0x78, 0x56, 0x34, 0x12,
                              0xef, 0xcd, 0xab, 0x89, 0x67, 0x45, 0x23, 0x01};
    coll_wire_hdr_t h = {COLL_WIRE_TOPK, 0x12345678u, 0x0123456789abcdefull};

    coll_wire_hdr_write(b, &h);
    assert_memory_equal(b, want, 16);
}

/* A TopK message written by the kernel in place, packed, read back, unpacked and accumulated:
 * every element either sent or kept. */
static void test_roundtrip_topk(void **state)
{
    enum { N = 1000 };
    float g[N], e[N] = {0}, acc[N] = {0};
    const size_t k = coll_topk_k(N, 0.05);
    uint64_t buf[(16 + 8 * 50) / 8]; /* 8-byte aligned, room for u32 indices */
    uint8_t *msg = (uint8_t *)buf;
    uint32_t *idx = (uint32_t *)(msg + coll_topk_wire_indices_offset(k));
    coll_wire_hdr_t h = {COLL_WIRE_TOPK, (uint32_t)k, N}, got;

    ref_seed(1);
    ref_fill(g, N, 1.0);
    coll_topk_args_t a = {.grad = g, .residual = e, .count = N, .k = k, .indices = idx,
                          .values = (float *)(msg + COLL_WIRE_HDR_BYTES)};
    assert_int_equal(coll_topk_compress(&a), COLL_OK);
    coll_wire_hdr_write(msg, &h);
    coll_topk_wire_pack(idx, k, N);
    assert_int_equal(coll_wire_hdr_read(msg, coll_topk_wire_bytes(k, N), &got), COLL_OK);
    assert_true(got.method == COLL_WIRE_TOPK && got.param == k && got.count == N);
    coll_topk_wire_unpack(idx, k, got.count);
    assert_int_equal(coll_topk_accumulate(idx, (const float *)(msg + COLL_WIRE_HDR_BYTES),
                                          got.param, 1, acc, got.count),
                     COLL_OK);
    for (size_t i = 0; i < N; i++) {
        assert_true(acc[i] + e[i] == g[i]); /* either sent or kept */
    }
}

/* Packed indices: the low w bytes of each, little-endian, back to back; and back again. */
static void test_topk_index_packing(void **state)
{
    static const uint64_t counts[] = {200, 60000, 1000003, UINT32_MAX};
    enum { K = 37 };

    for (size_t c = 0; c < LEN(counts); c++) {
        uint32_t v[K], want[K];
        size_t w = coll_topk_index_bytes(counts[c]);
        uint8_t expect[4 * K];

        for (size_t j = 0; j < K; j++) {
            want[j] = (uint32_t)((counts[c] - 1) - (K - 1 - j) * 3); /* ascending, the top bits */
            for (size_t b = 0; b < w; b++) {
                expect[w * j + b] = (uint8_t)(want[j] >> (8 * b));
            }
        }
        memcpy(v, want, sizeof(v));
        coll_topk_wire_pack(v, K, counts[c]);
        assert_memory_equal(v, expect, w * K);
        coll_topk_wire_unpack(v, K, counts[c]);
        assert_memory_equal(v, want, sizeof(want));
    }
}

/* FP16, BF16 and 1-bit spans: the parameter carries the exponent or the scale. */
static void test_roundtrip_dense(void **state)
{
    enum { N = 77 };
    float g[N], back[N];
    uint64_t buf[(16 + 2 * N) / 8 + 1];
    uint8_t *msg = (uint8_t *)buf;
    coll_wire_hdr_t got;
    int32_t p;
    float s;

    ref_seed(2);
    ref_fill(g, N, 1e4);
    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, g, NULL, N, (uint16_t *)(msg + 16), &p), 0);
    uint32_t param;
    memcpy(&param, &p, sizeof(p));
    coll_wire_hdr_write(msg, &(coll_wire_hdr_t){COLL_WIRE_FP16, param, N});
    assert_int_equal(coll_wire_hdr_read(msg, coll_cast_wire_bytes(N), &got), COLL_OK);
    memcpy(&p, &got.param, sizeof(p));
    assert_int_equal(coll_cast_decode(COLL_CAST_FP16, (uint16_t *)(msg + 16), N, p, back), 0);
    for (size_t i = 0; i < N; i++) {
        assert_true(fabs(back[i] - (double)g[i]) <= ldexp(fabs(g[i]), -11));
    }
    assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, g, NULL, N, msg + 16, &s), 0);
    coll_wire_hdr_write(msg, &(coll_wire_hdr_t){COLL_WIRE_ONEBIT, ref_bits(s), N});
    assert_int_equal(coll_wire_hdr_read(msg, coll_onebit_wire_bytes(N), &got), COLL_OK);
    assert_true(ref_from_bits(got.param) == s && got.count == N);
}

/* Reads a header built from the fields and returns the status. */
static coll_status_t read_with(uint8_t method, uint8_t version, uint16_t flags, uint32_t param,
                               uint64_t count, size_t bytes)
{
    uint8_t b[64] = {method, version};
    coll_wire_hdr_t h = {COLL_WIRE_FP16, 7, 7}, before = h;

    memcpy(b + 2, &flags, 2);
    memcpy(b + 4, &param, 4);
    memcpy(b + 8, &count, 8);
    coll_status_t st = coll_wire_hdr_read(b, bytes, &h);
    if (st != COLL_OK) {
        assert_memory_equal(&h, &before, sizeof(h)); /* untouched on failure */
    }
    return st;
}

static void test_checks(void **state)
{
    const uint32_t one = ref_bits(1.0f);
    /* Well-formed messages of every method. */
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, (uint32_t)-113, 20, 56), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_BF16, 2, 0, 126, 0, 16), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 5, 41), COLL_OK);   /* 1-byte indices */
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 70000, 51), COLL_OK); /* 3-byte */
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 1u << 24, 51), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, (1u << 24) + 1, 56), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, one, 9, 18), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_P, 2, 0, 2, 5, 56), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_Q, 2, 0, 64, 0, 16), COLL_OK);
    assert_int_equal(read_with(COLL_WIRE_F32, 2, 0, 0, 3, 28), COLL_OK);
    /* Header fields. */
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, 0, 0, 15), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_FP16, 1, 0, 0, 0, 16), COLL_ERR_VERSION);
    assert_int_equal(read_with(COLL_WIRE_FP16, 3, 0, 0, 0, 16), COLL_ERR_VERSION);
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 1, 0, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(0, 2, 0, 0, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(8, 2, 0, 0, 0, 16), COLL_ERR_PROTOCOL);
    /* Parameters. */
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, (uint32_t)-114, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_BF16, 2, 0, 127, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 6, 5, 64), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 0, 1ull << 32, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, ref_bits(-1.0f), 8, 17), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, ref_bits(NAN), 8, 17), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, ref_bits(INFINITY), 8, 17),
                     COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_P, 2, 0, 0, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_P, 2, 0, 65, 0, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_F32, 2, 0, 1, 3, 28), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_F32, 2, 0, 0, 3, 27), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_F32, 2, 0, 0, 1ull << 62, 16), COLL_ERR_PROTOCOL);
    /* Lengths one byte off. */
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, 0, 20, 55), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, 0, 20, 57), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, one, 9, 17), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, one, 8, 18), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 5, 40), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 5, 42), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_TOPK, 2, 0, 5, 70000, 56), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_Q, 2, 0, 2, 5, 57), COLL_ERR_PROTOCOL);
    /* Counts whose byte size wraps around 2^64: 16 + 2 * 2^63 == 16. */
    assert_int_equal(read_with(COLL_WIRE_FP16, 2, 0, 0, 1ull << 63, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_LOWRANK_P, 2, 0, 4, 1ull << 62, 16), COLL_ERR_PROTOCOL);
    assert_int_equal(read_with(COLL_WIRE_ONEBIT, 2, 0, one, UINT64_MAX, 16), COLL_ERR_PROTOCOL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_header_layout),
        cmocka_unit_test(test_roundtrip_topk),
        cmocka_unit_test(test_topk_index_packing),
        cmocka_unit_test(test_roundtrip_dense),
        cmocka_unit_test(test_checks),
    };
    return cmocka_run_group_tests_name("compress_wire", tests, NULL, NULL);
}
