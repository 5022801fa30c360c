/*
 * Inner loops of the 1-bit compressor (onebit.c), compiled once per instruction set by
 * isa_<set>.c (isa.h); see compress_isa.h for the contract of each. The sum is plain C that gcc
 * vectorizes: COLL__LANES partial sums in double (lane l takes elements l, l + 16, ...; the tail
 * goes to lanes 0, 1, ...), combined pairwise in a fixed order. Packing and unpacking bits is
 * where gcc's vectorizer does badly (it transposes the stride-8 accesses with permutes, slower
 * than scalar code), so where AVX2 is available whole bytes go through a compare and movemask
 * (pack) or a broadcast, AND and compare (unpack), 8 lanes per byte, and the plain C loops below
 * finish the tail; both compute the same comparisons and float operations.
 */
#ifndef COLL_KERNELS_ONEBIT_LOOPS_H
#define COLL_KERNELS_ONEBIT_LOOPS_H

#include "kernels/cpu/compress_isa.h"

#if defined(__AVX2__)
#include <immintrin.h>

/* Bytes 0 .. nbytes-1 of the signs (8 elements each). */
static void onebit_pack_bytes_avx2(const float *g, float *e, size_t nbytes, float scale,
                                   uint8_t *bits)
{
    const __m256 vs = _mm256_set1_ps(scale), vns = _mm256_set1_ps(-scale);
    const __m256 zero = _mm256_setzero_ps();

    for (size_t b = 0; b < nbytes; b++) {
        __m256 x = _mm256_loadu_ps(g + 8 * b);
        if (e != NULL) {
            x = _mm256_add_ps(x, _mm256_loadu_ps(e + 8 * b));
        }
        __m256 neg = _mm256_cmp_ps(x, zero, _CMP_LT_OQ); /* false for NaN, as x < 0 */
        bits[b] = (uint8_t)_mm256_movemask_ps(neg);      /* lane j -> bit j */
        if (e != NULL) {
            _mm256_storeu_ps(e + 8 * b, _mm256_sub_ps(x, _mm256_blendv_ps(vs, vns, neg)));
        }
    }
}

/* Elements of bytes 0 .. nbytes-1. */
static void onebit_unpack_bytes_avx2(const uint8_t *bits, size_t nbytes, float ws,
                                     int accumulate, float *out)
{
    const __m256i lane = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
    const __m256 vws = _mm256_set1_ps(ws), vnws = _mm256_set1_ps(-ws);

    for (size_t b = 0; b < nbytes; b++) {
        __m256i m = _mm256_and_si256(_mm256_set1_epi32(bits[b]), lane);
        __m256 set = _mm256_castsi256_ps(_mm256_cmpeq_epi32(m, lane));
        __m256 v = _mm256_blendv_ps(vws, vnws, set);
        if (accumulate) {
            v = _mm256_add_ps(_mm256_loadu_ps(out + 8 * b), v);
        }
        _mm256_storeu_ps(out + 8 * b, v);
    }
}
#endif

/* The term of one element: x^2, exact in double (24 + 24 significand bits), or |x|. */
static inline double onebit_term(float x, int l1)
{
    double d = x;
    return l1 ? (d < 0 ? -d : d) : d * d;
}

/* Inlined with constant @p has_e and @p l1 below, so each variant is its own simple loop. */
static inline double onebit_sum_impl(const float *g, const float *e, size_t n, int has_e, int l1)
{
    double acc[COLL__LANES] = {0};
    size_t i = 0;

    for (; i + COLL__LANES <= n; i += COLL__LANES) {
        for (size_t l = 0; l < COLL__LANES; l++) {
            acc[l] += onebit_term(has_e ? g[i + l] + e[i + l] : g[i + l], l1);
        }
    }
    for (size_t l = 0; i + l < n; l++) {
        acc[l] += onebit_term(has_e ? g[i + l] + e[i + l] : g[i + l], l1);
    }
    for (size_t w = COLL__LANES / 2; w > 0; w /= 2) {
        for (size_t l = 0; l < w; l++) {
            acc[l] += acc[l + w];
        }
    }
    return acc[0];
}

static double onebit_sum(const float *g, const float *e, size_t n, int l1)
{
    if (e != NULL) {
        return l1 ? onebit_sum_impl(g, e, n, 1, 1) : onebit_sum_impl(g, e, n, 1, 0);
    }
    return l1 ? onebit_sum_impl(g, NULL, n, 0, 1) : onebit_sum_impl(g, NULL, n, 0, 0);
}

/* Up to 8 elements into one byte, bit j for element j; bits past @p len stay 0. */
static inline uint8_t onebit_pack_byte(const float *g, float *e, size_t len, float scale,
                                       int has_e)
{
    unsigned v = 0;

    for (size_t j = 0; j < len; j++) {
        float x = has_e ? g[j] + e[j] : g[j];
        unsigned neg = x < 0.0f;
        v |= neg << j;
        if (has_e) {
            e[j] = x - (neg ? -scale : scale);
        }
    }
    return (uint8_t)v;
}

static inline void onebit_pack_impl(const float *g, float *e, size_t n, float scale,
                                    uint8_t *bits, int has_e)
{
    size_t b = 0;

#if defined(__AVX2__)
    b = n / 8;
    onebit_pack_bytes_avx2(g, has_e ? e : NULL, b, scale, bits);
#endif
    for (; 8 * b + 8 <= n; b++) {
        bits[b] = onebit_pack_byte(g + 8 * b, has_e ? e + 8 * b : NULL, 8, scale, has_e);
    }
    if (8 * b < n) {
        bits[b] = onebit_pack_byte(g + 8 * b, has_e ? e + 8 * b : NULL, n - 8 * b, scale, has_e);
    }
}

static void onebit_pack(const float *g, float *e, size_t n, float scale, uint8_t *bits)
{
    if (e != NULL) {
        onebit_pack_impl(g, e, n, scale, bits, 1);
    } else {
        onebit_pack_impl(g, NULL, n, scale, bits, 0);
    }
}

/* Inlined with a constant @p accumulate below. */
static inline void onebit_unpack_impl(const uint8_t *bits, size_t n, float ws, int accumulate,
                                      float *out)
{
    const float nws = -ws;
    size_t b = 0;

#if defined(__AVX2__)
    b = n / 8;
    onebit_unpack_bytes_avx2(bits, b, ws, accumulate, out);
#endif
    for (; 8 * b + 8 <= n; b++) {
        unsigned v = bits[b];
        for (unsigned j = 0; j < 8; j++) {
            float s = ((v >> j) & 1u) ? nws : ws;
            out[8 * b + j] = accumulate ? out[8 * b + j] + s : s;
        }
    }
    for (size_t i = 8 * b; i < n; i++) {
        float s = ((bits[b] >> (i - 8 * b)) & 1u) ? nws : ws;
        out[i] = accumulate ? out[i] + s : s;
    }
}

static void onebit_unpack(const uint8_t *bits, size_t n, float ws, int accumulate, float *out)
{
    if (accumulate) {
        onebit_unpack_impl(bits, n, ws, 1, out);
    } else {
        onebit_unpack_impl(bits, n, ws, 0, out);
    }
}

#endif
