/*
 * AVX2 + F16C element kernels (256-bit vectors). Compiled for the baseline ISA like the rest
 * of the program: only the functions here carry target("avx2,f16c"), and reduce.c calls them
 * only after coll__reduce_avx2.supported() said yes. Tails shorter than one vector go to the
 * scalar kernels, which compute the same bits.
 *
 * Everything SIMD except: int64 AVG's final division (scalar: no vector integer division), and
 * int64 PROD, which is built from 32x32->64 multiplies (no 64-bit multiply before AVX-512DQ).
 * MIN/MAX follow IEEE 754-2019 minimum()/maximum() exactly like reduce_scalar.c (see there).
 */
#if defined(__x86_64__)

#include <cpuid.h>
#include <immintrin.h>

#include "kernels/cpu/reduce_isa.h"

/* Helpers are inlined into their callers, which all carry the same target. */
#define AVX2_INLINE static inline __attribute__((always_inline, target("avx2,f16c")))
#define AVX2_FN static __attribute__((noinline, target("avx2,f16c")))

/* ---- float32 / float64 -------------------------------------------------------------- */

/* IEEE minimum(): vminps gives a < b ? a : b; where a == b or either is NaN, OR in a, which
 * turns (-0, +0) into -0 and keeps any NaN a NaN. "Equal or unordered" is built from the two
 * SSE-era predicates rather than _CMP_EQ_UQ, which Valgrind (3.19) emulates as _CMP_EQ_OQ. */
AVX2_INLINE __m256 f32_min(__m256 a, __m256 b)
{
    __m256 r = _mm256_min_ps(a, b);
    __m256 eq_or_nan =
        _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
    return _mm256_or_ps(r, _mm256_and_ps(eq_or_nan, a));
}

/* IEEE maximum(): vmaxps gives a > b ? a : b (so b when equal or unordered); AND in a where
 * equal (+0 wins), OR in a where unordered (NaN). */
AVX2_INLINE __m256 f32_max(__m256 a, __m256 b)
{
    __m256 r = _mm256_max_ps(a, b);
    __m256 eq = _mm256_cmp_ps(a, b, _CMP_EQ_OQ);
    __m256 nan = _mm256_cmp_ps(a, b, _CMP_UNORD_Q);
    r = _mm256_andnot_ps(_mm256_andnot_ps(a, eq), r);
    return _mm256_or_ps(r, _mm256_and_ps(nan, a));
}

AVX2_INLINE __m256 f32_op(coll_redop_t op, __m256 a, __m256 b)
{
    switch (op) {
    case COLL_PROD: return _mm256_mul_ps(a, b);
    case COLL_MIN: return f32_min(a, b);
    case COLL_MAX: return f32_max(a, b);
    default: return _mm256_add_ps(a, b);
    }
}

AVX2_INLINE __m256d f64_min(__m256d a, __m256d b)
{
    __m256d r = _mm256_min_pd(a, b);
    __m256d eq_or_nan =
        _mm256_or_pd(_mm256_cmp_pd(a, b, _CMP_EQ_OQ), _mm256_cmp_pd(a, b, _CMP_UNORD_Q));
    return _mm256_or_pd(r, _mm256_and_pd(eq_or_nan, a));
}

AVX2_INLINE __m256d f64_max(__m256d a, __m256d b)
{
    __m256d r = _mm256_max_pd(a, b);
    __m256d eq = _mm256_cmp_pd(a, b, _CMP_EQ_OQ);
    __m256d nan = _mm256_cmp_pd(a, b, _CMP_UNORD_Q);
    r = _mm256_andnot_pd(_mm256_andnot_pd(a, eq), r);
    return _mm256_or_pd(r, _mm256_and_pd(nan, a));
}

AVX2_INLINE __m256d f64_op(coll_redop_t op, __m256d a, __m256d b)
{
    switch (op) {
    case COLL_PROD: return _mm256_mul_pd(a, b);
    case COLL_MIN: return f64_min(a, b);
    case COLL_MAX: return f64_max(a, b);
    default: return _mm256_add_pd(a, b);
    }
}

/* ---- integers ------------------------------------------------------------------------ */

/* Byte products modulo 2^8 from 16-bit multiplies: the low byte of a 16x16 product is the
 * product of the low bytes; the high bytes are multiplied after shifting them down. */
AVX2_INLINE __m256i mul_epi8(__m256i a, __m256i b)
{
    __m256i even = _mm256_mullo_epi16(a, b);
    __m256i odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
    return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0xff)),
                           _mm256_slli_epi16(odd, 8));
}

/* 64-bit products modulo 2^64: lo*lo + ((lo*hi + hi*lo) << 32). */
AVX2_INLINE __m256i mul_epi64(__m256i a, __m256i b)
{
    __m256i lo = _mm256_mul_epu32(a, b);
    __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)),
                                     _mm256_mul_epu32(_mm256_srli_epi64(a, 32), b));
    return _mm256_add_epi64(lo, _mm256_slli_epi64(cross, 32));
}

AVX2_INLINE __m256i int_op(coll_dtype_t dt, coll_redop_t op, __m256i a, __m256i b)
{
    __m256i gt; /* int64 has no vpminsq before AVX-512: compare and blend */

    switch (dt * COLL_REDOP_COUNT + op) {
    case COLL_INT8 * COLL_REDOP_COUNT + COLL_MIN: return _mm256_min_epi8(a, b);
    case COLL_INT8 * COLL_REDOP_COUNT + COLL_MAX: return _mm256_max_epi8(a, b);
    case COLL_UINT8 * COLL_REDOP_COUNT + COLL_MIN: return _mm256_min_epu8(a, b);
    case COLL_UINT8 * COLL_REDOP_COUNT + COLL_MAX: return _mm256_max_epu8(a, b);
    case COLL_INT32 * COLL_REDOP_COUNT + COLL_MIN: return _mm256_min_epi32(a, b);
    case COLL_INT32 * COLL_REDOP_COUNT + COLL_MAX: return _mm256_max_epi32(a, b);
    case COLL_INT64 * COLL_REDOP_COUNT + COLL_MIN:
        gt = _mm256_cmpgt_epi64(a, b);
        return _mm256_blendv_epi8(a, b, gt);
    case COLL_INT64 * COLL_REDOP_COUNT + COLL_MAX:
        gt = _mm256_cmpgt_epi64(a, b);
        return _mm256_blendv_epi8(b, a, gt);
    default: break;
    }
    if (op == COLL_PROD) {
        return dt == COLL_INT32 ? _mm256_mullo_epi32(a, b)
             : dt == COLL_INT64 ? mul_epi64(a, b)
                                : mul_epi8(a, b);
    }
    return dt == COLL_INT32 ? _mm256_add_epi32(a, b)
         : dt == COLL_INT64 ? _mm256_add_epi64(a, b)
                            : _mm256_add_epi8(a, b);
}

/* One operation on 32 bytes of any non-16-bit dtype, carried in an integer register. */
AVX2_INLINE __m256i vec_op(coll_dtype_t dt, coll_redop_t op, __m256i a, __m256i b)
{
    if (dt == COLL_FLOAT32) {
        return _mm256_castps_si256(f32_op(op, _mm256_castsi256_ps(a), _mm256_castsi256_ps(b)));
    }
    if (dt == COLL_FLOAT64) {
        return _mm256_castpd_si256(f64_op(op, _mm256_castsi256_pd(a), _mm256_castsi256_pd(b)));
    }
    return int_op(dt, op, a, b);
}

/* ---- combine: out = op(in[0], ..., in[m-1]) ------------------------------------------ */

/* The loop, with dtype, op and m compile-time constants in every instance. */
AVX2_INLINE void combine_loop(coll_dtype_t dt, coll_redop_t op, unsigned m, void *out,
                              const void *const *in, size_t n)
{
    const size_t es = coll__reduce_esize(dt), vl = 32 / es;
    const char *p[COLL__REDUCE_FANIN + 1];
    const void *tail[COLL__REDUCE_FANIN + 1];
    char *o = out;
    size_t i = 0;

    for (unsigned k = 0; k < m; k++) {
        p[k] = in[k];
    }
    for (; i + vl <= n; i += vl) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p[0] + i * es));
        for (unsigned k = 1; k < m; k++) {
            v = vec_op(dt, op, v, _mm256_loadu_si256((const __m256i *)(p[k] + i * es)));
        }
        _mm256_storeu_si256((__m256i *)(o + i * es), v);
    }
    if (i < n) {
        for (unsigned k = 0; k < m; k++) {
            tail[k] = p[k] + i * es;
        }
        coll__reduce_scalar.combine(dt, op, o + i * es, tail, m, n - i);
    }
}

AVX2_INLINE void combine_m(coll_dtype_t dt, coll_redop_t op, void *out, const void *const *in,
                           unsigned m, size_t n)
{
    switch (m) {
    case 2: combine_loop(dt, op, 2, out, in, n); break;
    case 3: combine_loop(dt, op, 3, out, in, n); break;
    case 4: combine_loop(dt, op, 4, out, in, n); break;
    default: combine_loop(dt, op, 5, out, in, n); break;
    }
}

AVX2_INLINE void combine_ops(coll_dtype_t dt, coll_redop_t op, void *out, const void *const *in,
                             unsigned m, size_t n)
{
    switch (op) {
    case COLL_PROD: combine_m(dt, COLL_PROD, out, in, m, n); break;
    case COLL_MIN: combine_m(dt, COLL_MIN, out, in, m, n); break;
    case COLL_MAX: combine_m(dt, COLL_MAX, out, in, m, n); break;
    default: combine_m(dt, COLL_SUM, out, in, m, n); break;
    }
}

/* One out-of-line function per dtype, so that a profile names the dtype. */
#define COMBINE_DTYPE(name, DT)                                                             \
    AVX2_FN void combine_##name(coll_redop_t op, void *out, const void *const *in,          \
                                unsigned m, size_t n)                                       \
    {                                                                                       \
        combine_ops(DT, op, out, in, m, n);                                                 \
    }
COMBINE_DTYPE(f32, COLL_FLOAT32)
COMBINE_DTYPE(f64, COLL_FLOAT64)
COMBINE_DTYPE(i8, COLL_INT8)
COMBINE_DTYPE(u8, COLL_UINT8)
COMBINE_DTYPE(i32, COLL_INT32)
COMBINE_DTYPE(i64, COLL_INT64)

AVX2_FN void avx2_combine(coll_dtype_t dtype, coll_redop_t op, void *out, const void *const *in,
                          unsigned m, size_t n)
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

/* Eight 16-bit floats widened to float32: F16C for binary16, a shift for bfloat16. */
AVX2_INLINE __m256 widen8(coll_dtype_t dt, const char *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);

    if (dt == COLL_FLOAT16) {
        return _mm256_cvtph_ps(h);
    }
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Eight float32 rounded to bfloat16, nearest even (half.h), NaN made quiet. */
AVX2_INLINE __m128i bf16_round8(__m256 v)
{
    __m256i x = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb);
    __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));

    r = _mm256_blendv_epi8(r, _mm256_or_si256(x, _mm256_set1_epi32(0x400000)), nan);
    r = _mm256_srli_epi32(r, 16);
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* Eight float32 rounded to the 16-bit dtype, nearest even. */
AVX2_INLINE __m128i narrow8(coll_dtype_t dt, __m256 v)
{
    return dt == COLL_FLOAT16 ? _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT) : bf16_round8(v);
}

/* Eight elements at @p i: widen (and scale), combine, store to acc or, narrowed, to out. */
AVX2_INLINE void half_vec(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc, int has_acc,
                          const char *const *p, const __m256 *s, char *out, size_t i)
{
    __m256 x[COLL__REDUCE_FANIN];

    for (unsigned k = 0; k < m; k++) {
        x[k] = widen8(dt, p[k] + 2 * i);
        x[k] = op == COLL_AVG ? _mm256_mul_ps(x[k], s[k]) : x[k];
    }
    __m256 v = has_acc ? f32_op(op, _mm256_loadu_ps(acc + i), x[0]) : x[0];
    for (unsigned k = 1; k < m; k++) {
        v = f32_op(op, v, x[k]);
    }
    if (out != NULL) {
        _mm_storeu_si128((__m128i *)(out + 2 * i), narrow8(dt, v));
    } else {
        _mm256_storeu_ps(acc + i, v);
    }
}

AVX2_INLINE void half_loop(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc, int has_acc,
                           const void *const *in, const float *scale, size_t n, char *out)
{
    const char *p[COLL__REDUCE_FANIN];
    const void *tail[COLL__REDUCE_FANIN];
    __m256 s[COLL__REDUCE_FANIN];
    size_t i = 0;

    for (unsigned k = 0; k < m; k++) {
        p[k] = in[k];
        s[k] = _mm256_set1_ps(op == COLL_AVG ? scale[k] : 1.0f);
    }
    /* Separate loops for the two destinations, rather than a test per vector. */
    if (out != NULL) {
        for (; i + 8 <= n; i += 8) {
            half_vec(dt, op, m, acc, has_acc, p, s, out, i);
        }
    } else {
        for (; i + 8 <= n; i += 8) {
            half_vec(dt, op, m, acc, has_acc, p, s, NULL, i);
        }
    }
    if (i < n) {
        for (unsigned k = 0; k < m; k++) {
            tail[k] = p[k] + 2 * i;
        }
        coll__reduce_scalar.combine_half(dt, op, acc + i, has_acc, tail, scale, m, n - i,
                                         out != NULL ? out + 2 * i : NULL);
    }
}

AVX2_INLINE void half_m(coll_dtype_t dt, coll_redop_t op, float *acc, int has_acc,
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

AVX2_INLINE void half_ops(coll_dtype_t dt, coll_redop_t op, float *acc, int has_acc,
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

AVX2_FN void half_f16(coll_redop_t op, float *acc, int has_acc, const void *const *in,
                      const float *scale, unsigned m, size_t n, char *out)
{
    half_ops(COLL_FLOAT16, op, acc, has_acc, in, scale, m, n, out);
}

AVX2_FN void half_bf16(coll_redop_t op, float *acc, int has_acc, const void *const *in,
                       const float *scale, unsigned m, size_t n, char *out)
{
    half_ops(COLL_BFLOAT16, op, acc, has_acc, in, scale, m, n, out);
}

AVX2_FN void avx2_combine_half(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                               const void *const *in, const float *scale, unsigned m, size_t n,
                               void *out)
{
    if (dtype == COLL_FLOAT16) {
        half_f16(op, acc, has_acc, in, scale, m, n, out);
    } else {
        half_bf16(op, acc, has_acc, in, scale, m, n, out);
    }
}

/* ---- AVG's final division ------------------------------------------------------------ */

/* int32 through float64: |x| < 2^31, so a non-integral quotient is at least 1/|x| > 2^-31
 * (relative) away from an integer, far more than float64's 2^-53: truncating the correctly
 * rounded quotient is truncating the exact one. */
AVX2_INLINE void divide_i32(int32_t *buf, uint32_t world_size, size_t n)
{
    const __m256d w = _mm256_set1_pd((double)world_size);

    for (size_t i = 0; i + 4 <= n; i += 4) {
        __m256d x = _mm256_cvtepi32_pd(_mm_loadu_si128((const __m128i *)(buf + i)));
        _mm_storeu_si128((__m128i *)(buf + i), _mm256_cvttpd_epi32(_mm256_div_pd(x, w)));
    }
}

/* int8 and uint8 through float32, by the same argument (|x| <= 256, float32 has 2^-24). A
 * world size past 2^24 rounds when converted, but stays above 256, so the quotient is 0. */
AVX2_INLINE void divide_8(coll_dtype_t dt, uint8_t *buf, uint32_t world_size, size_t n)
{
    const __m256 w = _mm256_set1_ps((float)world_size);

    for (size_t i = 0; i + 8 <= n; i += 8) {
        __m128i b = _mm_loadl_epi64((const __m128i *)(buf + i));
        __m256i x = dt == COLL_INT8 ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
        __m256i q = _mm256_cvttps_epi32(_mm256_div_ps(_mm256_cvtepi32_ps(x), w));
        __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
        __m128i q8 = dt == COLL_INT8 ? _mm_packs_epi16(q16, q16) : _mm_packus_epi16(q16, q16);
        _mm_storel_epi64((__m128i *)(buf + i), q8);
    }
}

AVX2_FN void avx2_divide(coll_dtype_t dtype, void *buf, uint32_t world_size, size_t n)
{
    const size_t es = coll__reduce_esize(dtype), vl = 32 / es, done = n - n % vl;
    char *b = buf;

    switch (dtype) {
    case COLL_FLOAT32:
        for (size_t i = 0; i < done; i += 8) {
            __m256 x = _mm256_loadu_ps((const float *)b + i);
            _mm256_storeu_ps((float *)b + i, _mm256_div_ps(x, _mm256_set1_ps((float)world_size)));
        }
        break;
    case COLL_FLOAT64:
        for (size_t i = 0; i < done; i += 4) {
            __m256d x = _mm256_loadu_pd((const double *)b + i);
            _mm256_storeu_pd((double *)b + i, _mm256_div_pd(x, _mm256_set1_pd(world_size)));
        }
        break;
    case COLL_INT32: divide_i32((int32_t *)b, world_size, done); break;
    case COLL_INT8:
    case COLL_UINT8: divide_8(dtype, (uint8_t *)b, world_size, done); break;
    default: coll__reduce_scalar.divide(dtype, b, world_size, n); return;
    }
    coll__reduce_scalar.divide(dtype, b + done * es, world_size, n - done);
}

static int avx2_supported(void)
{
    unsigned eax, ebx, ecx, edx;

    /* __builtin_cpu_supports("avx2") also checks that the OS saves the YMM state. */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (ecx & bit_F16C) != 0;
}

const coll__reduce_isa_t coll__reduce_avx2 = {
    .name = "avx2",
    .supported = avx2_supported,
    .combine = avx2_combine,
    .combine_half = avx2_combine_half,
    .divide = avx2_divide,
};

#endif /* __x86_64__ */
