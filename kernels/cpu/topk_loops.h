/*
 * Inner loops of TopK (topk.c), compiled once per instruction set by isa_<set>.c (isa.h); see
 * compress_isa.h for the contract of each. The histograms of the radix select stay scalar in
 * topk.c (a scatter of increments does not vectorize); what vectorizes is the residual update
 * (plain C) and the threshold test of 64 elements at a time into a bit mask (compare and movemask
 * with AVX2: gcc does not vectorize building a mask well), which topk.c walks with ctz.
 */
#ifndef COLL_KERNELS_TOPK_LOOPS_H
#define COLL_KERNELS_TOPK_LOOPS_H

#include "kernels/cpu/compress_isa.h"
#include "kernels/cpu/half.h"

static void ef_add(const float *g, float *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e[i] = g[i] + e[i];
    }
}

#if defined(__AVX2__)
#include <immintrin.h>

/* 8 lanes of v: their bits of key >= t, lane j -> bit j. Keys are below 2^31 and t - 1 >= -1,
 * so the signed comparison key > t - 1 is the unsigned key >= t. */
static inline uint64_t topk_mask8_avx2(const float *v, __m256i tm1, __m256i abs_mask)
{
    __m256i key = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)v), abs_mask);
    return (uint64_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(key, tm1)));
}
#endif

static uint64_t topk_mask(const float *v, size_t len, uint32_t t)
{
    uint64_t m = 0;
    size_t l = 0;

#if defined(__AVX2__)
    const __m256i tm1 = _mm256_set1_epi32((int32_t)t - 1);
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    for (; l + 8 <= len; l += 8) {
        m |= topk_mask8_avx2(v + l, tm1, abs_mask) << l;
    }
#endif
    /* Without AVX2 (and for the tail): gcc turns this into poor vector code or none; it is the
     * reference the vector path must match. */
    for (; l < len; l++) {
        m |= (uint64_t)(coll__mag_key(coll__f32_bits(v[l])) >= t) << l;
    }
    return m;
}

#endif
