/*
 * The element loops of the reduction (reduce_isa.h), written once and compiled per instruction
 * set by isa_<set>.c: plain C on vectors of COLL__VBYTES bytes (isa.h: 16 for the baseline, 32
 * for AVX2, 64 for AVX-512), GCC/Clang vector extensions, so that the compiler emits one
 * instruction per operation at the width of each set. Intrinsics only where no vector operator
 * spells the instruction (the float16 conversions, F16C) or the compiler detours what one or two
 * instructions do (16 <-> 32-bit widening, a select by NaN, the IEEE minimum and maximum), each
 * next to the portable form the baseline uses; half.h's float16 conversions round as F16C does.
 *
 * Every set combines the sources in the same order (left to right), with the same rounding
 * steps and no fused multiply-add (-ffp-contract=off), so they give the same bits. MIN and MAX
 * follow IEEE 754-2019 §9.6 minimum()/maximum(), not IEEE 754-2008 minNum()/maxNum(): a NaN in
 * any source makes the result NaN (minNum would drop a quiet NaN and hide a diverged rank), -0
 * is below +0, and a NaN result is the bitwise OR of the two operands. Integer SUM and PROD wrap
 * (unsigned vectors); BAND, BOR and BXOR are the vectors' &, | and ^, integers only; AVG's
 * final integer division is exact through floating point (see rl_divide). A tail shorter than
 * one vector goes through the same vector code on a copy.
 */
#ifndef COLL_KERNELS_REDUCE_LOOPS_H
#define COLL_KERNELS_REDUCE_LOOPS_H

#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/reduce_isa.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define RL_INLINE static inline __attribute__((always_inline))
#define RL_NOINLINE static __attribute__((noinline))

#define RL_VB COLL__VBYTES
typedef float rl_f32 __attribute__((vector_size(RL_VB)));
typedef double rl_f64 __attribute__((vector_size(RL_VB)));
typedef int32_t rl_i32 __attribute__((vector_size(RL_VB)));
typedef int64_t rl_i64 __attribute__((vector_size(RL_VB)));
typedef uint32_t rl_u32 __attribute__((vector_size(RL_VB)));
typedef uint64_t rl_u64 __attribute__((vector_size(RL_VB)));
typedef int8_t rl_i8 __attribute__((vector_size(RL_VB)));
typedef uint8_t rl_u8 __attribute__((vector_size(RL_VB)));
/* The 16-bit floats that widen to one rl_f32, and the integers that widen to one division. */
typedef uint16_t rl_h16 __attribute__((vector_size(RL_VB / 2)));
typedef int32_t rl_i32h __attribute__((vector_size(RL_VB / 2)));
typedef int8_t rl_i8q __attribute__((vector_size(RL_VB / 4)));
typedef uint8_t rl_u8q __attribute__((vector_size(RL_VB / 4)));

/* Float32 lanes of one vector. */
#define RL_NF (RL_VB / 4)

/* The baseline's 16-byte vectors keep up with the loads only two to an iteration; the wider
 * sets run as fast or faster one at a time (reduce-bw, 4 KiB). */
#if RL_VB == 16
#define RL_UNROLL _Pragma("GCC unroll 2")
#else
#define RL_UNROLL
#endif

/* ---- float32 / float64 -------------------------------------------------------------------- */

/*
 * IEEE minimum() and maximum(): where one operand is strictly smaller (larger), that one; where
 * neither is, equal or unordered: the OR of the bits (-0 wins, a NaN stays a NaN), except that
 * maximum() of equal values is their AND (+0 wins). With AVX2 and AVX-512: vminps (a < b ? a : b)
 * or vmaxps (a > b ? a : b) and the ties fixed up under a compare, the sequences the vector
 * extensions' masks do not compile to; the baseline builds the masks.
 */
#if RL_VB == 64 && defined(__AVX512F__)
#define RL_MINMAX(name, VF, s, e, VI)                                                           \
    RL_INLINE VF name(coll_redop_t op, VF a, VF b)                                              \
    {                                                                                           \
        __m512i ia = (__m512i)a, r;                                                             \
        if (op == COLL_MIN) {                                                                   \
            r = (__m512i)_mm512_min_##s(a, b);                                                  \
            return (VF)_mm512_mask_or_##e(r, _mm512_cmp_##s##_mask(a, b, _CMP_EQ_UQ), r, ia);   \
        }                                                                                       \
        r = (__m512i)_mm512_max_##s(a, b);                                                      \
        r = _mm512_mask_and_##e(r, _mm512_cmp_##s##_mask(a, b, _CMP_EQ_OQ), r, ia);             \
        return (VF)_mm512_mask_or_##e(r, _mm512_cmp_##s##_mask(a, b, _CMP_UNORD_Q), r, ia);     \
    }
#elif RL_VB == 32 && defined(__AVX2__)
/* "Equal or unordered" from the two SSE-era predicates rather than _CMP_EQ_UQ, which Valgrind
 * (3.19) emulates as _CMP_EQ_OQ. */
#define RL_MINMAX(name, VF, s, e, VI)                                                           \
    RL_INLINE VF name(coll_redop_t op, VF a, VF b)                                              \
    {                                                                                           \
        VF eq = (VF)_mm256_cmp_##s(a, b, _CMP_EQ_OQ);                                           \
        VF nan = (VF)_mm256_cmp_##s(a, b, _CMP_UNORD_Q);                                        \
        if (op == COLL_MIN) {                                                                   \
            VF tie = (VF)_mm256_and_##s(_mm256_or_##s(eq, nan), a);                             \
            return (VF)_mm256_or_##s(_mm256_min_##s(a, b), tie);                                \
        }                                                                                       \
        VF r = (VF)_mm256_andnot_##s(_mm256_andnot_##s(a, eq), _mm256_max_##s(a, b));          \
        return (VF)_mm256_or_##s(r, _mm256_and_##s(nan, a));                                   \
    }
#else
#define RL_MINMAX(name, VF, s, e, VI)                                                           \
    RL_INLINE VF name(coll_redop_t op, VF a, VF b)                                              \
    {                                                                                           \
        VI ia = (VI)a, ib = (VI)b, lt = (VI)(a < b), gt = (VI)(b < a);                          \
        VI tie = ~(lt | gt) & (ia | ib);                                                        \
        if (op == COLL_MIN) {                                                                   \
            return (VF)((lt & ia) | (gt & ib) | tie);                                           \
        }                                                                                       \
        VI eq = (VI)(a == b);                                                                   \
        return (VF)((gt & ia) | (lt & ib) | (eq & ia & ib) | (tie & ~eq));                      \
    }
#endif
RL_MINMAX(rl_minmax_f32, rl_f32, ps, epi32, rl_i32)
RL_MINMAX(rl_minmax_f64, rl_f64, pd, epi64, rl_i64)

/* ---- integers: unsigned vectors (SUM and PROD wrap), compared as their own signedness ------ */

/* Lane by lane, which the compiler turns into one vpmin / vpmax (a compare and a blend for
 * int64 on AVX2). */
#define RL_INT_MINMAX(name, VU, VS)                                                             \
    RL_INLINE VU name(coll_redop_t op, VU ua, VU ub)                                            \
    {                                                                                           \
        VS a = (VS)ua, b = (VS)ub, r;                                                           \
        for (unsigned j = 0; j < sizeof(VS) / sizeof(a[0]); j++) {                              \
            r[j] = op == COLL_MIN ? (a[j] < b[j] ? a[j] : b[j]) : (a[j] > b[j] ? a[j] : b[j]);  \
        }                                                                                       \
        return (VU)r;                                                                           \
    }
RL_INT_MINMAX(rl_minmax_i8, rl_u8, rl_i8)
RL_INT_MINMAX(rl_minmax_u8, rl_u8, rl_u8)
RL_INT_MINMAX(rl_minmax_i32, rl_u32, rl_i32)
RL_INT_MINMAX(rl_minmax_i64, rl_u64, rl_i64)

/* ---- one binary operation per element type (AVG combines as SUM) ------------------------- */

#define RL_OP(name, V, MINMAX)                                                                  \
    RL_INLINE V name(coll_redop_t op, V a, V b)                                                 \
    {                                                                                           \
        if (op == COLL_PROD) {                                                                  \
            return a * b;                                                                       \
        }                                                                                       \
        if (op == COLL_MIN || op == COLL_MAX) {                                                 \
            return MINMAX(op, a, b);                                                            \
        }                                                                                       \
        return a + b;                                                                           \
    }

/* The integers' operation: the bitwise ones besides. */
#define RL_INT_OP(name, V, MINMAX)                                                              \
    RL_OP(name##_arith, V, MINMAX)                                                              \
    RL_INLINE V name(coll_redop_t op, V a, V b)                                                 \
    {                                                                                           \
        switch (op) {                                                                           \
        case COLL_BAND: return a & b;                                                           \
        case COLL_BOR: return a | b;                                                            \
        case COLL_BXOR: return a ^ b;                                                           \
        default: return name##_arith(op, a, b);                                                 \
        }                                                                                       \
    }

/* ---- combine: out = op(in[0], ..., in[m-1]) ---------------------------------------------- */

/*
 * One loop per element type V and its operation OP, instantiated below for every operation and
 * every number of inputs (compile-time constants in each instance): the arithmetic ones, and
 * those CASES adds (RL_BITWISE_CASES for the integers, RL_NO_CASES for the floats). Whole
 * vectors, then the tail through the same code on zero-padded copies. @p out may be exactly
 * in[0]: each vector is read from every input before it is stored.
 */
#define RL_COMBINE(name, V, OP, CASES)                                                          \
    RL_INLINE V name##_vec(coll_redop_t op, unsigned m, const char *const *p, size_t off)       \
    {                                                                                           \
        V v, x;                                                                                 \
        memcpy(&v, p[0] + off, RL_VB);                                                          \
        for (unsigned k = 1; k < m; k++) {                                                      \
            memcpy(&x, p[k] + off, RL_VB);                                                      \
            v = OP(op, v, x);                                                                   \
        }                                                                                       \
        return v;                                                                               \
    }                                                                                           \
    RL_INLINE void name##_tail(coll_redop_t op, unsigned m, char *out, const char *const *p,    \
                               size_t bytes)                                                    \
    {                                                                                           \
        char t[COLL__REDUCE_FANIN + 1][RL_VB] = {{0}};                                          \
        const char *tp[COLL__REDUCE_FANIN + 1];                                                 \
        for (unsigned k = 0; k < m; k++) {                                                      \
            memcpy(t[k], p[k], bytes);                                                          \
            tp[k] = t[k];                                                                       \
        }                                                                                       \
        V v = name##_vec(op, m, tp, 0);                                                         \
        memcpy(out, &v, bytes);                                                                 \
    }                                                                                           \
    RL_INLINE void name##_loop(coll_redop_t op, unsigned m, void *out, const void *const *in,  \
                               size_t bytes)                                                    \
    {                                                                                           \
        const char *p[COLL__REDUCE_FANIN + 1];                                                  \
        const size_t whole = bytes - bytes % RL_VB;                                             \
        for (unsigned k = 0; k < m; k++) { /* locals: a store to out cannot change them */      \
            p[k] = in[k];                                                                       \
        }                                                                                       \
        RL_UNROLL for (size_t off = 0; off < whole; off += RL_VB) {                             \
            V v = name##_vec(op, m, p, off);                                                    \
            memcpy((char *)out + off, &v, RL_VB);                                               \
        }                                                                                       \
        if (whole < bytes) {                                                                    \
            for (unsigned k = 0; k < m; k++) {                                                  \
                p[k] += whole;                                                                  \
            }                                                                                   \
            name##_tail(op, m, (char *)out + whole, p, bytes - whole);                          \
        }                                                                                       \
    }                                                                                           \
    RL_INLINE void name##_m(coll_redop_t op, void *out, const void *const *in, unsigned m,      \
                            size_t bytes)                                                       \
    {                                                                                           \
        switch (m) {                                                                            \
        case 2: name##_loop(op, 2, out, in, bytes); break;                                      \
        case 3: name##_loop(op, 3, out, in, bytes); break;                                      \
        case 4: name##_loop(op, 4, out, in, bytes); break;                                      \
        default: name##_loop(op, 5, out, in, bytes); break;                                     \
        }                                                                                       \
    }                                                                                           \
    RL_NOINLINE void name(coll_redop_t op, void *out, const void *const *in, unsigned m,        \
                          size_t bytes)                                                         \
    {                                                                                           \
        switch (op) {                                                                           \
        case COLL_PROD: name##_m(COLL_PROD, out, in, m, bytes); break;                          \
        case COLL_MIN: name##_m(COLL_MIN, out, in, m, bytes); break;                            \
        case COLL_MAX: name##_m(COLL_MAX, out, in, m, bytes); break;                            \
        CASES(name)                                                                             \
        default: name##_m(COLL_SUM, out, in, m, bytes); break;                                  \
        }                                                                                       \
    }
#define RL_CASE(name, OP)                                                                       \
    case OP: name##_m(OP, out, in, m, bytes); break;
#define RL_BITWISE_CASES(name)                                                                  \
    RL_CASE(name, COLL_BAND) RL_CASE(name, COLL_BOR) RL_CASE(name, COLL_BXOR)
#define RL_NO_CASES(name)

/* Every dtype but the 16-bit floats: its operation on vectors V and its combine loops. The
 * bitwise operations apply to the integers only (the callers checked: kernels/reduce.h). */
#define RL_DTYPE(t, V, MINMAX)                                                                  \
    RL_OP(rl_op_##t, V, MINMAX) RL_COMBINE(rl_combine_##t, V, rl_op_##t, RL_NO_CASES)
#define RL_INT_DTYPE(t, V, MINMAX)                                                              \
    RL_INT_OP(rl_op_##t, V, MINMAX) RL_COMBINE(rl_combine_##t, V, rl_op_##t, RL_BITWISE_CASES)
RL_DTYPE(f32, rl_f32, rl_minmax_f32)
RL_DTYPE(f64, rl_f64, rl_minmax_f64)
RL_INT_DTYPE(i8, rl_u8, rl_minmax_i8)
RL_INT_DTYPE(u8, rl_u8, rl_minmax_u8)
RL_INT_DTYPE(i32, rl_u32, rl_minmax_i32)
RL_INT_DTYPE(i64, rl_u64, rl_minmax_i64)

static void rl_combine(coll_dtype_t dtype, coll_redop_t op, void *out, const void *const *in,
                       unsigned m, size_t n)
{
    const size_t bytes = n * coll__reduce_esize(dtype);

    switch (dtype) {
    case COLL_FLOAT32: rl_combine_f32(op, out, in, m, bytes); break;
    case COLL_FLOAT64: rl_combine_f64(op, out, in, m, bytes); break;
    case COLL_INT8: rl_combine_i8(op, out, in, m, bytes); break;
    case COLL_UINT8: rl_combine_u8(op, out, in, m, bytes); break;
    case COLL_INT32: rl_combine_i32(op, out, in, m, bytes); break;
    case COLL_INT64: rl_combine_i64(op, out, in, m, bytes); break;
    default: break; /* 16-bit floats go through rl_combine_half */
    }
}

/* ---- float16 / bfloat16 ------------------------------------------------------------------- */

/* RL_NF binary16 values widened to float32 (exact). */
RL_INLINE rl_f32 rl_widen_f16(const char *p)
{
#if RL_VB == 64 && defined(__AVX512F__) && defined(__F16C__)
    return (rl_f32)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
#elif RL_VB == 32 && defined(__AVX2__) && defined(__F16C__)
    return (rl_f32)_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
    uint16_t h[RL_NF];
    rl_f32 v;
    memcpy(h, p, sizeof(h));
    for (unsigned j = 0; j < RL_NF; j++) {
        v[j] = coll__f16_to_f32(h[j]);
    }
    return v;
#endif
}

/* RL_NF float32 rounded to binary16, nearest even (F16C and half.h round alike), into @p p. */
RL_INLINE void rl_narrow_f16(rl_f32 v, char *p)
{
#if RL_VB == 64 && defined(__AVX512F__) && defined(__F16C__)
    __m256i h = _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256((__m256i *)(void *)p, h);
#elif RL_VB == 32 && defined(__AVX2__) && defined(__F16C__)
    _mm_storeu_si128((__m128i *)(void *)p, _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
#else
    uint16_t h[RL_NF];
    for (unsigned j = 0; j < RL_NF; j++) {
        h[j] = coll__f32_to_f16(v[j]);
    }
    memcpy(p, h, sizeof(h));
#endif
}

/* RL_NF 16-bit integers zero-extended to 32 bits, and back (the upper halves must be 0): the
 * vector extensions' conversions split these into halves at 512 bits, the instructions do not. */
RL_INLINE rl_u32 rl_load_u16(const char *p)
{
#if RL_VB == 64 && defined(__AVX512F__)
    return (rl_u32)_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p));
#elif RL_VB == 32 && defined(__AVX2__)
    return (rl_u32)_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p));
#else
    rl_h16 h;
    memcpy(&h, p, sizeof(h));
    return __builtin_convertvector(h, rl_u32);
#endif
}

RL_INLINE void rl_store_u16(rl_u32 x, char *p)
{
#if RL_VB == 64 && defined(__AVX512F__)
    _mm256_storeu_si256((__m256i *)(void *)p, _mm512_cvtepi32_epi16((__m512i)x));
#elif RL_VB == 32 && defined(__AVX2__)
    __m256i v = (__m256i)x;
    __m128i h = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storeu_si128((__m128i *)(void *)p, h);
#else
    rl_h16 h = __builtin_convertvector(x, rl_h16);
    memcpy(p, &h, sizeof(h));
#endif
}

/* Lanes of @p a where @p v is a NaN, of @p b elsewhere: a compare into a mask register and a
 * masked move (AVX-512) or a blend (AVX2), which the vector extensions' masks do not become. */
RL_INLINE rl_u32 rl_where_nan(rl_f32 v, rl_u32 a, rl_u32 b)
{
#if RL_VB == 64 && defined(__AVX512F__)
    __mmask16 nan = _mm512_cmp_ps_mask((__m512)v, (__m512)v, _CMP_UNORD_Q);
    return (rl_u32)_mm512_mask_mov_epi32((__m512i)b, nan, (__m512i)a);
#elif RL_VB == 32 && defined(__AVX2__)
    __m256 nan = _mm256_cmp_ps((__m256)v, (__m256)v, _CMP_UNORD_Q);
    return (rl_u32)_mm256_blendv_epi8((__m256i)b, (__m256i)a, _mm256_castps_si256(nan));
#else
    rl_u32 nan = (rl_u32)(v != v);
    return (nan & a) | (~nan & b);
#endif
}

/* RL_NF bfloat16 values widened to float32: the upper halves of the float32 bits. */
RL_INLINE rl_f32 rl_widen_bf16(const char *p)
{
    return (rl_f32)(rl_load_u16(p) << 16);
}

/* RL_NF float32 rounded to bfloat16 as half.h does (nearest even, NaN made quiet), into @p p. */
RL_INLINE void rl_narrow_bf16(rl_f32 v, char *p)
{
    rl_u32 x = (rl_u32)v;
    rl_u32 r = x + 0x7fffu + ((x >> 16) & 1u);
    rl_store_u16(rl_where_nan(v, x | 0x400000u, r) >> 16, p);
}

RL_INLINE rl_f32 rl_widen(coll_dtype_t dt, const char *p)
{
    return dt == COLL_FLOAT16 ? rl_widen_f16(p) : rl_widen_bf16(p);
}

RL_INLINE void rl_narrow(coll_dtype_t dt, rl_f32 v, char *p)
{
    if (dt == COLL_FLOAT16) {
        rl_narrow_f16(v, p);
    } else {
        rl_narrow_bf16(v, p);
    }
}

/* RL_NF elements from element @p i on: widen (and, for AVG, scale) every input, combine them
 * after the accumulator when @p has_acc, store the float32 result to @p acc_out or, narrowed,
 * to @p out. */
RL_INLINE void rl_half_vec(coll_dtype_t dt, coll_redop_t op, unsigned m, const float *acc,
                           int has_acc, const char *const *in, size_t i, const rl_f32 *s,
                           float *acc_out, char *out)
{
    rl_f32 v, x = rl_widen(dt, in[0] + 2 * i);

    /* The accumulator, if any, is the left-most operand; else the first input is. */
    x = op == COLL_AVG ? x * s[0] : x;
    if (has_acc) {
        memcpy(&v, acc, sizeof(v));
        v = rl_op_f32(op, v, x);
    } else {
        v = x;
    }
    for (unsigned k = 1; k < m; k++) {
        x = rl_widen(dt, in[k] + 2 * i);
        x = op == COLL_AVG ? x * s[k] : x;
        v = rl_op_f32(op, v, x);
    }
    if (out != NULL) {
        rl_narrow(dt, v, out);
    } else {
        memcpy(acc_out, &v, sizeof(v));
    }
}

/* The last n < RL_NF elements, from element @p i on, through rl_half_vec on zero-padded
 * copies. */
RL_INLINE void rl_half_tail(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc,
                            int has_acc, const char *const *in, size_t i, const rl_f32 *s,
                            size_t n, char *out)
{
    char h[COLL__REDUCE_FANIN][RL_VB / 2] = {{0}}, o[RL_VB / 2];
    const char *hp[COLL__REDUCE_FANIN];
    float a[RL_NF] = {0};

    for (unsigned k = 0; k < m; k++) {
        memcpy(h[k], in[k] + 2 * i, 2 * n);
        hp[k] = h[k];
    }
    if (has_acc) {
        memcpy(a, acc, n * sizeof(float));
    }
    rl_half_vec(dt, op, m, a, has_acc, hp, 0, s, a, out != NULL ? o : NULL);
    if (out != NULL) {
        memcpy(out, o, 2 * n);
    } else {
        memcpy(acc, a, n * sizeof(float));
    }
}

RL_INLINE void rl_half_loop(coll_dtype_t dt, coll_redop_t op, unsigned m, float *acc,
                            int has_acc, const void *const *in, const float *scale, size_t n,
                            char *out)
{
    const char *p[COLL__REDUCE_FANIN];
    rl_f32 s[COLL__REDUCE_FANIN];
    size_t i = 0;

    for (unsigned k = 0; k < m; k++) { /* locals: a store to out cannot change them */
        p[k] = in[k];
        s[k] = (rl_f32){0} + (op == COLL_AVG ? scale[k] : 1.0f);
    }
    /* Separate loops for the two destinations, rather than a test per vector. */
    if (out != NULL) {
        for (; i + RL_NF <= n; i += RL_NF) {
            rl_half_vec(dt, op, m, acc + i, has_acc, p, i, s, NULL, out + 2 * i);
        }
    } else {
        for (; i + RL_NF <= n; i += RL_NF) {
            rl_half_vec(dt, op, m, acc + i, has_acc, p, i, s, acc + i, NULL);
        }
    }
    if (i < n) {
        rl_half_tail(dt, op, m, acc + i, has_acc, p, i, s, n - i, out != NULL ? out + 2 * i : NULL);
    }
}

RL_INLINE void rl_half_m(coll_dtype_t dt, coll_redop_t op, float *acc, int has_acc,
                         const void *const *in, const float *scale, unsigned m, size_t n,
                         char *out)
{
    switch (m) {
    case 1: rl_half_loop(dt, op, 1, acc, has_acc, in, scale, n, out); break;
    case 2: rl_half_loop(dt, op, 2, acc, has_acc, in, scale, n, out); break;
    case 3: rl_half_loop(dt, op, 3, acc, has_acc, in, scale, n, out); break;
    default: rl_half_loop(dt, op, 4, acc, has_acc, in, scale, n, out); break;
    }
}

/* One out-of-line function per 16-bit dtype, so that a profile names it. */
#define RL_HALF_DTYPE(name, DT)                                                                 \
    RL_NOINLINE void name(coll_redop_t op, float *acc, int has_acc, const void *const *in,      \
                          const float *scale, unsigned m, size_t n, char *out)                  \
    {                                                                                           \
        switch (op) {                                                                           \
        case COLL_SUM: rl_half_m(DT, COLL_SUM, acc, has_acc, in, scale, m, n, out); break;      \
        case COLL_AVG: rl_half_m(DT, COLL_AVG, acc, has_acc, in, scale, m, n, out); break;      \
        case COLL_PROD: rl_half_m(DT, COLL_PROD, acc, has_acc, in, scale, m, n, out); break;    \
        case COLL_MIN: rl_half_m(DT, COLL_MIN, acc, has_acc, in, scale, m, n, out); break;      \
        default: rl_half_m(DT, COLL_MAX, acc, has_acc, in, scale, m, n, out); break;            \
        }                                                                                       \
    }
RL_HALF_DTYPE(rl_half_f16, COLL_FLOAT16)
RL_HALF_DTYPE(rl_half_bf16, COLL_BFLOAT16)

static void rl_combine_half(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                            const void *const *in, const float *scale, unsigned m, size_t n,
                            void *out)
{
    if (dtype == COLL_FLOAT16) {
        rl_half_f16(op, acc, has_acc, in, scale, m, n, out);
    } else {
        rl_half_bf16(op, acc, has_acc, in, scale, m, n, out);
    }
}

/* ---- AVG's final division ------------------------------------------------------------------ */

/*
 * Integers divide through floating point, which truncated is the exact quotient truncated:
 * int32 through float64, since |x| < 2^31 puts a non-integral quotient at least 1/|x| > 2^-31
 * (relative) from an integer, far more than float64's 2^-53; int8 and uint8 through float32 by
 * the same argument (|x| <= 256, float32 has 2^-24; a world size past 2^24 rounds when
 * converted but stays above 256, so the quotient is 0 either way). int64 has no such route and
 * divides one element at a time.
 */
#define RL_DIVIDE(name, T, VIN, FT, VF, VW)                                                       \
    RL_INLINE void name(T *buf, uint32_t world_size, size_t n)                                  \
    {                                                                                           \
        const size_t per = sizeof(VIN) / sizeof(T);                                             \
        const VF w = (VF){0} + (FT)world_size;                                                  \
        VIN x = {0};                                                                            \
        for (size_t i = 0; i < n; i += per) {                                                   \
            size_t len = n - i < per ? n - i : per;                                             \
            memcpy(&x, buf + i, len * sizeof(T));                                               \
            x = __builtin_convertvector(                                                        \
                __builtin_convertvector(__builtin_convertvector(x, VF) / w, VW), VIN);          \
            memcpy(buf + i, &x, len * sizeof(T));                                               \
        }                                                                                       \
    }
RL_DIVIDE(rl_divide_f32, float, rl_f32, float, rl_f32, rl_f32)
RL_DIVIDE(rl_divide_f64, double, rl_f64, double, rl_f64, rl_f64)
RL_DIVIDE(rl_divide_i32, int32_t, rl_i32h, double, rl_f64, rl_i32h)
RL_DIVIDE(rl_divide_i8, int8_t, rl_i8q, float, rl_f32, rl_i32)
RL_DIVIDE(rl_divide_u8, uint8_t, rl_u8q, float, rl_f32, rl_i32)

static void rl_divide(coll_dtype_t dtype, void *buf, uint32_t world_size, size_t n)
{
    switch (dtype) {
    case COLL_FLOAT32: rl_divide_f32(buf, world_size, n); break;
    case COLL_FLOAT64: rl_divide_f64(buf, world_size, n); break;
    case COLL_INT32: rl_divide_i32(buf, world_size, n); break;
    case COLL_INT8: rl_divide_i8(buf, world_size, n); break;
    case COLL_UINT8: rl_divide_u8(buf, world_size, n); break;
    case COLL_INT64:
        for (size_t i = 0; i < n; i++) {
            ((int64_t *)buf)[i] /= (int64_t)world_size;
        }
        break;
    default: break;
    }
}

#endif
