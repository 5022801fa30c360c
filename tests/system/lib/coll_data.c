/*
 * Test data of coll_check; see coll_data.h. Every value is checked to be exactly representable
 * when it is stored (check_store()), so a wrong choice here fails loudly instead of passing.
 */
#include "coll_data.h"

#include <math.h>
#include <string.h>

const char *const coll_kind_names[K_COUNT] = {"allreduce", "reduce_scatter", "allgather",
                                              "broadcast", "reduce"};

static uint64_t hash(const case_t *k, int rank, size_t i)
{
    uint64_t salt = check_mix(((uint64_t)k->seq << 32) ^ ((uint64_t)k->iter << 16) ^
                              ((uint64_t)k->kind << 8) ^ ((uint64_t)k->dt << 4) ^
                              (uint64_t)k->op);
    return check_mix(salt ^ (uint64_t)i ^ ((uint64_t)(rank + 1) << 48));
}

/* An integer in [-r, r] from @p h. */
static int64_t small_int(uint64_t h, int64_t r)
{
    return (int64_t)(h % (uint64_t)(2 * r + 1)) - r;
}

/* Bound of the SUM and AVG integers (in units of 1/8): the sum over up to 8 ranks, and every
 * partial sum, stays exact in the type (bfloat16 has 8 significant bits, float16 11). */
static int64_t sum_range(coll_dtype_t dt)
{
    switch (dt) {
    case COLL_BFLOAT16: return 25;
    case COLL_FLOAT16: return 255;
    case COLL_FLOAT32: return 1 << 16;
    default: return 1ll << 40;
    }
}

/* A random finite value of a float type (no negative zero, so that MIN and MAX are unique). */
static double random_finite(coll_dtype_t dt, uint64_t h)
{
    check_val_t v;
    uint8_t raw[8];
    int exp_bits = dt == COLL_FLOAT16 ? 5 : dt == COLL_FLOAT64 ? 11 : 8;
    int bits = check_dtype_bits(dt);
    uint64_t exp_mask = ((1ull << exp_bits) - 1) << (bits - 1 - exp_bits);

    if ((h & exp_mask) == exp_mask) {
        h &= ~(1ull << (bits - 2)); /* an all-ones exponent is inf or NaN */
    }
    memcpy(raw, &h, sizeof(raw));
    v = check_load(dt, raw, 0);
    return v.f == 0 ? 0.0 : v.f;
}

/* 16-bit AVG: w * 2^E with the largest E that keeps it finite; the sum of w of them is not. */
static double big_avg_value(coll_dtype_t dt, int world)
{
    int e = (int)floor(log2(check_float_max(dt) / world));
    return ldexp((double)world, e);
}

/* AVG input for float32 and float64: the last rank makes the sum a multiple of the world size,
 * so the mean (divided once at the end, as documented) is exact. Ranks do not hold multiples of
 * the world size themselves, so pre-scaling each input would not be exact. */
static double gen_avg_wide(const case_t *k, int world, int rank, size_t i)
{
    int64_t r = sum_range(k->dt) - world, v = small_int(hash(k, rank, i), r), s = v;
    if (rank != world - 1) {
        return (double)v / 8;
    }
    for (int q = 0; q < world - 1; q++) {
        s += small_int(hash(k, q, i), r);
    }
    v -= ((s % world) + world) % world;
    return (double)v / 8;
}

/* AVG input for float16 and bfloat16, which scale each input by 1/world in float32 before the
 * sum: multiples of the world size, so that x * fl(1/world) rounds to exactly x / world (the
 * relative error of fl(1/w) * w is at most 2^-25 for the sizes tested, under half an ulp). */
static double gen_avg_half(const case_t *k, int world, int rank, size_t i)
{
    if (i % BIG_PERIOD == BIG_PHASE) {
        return big_avg_value(k->dt, world);
    }
    return (double)(world * small_int(hash(k, rank, i), sum_range(k->dt) / world)) / 8;
}

static double gen_float(const case_t *k, int world, int rank, size_t i)
{
    static const double prod_values[5] = {1, -1, 2, -2, 0.5};
    uint64_t h = hash(k, rank, i);

    switch (k->op) {
    case COLL_SUM: return (double)small_int(h, sum_range(k->dt)) / 8;
    case COLL_AVG:
        if (k->dt == COLL_FLOAT16 || k->dt == COLL_BFLOAT16) {
            return gen_avg_half(k, world, rank, i);
        }
        return gen_avg_wide(k, world, rank, i);
    case COLL_PROD: return prod_values[h % 5];
    default:
        if (i % NAN_PERIOD == NAN_PHASE && (size_t)rank == (i / NAN_PERIOD) % (size_t)world) {
            return NAN;
        }
        return random_finite(k->dt, h);
    }
}

check_val_t coll_data_input(const case_t *k, int world, int rank, size_t i)
{
    check_val_t v = {0, 0};
    uint64_t h = hash(k, rank, i), g = check_mix(h);

    if (check_dtype_is_float(k->dt)) {
        v.f = gen_float(k, world, rank, i);
    } else if (k->op == COLL_BAND || k->op == COLL_BOR) {
        /* Bits set 3 times in 4 for AND, 1 in 4 for OR: over a few ranks, results that are
         * neither all zeros nor all ones. */
        v.i = check_int_wrap(k->dt, k->op == COLL_BAND ? h | g : h & g);
    } else {
        v.i = check_int_wrap(k->dt, h);
    }
    return v;
}

static double float_reduce(coll_redop_t op, double acc, double x)
{
    if (isnan(acc) || isnan(x)) {
        return op == COLL_MIN || op == COLL_MAX ? NAN : acc + x;
    }
    switch (op) {
    case COLL_SUM:
    case COLL_AVG: return acc + x;
    case COLL_PROD: return acc * x;
    case COLL_MIN: return x < acc ? x : acc;
    default: return x > acc ? x : acc;
    }
}

static int64_t int_reduce(coll_dtype_t dt, coll_redop_t op, int64_t acc, int64_t x)
{
    switch (op) {
    case COLL_SUM:
    case COLL_AVG: return check_int_wrap(dt, (uint64_t)acc + (uint64_t)x);
    case COLL_PROD: return check_int_wrap(dt, (uint64_t)acc * (uint64_t)x);
    case COLL_MIN: return x < acc ? x : acc;
    case COLL_MAX: return x > acc ? x : acc;
    /* On the sign-extended values, whose results stay sign-extended. */
    case COLL_BAND: return acc & x;
    case COLL_BOR: return acc | x;
    default: return acc ^ x;
    }
}

/* The documented reduction of element @p i over all ranks. Float sums here are exact (the
 * inputs are chosen so), so the order does not matter; integer AVG divides the wrapped sum,
 * rounding toward zero (C division). */
check_val_t coll_data_expected(const case_t *k, int world, size_t i)
{
    check_val_t acc = coll_data_input(k, world, 0, i);
    for (int r = 1; r < world; r++) {
        check_val_t x = coll_data_input(k, world, r, i);
        if (check_dtype_is_float(k->dt)) {
            acc.f = float_reduce(k->op, acc.f, x.f);
        } else {
            acc.i = int_reduce(k->dt, k->op, acc.i, x.i);
        }
    }
    if (k->op == COLL_AVG) {
        acc.f /= world;
        acc.i /= world;
    }
    return acc;
}

void coll_data_fill(const case_t *k, int world, int rank, void *p, size_t n)
{
    size_t es = coll_dtype_size(k->dt);
    for (size_t i = 0; i < n; i++) {
        if (coll_kind_reduces(k->kind)) {
            check_store(k->dt, p, i, coll_data_input(k, world, rank, i));
        } else {
            uint64_t h = hash(k, rank, i);
            memcpy((uint8_t *)p + i * es, &h, es);
        }
    }
}
