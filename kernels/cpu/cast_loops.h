/*
 * Inner loops of the 16-bit wire cast (cast.c), compiled once per instruction set by
 * isa_<set>.c (isa.h); see compress_isa.h for the contract of each. Float16 conversions use the
 * F16C instructions where the file is compiled with them (8 lanes at a time) and half.h
 * elsewhere and for tails; the two round alike (half.h). Bfloat16 uses half.h's integer
 * rounding, which gcc vectorizes as it stands.
 */
#ifndef COLL_KERNELS_CAST_LOOPS_H
#define COLL_KERNELS_CAST_LOOPS_H

#include "kernels/cpu/compress_isa.h"
#include "kernels/cpu/half.h"

#if defined(__F16C__) && defined(__AVX__)
#include <immintrin.h>
#define CAST_F16C 1
#endif

static uint32_t cast_maxkey(const float *g, const float *e, size_t n)
{
    uint32_t m = 0;

    /* An unsigned integer maximum: exact, so any order (and any vector width) gives it. */
    if (e == NULL) {
        for (size_t i = 0; i < n; i++) {
            uint32_t k = coll__mag_key(coll__f32_bits(g[i]));
            m = k > m ? k : m;
        }
        return m;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t k = coll__mag_key(coll__f32_bits(g[i] + e[i]));
        m = k > m ? k : m;
    }
    return m;
}

static void cast_encode_bf16(const float *g, float *e, size_t n, float mul, float inv,
                             uint16_t *out)
{
    if (e == NULL) {
        for (size_t i = 0; i < n; i++) {
            out[i] = coll__f32_to_bf16(g[i] * mul);
        }
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float x = g[i] + e[i];
        uint16_t h = coll__f32_to_bf16(x * mul);
        out[i] = h;
        e[i] = x - coll__bf16_to_f32(h) * inv;
    }
}

/* Float16 from @p i on, with half.h (the whole span without F16C, else the tail). */
static void cast_encode_f16_tail(const float *g, float *e, size_t i, size_t n, float mul,
                                 float inv, uint16_t *out)
{
    for (; i < n; i++) {
        float x = e ? g[i] + e[i] : g[i];
        uint16_t h = coll__f32_to_f16(x * mul);
        out[i] = h;
        if (e) {
            e[i] = x - coll__f16_to_f32(h) * inv;
        }
    }
}

static void cast_encode_f16(const float *g, float *e, size_t n, float mul, float inv,
                            uint16_t *out)
{
    size_t i = 0;
#if defined(CAST_F16C)
    const __m256 vmul = _mm256_set1_ps(mul), vinv = _mm256_set1_ps(inv);
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        if (e) {
            x = _mm256_add_ps(x, _mm256_loadu_ps(e + i));
        }
        __m128i h = _mm256_cvtps_ph(_mm256_mul_ps(x, vmul), _MM_FROUND_TO_NEAREST_INT);
        _mm_storeu_si128((__m128i *)(out + i), h);
        if (e) {
            __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(h), vinv);
            _mm256_storeu_ps(e + i, _mm256_sub_ps(x, d));
        }
    }
#endif
    cast_encode_f16_tail(g, e, i, n, mul, inv, out);
}

static void cast_encode(int fmt, const float *g, float *e, size_t n, float mul, float inv,
                        uint16_t *out)
{
    if (fmt == COLL__CAST_BF16) {
        cast_encode_bf16(g, e, n, mul, inv, out);
    } else {
        cast_encode_f16(g, e, n, mul, inv, out);
    }
}

static void cast_decode_bf16(const uint16_t *in, size_t n, float mul, int accumulate, float *out)
{
    if (accumulate) {
        for (size_t i = 0; i < n; i++) {
            out[i] += coll__bf16_to_f32(in[i]) * mul;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            out[i] = coll__bf16_to_f32(in[i]) * mul;
        }
    }
}

static void cast_decode_f16(const uint16_t *in, size_t n, float mul, int accumulate, float *out)
{
    size_t i = 0;
#if defined(CAST_F16C)
    const __m256 vmul = _mm256_set1_ps(mul);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i)));
        v = _mm256_mul_ps(v, vmul);
        if (accumulate) {
            v = _mm256_add_ps(_mm256_loadu_ps(out + i), v);
        }
        _mm256_storeu_ps(out + i, v);
    }
#endif
    for (; i < n; i++) {
        float v = coll__f16_to_f32(in[i]) * mul;
        out[i] = accumulate ? out[i] + v : v;
    }
}

static void cast_decode(int fmt, const uint16_t *in, size_t n, float mul, int accumulate,
                        float *out)
{
    if (fmt == COLL__CAST_BF16) {
        cast_decode_bf16(in, n, mul, accumulate, out);
    } else {
        cast_decode_f16(in, n, mul, accumulate, out);
    }
}

#endif
