/*
 * perf/data.c: values and expected results of coll-perf's correctness check (see the header).
 */
#include "perf/data.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* splitmix64's finalizer: a bijective mix, so neighbouring indices get unrelated classes. */
static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static inline unsigned elem_class(uint64_t seed, size_t i)
{
    return (unsigned)(mix64((uint64_t)i ^ seed) % PERF_CLASSES);
}

/* ---- encoding ----------------------------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof(x));
    return x;
}

/* float32 to IEEE binary16, rounding to nearest even. */
static uint16_t f32_to_f16(float f)
{
    uint32_t x = f32_bits(f), sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu, half, rem, mid;
    int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
    unsigned shift;

    if (((x >> 23) & 0xffu) == 0xffu) {
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0u));
    }
    if (exp >= 31) {
        return (uint16_t)(sign | 0x7c00u);
    }
    if (exp <= 0) { /* subnormal or zero */
        if (exp < -10) {
            return (uint16_t)sign;
        }
        mant |= 0x800000u;
        shift = (unsigned)(14 - exp);
    } else {
        mant |= (uint32_t)exp << 23; /* a rounding carry out of the mantissa bumps the exponent */
        shift = 13;
    }
    half = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) {
        half++;
    }
    return (uint16_t)(sign | half);
}

static double f16_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000u) ? -v : v;
}

/* float32 to bfloat16, rounding to nearest even (the values here are exact anyway). */
static uint16_t f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static double bf16_to_double(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, sizeof(f));
    return f;
}

/* The element bits of @p v in @p t, in the low bytes of the result. */
static uint64_t encode(coll_dtype_t t, double v)
{
    float f = (float)v;
    uint64_t u;
    switch (t) {
    case COLL_FLOAT32: return f32_bits(f);
    case COLL_FLOAT64: memcpy(&u, &v, sizeof(u)); return u;
    case COLL_FLOAT16: return f32_to_f16(f);
    case COLL_BFLOAT16: return f32_to_bf16(f);
    case COLL_INT8: return (uint8_t)(int8_t)(int64_t)v;
    case COLL_UINT8: return (uint8_t)(int64_t)v;
    case COLL_INT32: return (uint32_t)(int32_t)(int64_t)v;
    case COLL_INT64: return (uint64_t)(int64_t)v;
    default: return 0;
    }
}

static double decode(coll_dtype_t t, uint64_t u)
{
    float f;
    uint32_t x = (uint32_t)u;
    double v;
    switch (t) {
    case COLL_FLOAT32: memcpy(&f, &x, sizeof(f)); return f;
    case COLL_FLOAT64: memcpy(&v, &u, sizeof(v)); return v;
    case COLL_FLOAT16: return f16_to_double((uint16_t)u);
    case COLL_BFLOAT16: return bf16_to_double((uint16_t)u);
    case COLL_INT8: return (int8_t)(uint8_t)u;
    case COLL_UINT8: return (uint8_t)u;
    case COLL_INT32: return (int32_t)x;
    case COLL_INT64: return (double)(int64_t)u;
    default: return NAN;
    }
}

static int is_float(coll_dtype_t t)
{
    return t == COLL_FLOAT32 || t == COLL_FLOAT64 || t == COLL_FLOAT16 || t == COLL_BFLOAT16;
}

/* ---- values and their reduction ----------------------------------------------------------- */

/* Rank @p r's value of class @p h. Ranges keep every float result exact: |sums| <= 100, so
 * even bfloat16 (integers exact up to 256) and int8 never round or wrap; products have at most
 * one factor of magnitude 2 (the class's "owner" rank), the rest +-1. AVG inputs of float types
 * are multiples of the world size, so the mean is an integer. */
static int64_t input_value(const perf_data_t *d, int r, unsigned h)
{
    uint64_t x = mix64(d->seed ^ ((uint64_t)(unsigned)r << 32) ^ ((uint64_t)h * 0x9e3779b97f4a7c15ull));
    int is_unsigned = d->dtype == COLL_UINT8;
    int64_t range, v;

    if (d->reduces && d->op == COLL_PROD) {
        v = (int)h % d->world == r ? 2 : 1;
        return (!is_unsigned && (x & 1u)) ? -v : v;
    }
    range = d->reduces ? 100 / d->world : 100;
    range = range < 1 ? 1 : range;
    v = (int64_t)(x % (uint64_t)(2 * range + 1)) - range;
    if (is_unsigned) {
        v += range;
    }
    if (d->reduces && d->op == COLL_AVG && is_float(d->dtype)) {
        v *= d->world;
    }
    return v;
}

/* An exact integer result as the integer type holds it: truncated to its bits (a sum or
 * product modulo 2^bits is the wrapped one). */
static int64_t wrap_int(coll_dtype_t t, int64_t v)
{
    switch (t) {
    case COLL_INT8: return (int8_t)(uint8_t)(uint64_t)v;
    case COLL_UINT8: return (uint8_t)(uint64_t)v;
    case COLL_INT32: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

/* The reduction of class @p h over all ranks, in rank order, as the documented semantics say. */
static double reduce_class(const perf_data_t *d, unsigned h)
{
    int64_t acc = input_value(d, 0, h);
    for (int r = 1; r < d->world; r++) {
        int64_t v = input_value(d, r, h);
        switch (d->op) {
        case COLL_PROD: acc = (int64_t)((uint64_t)acc * (uint64_t)v); break;
        case COLL_MIN: acc = v < acc ? v : acc; break;
        case COLL_MAX: acc = v > acc ? v : acc; break;
        case COLL_BAND: acc &= v; break;
        case COLL_BOR: acc |= v; break;
        case COLL_BXOR: acc ^= v; break;
        default: acc = (int64_t)((uint64_t)acc + (uint64_t)v); break; /* SUM, AVG */
        }
    }
    if (is_float(d->dtype)) {
        return d->op == COLL_AVG ? (double)acc / d->world : (double)acc;
    }
    acc = wrap_int(d->dtype, acc);
    return (double)(d->op == COLL_AVG ? acc / d->world : acc); /* C division: toward zero */
}

int perf_data_init(perf_data_t *d, coll_dtype_t dtype, coll_redop_t op, int world, int reduces)
{
    memset(d, 0, sizeof(*d));
    d->dtype = dtype;
    d->op = op;
    d->world = world;
    d->reduces = reduces;
    d->esize = coll_dtype_size(dtype);
    /* A byte pattern no expected value has: 0x7f... is NaN or huge for floats and 127 or more
     * for the signed integers; uint8 values stay below 255. */
    d->sentinel = dtype == COLL_UINT8 ? 0xff : 0x7f;
    d->in = calloc((size_t)world * PERF_CLASSES, sizeof(*d->in));
    d->out = calloc(PERF_CLASSES, sizeof(*d->out));
    if (d->in == NULL || d->out == NULL) {
        perf_data_free(d);
        return -1;
    }
    return 0;
}

void perf_data_free(perf_data_t *d)
{
    free(d->in);
    free(d->out);
    d->in = d->out = NULL;
}

void perf_data_seed(perf_data_t *d, uint64_t seed)
{
    d->seed = mix64(seed + 0x5eedull);
    for (unsigned h = 0; h < PERF_CLASSES; h++) {
        for (int r = 0; r < d->world; r++) {
            d->in[(size_t)r * PERF_CLASSES + h] = encode(d->dtype, (double)input_value(d, r, h));
        }
        if (d->reduces) {
            d->out[h] = encode(d->dtype, reduce_class(d, h));
        }
    }
}

/* ---- buffers ------------------------------------------------------------------------------ */

void perf_data_fill(const perf_data_t *d, int rank, void *buf, size_t first, size_t count)
{
    const uint64_t *tab = &d->in[(size_t)rank * PERF_CLASSES];
    switch (d->esize) {
    case 1:
        for (size_t j = 0; j < count; j++) {
            ((uint8_t *)buf)[j] = (uint8_t)tab[elem_class(d->seed, first + j)];
        }
        break;
    case 2:
        for (size_t j = 0; j < count; j++) {
            ((uint16_t *)buf)[j] = (uint16_t)tab[elem_class(d->seed, first + j)];
        }
        break;
    case 4:
        for (size_t j = 0; j < count; j++) {
            ((uint32_t *)buf)[j] = (uint32_t)tab[elem_class(d->seed, first + j)];
        }
        break;
    default:
        for (size_t j = 0; j < count; j++) {
            ((uint64_t *)buf)[j] = tab[elem_class(d->seed, first + j)];
        }
        break;
    }
}

void perf_data_poison(const perf_data_t *d, void *buf, size_t count)
{
    memset(buf, d->sentinel, count * d->esize);
}

static uint64_t load(const void *buf, size_t esize, size_t j)
{
    switch (esize) {
    case 1: return ((const uint8_t *)buf)[j];
    case 2: return ((const uint16_t *)buf)[j];
    case 4: return ((const uint32_t *)buf)[j];
    default: return ((const uint64_t *)buf)[j];
    }
}

/* Bits equal, or equal values (+0 and -0 both stand for an exact zero). */
static int same(coll_dtype_t t, uint64_t got, uint64_t want)
{
    return got == want || (is_float(t) && decode(t, got) == decode(t, want));
}

static size_t check(const perf_data_t *d, const uint64_t *tab, const void *buf, size_t first,
                    size_t count)
{
    size_t wrong = 0;
    for (size_t j = 0; j < count; j++) {
        uint64_t want = tab[elem_class(d->seed, first + j)];
        uint64_t got = load(buf, d->esize, j);
        if (got != want && !same(d->dtype, got, want)) {
            wrong++;
        }
    }
    return wrong;
}

size_t perf_data_check_input(const perf_data_t *d, int rank, const void *buf, size_t first,
                             size_t count)
{
    return check(d, &d->in[(size_t)rank * PERF_CLASSES], buf, first, count);
}

size_t perf_data_check_reduced(const perf_data_t *d, const void *buf, size_t first,
                               size_t count)
{
    return check(d, d->out, buf, first, count);
}
