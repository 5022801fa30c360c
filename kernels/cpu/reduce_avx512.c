/*
 * AVX-512 (F + BW) element kernels: 512-bit vectors, tails done with masked loads and stores
 * (masked-off lanes are not accessed, so nothing is read or written past the buffers). Only the
 * functions here carry target("avx512f,avx512bw"); reduce.c calls them only after
 * coll__reduce_avx512.supported() said yes. VL and DQ are not needed: 256/128-bit masked
 * accesses are done as 512-bit ones with a narrower mask.
 *
 * Same arithmetic as reduce_avx2.c and reduce_scalar.c (bit-identical results): MIN/MAX are
 * IEEE 754-2019 minimum()/maximum(); int64 PROD is built from 32x32->64 multiplies; int64 AVG's
 * final division is scalar.
 */
#if defined(__x86_64__)

#include <immintrin.h>

#include "kernels/cpu/reduce_isa.h"

#define AVX512_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw")))
#define AVX512_FN static __attribute__((noinline, target("avx512f,avx512bw")))

/* Mask of the first @p n lanes (n < 64 unless all lanes are wanted). */
static inline uint64_t first_lanes(size_t n)
{
    return n >= 64 ? ~0ull : (1ull << n) - 1;
}

/* ---- float32 / float64 (see reduce_avx2.c for the min/max reasoning) ------------------ */

AVX512_INLINE __m512 f32_op(coll_redop_t op, __m512 a, __m512 b)
{
    __m512i r, ai = _mm512_castps_si512(a);

    switch (op) {
    case COLL_PROD: return _mm512_mul_ps(a, b);
    case COLL_MIN:
        r = _mm512_castps_si512(_mm512_min_ps(a, b));
        r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_UQ), r, ai);
        return _mm512_castsi512_ps(r);
    case COLL_MAX:
        r = _mm512_castps_si512(_mm512_max_ps(a, b));
        r = _mm512_mask_and_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), r, ai);
        r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), r, ai);
        return _mm512_castsi512_ps(r);
    default: return _mm512_add_ps(a, b);
    }
}

AVX512_INLINE __m512d f64_op(coll_redop_t op, __m512d a, __m512d b)
{
    __m512i r, ai = _mm512_castpd_si512(a);

    switch (op) {
    case COLL_PROD: return _mm512_mul_pd(a, b);
    case COLL_MIN:
        r = _mm512_castpd_si512(_mm512_min_pd(a, b));
        r = _mm512_mask_or_epi64(r, _mm512_cmp_pd_mask(a, b, _CMP_EQ_UQ), r, ai);
        return _mm512_castsi512_pd(r);
    case COLL_MAX:
        r = _mm512_castpd_si512(_mm512_max_pd(a, b));
        r = _mm512_mask_and_epi64(r, _mm512_cmp_pd_mask(a, b, _CMP_EQ_OQ), r, ai);
        r = _mm512_mask_or_epi64(r, _mm512_cmp_pd_mask(a, b, _CMP_UNORD_Q), r, ai);
        return _mm512_castsi512_pd(r);
    default: return _mm512_add_pd(a, b);
    }
}

/* ---- integers ------------------------------------------------------------------------ */

AVX512_INLINE __m512i mul_epi8(__m512i a, __m512i b)
{
    __m512i even = _mm512_mullo_epi16(a, b);
    __m512i odd = _mm512_mullo_epi16(_mm512_srli_epi16(a, 8), _mm512_srli_epi16(b, 8));
    return _mm512_or_si512(_mm512_and_si512(even, _mm512_set1_epi16(0xff)),
                           _mm512_slli_epi16(odd, 8));
}

AVX512_INLINE __m512i mul_epi64(__m512i a, __m512i b)
{
    __m512i lo = _mm512_mul_epu32(a, b);
    __m512i cross = _mm512_add_epi64(_mm512_mul_epu32(a, _mm512_srli_epi64(b, 32)),
                                     _mm512_mul_epu32(_mm512_srli_epi64(a, 32), b));
    return _mm512_add_epi64(lo, _mm512_slli_epi64(cross, 32));
}

AVX512_INLINE __m512i int_op(coll_dtype_t dt, coll_redop_t op, __m512i a, __m512i b)
{
    switch (dt * COLL_REDOP_COUNT + op) {
    case COLL_INT8 * COLL_REDOP_COUNT + COLL_MIN: return _mm512_min_epi8(a, b);
    case COLL_INT8 * COLL_REDOP_COUNT + COLL_MAX: return _mm512_max_epi8(a, b);
    case COLL_UINT8 * COLL_REDOP_COUNT + COLL_MIN: return _mm512_min_epu8(a, b);
    case COLL_UINT8 * COLL_REDOP_COUNT + COLL_MAX: return _mm512_max_epu8(a, b);
    case COLL_INT32 * COLL_REDOP_COUNT + COLL_MIN: return _mm512_min_epi32(a, b);
    case COLL_INT32 * COLL_REDOP_COUNT + COLL_MAX: return _mm512_max_epi32(a, b);
    case COLL_INT64 * COLL_REDOP_COUNT + COLL_MIN: return _mm512_min_epi64(a, b);
    case COLL_INT64 * COLL_REDOP_COUNT + COLL_MAX: return _mm512_max_epi64(a, b);
    default: break;
    }
    if (op == COLL_PROD) {
        return dt == COLL_INT32 ? _mm512_mullo_epi32(a, b)
             : dt == COLL_INT64 ? mul_epi64(a, b)
                                : mul_epi8(a, b);
    }
    return dt == COLL_INT32 ? _mm512_add_epi32(a, b)
         : dt == COLL_INT64 ? _mm512_add_epi64(a, b)
                            : _mm512_add_epi8(a, b);
}

AVX512_INLINE __m512i vec_op(coll_dtype_t dt, coll_redop_t op, __m512i a, __m512i b)
{
    if (dt == COLL_FLOAT32) {
        return _mm512_castps_si512(f32_op(op, _mm512_castsi512_ps(a), _mm512_castsi512_ps(b)));
    }
    if (dt == COLL_FLOAT64) {
        return _mm512_castpd_si512(f64_op(op, _mm512_castsi512_pd(a), _mm512_castsi512_pd(b)));
    }
    return int_op(dt, op, a, b);
}

/* ---- combine: out = op(in[0], ..., in[m-1]) ------------------------------------------ */

/* 64 bytes at byte offset @p off of every input, combined and stored; @p bytes < 64 masks. */
AVX512_INLINE void combine_vec(coll_dtype_t dt, coll_redop_t op, unsigned m, char *o,
                               const char *const *p, size_t off, __mmask64 bytes)
{
    __m512i v = _mm512_maskz_loadu_epi8(bytes, p[0] + off);

    for (unsigned k = 1; k < m; k++) {
        v = vec_op(dt, op, v, _mm512_maskz_loadu_epi8(bytes, p[k] + off));
    }
    _mm512_mask_storeu_epi8(o + off, bytes, v);
}

AVX512_INLINE void combine_loop(coll_dtype_t dt, coll_redop_t op, unsigned m, void *out,
                                const void *const *in, size_t n)
{
    const size_t es = coll__reduce_esize(dt), len = n * es;
    const char *p[COLL__REDUCE_FANIN + 1];
    size_t off = 0;

    for (unsigned k = 0; k < m; k++) {
        p[k] = in[k];
    }
    for (; off + 64 <= len; off += 64) {
        combine_vec(dt, op, m, out, p, off, ~0ull);
    }
    if (off < len) {
        combine_vec(dt, op, m, out, p, off, first_lanes(len - off));
    }
}

AVX512_INLINE void combine_m(coll_dtype_t dt, coll_redop_t op, void *out,
                             const void *const *in, unsigned m, size_t n)
{
    switch (m) {
    case 2: combine_loop(dt, op, 2, out, in, n); break;
    case 3: combine_loop(dt, op, 3, out, in, n); break;
    case 4: combine_loop(dt, op, 4, out, in, n); break;
    default: combine_loop(dt, op, 5, out, in, n); break;
    }
}

AVX512_INLINE void combine_ops(coll_dtype_t dt, coll_redop_t op, void *out,
                               const void *const *in, unsigned m, size_t n)
{
    switch (op) {
    case COLL_PROD: combine_m(dt, COLL_PROD, out, in, m, n); break;
    case COLL_MIN: combine_m(dt, COLL_MIN, out, in, m, n); break;
    case COLL_MAX: combine_m(dt, COLL_MAX, out, in, m, n); break;
    default: combine_m(dt, COLL_SUM, out, in, m, n); break;
    }
}

#define COMBINE_DTYPE(name, DT)                                                             \
    AVX512_FN void combine_##name(coll_redop_t op, void *out, const void *const *in,        \
                                  unsigned m, size_t n)                                     \
    {                                                                                       \
        combine_ops(DT, op, out, in, m, n);                                                 \
    }
COMBINE_DTYPE(f32, COLL_FLOAT32)
COMBINE_DTYPE(f64, COLL_FLOAT64)
COMBINE_DTYPE(i8, COLL_INT8)
COMBINE_DTYPE(u8, COLL_UINT8)
COMBINE_DTYPE(i32, COLL_INT32)
COMBINE_DTYPE(i64, COLL_INT64)

AVX512_FN void avx512_combine(coll_dtype_t dtype, coll_redop_t op, void *out,
                              const void *const *in, unsigned m, size_t n)
{
    switch (dtype) {
    case COLL_FLOAT32: combine_f32(op, out, in, m, n); break;
    case COLL_FLOAT64: combine_f64(op, out, in, m, n); break;
    case COLL_INT8: combine_i8(op, out, in, m, n); break;
    case COLL_UINT8: combine_u8(op, out, in, m, n); break;
    case COLL_INT32: combine_i32(op, out, in, m, n); break;
    case COLL_INT64: combine_i64(op, out, in, m, n); break;
    default: break;
    }
}

/* ---- float16 / bfloat16 ------------------------------------------------------------- */

/* Sixteen 16-bit floats (the first lanes of @p mask) widened to float32. */
AVX512_INLINE __m512 widen16(coll_dtype_t dt, const char *p, __mmask32 mask)
{
    __m256i h = _mm512_castsi512_si256(_mm512_maskz_loadu_epi16(mask, p));

    if (dt == COLL_FLOAT16) {
        return _mm512_cvtph_ps(h);
    }
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Sixteen float32 rounded to bfloat16, nearest even (half.h), NaN made quiet. */
AVX512_INLINE __m256i bf16_round16(__m512 v)
{
    __m512i x = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_add_epi32(_mm512_add_epi32(x, _mm512_set1_epi32(0x7fff)), lsb);
    __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);

    r = _mm512_mask_or_epi32(r, nan, x, _mm512_set1_epi32(0x400000));
    return _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16));
}

/* Sixteen float32 rounded to the 16-bit dtype, nearest even. */
AVX512_INLINE __m256i narrow16(coll_dtype_t dt, __m512 v)
{
    return dt == COLL_FLOAT16 ? _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
                              : bf16_round16(v);
}

/* The lanes of @p mask at element @p i: widen (and scale), combine, store to acc or, narrowed,
 * to out. */
AVX512_INLINE void half_vec(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc,
                            int has_acc, const char *const *p, const __m512 *s, char *out,
                            size_t i, __mmask16 mask)
{
    __m512 x[COLL__REDUCE_FANIN];

    for (unsigned k = 0; k < m; k++) {
        x[k] = widen16(dt, p[k] + 2 * i, mask);
        x[k] = op == COLL_AVG ? _mm512_mul_ps(x[k], s[k]) : x[k];
    }
    __m512 v = has_acc ? f32_op(op, _mm512_maskz_loadu_ps(mask, acc + i), x[0]) : x[0];
    for (unsigned k = 1; k < m; k++) {
        v = f32_op(op, v, x[k]);
    }
    if (out != NULL) {
        _mm512_mask_storeu_epi16(out + 2 * i, mask, _mm512_castsi256_si512(narrow16(dt, v)));
    } else {
        _mm512_mask_storeu_ps(acc + i, mask, v);
    }
}

AVX512_INLINE void half_loop(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc,
                             int has_acc, const void *const *in, const float *scale, size_t n,
                             char *out)
{
    const char *p[COLL__REDUCE_FANIN];
    __m512 s[COLL__REDUCE_FANIN];
    size_t i = 0;

    for (unsigned k = 0; k < m; k++) {
        p[k] = in[k];
        s[k] = _mm512_set1_ps(op == COLL_AVG ? scale[k] : 1.0f);
    }
    /* Separate loops for the two destinations, rather than a test per vector. */
    if (out != NULL) {
        for (; i + 16 <= n; i += 16) {
            half_vec(dt, op, m, acc, has_acc, p, s, out, i, 0xffff);
        }
    } else {
        for (; i + 16 <= n; i += 16) {
            half_vec(dt, op, m, acc, has_acc, p, s, NULL, i, 0xffff);
        }
    }
    if (i < n) {
        half_vec(dt, op, m, acc, has_acc, p, s, out, i, (__mmask16)first_lanes(n - i));
    }
}

AVX512_INLINE void half_m(coll_dtype_t dt, coll_redop_t op, float *acc, int has_acc,
                          const void *const *in, const float *scale, unsigned m, size_t n,
                          char *out)
{
    switch (m) {
    case 1: half_loop(dt, op, 1, acc, has_acc, in, scale, n, out); break;
    case 2: half_loop(dt, op, 2, acc, has_acc, in, scale, n, out); break;
    case 3: half_loop(dt, op, 3, acc, has_acc, in, scale, n, out); break;
    default: half_loop(dt, op, 4, acc, has_acc, in, scale, n, out); break;
    }
}

AVX512_INLINE void half_ops(coll_dtype_t dt, coll_redop_t op, float *acc, int has_acc,
                            const void *const *in, const float *scale, unsigned m, size_t n,
                            char *out)
{
    switch (op) {
    case COLL_SUM: half_m(dt, COLL_SUM, acc, has_acc, in, scale, m, n, out); break;
    case COLL_AVG: half_m(dt, COLL_AVG, acc, has_acc, in, scale, m, n, out); break;
    case COLL_PROD: half_m(dt, COLL_PROD, acc, has_acc, in, scale, m, n, out); break;
    case COLL_MIN: half_m(dt, COLL_MIN, acc, has_acc, in, scale, m, n, out); break;
    default: half_m(dt, COLL_MAX, acc, has_acc, in, scale, m, n, out); break;
    }
}

AVX512_FN void half_f16(coll_redop_t op, float *acc, int has_acc, const void *const *in,
                        const float *scale, unsigned m, size_t n, char *out)
{
    half_ops(COLL_FLOAT16, op, acc, has_acc, in, scale, m, n, out);
}

AVX512_FN void half_bf16(coll_redop_t op, float *acc, int has_acc, const void *const *in,
                         const float *scale, unsigned m, size_t n, char *out)
{
    half_ops(COLL_BFLOAT16, op, acc, has_acc, in, scale, m, n, out);
}

AVX512_FN void avx512_combine_half(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                                   const void *const *in, const float *scale, unsigned m,
                                   size_t n, void *out)
{
    if (dtype == COLL_FLOAT16) {
        half_f16(op, acc, has_acc, in, scale, m, n, out);
    } else {
        half_bf16(op, acc, has_acc, in, scale, m, n, out);
    }
}

/* ---- AVG's final division (exactness argued in reduce_avx2.c) ------------------------ */

/* Sixteen lanes of @p dt at element @p i divided by @p w (float32 lanes for 8-bit integers,
 * float64 lanes, eight at a time, for int32). */
AVX512_INLINE void divide_vec(coll_dtype_t dt, char *b, uint32_t w, size_t i, __mmask16 mask)
{
    const size_t es = coll__reduce_esize(dt);
    char *p = b + i * es;

    if (dt == COLL_FLOAT32) {
        __m512 x = _mm512_maskz_loadu_ps(mask, p);
        _mm512_mask_storeu_ps(p, mask, _mm512_div_ps(x, _mm512_set1_ps((float)w)));
    } else if (dt == COLL_FLOAT64) {
        __m512d x = _mm512_maskz_loadu_pd((__mmask8)mask, p);
        _mm512_mask_storeu_pd(p, (__mmask8)mask, _mm512_div_pd(x, _mm512_set1_pd(w)));
    } else if (dt == COLL_INT32) {
        __m256i x = _mm512_castsi512_si256(_mm512_maskz_loadu_epi32(mask, p));
        __m256i q = _mm512_cvttpd_epi32(_mm512_div_pd(_mm512_cvtepi32_pd(x), _mm512_set1_pd(w)));
        _mm512_mask_storeu_epi32(p, mask, _mm512_castsi256_si512(q));
    } else {
        __m128i x = _mm512_castsi512_si128(_mm512_maskz_loadu_epi8(mask, p));
        __m512i xi = dt == COLL_INT8 ? _mm512_cvtepi8_epi32(x) : _mm512_cvtepu8_epi32(x);
        __m512 q = _mm512_div_ps(_mm512_cvtepi32_ps(xi), _mm512_set1_ps((float)w));
        __m128i q8 = _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(q));
        _mm512_mask_storeu_epi8(p, mask, _mm512_castsi128_si512(q8));
    }
}

AVX512_INLINE void divide_loop(coll_dtype_t dt, char *b, uint32_t w, size_t n)
{
    /* Lanes per step: sixteen, or eight where each lane widens to 64 bits. */
    const size_t vl = dt == COLL_FLOAT64 || dt == COLL_INT32 ? 8 : 16;
    size_t i = 0;

    for (; i + vl <= n; i += vl) {
        divide_vec(dt, b, w, i, (__mmask16)first_lanes(vl));
    }
    if (i < n) {
        divide_vec(dt, b, w, i, (__mmask16)first_lanes(n - i));
    }
}

AVX512_FN void avx512_divide(coll_dtype_t dtype, void *buf, uint32_t world_size, size_t n)
{
    switch (dtype) {
    case COLL_FLOAT32: divide_loop(COLL_FLOAT32, buf, world_size, n); break;
    case COLL_FLOAT64: divide_loop(COLL_FLOAT64, buf, world_size, n); break;
    case COLL_INT32: divide_loop(COLL_INT32, buf, world_size, n); break;
    case COLL_INT8: divide_loop(COLL_INT8, buf, world_size, n); break;
    case COLL_UINT8: divide_loop(COLL_UINT8, buf, world_size, n); break;
    default: coll__reduce_scalar.divide(dtype, buf, world_size, n); break;
    }
}

static int avx512_supported(void)
{
    /* __builtin_cpu_supports() also checks that the OS saves the ZMM and mask state. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}

const coll__reduce_isa_t coll__reduce_avx512 = {
    .name = "avx512",
    .supported = avx512_supported,
    .combine = avx512_combine,
    .combine_half = avx512_combine_half,
    .divide = avx512_divide,
};

#endif /* __x86_64__ */
