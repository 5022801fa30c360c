/*
 * Unit tests of the 16-bit wire cast (kernels/cpu/cast.h) against a reference computed here: the
 * span's exponent from frexp of max|x|, rounding through ldexp/nearbyint in double
 * (compress_ref.h), and bfloat16 also against half.h, whose rounding the kernels must reuse.
 * Covers counts around the 8-lane vector width, subnormals and ties, values beyond float16's
 * 65504 (scaled, never infinity), non-finite input (rejected, nothing written), decode and
 * accumulate, and every instruction set against the scalar one.
 */
#include "compress_ref.h"

#include "kernels/cpu/cast.h"
#include "kernels/cpu/half.h"

static const coll_cast_format_t formats[] = {COLL_CAST_FP16, COLL_CAST_BF16};
static const size_t counts[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099};
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The exponent the kernel must choose: max|x| * 2^p in [2^14, 2^15), at most 126. */
static int32_t ref_exp(const float *x, size_t n)
{
    double m = 0;
    int e;

    for (size_t i = 0; i < n; i++) {
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    }
    if (m == 0) {
        return 0;
    }
    frexp(m, &e); /* m in [2^(e-1), 2^e) */
    int p = 14 - (e - 1);
    return p > 126 ? 126 : p;
}

static uint16_t ref_encode1(coll_cast_format_t fmt, float x, int32_t p)
{
    double y = ldexp(x, p); /* exact in double */
    return fmt == COLL_CAST_FP16 ? ref_to_f16(y) : ref_to_bf16(y);
}

static double ref_decode1(coll_cast_format_t fmt, uint16_t h, int32_t p)
{
    return ldexp(fmt == COLL_CAST_FP16 ? ref_f16_value(h) : ref_bf16_value(h), -p);
}

/* Encodes g (+ e) and checks exponent, every 16-bit value and the residual. */
static void check_encode(coll_cast_format_t fmt, const float *g, const float *e0, size_t n)
{
    float *x = ref_floats(n), *e = ref_floats(n);
    uint16_t *out = malloc((n + 1) * sizeof(uint16_t));
    int32_t p = 99;

    assert_non_null(out);
    for (size_t i = 0; i < n; i++) {
        x[i] = e0 ? (float)((double)g[i] + e0[i]) : g[i];
        e[i] = e0 ? e0[i] : 0;
    }
    assert_int_equal(coll_cast_encode(fmt, g, e0 ? e : NULL, n, out, &p), COLL_OK);
    assert_int_equal(p, ref_exp(x, n));
    for (size_t i = 0; i < n; i++) {
        if (out[i] != ref_encode1(fmt, x[i], p)) {
            fail_msg("fmt %d n %zu i %zu x %a p %d: got %#x want %#x", fmt, n, i, x[i], p, out[i],
                     ref_encode1(fmt, x[i], p));
        }
        float want_e = (float)((double)x[i] - (double)(float)ref_decode1(fmt, out[i], p));
        if (e0 && ref_bits(e[i]) != ref_bits(want_e)) {
            fail_msg("fmt %d n %zu i %zu: residual %a, want %a", fmt, n, i, e[i], want_e);
        }
    }
    free(x);
    free(e);
    free(out);
}

static void test_encode_random(void **state)
{
    ref_seed(1);
    for (size_t f = 0; f < LEN(formats); f++) {
        for (size_t c = 0; c < LEN(counts); c++) {
            size_t n = counts[c];
            float *g = ref_floats(n), *e = ref_floats(n);
            ref_fill(g, n, 1e-3);
            ref_fill(e, n, 1e-5);
            check_encode(formats[f], g, NULL, n);
            check_encode(formats[f], g, e, n);
            free(g);
            free(e);
        }
    }
}

/* Magnitudes from far below to far above float16's range, subnormal float32 included. */
static void test_encode_extremes(void **state)
{
    static const double scales[] = {1e-42, 1e-30, 1e-8, 1, 65504, 65520, 1e5, 1e20, 3e38};
    float g[37];

    ref_seed(2);
    for (size_t s = 0; s < LEN(scales); s++) {
        for (size_t i = 0; i < LEN(g); i++) {
            g[i] = (float)(ref_normal() * scales[s] * ldexp(1, -(int)(ref_rand() % 40)));
        }
        g[5] = (float)(scales[s] < 3.4e38 ? scales[s] : 3.4e38);
        check_encode(COLL_CAST_FP16, g, NULL, LEN(g));
        check_encode(COLL_CAST_BF16, g, NULL, LEN(g));
    }
}

/* Beyond 65504 float16 would overflow: the scale brings the span down, no infinity is sent. */
static void check_no_overflow(const float *g, size_t n, int32_t want_p, size_t nbig)
{
    uint16_t out[8];
    float back[8], e[8] = {0};
    int32_t p;

    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, g, e, n, out, &p), COLL_OK);
    assert_int_equal(p, want_p);
    assert_int_equal(coll_cast_decode(COLL_CAST_FP16, out, n, p, back), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        assert_int_not_equal(out[i] & 0x7c00, 0x7c00); /* neither infinity nor NaN */
        assert_true(isfinite(back[i]) && isfinite(e[i]));
        /* The first nbig within float16's relative precision; all exact with the residual. */
        assert_true(i >= nbig || fabs(back[i] - (double)g[i]) <= ldexp(fabs(g[i]), -11));
        assert_true((double)back[i] + e[i] == g[i]);
    }
}

static void test_fp16_overflow_scaled(void **state)
{
    const float a[] = {65504.0f, 65520.0f, 1e5f, -1e5f, -7.0f, 1e-3f};
    const float b[] = {-3e38f, 3.4e38f, 65504.0f, -7.0f, 1e-3f};

    check_no_overflow(a, LEN(a), 14 - 16, LEN(a)); /* 1e5 is in [2^16, 2^17) */
    /* Next to FLT_MAX the small values fall below float16's range: sent as 0, kept in e. */
    check_no_overflow(b, LEN(b), 14 - 127, 2);
}

/* Magnitudes whose 16-bit rounding would decode to 2^128 (infinity) are rejected, not sent. */
static void test_near_flt_max_rejected(void **state)
{
    /* The first rejected magnitude of each format, and the largest accepted one below it. */
    const float fp16_lim = 0x1.ffep127f, bf16_lim = 0x1.ffp127f;
    float g[3] = {1.0f, 0, -2.0f}, back[3];
    uint16_t out[3];
    int32_t p;

    const struct {
        coll_cast_format_t fmt;
        float x;
        coll_status_t want;
    } cases[] = {
        {COLL_CAST_FP16, 3.4028235e38f, COLL_ERR_INVALID},
        {COLL_CAST_FP16, fp16_lim, COLL_ERR_INVALID},
        {COLL_CAST_FP16, -fp16_lim, COLL_ERR_INVALID},
        {COLL_CAST_FP16, nextafterf(fp16_lim, 0), COLL_OK},
        {COLL_CAST_BF16, 3.4028235e38f, COLL_ERR_INVALID},
        {COLL_CAST_BF16, bf16_lim, COLL_ERR_INVALID},
        {COLL_CAST_BF16, nextafterf(bf16_lim, 0), COLL_OK},
        {COLL_CAST_BF16, -nextafterf(bf16_lim, 0), COLL_OK},
    };
    for (size_t c = 0; c < LEN(cases); c++) {
        g[1] = cases[c].x;
        memset(out, 0, sizeof(out));
        assert_int_equal(coll_cast_encode(cases[c].fmt, g, NULL, 3, out, &p), cases[c].want);
        if (cases[c].want == COLL_OK) {
            assert_int_equal(coll_cast_decode(cases[c].fmt, out, 3, p, back), COLL_OK);
            assert_true(isfinite(back[1]) && fabs(back[1] - (double)g[1]) < 0x1p119);
        } else {
            assert_true(out[0] == 0 && out[1] == 0 && out[2] == 0);
        }
    }
}

/* bfloat16 rounds to nearest even exactly as half.h; p = 0 because 16384 is in the span. */
static void test_bf16_nearest_even(void **state)
{
    const float g[] = {16384.0f, 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -(1.0f + 0x1p-8f),
                       1.0f + 0x1p-8f + 0x1p-20f, 0x1p-130f, 32640.0f};
    const uint16_t want[] = {0x4680, 0x3f80, 0x3f82, 0xbf80, 0x3f81, 0x0008, 0x46ff};
    uint16_t out[LEN(g)];
    int32_t p;

    assert_int_equal(coll_cast_encode(COLL_CAST_BF16, g, NULL, LEN(g), out, &p), COLL_OK);
    assert_int_equal(p, 0);
    for (size_t i = 0; i < LEN(g); i++) {
        assert_int_equal(out[i], coll__f32_to_bf16(g[i]));
        assert_int_equal(out[i], want[i]);
    }
    /* And on random spans, element by element against half.h at the chosen scale. */
    float r[1001];
    uint16_t h[LEN(r)];
    ref_seed(3);
    ref_fill(r, LEN(r), 1.0);
    assert_int_equal(coll_cast_encode(COLL_CAST_BF16, r, NULL, LEN(r), h, &p), COLL_OK);
    for (size_t i = 0; i < LEN(r); i++) {
        assert_int_equal(h[i], coll__f32_to_bf16(ldexpf(r[i], p)));
    }
}

/* Infinity, NaN, and a g + e that overflows: rejected before anything is written. */
static void test_non_finite_rejected(void **state)
{
    const float bad[] = {INFINITY, -INFINITY, NAN};
    float g[19], e[19], e_copy[19];
    uint16_t out[19];
    int32_t p = 77;

    for (size_t b = 0; b < LEN(bad) + 1; b++) {
        for (size_t f = 0; f < LEN(formats); f++) {
            ref_fill(g, 19, 1.0);
            ref_fill(e, 19, 1.0);
            if (b < LEN(bad)) {
                g[11] = bad[b];
            } else {
                g[18] = e[18] = 3e38f; /* finite, but the sum is not */
            }
            memcpy(e_copy, e, sizeof(e));
            memset(out, 0x5a, sizeof(out));
            assert_int_equal(coll_cast_encode(formats[f], g, e, 19, out, &p), COLL_ERR_INVALID);
            assert_memory_equal(e, e_copy, sizeof(e));
            for (size_t i = 0; i < 19; i++) {
                assert_int_equal(out[i], 0x5a5a);
            }
            assert_int_equal(p, 77);
        }
    }
}

static void test_decode_accumulate(void **state)
{
    uint16_t h[23];
    float out[23], acc[23], acc0[23];

    ref_seed(4);
    for (size_t f = 0; f < LEN(formats); f++) {
        for (size_t i = 0; i < LEN(h); i++) {
            h[i] = (uint16_t)(ref_rand() & 0x7bff); /* finite in both formats */
            acc0[i] = acc[i] = ref_grad(1.0);
        }
        const int32_t p = (int32_t)(ref_rand() % 40) - 20;
        assert_int_equal(coll_cast_decode(formats[f], h, LEN(h), p, out), COLL_OK);
        assert_int_equal(coll_cast_accumulate(formats[f], h, LEN(h), p, 0.25f, acc), COLL_OK);
        for (size_t i = 0; i < LEN(h); i++) {
            double v = ref_decode1(formats[f], h[i], p);
            assert_true(ref_bits(out[i]) == ref_bits((float)v));
            assert_true(ref_bits(acc[i]) == ref_bits((float)((double)acc0[i] + (float)(v / 4))));
        }
    }
}

static void test_arguments(void **state)
{
    float g[4] = {1, 2, 3, 4}, out32[4];
    uint16_t out[4];
    int32_t p = 5;

    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, NULL, NULL, 0, NULL, &p), COLL_OK);
    assert_int_equal(p, 0);
    assert_int_equal(coll_cast_encode((coll_cast_format_t)3, g, NULL, 4, out, &p),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, NULL, NULL, 4, out, &p), COLL_ERR_INVALID);
    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, g, NULL, 4, NULL, &p), COLL_ERR_INVALID);
    assert_int_equal(coll_cast_encode(COLL_CAST_FP16, g, NULL, 4, out, NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_cast_decode(COLL_CAST_BF16, out, 4, COLL_CAST_EXP_MAX + 1, out32),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cast_decode(COLL_CAST_BF16, out, 4, COLL_CAST_EXP_MIN - 1, out32),
                     COLL_ERR_INVALID);
    assert_int_equal(coll_cast_accumulate(COLL_CAST_BF16, NULL, 0, 0, 1, NULL), COLL_OK);
    assert_int_equal(coll_cast_accumulate(COLL_CAST_BF16, NULL, 4, 0, 1, out32),
                     COLL_ERR_INVALID);
}

/* Every format, count, with and without residual, on @p isa: the same bits as scalar. */
static void check_isa_matches_scalar(const char *isa)
{
    ref_isa_force_or_skip(isa);
    for (size_t f = 0; f < LEN(formats); f++) {
        for (size_t c = 0; c < LEN(counts); c++) {
            const size_t n = counts[c];
            float *g = ref_floats(n), *e[2] = {ref_floats(n), ref_floats(n)};
            float *acc[2] = {ref_floats(n), ref_floats(n)};
            uint16_t *out[2] = {malloc(2 * n), malloc(2 * n)};
            int32_t p[2];
            ref_seed(100 + c);
            ref_fill(g, n, 1.0);
            ref_fill(e[0], n, 1e-2);
            memcpy(e[1], e[0], n * sizeof(float));
            ref_fill(acc[0], n, 1.0);
            memcpy(acc[1], acc[0], n * sizeof(float));
            for (int run = 0; run < 2; run++) {
                assert_int_equal(coll_cpu_force_isa(run ? isa : "scalar"), 0);
                assert_int_equal(coll_cast_encode(formats[f], g, e[run], n, out[run], &p[run]), 0);
                assert_int_equal(coll_cast_accumulate(formats[f], out[run], n, p[run], 0.5f,
                                                      acc[run]), 0);
            }
            assert_int_equal(p[0], p[1]);
            assert_memory_equal(out[0], out[1], 2 * n);
            assert_memory_equal(e[0], e[1], n * sizeof(float));
            assert_memory_equal(acc[0], acc[1], n * sizeof(float));
            free(g), free(e[0]), free(e[1]), free(acc[0]), free(acc[1]);
            free(out[0]), free(out[1]);
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
        cmocka_unit_test(test_encode_extremes),
        cmocka_unit_test(test_fp16_overflow_scaled),
        cmocka_unit_test(test_near_flt_max_rejected),
        cmocka_unit_test(test_bf16_nearest_even),
        cmocka_unit_test(test_non_finite_rejected),
        cmocka_unit_test(test_decode_accumulate),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_isa_avx2),
        cmocka_unit_test(test_isa_avx512),
    };
    print_message("compression kernels: %s\n", coll_cpu_isa());
    return cmocka_run_group_tests_name("cast", tests, NULL, NULL);
}
