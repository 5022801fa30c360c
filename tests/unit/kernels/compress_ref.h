/*
 * Test-side helpers for the compression kernels (kernels/compress.h, kernels/cpu/<name>.h): a
 * PRNG, gradient-like inputs, an independent float16/bfloat16 rounding (through frexp/ldexp and
 * nearbyint in double, not the bit tricks of half.h), float comparison helpers and the
 * instruction-set loop.
 *
 * Float32 arithmetic through double is exact before the final rounding: a sum, difference or
 * product of two floats rounded from double to float is the correctly rounded float result.
 */
#ifndef TEST_COMPRESS_REF_H
#define TEST_COMPRESS_REF_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/compress.h"
#include "kernels/cpu/isa.h"

/* ---- PRNG (xorshift64*), reseeded per test for reproducible cases ---- */

static uint64_t ref_state = 0x9e3779b97f4a7c15ull;

static inline void ref_seed(uint64_t s)
{
    ref_state = s * 0x9e3779b97f4a7c15ull + 1;
}

static inline uint64_t ref_rand(void)
{
    ref_state ^= ref_state >> 12;
    ref_state ^= ref_state << 25;
    ref_state ^= ref_state >> 27;
    return ref_state * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1). */
static inline double ref_unit(void)
{
    return (double)(ref_rand() >> 11) * 0x1p-53;
}

/* Approximately normal (sum of four uniforms, centred, unit variance). */
static inline double ref_normal(void)
{
    return (ref_unit() + ref_unit() + ref_unit() + ref_unit() - 2.0) * 1.7320508075688772;
}

/* A gradient-like float: normal times a scale spread over a few binades. */
static inline float ref_grad(double scale)
{
    return (float)(ref_normal() * scale * ldexp(1.0, (int)(ref_rand() % 7) - 3));
}

static inline void ref_fill(float *x, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = ref_grad(scale);
    }
}

/* Allocates @p n floats (at least one, so that count 0 still has a valid pointer). */
static inline float *ref_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}

static inline uint32_t ref_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

static inline float ref_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* ---- 16-bit floats, by value ---- */

/*
 * @p x rounded to nearest, ties to even, into a binary format of @p prec significand bits, bias
 * @p bias and @p ebits exponent bits; too large gives infinity. Finite x only.
 */
static inline uint16_t ref_round16(double x, int prec, int bias, int ebits)
{
    const int emin = 1 - bias, emax = (1 << ebits) - 1;
    const uint16_t sign = signbit(x) ? 0x8000 : 0, inf = (uint16_t)(emax << (prec - 1));
    double a = fabs(x);
    int e;

    if (a < ldexp(1, emin)) { /* subnormal, in units of 2^(emin - prec + 1); may round up */
        return sign | (uint16_t)nearbyint(ldexp(a, prec - 1 - emin));
    }
    frexp(a, &e); /* a in [2^(e-1), 2^e) */
    double q = nearbyint(ldexp(a, prec - e));
    if (q == ldexp(1, prec)) {
        q /= 2;
        e++;
    }
    if (e - 1 + bias >= emax) {
        return sign | inf;
    }
    return sign | (uint16_t)((e - 1 + bias) << (prec - 1)) | (uint16_t)(q - ldexp(1, prec - 1));
}

static inline uint16_t ref_to_f16(double x)
{
    return ref_round16(x, 11, 15, 5);
}

static inline uint16_t ref_to_bf16(double x)
{
    return ref_round16(x, 8, 127, 8);
}

static inline double ref_f16_value(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static inline double ref_bf16_value(uint16_t b)
{
    int e = (b >> 7) & 0xff, m = b & 0x7f;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (b & 0x8000) ? -v : v;
}

/* ---- Instruction sets ---- */

/*
 * Forces @p isa, or skips the calling test saying why when the CPU lacks it. Tests that force a
 * set restore the default with ref_isa_restore() before they return.
 */
static inline void ref_isa_force_or_skip(const char *isa)
{
    if (coll_cpu_force_isa(isa) != 0) {
        print_message("instruction set %s: not supported by this CPU, not run\n", isa);
        skip();
    }
    assert_string_equal(coll_cpu_isa(), isa);
}

/* The widest set this CPU has, which the kernels chose by default. */
static inline void ref_isa_restore(void)
{
    static const char *const order[] = {"avx512", "avx2", "scalar"};
    for (size_t i = 0; i < 3; i++) {
        if (coll_cpu_force_isa(order[i]) == 0) {
            return;
        }
    }
}

#endif
