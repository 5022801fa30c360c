/**
 * @file elem_reduce.h
 * @brief The reduction's element functions (hd.h): two values of a dtype combined under an
 *        operation, AVG's division, and one element of a whole reduction, as the host's
 *        coll_reduce() computes it (kernels/cpu/reduce.h, reduce_loops.h).
 *
 * The host folds the sources left to right: v = op(...op(op(x0, x1), x2)..., x_{n-1}); AVG
 * combines as SUM. float32, float64 and the integers fold in their own type (integers wrap: SUM
 * and PROD on the unsigned type of their width) and AVG divides once at the end when the call
 * finalizes (IEEE division for floats, truncation toward zero for integers, which the host
 * reaches through floating point and which is the exact quotient truncated). float16 and
 * bfloat16 widen every source to float32 (a raw source times 1/world_size first, for AVG; a
 * float32 partial source as it is), fold in float32 and round once. MIN and MAX are IEEE
 * 754-2019 minimum() and maximum() on the bits: a NaN operand gives a NaN (the OR of the two
 * operands' bits), -0 is below +0. BAND, BOR and BXOR take the integers only. The results are
 * the host's bit for bit, except the payload of a NaN that SUM, AVG or PROD produce (the
 * device's arithmetic makes its canonical NaN).
 */
#ifndef COLL_KERNELS_CUDA_ELEM_REDUCE_H
#define COLL_KERNELS_CUDA_ELEM_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/cuda/hd.h"

/* ---- minimum() and maximum() on float bits ------------------------------------------------- */

/*
 * Where one operand is strictly smaller (larger), that one; where they are equal or unordered,
 * the OR of their bits (-0 wins a tie, a NaN stays a NaN), except that maximum() of equal values
 * is their AND (+0 wins). @p lt is a < b and @p gt is b < a.
 */
COLL_HD uint64_t coll_hd_minmax_bits(int op, int lt, int gt, int eq, uint64_t ia, uint64_t ib)
{
    if (lt) {
        return op == COLL_MIN ? ia : ib;
    }
    if (gt) {
        return op == COLL_MIN ? ib : ia;
    }
    return op == COLL_MAX && eq ? ia & ib : ia | ib;
}

/* ---- two values under an operation (AVG combines as SUM) ----------------------------------- */

COLL_HD float coll_hd_op_f32(int op, float a, float b)
{
    if (op == COLL_PROD) {
        return COLL_FMUL(a, b);
    }
    if (op == COLL_MIN || op == COLL_MAX) {
        return coll_hd_f32_from_bits((uint32_t)coll_hd_minmax_bits(
            op, a < b, b < a, a == b, coll_hd_f32_bits(a), coll_hd_f32_bits(b)));
    }
    return COLL_FADD(a, b);
}

COLL_HD double coll_hd_op_f64(int op, double a, double b)
{
    if (op == COLL_PROD) {
        return COLL_DMUL(a, b);
    }
    if (op == COLL_MIN || op == COLL_MAX) {
        return coll_hd_f64_from_bits(coll_hd_minmax_bits(op, a < b, b < a, a == b,
                                                         coll_hd_f64_bits(a),
                                                         coll_hd_f64_bits(b)));
    }
    return COLL_DADD(a, b);
}

/* Integers: SUM and PROD on the unsigned type of the width (wrapping), MIN and MAX signed or
 * unsigned as the dtype, BAND, BOR and BXOR on the bits. */
#define COLL_HD_OP_INT(name, T, U)                                                              \
    COLL_HD T name(int op, T a, T b)                                                            \
    {                                                                                           \
        if (op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR) {                             \
            return (T)(op == COLL_BAND ? a & b : op == COLL_BOR ? a | b : a ^ b);               \
        }                                                                                       \
        if (op == COLL_PROD) {                                                                  \
            return (T)(U)((U)a * (U)b);                                                         \
        }                                                                                       \
        if (op == COLL_MIN) {                                                                   \
            return a < b ? a : b;                                                               \
        }                                                                                       \
        if (op == COLL_MAX) {                                                                   \
            return a > b ? a : b;                                                               \
        }                                                                                       \
        return (T)(U)((U)a + (U)b);                                                             \
    }
COLL_HD_OP_INT(coll_hd_op_i8, int8_t, uint32_t)
COLL_HD_OP_INT(coll_hd_op_u8, uint8_t, uint32_t)
COLL_HD_OP_INT(coll_hd_op_i32, int32_t, uint32_t)
COLL_HD_OP_INT(coll_hd_op_i64, int64_t, uint64_t)
#undef COLL_HD_OP_INT

/* ---- AVG's division by the world size, on the last combine ---------------------------------- */

COLL_HD float coll_hd_avg_f32(float x, uint32_t w)
{
    return COLL_FDIV(x, (float)w);
}

COLL_HD double coll_hd_avg_f64(double x, uint32_t w)
{
    return COLL_DDIV(x, (double)w);
}

COLL_HD int8_t coll_hd_avg_i8(int8_t x, uint32_t w)
{
    return (int8_t)((int64_t)x / (int64_t)w);
}

COLL_HD uint8_t coll_hd_avg_u8(uint8_t x, uint32_t w)
{
    return (uint8_t)(x / w);
}

COLL_HD int32_t coll_hd_avg_i32(int32_t x, uint32_t w)
{
    return (int32_t)((int64_t)x / (int64_t)w);
}

COLL_HD int64_t coll_hd_avg_i64(int64_t x, uint32_t w)
{
    return x / (int64_t)w;
}

/* ---- one element of a whole reduction of float32, float64 or integers ---------------------- */

/* dst[i] of a reduction of @p nsrc sources, folded left to right, AVG divided when @p divide
 * (the call finalizes and world_size > 1). */
#define COLL_HD_REDUCE(name, T, OP, AVG)                                                        \
    COLL_HD T name(int op, int divide, uint32_t world, const void *const *src, unsigned nsrc,   \
                   size_t i)                                                                    \
    {                                                                                           \
        T v = ((const T *)src[0])[i];                                                           \
        for (unsigned k = 1; k < nsrc; k++) {                                                   \
            v = OP(op, v, ((const T *)src[k])[i]);                                              \
        }                                                                                       \
        return op == COLL_AVG && divide ? AVG(v, world) : v;                                    \
    }
COLL_HD_REDUCE(coll_hd_reduce_f32, float, coll_hd_op_f32, coll_hd_avg_f32)
COLL_HD_REDUCE(coll_hd_reduce_f64, double, coll_hd_op_f64, coll_hd_avg_f64)
COLL_HD_REDUCE(coll_hd_reduce_i8, int8_t, coll_hd_op_i8, coll_hd_avg_i8)
COLL_HD_REDUCE(coll_hd_reduce_u8, uint8_t, coll_hd_op_u8, coll_hd_avg_u8)
COLL_HD_REDUCE(coll_hd_reduce_i32, int32_t, coll_hd_op_i32, coll_hd_avg_i32)
COLL_HD_REDUCE(coll_hd_reduce_i64, int64_t, coll_hd_op_i64, coll_hd_avg_i64)
#undef COLL_HD_REDUCE

/* ---- float16 and bfloat16: float32 accumulation, one rounding ------------------------------ */

/** @return AVG's factor of a source: 1/world_size (float32) for a raw input, else 1. */
COLL_HD float coll_hd_half_scale(int op, int raw, uint32_t world)
{
    return op == COLL_AVG && raw ? COLL_FDIV(1.0f, (float)world) : 1.0f;
}

/** @return A 16-bit source's value in the float32 fold: widened, times @p scale for AVG. */
COLL_HD float coll_hd_half_term(int fmt, int op, uint16_t h, float scale)
{
    float x = coll_hd_widen(fmt, h);
    return op == COLL_AVG ? COLL_FMUL(x, scale) : x;
}

/**
 * @return The float32 accumulator of element @p i: the sources folded left to right, source k
 *         a float32 partial result (as it is) when bit k of @p f32_mask is set, else a 16-bit
 *         value of format @p fmt (coll_hd_half_term() with scale[k]).
 */
COLL_HD float coll_hd_reduce_half(int fmt, int op, const void *const *src, unsigned nsrc,
                                  uint64_t f32_mask, const float *scale, size_t i)
{
    float v = 0.0f;

    for (unsigned k = 0; k < nsrc; k++) {
        float x = (f32_mask >> k) & 1 ? ((const float *)src[k])[i]
                                      : coll_hd_half_term(fmt, op, ((const uint16_t *)src[k])[i],
                                                          scale[k]);
        v = k == 0 ? x : coll_hd_op_f32(op, v, x);
    }
    return v;
}

#endif
