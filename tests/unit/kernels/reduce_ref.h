/*
 * Test-side reference for the reduction kernels (kernels/cpu/reduce.h), shared by
 * test_reduce.c and test_reduce_special.c: a PRNG and an element-by-element
 * reference written independently of the kernels (16-bit conversions through frexp/ldexp and
 * nearbyint rather than bit tricks, float arithmetic done in double and rounded after every
 * step, integers wrapped by masking 64-bit arithmetic).
 *
 * Float32 rounding through double is exact: double has more than 2*24+2 significand bits, so
 * rounding a double sum, product or quotient of two floats to float gives the correctly rounded
 * float result (no double-rounding error).
 */
#ifndef TEST_REDUCE_REF_H
#define TEST_REDUCE_REF_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/reduce.h"

static const char *const ref_isas[] = {"avx512", "avx2", "scalar"};
#define REF_NISAS 3

static const char *const ref_dtype_names[COLL_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"};
static const char *const ref_op_names[COLL_REDOP_COUNT] = {"sum", "avg", "prod", "min",
                                                            "max", "band", "bor", "bxor"};

static size_t ref_esize(coll_dtype_t dt)
{
    static const size_t size[COLL_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 8};
    return size[dt];
}

static int ref_is_float(coll_dtype_t dt)
{
    return dt <= COLL_BFLOAT16;
}

static int ref_is_half(coll_dtype_t dt)
{
    return dt == COLL_FLOAT16 || dt == COLL_BFLOAT16;
}

static int ref_is_bitwise(coll_redop_t op)
{
    return op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
}

/* Whether the kernels take @p op of @p dt: the bitwise ones only of integers (inline: not
 * every test that includes this asks). */
static inline int ref_op_applies(coll_dtype_t dt, coll_redop_t op)
{
    return !(ref_is_float(dt) && ref_is_bitwise(op));
}

/* ---- PRNG (xorshift64*) ---- */

static uint64_t ref_rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t ref_rand(void)
{
    ref_rng_state ^= ref_rng_state >> 12;
    ref_rng_state ^= ref_rng_state << 25;
    ref_rng_state ^= ref_rng_state >> 27;
    return ref_rng_state * 0x2545f4914f6cdd1dull;
}

/* ---- 16-bit floats, by value ---- */

static double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double ref_bf16_value(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    double v = e == 255 ? (m ? NAN : INFINITY)
             : e == 0   ? ldexp(m, -133)
                        : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}

/*
 * @p x rounded to nearest even into a binary format with @p p significand bits, exponent bias
 * @p bias and @p ebits exponent bits (binary16: 11, 15, 5; bfloat16: 8, 127, 8).
 */
static uint16_t ref_round16(double x, int p, int bias, int ebits)
{
    const int emin = 1 - bias, emax_code = (1 << ebits) - 1;
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs(x), q;
    int e;

    if (isnan(x)) {
        return (uint16_t)(0x7fff);
    }
    if (isinf(x)) {
        return sign | (uint16_t)(emax_code << (p - 1));
    }
    if (a < ldexp(1, emin)) { /* subnormal: units of 2^(emin - p + 1) */
        return sign | (uint16_t)nearbyint(ldexp(a, p - 1 - emin));
    }
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    q = nearbyint(ldexp(a, p - e));
    if (q == ldexp(1, p)) {
        q /= 2;
        e++;
    }
    if (e - 1 + bias >= emax_code) {
        return sign | (uint16_t)(emax_code << (p - 1));
    }
    return sign | (uint16_t)((e - 1 + bias) << (p - 1)) | (uint16_t)(q - ldexp(1, p - 1));
}

static uint16_t ref_to_f16(double x)
{
    return ref_round16(x, 11, 15, 5);
}

static uint16_t ref_to_bf16(double x)
{
    return ref_round16(x, 8, 127, 8);
}

/* ---- Element access ---- */

static double ref_get_f(coll_dtype_t dt, const void *p, size_t i)
{
    const uint8_t *b = (const uint8_t *)p + i * ref_esize(dt);
    float f;
    double d;
    uint16_t h;

    switch (dt) {
    case COLL_FLOAT32: memcpy(&f, b, 4); return f;
    case COLL_FLOAT64: memcpy(&d, b, 8); return d;
    case COLL_FLOAT16: memcpy(&h, b, 2); return ref_f16_value(h);
    default: memcpy(&h, b, 2); return ref_bf16_value(h);
    }
}

static void ref_put_f(coll_dtype_t dt, void *p, size_t i, double v)
{
    uint8_t *b = (uint8_t *)p + i * ref_esize(dt);
    float f = (float)v;
    uint16_t h;

    switch (dt) {
    case COLL_FLOAT32: memcpy(b, &f, 4); break;
    case COLL_FLOAT64: memcpy(b, &v, 8); break;
    case COLL_FLOAT16: h = ref_to_f16(v); memcpy(b, &h, 2); break;
    default: h = ref_to_bf16(v); memcpy(b, &h, 2); break;
    }
}

static int64_t ref_get_i(coll_dtype_t dt, const void *p, size_t i)
{
    const uint8_t *b = (const uint8_t *)p + i * ref_esize(dt);
    int8_t s8;
    int32_t s32;
    int64_t s64;

    switch (dt) {
    case COLL_INT8: memcpy(&s8, b, 1); return s8;
    case COLL_UINT8: return *b;
    case COLL_INT32: memcpy(&s32, b, 4); return s32;
    default: memcpy(&s64, b, 8); return s64;
    }
}

/* Stores the low bits of @p v (two's complement), i.e. @p v modulo 2^bits. */
static void ref_put_i(coll_dtype_t dt, void *p, size_t i, uint64_t v)
{
    uint8_t *b = (uint8_t *)p + i * ref_esize(dt);
    for (size_t k = 0; k < ref_esize(dt); k++) {
        b[k] = (uint8_t)(v >> (8 * k));
    }
}

/* ---- The reference reduction ---- */

static double ref_min(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    if (a == 0 && b == 0) {
        return signbit(a) ? a : b; /* -0 if either is -0 */
    }
    return a < b ? a : b;
}

static double ref_max(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    if (a == 0 && b == 0) {
        return signbit(a) ? b : a; /* +0 if either is +0 */
    }
    return a > b ? a : b;
}

/* Rounds an intermediate to the precision floats accumulate in (float32 but for float64). */
static double ref_acc_round(coll_dtype_t dt, double v)
{
    return dt == COLL_FLOAT64 ? v : (double)(float)v;
}

static double ref_float_elem(const coll_reduce_args_t *a, const void *const *src, size_t i)
{
    const coll_dtype_t dt = a->dtype;
    const float inv = 1.0f / (float)a->world_size;
    double acc = 0;

    for (unsigned k = 0; k < a->nsrc; k++) {
        double x = ref_get_f(dt, src[k], i);
        if (ref_is_half(dt) && a->op == COLL_AVG && ((a->raw_mask >> k) & 1)) {
            x = ref_acc_round(dt, x * inv);
        }
        if (k == 0) {
            acc = x;
            continue;
        }
        acc = a->op == COLL_PROD ? acc * x
            : a->op == COLL_MIN  ? ref_min(acc, x)
            : a->op == COLL_MAX  ? ref_max(acc, x)
                                 : acc + x;
        acc = ref_acc_round(dt, acc);
    }
    if (!ref_is_half(dt) && a->op == COLL_AVG && a->finalize) {
        acc = ref_acc_round(dt, acc / a->world_size);
    }
    return acc;
}

/* The integer result modulo 2^64 (then stored modulo 2^bits). */
static uint64_t ref_int_elem(const coll_reduce_args_t *a, const void *const *src, size_t i)
{
    const coll_dtype_t dt = a->dtype;
    const unsigned bits = 8 * (unsigned)ref_esize(dt);
    int64_t acc = ref_get_i(dt, src[0], i);

    for (unsigned k = 1; k < a->nsrc; k++) {
        int64_t x = ref_get_i(dt, src[k], i);
        uint64_t u = a->op == COLL_PROD ? (uint64_t)acc * (uint64_t)x : (uint64_t)acc + (uint64_t)x;
        if (ref_is_bitwise(a->op)) {
            /* On the sign-extended values, whose results stay sign-extended. */
            acc = a->op == COLL_BAND ? acc & x : a->op == COLL_BOR ? acc | x : acc ^ x;
            continue;
        }
        if (a->op == COLL_MIN || a->op == COLL_MAX) {
            acc = (a->op == COLL_MIN) == (x < acc) ? x : acc;
            continue;
        }
        /* Back into the type's range: sign-extend (or zero-extend) the low bits. */
        if (bits < 64) {
            u &= (1ull << bits) - 1;
            if (dt != COLL_UINT8 && (u >> (bits - 1))) {
                u |= ~0ull << bits;
            }
        }
        acc = (int64_t)u;
    }
    if (a->op == COLL_AVG && a->finalize) {
        /* Truncation toward zero, written as |acc| / w with the sign put back. */
        uint64_t mag = acc < 0 ? 0 - (uint64_t)acc : (uint64_t)acc;
        uint64_t q = mag / a->world_size;
        acc = acc < 0 ? (int64_t)(0 - q) : (int64_t)q;
    }
    return (uint64_t)acc;
}

/* want[i] for every i: the reduction @p a describes, of the inputs @p src. */
static inline void ref_reduce(const coll_reduce_args_t *a, const void *const *src, void *want)
{
    for (size_t i = 0; i < a->count; i++) {
        if (ref_is_float(a->dtype)) {
            ref_put_f(a->dtype, want, i, ref_float_elem(a, src, i));
        } else {
            ref_put_i(a->dtype, want, i, ref_int_elem(a, src, i));
        }
    }
}

/* @return 1 when element i of @p got and @p want are the same bits, or are both NaN. */
static inline int ref_elem_equal(coll_dtype_t dt, const void *got, const void *want, size_t i)
{
    size_t es = ref_esize(dt);
    if (memcmp((const uint8_t *)got + i * es, (const uint8_t *)want + i * es, es) == 0) {
        return 1;
    }
    return ref_is_float(dt) && isnan(ref_get_f(dt, got, i)) && isnan(ref_get_f(dt, want, i));
}

#endif
