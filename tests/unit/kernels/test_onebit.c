/*
 * Unit tests of the 1-bit compressor (kernels/cpu/onebit.h) against a reference computed here, bit
 * by bit: sign bits (LSB first, set for negative, sign(0) = sign(-0) = +1, padding 0), the scale
 * over the real n elements only (never the padded length), the residual x - scale * sign(x),
 * decode and accumulate. Counts around multiples of 8; both scale rules; non-finite input
 * rejected with nothing written; every instruction set against the scalar one.
 */
#include "compress_ref.h"

#include "kernels/cpu/onebit.h"

static const size_t counts[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 1000, 1003, 4097};
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The scale in long double: sqrt(sum x^2 / n) or sum |x| / n over exactly n elements. */
static long double ref_scale(const float *x, size_t n, coll_onebit_scale_t rule)
{
    long double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += rule == COLL_ONEBIT_SCALE_L1 ? fabsl(x[i]) : (long double)x[i] * x[i];
    }
    return rule == COLL_ONEBIT_SCALE_L1 ? s / n : sqrtl(s / n);
}

/* @p got is @p want rounded to float32 (to within the double sum's error, 2^-40 relative). */
static int scale_ok(float got, long double want)
{
    long double ulp = ldexpl(1, ilogbl(want) - 23);
    return fabsl(got - want) <= ulp * (0.5L + 0x1p-16L);
}

/* Encodes and checks every sign bit, the padding bits, the scale and the residual. */
static void check_encode(coll_onebit_scale_t rule, const float *g, const float *e0, size_t n)
{
    const size_t nb = coll_onebit_sign_bytes(n);
    float *x = ref_floats(n), *e = ref_floats(n), s = -1;
    uint8_t *bits = malloc(nb + 1);

    assert_non_null(bits);
    for (size_t i = 0; i < n; i++) {
        x[i] = e0 ? (float)((double)g[i] + e0[i]) : g[i];
        e[i] = e0 ? e0[i] : 0;
    }
    memset(bits, 0xff, nb + 1);
    assert_int_equal(coll_onebit_encode(rule, g, e0 ? e : NULL, n, bits, &s), COLL_OK);
    if (!scale_ok(s, ref_scale(x, n, rule))) {
        fail_msg("rule %d n %zu: scale %a, want %La", rule, n, s, ref_scale(x, n, rule));
    }
    for (size_t i = 0; i < 8 * nb; i++) {
        int bit = (bits[i / 8] >> (i % 8)) & 1, want = i < n && x[i] < 0;
        if (bit != want) {
            fail_msg("rule %d n %zu: bit %zu is %d, want %d", rule, n, i, bit, want);
        }
        float want_e = i < n ? (float)((double)x[i] - (want ? -(double)s : (double)s)) : 0;
        if (e0 && i < n && ref_bits(e[i]) != ref_bits(want_e)) {
            fail_msg("rule %d n %zu: residual %zu is %a, want %a", rule, n, i, e[i], want_e);
        }
    }
    assert_int_equal(bits[nb], 0xff); /* nothing written past the signs */
    free(x);
    free(e);
    free(bits);
}

static void test_encode_random(void **state)
{
    ref_seed(1);
    for (int rule = 0; rule < 2; rule++) {
        for (size_t c = 0; c < LEN(counts); c++) {
            size_t n = counts[c];
            float *g = ref_floats(n), *e = ref_floats(n);
            ref_fill(g, n, 1e-3);
            ref_fill(e, n, 1e-4);
            check_encode((coll_onebit_scale_t)rule, g, NULL, n);
            check_encode((coll_onebit_scale_t)rule, g, e, n);
            free(g);
            free(e);
        }
    }
}

/* Values that are multiples of 1/16 below 2^10: every sum is exact in double, so the scale must
 * be exactly (float)sqrt(sum / n) of the n real elements; dividing by the padded length (a
 * multiple of 8) would give another number. Zeros of both signs count as +1. */
static void test_scale_exact_no_padding(void **state)
{
    for (size_t c = 0; c < LEN(counts); c++) {
        const size_t n = counts[c];
        float *g = ref_floats(n), s;
        uint8_t bits[600];
        double sum2 = 0, sum1 = 0;
        ref_seed(10 + c);
        for (size_t i = 0; i < n; i++) {
            int v = (int)(ref_rand() % 2001) - 1000;
            g[i] = i % 5 == 3 ? (i % 2 ? -0.0f : 0.0f) : (float)v / 16;
            sum2 += (double)g[i] * g[i];
            sum1 += fabs(g[i]);
        }
        assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, g, NULL, n, bits, &s), 0);
        assert_true(ref_bits(s) == ref_bits((float)sqrt(sum2 / (double)n)));
        assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L1, g, NULL, n, bits, &s), 0);
        assert_true(ref_bits(s) == ref_bits((float)(sum1 / (double)n)));
        for (size_t i = 0; i < n; i++) {
            assert_int_equal((bits[i / 8] >> (i % 8)) & 1, g[i] < 0);
        }
        free(g);
    }
}

/* Fixed example: 9 elements, the second byte holds one sign and 7 zero padding bits. */
static void test_example(void **state)
{
    const float g[9] = {-1, 2, -0.0f, 0, -3, 4, -5, -6, -7};
    float e[9] = {0}, s;
    uint8_t bits[2];

    assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, g, e, 9, bits, &s), COLL_OK);
    assert_int_equal(bits[0], 0x01 | 0x10 | 0x40 | 0x80);
    assert_int_equal(bits[1], 0x01);
    assert_true(s == (float)sqrt((1 + 4 + 9 + 16 + 25 + 36 + 49) / 9.0));
    assert_true(e[2] == -s && e[3] == -s && e[8] == -7 + s);
}

static void test_decode_accumulate(void **state)
{
    for (size_t c = 0; c < LEN(counts); c++) {
        const size_t n = counts[c];
        uint8_t *bits = malloc(coll_onebit_sign_bytes(n));
        float *out = ref_floats(n), *acc = ref_floats(n), *acc0 = ref_floats(n);
        const float scale = 0.3f, w = 1.0f / 3;
        assert_non_null(bits);
        ref_seed(20 + c);
        for (size_t b = 0; b < coll_onebit_sign_bytes(n); b++) {
            bits[b] = (uint8_t)ref_rand(); /* padding bits set too: they must be ignored */
        }
        ref_fill(acc0, n, 1.0);
        memcpy(acc, acc0, n * sizeof(float));
        assert_int_equal(coll_onebit_decode(bits, n, scale, w, out), COLL_OK);
        assert_int_equal(coll_onebit_accumulate(bits, n, scale, w, acc), COLL_OK);
        const float sw = scale * w;
        for (size_t i = 0; i < n; i++) {
            float v = ((bits[i / 8] >> (i % 8)) & 1) ? -sw : sw;
            assert_true(out[i] == v);
            assert_true(ref_bits(acc[i]) == ref_bits((float)((double)acc0[i] + v)));
        }
        free(bits), free(out), free(acc), free(acc0);
    }
}

static void test_non_finite_rejected(void **state)
{
    const float bad[] = {INFINITY, -INFINITY, NAN};
    float g[21], e[21], e0[21], s = 5;
    uint8_t bits[3] = {0x5a, 0x5a, 0x5a};

    for (size_t b = 0; b < LEN(bad); b++) {
        for (int rule = 0; rule < 2; rule++) {
            ref_fill(g, 21, 1.0);
            ref_fill(e0, 21, 1.0);
            memcpy(e, e0, sizeof(e));
            g[13] = bad[b];
            assert_int_equal(coll_onebit_encode((coll_onebit_scale_t)rule, g, e, 21, bits, &s),
                             COLL_ERR_INVALID);
            assert_memory_equal(e, e0, sizeof(e));
            assert_true(bits[0] == 0x5a && bits[1] == 0x5a && bits[2] == 0x5a && s == 5);
        }
    }
}

static void test_arguments(void **state)
{
    float g[3] = {1, -1, 2}, s = 4;
    uint8_t bits[1];

    assert_int_equal(coll_onebit_sign_bytes(0), 0);
    assert_int_equal(coll_onebit_sign_bytes(8), 1);
    assert_int_equal(coll_onebit_sign_bytes(9), 2);
    assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, NULL, NULL, 0, NULL, &s), COLL_OK);
    assert_true(s == 0);
    assert_int_equal(coll_onebit_encode((coll_onebit_scale_t)2, g, NULL, 3, bits, &s),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, g, NULL, 3, NULL, &s),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_onebit_encode(COLL_ONEBIT_SCALE_L2, g, NULL, 3, bits, NULL),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_onebit_decode(NULL, 3, 1, 1, g), COLL_ERR_INVALID);
    assert_int_equal(coll_onebit_accumulate(bits, 3, 1, 1, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_onebit_accumulate(NULL, 0, 1, 1, NULL), COLL_OK);
}

/* Both rules, every count, with and without residual, on @p isa: the same bits as scalar. */
static void check_isa_matches_scalar(const char *isa)
{
    ref_isa_force_or_skip(isa);
    for (int rule = 0; rule < 2; rule++) {
        for (size_t c = 0; c < LEN(counts); c++) {
            const size_t n = counts[c], nb = coll_onebit_sign_bytes(n);
            float *g = ref_floats(n), *e[2] = {ref_floats(n), ref_floats(n)}, s[2];
            float *acc[2] = {ref_floats(n), ref_floats(n)};
            uint8_t *bits[2] = {malloc(nb), malloc(nb)};
            ref_seed(200 + c);
            ref_fill(g, n, 1.0);
            ref_fill(e[0], n, 0.1);
            memcpy(e[1], e[0], n * sizeof(float));
            ref_fill(acc[0], n, 1.0);
            memcpy(acc[1], acc[0], n * sizeof(float));
            for (int run = 0; run < 2; run++) {
                assert_int_equal(coll_cpu_force_isa(run ? isa : "scalar"), 0);
                assert_int_equal(coll_onebit_encode((coll_onebit_scale_t)rule, g, e[run], n,
                                                    bits[run], &s[run]), 0);
                assert_int_equal(coll_onebit_accumulate(bits[run], n, s[run], 0.5f, acc[run]), 0);
            }
            assert_true(ref_bits(s[0]) == ref_bits(s[1]));
            assert_memory_equal(bits[0], bits[1], nb);
            assert_memory_equal(e[0], e[1], n * sizeof(float));
            assert_memory_equal(acc[0], acc[1], n * sizeof(float));
            free(g), free(e[0]), free(e[1]), free(acc[0]), free(acc[1]);
            free(bits[0]), free(bits[1]);
        }
    }
    ref_isa_restore();
}

static void test_isa_avx2(void **state)
{
    check_isa_matches_scalar("avx2");
}

static void test_isa_avx512(void **state)
{
    check_isa_matches_scalar("avx512");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_random),
        cmocka_unit_test(test_scale_exact_no_padding),
        cmocka_unit_test(test_example),
        cmocka_unit_test(test_decode_accumulate),
        cmocka_unit_test(test_non_finite_rejected),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_isa_avx2),
        cmocka_unit_test(test_isa_avx512),
    };
    print_message("compression kernels: %s\n", coll_cpu_isa());
    return cmocka_run_group_tests_name("onebit", tests, NULL, NULL);
}
