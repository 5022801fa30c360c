/*
 * Unit tests of the host reduction kernels (kernels/cpu/reduce.h) on chosen values, on every
 * instruction set this CPU has: NaN in any source position for MIN/MAX, signed zeros, 16-bit
 * AVG that must not overflow, raw/partial mixtures, integer wraparound, integer AVG truncation,
 * every 16-bit bit pattern, rounding ties, and bit-for-bit agreement between instruction sets.
 * The random matrix against the reference is test_reduce.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kernels/cpu/isa.h"
#include "reduce_ref.h"

#define MAXN 64
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sources with their own storage, so the tests can write bits directly. */
typedef struct {
    coll_reduce_args_t a;
    uint8_t *src[MAXN];
    const void *srcs[MAXN];
} setup_t;

static setup_t *setup_new(coll_dtype_t dt, coll_redop_t op, unsigned nsrc, size_t count)
{
    setup_t *s = calloc(1, sizeof(*s));
    assert_non_null(s);
    s->a = (coll_reduce_args_t){.dtype = dt, .op = op, .world_size = 1, .nsrc = nsrc,
                                .raw_mask = ~0ull, .count = count};
    for (unsigned k = 0; k < nsrc; k++) {
        s->src[k] = calloc(count + 1, ref_esize(dt));
        assert_non_null(s->src[k]);
        s->srcs[k] = s->src[k];
    }
    s->a.src = s->srcs;
    return s;
}

static void setup_free(setup_t *s)
{
    for (unsigned k = 0; k < s->a.nsrc; k++) {
        free(s->src[k]);
    }
    free(s);
}

/* Runs the reduction out of place on every supported instruction set, and checks every element
 * against the reference (or against @p want when not NULL): same bits, or both NaN unless
 * @p bitwise. @return The last result (free it). */
static uint8_t *reduce_isas(setup_t *s, const void *want, int bitwise)
{
    const size_t es = ref_esize(s->a.dtype);
    const size_t bytes = s->a.count * ref_esize(s->a.dtype);
    uint8_t *ref = malloc(bytes + 1), *out = NULL;

    assert_non_null(ref);
    if (want == NULL) {
        ref_reduce(&s->a, s->srcs, ref);
        want = ref;
    }
    for (int i = 0; i < REF_NISAS; i++) {
        if (coll_cpu_force_isa(ref_isas[i]) != 0) {
            continue;
        }
        free(out);
        out = malloc(bytes + 1);
        assert_non_null(out);
        s->a.dst = out;
        coll_reduce(&s->a);
        for (size_t e = 0; e < s->a.count; e++) {
            if (bitwise ? memcmp(out + e * es, (const uint8_t *)want + e * es, es) != 0
                        : !ref_elem_equal(s->a.dtype, out, want, e)) {
                fail_msg("isa %s %s %s nsrc %u count %zu: element %zu differs", ref_isas[i],
                         ref_dtype_names[s->a.dtype], ref_op_names[s->a.op], s->a.nsrc,
                         s->a.count, e);
            }
        }
    }
    free(ref);
    return out;
}

static uint8_t *reduce_all_isas(setup_t *s, const void *want)
{
    return reduce_isas(s, want, 0);
}

static void fill_all(setup_t *s, size_t k, double v)
{
    for (size_t i = 0; i < s->a.count; i++) {
        ref_put_f(s->a.dtype, s->src[k], i, v);
    }
}

/* Element i of @p p set to the low bits of @p bits (ref_put_i only looks at the size). */
static void put_bits(coll_dtype_t dt, void *p, size_t i, uint64_t bits)
{
    ref_put_i(dt, p, i, bits);
}

/* ---- Floats ---- */

/* A quiet NaN, a negative quiet NaN and a signaling NaN of @p dt, by index 0..2. */
static uint64_t nan_bits(coll_dtype_t dt, int kind)
{
    static const uint64_t bits[4][3] = {
        {0x7fc00000u, 0xffc00001u, 0x7f800001u},
        {0x7ff8000000000000ull, 0xfff8000000000001ull, 0x7ff0000000000001ull},
        {0x7e00u, 0xfe01u, 0x7c01u},
        {0x7fc0u, 0xffc1u, 0x7f81u},
    };
    return bits[dt][kind];
}

/* MIN/MAX: a NaN in any one source, at any position, makes that element NaN. */
static void test_nan_in_any_source(void **state)
{
    static const unsigned nsrcs[] = {1, 2, 3, 4, 5, 6, 8, 9, 64};
    const size_t count = 37; /* vectors and a tail on every instruction set */

    for (int dt = COLL_FLOAT32; dt <= COLL_BFLOAT16; dt++) {
        for (coll_redop_t op = COLL_MIN; op <= COLL_MAX; op++) {
            for (size_t n = 0; n < LEN(nsrcs); n++) {
                for (unsigned p = 0; p < nsrcs[n]; p++) {
                    setup_t *s = setup_new((coll_dtype_t)dt, op, nsrcs[n], count);
                    for (unsigned k = 0; k < nsrcs[n]; k++) {
                        for (size_t i = 0; i < count; i++) {
                            ref_put_f(s->a.dtype, s->src[k], i, (double)((i * 7 + k) % 11) - 5);
                        }
                    }
                    /* Every third element from p on, cycling through the NaN kinds. */
                    for (size_t i = p % 3; i < count; i += 3) {
                        put_bits(s->a.dtype, s->src[p], i, nan_bits(s->a.dtype, (int)(i % 3)));
                    }
                    uint8_t *out = reduce_all_isas(s, NULL);
                    for (size_t i = p % 3; i < count; i += 3) {
                        assert_true(isnan(ref_get_f(s->a.dtype, out, i)));
                    }
                    free(out);
                    setup_free(s);
                }
            }
        }
    }
}

/* IEEE 754-2019 minimum/maximum: -0 < +0, in either order. */
static void test_signed_zeros(void **state)
{
    for (int dt = COLL_FLOAT32; dt <= COLL_BFLOAT16; dt++) {
        for (coll_redop_t op = COLL_MIN; op <= COLL_MAX; op++) {
            for (int order = 0; order < 2; order++) {
                setup_t *s = setup_new((coll_dtype_t)dt, op, 2, 19);
                fill_all(s, 0, order ? 0.0 : -0.0);
                fill_all(s, 1, order ? -0.0 : 0.0);
                uint8_t *out = reduce_all_isas(s, NULL);
                for (size_t i = 0; i < 19; i++) {
                    double v = ref_get_f(s->a.dtype, out, i);
                    assert_true(v == 0 && !signbit(v) == (op == COLL_MAX));
                }
                free(out);
                setup_free(s);
            }
        }
    }
}

/* 16-bit AVG scales raw inputs first: eight ranks of 60000 in float16 average to 60000, while
 * their plain sum overflows. Partial results (bit clear in raw_mask) are not scaled again. */
static void test_half_avg_does_not_overflow(void **state)
{
    static const struct {
        coll_dtype_t dt;
        double big;
    } cases[] = {{COLL_FLOAT16, 60000.0}, {COLL_BFLOAT16, 0x1.fep127}};

    for (size_t c = 0; c < LEN(cases); c++) {
        for (unsigned w = 6; w <= 8; w += 2) {
            setup_t *s = setup_new(cases[c].dt, COLL_AVG, w, 21);
            s->a.world_size = w;
            for (unsigned k = 0; k < w; k++) {
                fill_all(s, k, cases[c].big);
            }
            uint8_t *out = reduce_all_isas(s, NULL);
            for (size_t i = 0; i < 21; i++) {
                assert_true(ref_get_f(cases[c].dt, out, i) == cases[c].big);
            }
            free(out);
            s->a.op = COLL_SUM;
            out = reduce_all_isas(s, NULL);
            assert_true(isinf(ref_get_f(cases[c].dt, out, 0)));
            free(out);
            setup_free(s);
        }
        /* A partial result (already a sum of scaled inputs) plus two raw ranks of four. */
        setup_t *s = setup_new(cases[c].dt, COLL_AVG, 3, 21);
        s->a.world_size = 4;
        s->a.raw_mask = 0x6;
        fill_all(s, 0, cases[c].big / 2);
        fill_all(s, 1, cases[c].big);
        fill_all(s, 2, cases[c].big);
        uint8_t *out = reduce_all_isas(s, NULL);
        assert_true(ref_get_f(cases[c].dt, out, 20) == cases[c].big);
        free(out);
        setup_free(s);
    }
}

/* Ties round to even; overflow rounds to infinity; subnormal ties (via products) too. */
static void test_half_rounding(void **state)
{
    static const struct {
        coll_dtype_t dt;
        coll_redop_t op;
        double a, b, want;
    } cases[] = {
        {COLL_FLOAT16, COLL_SUM, 2048, 1, 2048},
        {COLL_FLOAT16, COLL_SUM, 2048, 3, 2052},
        {COLL_FLOAT16, COLL_SUM, 65504, 8, 65504},
        {COLL_FLOAT16, COLL_SUM, 65504, 16, INFINITY},
        {COLL_FLOAT16, COLL_SUM, -65504, -16, -INFINITY},
        {COLL_FLOAT16, COLL_PROD, 0x1p-24, 0.5, 0},
        {COLL_FLOAT16, COLL_PROD, 0x3p-24, 0.5, 0x2p-24},
        {COLL_FLOAT16, COLL_PROD, 0x5p-24, 0.5, 0x2p-24},
        {COLL_FLOAT16, COLL_PROD, 0x3ffp-24, 1.0 + 0x1p-10, 0x1p-14},
        {COLL_BFLOAT16, COLL_SUM, 256, 1, 256},
        {COLL_BFLOAT16, COLL_SUM, 258, 1, 260},
        {COLL_BFLOAT16, COLL_SUM, 0x1.fep127, 0x1.fep127, INFINITY},
        {COLL_BFLOAT16, COLL_PROD, 0x1p-133, 0.5, 0},
        {COLL_BFLOAT16, COLL_PROD, 0x3p-133, 0.5, 0x2p-133},
        {COLL_BFLOAT16, COLL_PROD, -0x5p-133, 0.5, -0x2p-133},
    };

    for (size_t c = 0; c < LEN(cases); c++) {
        setup_t *s = setup_new(cases[c].dt, cases[c].op, 2, 23);
        fill_all(s, 0, cases[c].a);
        fill_all(s, 1, cases[c].b);
        uint8_t *out = reduce_all_isas(s, NULL);
        for (size_t i = 0; i < 23; i++) {
            if (ref_get_f(cases[c].dt, out, i) != cases[c].want) {
                fail_msg("case %zu: %a op %a = %a, want %a", c, cases[c].a, cases[c].b,
                         ref_get_f(cases[c].dt, out, i), cases[c].want);
            }
        }
        free(out);
        setup_free(s);
    }
}

/* Every 16-bit pattern survives a one-source reduction; NaN comes back quiet, same sign. */
static void test_half_all_bit_patterns(void **state)
{
    for (int dt = COLL_FLOAT16; dt <= COLL_BFLOAT16; dt++) {
        const uint16_t quiet = dt == COLL_FLOAT16 ? 0x7e00 : 0x7fc0;
        setup_t *s = setup_new((coll_dtype_t)dt, COLL_MAX, 1, 65536);
        for (size_t i = 0; i < 65536; i++) {
            put_bits(s->a.dtype, s->src[0], i, i);
        }
        uint8_t *out = reduce_all_isas(s, NULL);
        for (size_t i = 0; i < 65536; i++) {
            uint16_t h;
            memcpy(&h, out + 2 * i, 2);
            if (isnan(ref_get_f(s->a.dtype, s->src[0], i))) {
                assert_true((h & quiet) == quiet && (h & 0x8000) == (i & 0x8000));
            } else {
                assert_int_equal(h, i);
            }
        }
        free(out);
        setup_free(s);
    }
}

/* AVG of float32/float64 divides once, on finalize, correctly rounded. */
static void test_float_avg_known_values(void **state)
{
    static const double in[3][3] = {{1, 2, 10}, {2, 2, 5}, {3, 5, 0}};
    static const double mean3[3] = {2, 3, 5}, mean2[3] = {3, 4.5, 7.5}, sum[3] = {6, 9, 15};

    for (int dt = COLL_FLOAT32; dt <= COLL_FLOAT64; dt++) {
        setup_t *s = setup_new((coll_dtype_t)dt, COLL_AVG, 3, 3);
        for (size_t k = 0; k < 3; k++) {
            for (size_t i = 0; i < 3; i++) {
                ref_put_f(s->a.dtype, s->src[k], i, in[k][i]);
            }
        }
        const double *wants[3] = {sum, mean3, mean2};
        const uint32_t worlds[3] = {3, 3, 2};
        for (int c = 0; c < 3; c++) {
            s->a.world_size = worlds[c];
            s->a.finalize = c > 0;
            uint8_t *out = reduce_all_isas(s, NULL);
            for (size_t i = 0; i < 3; i++) {
                assert_true(ref_get_f(s->a.dtype, out, i) == wants[c][i]);
            }
            free(out);
        }
        setup_free(s);
    }
}

/* ---- Integers ---- */

typedef struct {
    coll_dtype_t dt;
    coll_redop_t op;
    uint32_t world; /* AVG only, with finalize */
    int64_t a, b, want;
    unsigned nsrc;
} int_case_t;

static void run_int_cases(const int_case_t *cases, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        const size_t count = 37;
        setup_t *s = setup_new(cases[c].dt, cases[c].op, cases[c].nsrc, count);
        uint8_t *want = malloc(count * ref_esize(cases[c].dt));
        s->a.world_size = cases[c].world ? cases[c].world : 1;
        s->a.finalize = cases[c].world != 0;
        for (size_t i = 0; i < count; i++) {
            ref_put_i(s->a.dtype, s->src[0], i, (uint64_t)cases[c].a);
            if (s->a.nsrc > 1) {
                ref_put_i(s->a.dtype, s->src[1], i, (uint64_t)cases[c].b);
            }
            ref_put_i(s->a.dtype, want, i, (uint64_t)cases[c].want);
        }
        free(reduce_all_isas(s, want));
        free(want);
        setup_free(s);
    }
}

static void test_int_wraparound(void **state)
{
    static const int_case_t cases[] = {
        {COLL_INT8, COLL_SUM, 0, 100, 100, -56, 2},
        {COLL_INT8, COLL_SUM, 0, -128, -1, 127, 2},
        {COLL_UINT8, COLL_SUM, 0, 200, 100, 44, 2},
        {COLL_INT32, COLL_SUM, 0, INT32_MAX, 1, INT32_MIN, 2},
        {COLL_INT64, COLL_SUM, 0, INT64_MAX, 1, INT64_MIN, 2},
        {COLL_INT64, COLL_SUM, 0, INT64_MIN, -1, INT64_MAX, 2},
        {COLL_INT8, COLL_PROD, 0, 16, 16, 0, 2},
        {COLL_INT8, COLL_PROD, 0, -128, -1, -128, 2},
        {COLL_INT8, COLL_PROD, 0, -3, 77, 25, 2},
        {COLL_UINT8, COLL_PROD, 0, 16, 17, 16, 2},
        {COLL_UINT8, COLL_PROD, 0, 255, 255, 1, 2},
        {COLL_INT32, COLL_PROD, 0, 65536, 65536, 0, 2},
        {COLL_INT32, COLL_PROD, 0, 65537, 65537, 131073, 2},
        {COLL_INT32, COLL_PROD, 0, INT32_MIN, -1, INT32_MIN, 2},
        {COLL_INT64, COLL_PROD, 0, (1ll << 32) + 1, (1ll << 32) + 1, (1ll << 33) + 1, 2},
        {COLL_INT64, COLL_PROD, 0, INT64_MIN, -1, INT64_MIN, 2},
        {COLL_INT64, COLL_PROD, 0, -3, 0x5555555555555556ll, -2, 2},
        {COLL_INT64, COLL_MIN, 0, INT64_MIN, INT64_MAX, INT64_MIN, 2},
        {COLL_INT64, COLL_MAX, 0, -1, 1ll << 40, 1ll << 40, 2},
        {COLL_UINT8, COLL_MAX, 0, 255, 1, 255, 2},
        {COLL_INT8, COLL_MIN, 0, -128, 127, -128, 2},
    };
    run_int_cases(cases, LEN(cases));
}

/* BAND, BOR and BXOR on the bits of every integer dtype, the sign bit included. */
static void test_int_bitwise(void **state)
{
    static const int_case_t cases[] = {
        {COLL_INT8, COLL_BAND, 0, -1, 0x5a, 0x5a, 2},
        {COLL_INT8, COLL_BAND, 0, -128, -1, -128, 2},
        {COLL_INT8, COLL_BOR, 0, 0x0f, 0x70, 0x7f, 2},
        {COLL_INT8, COLL_BOR, 0, -128, 1, -127, 2},
        {COLL_INT8, COLL_BXOR, 0, -1, 0x0f, -16, 2},
        {COLL_UINT8, COLL_BAND, 0, 0xf0, 0x3c, 0x30, 2},
        {COLL_UINT8, COLL_BOR, 0, 0x81, 0x18, 0x99, 2},
        {COLL_UINT8, COLL_BXOR, 0, 0xff, 0xaa, 0x55, 2},
        {COLL_UINT8, COLL_BXOR, 0, 0xa5, 0, 0xa5, 1},
        {COLL_INT32, COLL_BAND, 0, INT32_MIN, -1, INT32_MIN, 2},
        {COLL_INT32, COLL_BAND, 0, 0x12345678, 0x0f0f0f0f, 0x02040608, 2},
        {COLL_INT32, COLL_BOR, 0, 0x12340000, 0x5678, 0x12345678, 2},
        {COLL_INT32, COLL_BXOR, 0, 0x7fffffff, -1, INT32_MIN, 2},
        {COLL_INT64, COLL_BAND, 0, -1, 0x0123456789abcdefll, 0x0123456789abcdefll, 2},
        {COLL_INT64, COLL_BOR, 0, INT64_MIN, 1, INT64_MIN + 1, 2},
        {COLL_INT64, COLL_BXOR, 0, 0x5555555555555555ll, -0x5555555555555556ll, -1, 2},
        {COLL_INT64, COLL_BXOR, 0, 1ll << 62, 1ll << 62, 0, 2},
    };
    run_int_cases(cases, LEN(cases));
}

/* AVG of integers: the wrapped sum divided by world_size, truncating toward zero. */
static void test_int_avg_truncates_toward_zero(void **state)
{
    static const int_case_t cases[] = {
        {COLL_INT32, COLL_AVG, 2, -3, -4, -3, 2},
        {COLL_INT32, COLL_AVG, 7, -10, -10, -2, 2},
        {COLL_INT32, COLL_AVG, 2, 3, 4, 3, 2},
        {COLL_INT32, COLL_AVG, 3, INT32_MIN, 0, INT32_MIN / 3, 2},
        {COLL_INT32, COLL_AVG, 4000000000u, INT32_MIN, 0, 0, 2},
        {COLL_INT8, COLL_AVG, 3, -128, 0, -42, 1},
        {COLL_INT8, COLL_AVG, 2, 100, 100, -28, 2}, /* the sum wraps to -56 first */
        {COLL_INT8, COLL_AVG, 300, -128, 0, 0, 1},
        {COLL_INT8, COLL_AVG, 128, -128, 0, -1, 1},
        {COLL_UINT8, COLL_AVG, 2, 255, 0, 127, 1},
        {COLL_UINT8, COLL_AVG, 3, 200, 100, 14, 2}, /* 300 wraps to 44 */
        {COLL_INT64, COLL_AVG, 2, INT64_MIN, 0, INT64_MIN / 2, 1},
        {COLL_INT64, COLL_AVG, 3, -5, -3, -2, 2},
        {COLL_INT64, COLL_AVG, 1, INT64_MIN, 0, INT64_MIN, 1},
    };
    run_int_cases(cases, LEN(cases));
}

/* ---- Every instruction set gives the same bits ---- */

/* Random bit patterns (NaNs, infinities, subnormals included) on every instruction set against
 * the scalar kernels: identical bits, except the payload of NaNs made by SUM, AVG or PROD. */
static void test_isas_agree_bitwise(void **state)
{
    static const unsigned nsrcs[] = {1, 2, 3, 5, 9};

    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        for (int op = 0; op < COLL_REDOP_COUNT; op++) {
            for (size_t n = 0; n < LEN(nsrcs) && ref_op_applies(dt, op); n++) {
                setup_t *s = setup_new((coll_dtype_t)dt, (coll_redop_t)op, nsrcs[n], 301);
                for (unsigned k = 0; k < nsrcs[n]; k++) {
                    for (size_t i = 0; i < 301 * ref_esize(s->a.dtype); i++) {
                        s->src[k][i] = (uint8_t)ref_rand();
                    }
                }
                s->a.world_size = 3;
                s->a.finalize = 1;
                s->a.raw_mask = ref_rand();
                assert_int_equal(coll_cpu_force_isa("scalar"), 0);
                uint8_t *want = malloc(301 * ref_esize(s->a.dtype));
                s->a.dst = want;
                coll_reduce(&s->a);
                /* MIN/MAX pick NaNs bit-exactly too: every set ORs the operands. */
                free(reduce_isas(s, want, op == COLL_MIN || op == COLL_MAX));
                free(want);
                setup_free(s);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nan_in_any_source),
        cmocka_unit_test(test_signed_zeros),
        cmocka_unit_test(test_half_avg_does_not_overflow),
        cmocka_unit_test(test_half_rounding),
        cmocka_unit_test(test_half_all_bit_patterns),
        cmocka_unit_test(test_float_avg_known_values),
        cmocka_unit_test(test_int_wraparound),
        cmocka_unit_test(test_int_bitwise),
        cmocka_unit_test(test_int_avg_truncates_toward_zero),
        cmocka_unit_test(test_isas_agree_bitwise),
    };
    return cmocka_run_group_tests_name("reduce_special", tests, NULL, NULL);
}
