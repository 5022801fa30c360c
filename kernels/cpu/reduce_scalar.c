/*
 * Portable C element kernels: the fallback on CPUs without AVX2 or on other architectures, and
 * the tails (fewer elements than one vector) of the AVX2 kernels. The compiler may still
 * vectorize these loops for the baseline instruction set (SSE2 on x86-64); the results are the
 * same either way because every operation is element-wise.
 *
 * MIN and MAX follow IEEE 754-2019 §9.6 minimum()/maximum(), not IEEE 754-2008 §5.3.1
 * minNum()/maxNum(): a NaN in any source makes the result NaN (minNum/maxNum would drop a quiet
 * NaN and hide a diverged rank), and -0 is below +0. The SIMD kernels compute exactly the same
 * bits, including which NaN comes out (the bitwise OR of the two operands).
 */
#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce_isa.h"

#define ALWAYS_INLINE inline __attribute__((always_inline))
#define NOINLINE __attribute__((noinline))

static ALWAYS_INLINE float min_f32(float a, float b)
{
    if (a < b) {
        return a;
    }
    if (b < a) {
        return b;
    }
    /* Equal (then -0 wins over +0) or unordered (then the OR is a NaN). */
    return coll__f32_from_bits(coll__f32_bits(a) | coll__f32_bits(b));
}

static ALWAYS_INLINE float max_f32(float a, float b)
{
    if (a > b) {
        return a;
    }
    if (b > a) {
        return b;
    }
    if (a == b) { /* +0 wins over -0 */
        return coll__f32_from_bits(coll__f32_bits(a) & coll__f32_bits(b));
    }
    return coll__f32_from_bits(coll__f32_bits(a) | coll__f32_bits(b));
}

static ALWAYS_INLINE uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static ALWAYS_INLINE double f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
}

static ALWAYS_INLINE double min_f64(double a, double b)
{
    if (a < b) {
        return a;
    }
    if (b < a) {
        return b;
    }
    return f64_from_bits(f64_bits(a) | f64_bits(b));
}

static ALWAYS_INLINE double max_f64(double a, double b)
{
    if (a > b) {
        return a;
    }
    if (b > a) {
        return b;
    }
    if (a == b) {
        return f64_from_bits(f64_bits(a) & f64_bits(b));
    }
    return f64_from_bits(f64_bits(a) | f64_bits(b));
}

/* One binary operation per element type. AVG combines as SUM; integer SUM and PROD are done in
 * the unsigned type of the same width, so they wrap modulo 2^bits without undefined behaviour
 * (converting back to the signed type keeps the bits, as GCC and Clang define it). */

static ALWAYS_INLINE float op_f32(coll_redop_t op, float a, float b)
{
    return op == COLL_PROD ? a * b
         : op == COLL_MIN  ? min_f32(a, b)
         : op == COLL_MAX  ? max_f32(a, b)
                           : a + b;
}

static ALWAYS_INLINE double op_f64(coll_redop_t op, double a, double b)
{
    return op == COLL_PROD ? a * b
         : op == COLL_MIN  ? min_f64(a, b)
         : op == COLL_MAX  ? max_f64(a, b)
                           : a + b;
}

static ALWAYS_INLINE int8_t op_i8(coll_redop_t op, int8_t a, int8_t b)
{
    return op == COLL_PROD ? (int8_t)(uint8_t)((uint8_t)a * (uint8_t)b)
         : op == COLL_MIN  ? (a < b ? a : b)
         : op == COLL_MAX  ? (a > b ? a : b)
                           : (int8_t)(uint8_t)((uint8_t)a + (uint8_t)b);
}

static ALWAYS_INLINE uint8_t op_u8(coll_redop_t op, uint8_t a, uint8_t b)
{
    return op == COLL_PROD ? (uint8_t)(a * b)
         : op == COLL_MIN  ? (a < b ? a : b)
         : op == COLL_MAX  ? (a > b ? a : b)
                           : (uint8_t)(a + b);
}

static ALWAYS_INLINE int32_t op_i32(coll_redop_t op, int32_t a, int32_t b)
{
    return op == COLL_PROD ? (int32_t)((uint32_t)a * (uint32_t)b)
         : op == COLL_MIN  ? (a < b ? a : b)
         : op == COLL_MAX  ? (a > b ? a : b)
                           : (int32_t)((uint32_t)a + (uint32_t)b);
}

static ALWAYS_INLINE int64_t op_i64(coll_redop_t op, int64_t a, int64_t b)
{
    return op == COLL_PROD ? (int64_t)((uint64_t)a * (uint64_t)b)
         : op == COLL_MIN  ? (a < b ? a : b)
         : op == COLL_MAX  ? (a > b ? a : b)
                           : (int64_t)((uint64_t)a + (uint64_t)b);
}

/*
 * combine_<type>(): the loop, instantiated per operation and per number of inputs, both
 * compile-time constants in each instance, so that each is a tight loop the compiler can
 * vectorize. A macro because C has no templates: only the element type and its operation vary.
 */
#define DEFINE_COMBINE(T, name)                                                                 \
    static ALWAYS_INLINE void name##_loop(coll_redop_t op, unsigned m, void *out,              \
                                          const void *const *in, size_t n)                     \
    {                                                                                          \
        const T *p[COLL__REDUCE_FANIN + 1];                                                    \
        T *o = out;                                                                            \
        for (unsigned k = 0; k < m; k++) {                                                     \
            p[k] = in[k];                                                                      \
        }                                                                                      \
        for (size_t i = 0; i < n; i++) {                                                       \
            T v = p[0][i];                                                                     \
            for (unsigned k = 1; k < m; k++) {                                                 \
                v = op_##name(op, v, p[k][i]);                                                 \
            }                                                                                  \
            o[i] = v;                                                                          \
        }                                                                                      \
    }                                                                                          \
    static ALWAYS_INLINE void name##_m(coll_redop_t op, void *out, const void *const *in,      \
                                       unsigned m, size_t n)                                   \
    {                                                                                          \
        switch (m) {                                                                           \
        case 2: name##_loop(op, 2, out, in, n); break;                                         \
        case 3: name##_loop(op, 3, out, in, n); break;                                         \
        case 4: name##_loop(op, 4, out, in, n); break;                                         \
        default: name##_loop(op, 5, out, in, n); break;                                        \
        }                                                                                      \
    }                                                                                          \
    static NOINLINE void combine_##name(coll_redop_t op, void *out, const void *const *in,    \
                                        unsigned m, size_t n)                                  \
    {                                                                                          \
        switch (op) {                                                                          \
        case COLL_PROD: name##_m(COLL_PROD, out, in, m, n); break;                             \
        case COLL_MIN: name##_m(COLL_MIN, out, in, m, n); break;                               \
        case COLL_MAX: name##_m(COLL_MAX, out, in, m, n); break;                               \
        default: name##_m(COLL_SUM, out, in, m, n); break;                                     \
        }                                                                                      \
    }

DEFINE_COMBINE(float, f32)
DEFINE_COMBINE(double, f64)
DEFINE_COMBINE(int8_t, i8)
DEFINE_COMBINE(uint8_t, u8)
DEFINE_COMBINE(int32_t, i32)
DEFINE_COMBINE(int64_t, i64)

static void scalar_combine(coll_dtype_t dtype, coll_redop_t op, void *out,
                           const void *const *in, unsigned m, size_t n)
{
    switch (dtype) {
    case COLL_FLOAT32: combine_f32(op, out, in, m, n); break;
    case COLL_FLOAT64: combine_f64(op, out, in, m, n); break;
    case COLL_INT8: combine_i8(op, out, in, m, n); break;
    case COLL_UINT8: combine_u8(op, out, in, m, n); break;
    case COLL_INT32: combine_i32(op, out, in, m, n); break;
    case COLL_INT64: combine_i64(op, out, in, m, n); break;
    default: break; /* 16-bit floats go through combine_half */
    }
}

/* Element i of a 16-bit float source, widened and, for AVG, scaled. */
static ALWAYS_INLINE float widen(coll_dtype_t dtype, coll_redop_t op, const void *p, size_t i,
                                 float scale)
{
    uint16_t h;
    memcpy(&h, (const char *)p + 2 * i, sizeof(h));
    float x = dtype == COLL_FLOAT16 ? coll__f16_to_f32(h) : coll__bf16_to_f32(h);
    return op == COLL_AVG ? x * scale : x;
}

static ALWAYS_INLINE uint16_t narrow(coll_dtype_t dtype, float v)
{
    return dtype == COLL_FLOAT16 ? coll__f32_to_f16(v) : coll__f32_to_bf16(v);
}

static ALWAYS_INLINE void half_loop(coll_dtype_t dtype, coll_redop_t op, float *acc,
                                    int has_acc, const void *const *in, const float *scale,
                                    unsigned m, size_t n, void *out)
{
    for (size_t i = 0; i < n; i++) {
        /* The accumulator, if any, is the left-most operand; else the first source is. */
        unsigned k = has_acc ? 0 : 1;
        float v = has_acc ? acc[i] : widen(dtype, op, in[0], i, scale[0]);
        for (; k < m; k++) {
            v = op_f32(op, v, widen(dtype, op, in[k], i, scale[k]));
        }
        if (out != NULL) {
            uint16_t h = narrow(dtype, v);
            memcpy((char *)out + 2 * i, &h, sizeof(h));
        } else {
            acc[i] = v;
        }
    }
}

/* The float16 and bfloat16 instances of half_loop() for one operation. */
static NOINLINE void half_op(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                             const void *const *in, const float *scale, unsigned m, size_t n,
                             void *out)
{
    if (dtype == COLL_FLOAT16) {
        half_loop(COLL_FLOAT16, op, acc, has_acc, in, scale, m, n, out);
    } else {
        half_loop(COLL_BFLOAT16, op, acc, has_acc, in, scale, m, n, out);
    }
}

static void scalar_combine_half(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                                const void *const *in, const float *scale, unsigned m,
                                size_t n, void *out)
{
    switch (op) {
    case COLL_SUM: half_op(dtype, COLL_SUM, acc, has_acc, in, scale, m, n, out); break;
    case COLL_AVG: half_op(dtype, COLL_AVG, acc, has_acc, in, scale, m, n, out); break;
    case COLL_PROD: half_op(dtype, COLL_PROD, acc, has_acc, in, scale, m, n, out); break;
    case COLL_MIN: half_op(dtype, COLL_MIN, acc, has_acc, in, scale, m, n, out); break;
    default: half_op(dtype, COLL_MAX, acc, has_acc, in, scale, m, n, out); break;
    }
}

static void scalar_divide(coll_dtype_t dtype, void *buf, uint32_t world_size, size_t n)
{
    /* int64_t holds every integer dtype and every world size, so one division covers them. */
    const int64_t w = world_size;

    for (size_t i = 0; i < n; i++) {
        switch (dtype) {
        case COLL_FLOAT32: ((float *)buf)[i] /= (float)world_size; break;
        case COLL_FLOAT64: ((double *)buf)[i] /= (double)world_size; break;
        case COLL_INT8: ((int8_t *)buf)[i] = (int8_t)(((int8_t *)buf)[i] / w); break;
        case COLL_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(((uint8_t *)buf)[i] / w); break;
        case COLL_INT32: ((int32_t *)buf)[i] = (int32_t)(((int32_t *)buf)[i] / w); break;
        case COLL_INT64: ((int64_t *)buf)[i] /= w; break;
        default: return;
        }
    }
}

static int scalar_supported(void)
{
    return 1;
}

const coll__reduce_isa_t coll__reduce_scalar = {
    .name = "scalar",
    .supported = scalar_supported,
    .combine = scalar_combine,
    .combine_half = scalar_combine_half,
    .divide = scalar_divide,
};
