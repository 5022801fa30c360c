/*
 * Unit tests of TopK (kernels/cpu/topk.h) against a qsort-based reference computed here: all
 * elements ordered by |v| (the bits of |v|, so NaN above infinity), ties by lower index, the
 * first k taken, their indices ascending. Every method (AUTO, RADIX, SAMPLED) with full, tiny
 * and no scratch, which drives each fast path and each fallback (checked through
 * coll_topk_info_t); counts 0, 1, 7, 8, 9 up to 1,000,003; ratios 0.001 to 1; ties, all-equal
 * spans, zeros of both signs, NaN and infinity; the residual; sparse accumulate (and its checks
 * of untrusted indices) and merge; every instruction set against the scalar one.
 */
#include "compress_ref.h"

#include "kernels/cpu/topk.h"

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Reference ---- */

typedef struct {
    uint32_t key;
    uint32_t idx;
} ref_elem_t;

static int by_key_desc(const void *a, const void *b)
{
    const ref_elem_t *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? 1 : -1;
    }
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int by_index(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The indices of the k largest |v[i]| (ties: lower index), ascending, into @p want (k). */
static void ref_topk(const float *v, size_t n, size_t k, uint32_t *want)
{
    ref_elem_t *el = malloc((n ? n : 1) * sizeof(*el));
    assert_non_null(el);
    for (size_t i = 0; i < n; i++) {
        el[i].key = ref_bits(v[i]) & 0x7fffffffu;
        el[i].idx = (uint32_t)i;
    }
    qsort(el, n, sizeof(*el), by_key_desc);
    for (size_t j = 0; j < k; j++) {
        want[j] = el[j].idx;
    }
    qsort(want, k, sizeof(*want), by_index);
    free(el);
}

/* ---- One case ---- */

typedef struct {
    coll_topk_select_t select;
    int scratch; /* 0: NULL, 1: 64 bytes, 2: coll_topk_scratch_bytes() */
    int residual;
} variant_t;

static const variant_t variants[] = {
    {COLL_TOPK_SELECT_AUTO, 2, 1},    {COLL_TOPK_SELECT_RADIX, 2, 1},
    {COLL_TOPK_SELECT_SAMPLED, 2, 1}, {COLL_TOPK_SELECT_RADIX, 0, 1},
    {COLL_TOPK_SELECT_SAMPLED, 1, 1}, {COLL_TOPK_SELECT_AUTO, 2, 0},
    {COLL_TOPK_SELECT_SAMPLED, 2, 0},
};

/* Runs one compression of g (+ e) and checks indices, values and the residual against the
 * reference; returns what the kernel did. */
static coll_topk_info_t check_case(const float *g, const float *e0, size_t n, size_t k,
                                   variant_t var)
{
    float *v = ref_floats(n), *e = ref_floats(n), *val = ref_floats(k);
    uint32_t *idx = malloc((k + 1) * 4), *want = malloc((k + 1) * 4);
    size_t sb = var.scratch == 2 ? coll_topk_scratch_bytes(n, k) : var.scratch ? 64 : 0;
    void *scratch = sb ? malloc(sb) : NULL;
    coll_topk_info_t info = {.passes = 99};

    assert_true(idx && want && (scratch || !sb));
    for (size_t i = 0; i < n; i++) {
        v[i] = var.residual ? (float)((double)g[i] + e0[i]) : g[i];
        e[i] = e0[i];
    }
    ref_topk(v, n, k, want);
    coll_topk_args_t a = {.grad = g, .residual = var.residual ? e : NULL, .count = n, .k = k,
                          .select = var.select, .scratch = scratch, .scratch_bytes = sb,
                          .indices = idx, .values = val, .info = &info};
    assert_int_equal(coll_topk_compress(&a), COLL_OK);
    for (size_t j = 0; j < k; j++) {
        if (idx[j] != want[j] || ref_bits(val[j]) != ref_bits(v[want[j]])) {
            fail_msg("n %zu k %zu select %d scratch %d: pair %zu is (%u, %a), want (%u, %a)", n,
                     k, var.select, var.scratch, j, idx[j], val[j], want[j], v[want[j]]);
        }
        v[want[j]] = 0.0f; /* what the residual must hold there */
    }
    for (size_t i = 0; var.residual && i < n; i++) {
        if (ref_bits(e[i]) != ref_bits(v[i])) {
            fail_msg("n %zu k %zu select %d: residual %zu is %a, want %a", n, k, var.select, i,
                     e[i], v[i]);
        }
    }
    assert_true((n == 0 || info.passes >= 1) && info.passes <= 5);
    free(v), free(e), free(val), free(idx), free(want), free(scratch);
    return info;
}

/* Every variant for the span g (+ e) at each ratio. */
static void check_ratios(const float *g, const float *e, size_t n, const double *ratios,
                         size_t nratios)
{
    for (size_t r = 0; r < nratios; r++) {
        size_t k = coll_topk_k(n, ratios[r]);
        for (size_t v = 0; v < LEN(variants); v++) {
            check_case(g, e, n, k, variants[v]);
        }
    }
}

static const double ratios[] = {0.001, 0.003, 0.01, 0.1, 0.5, 0.999, 1};

static void test_k(void **state)
{
    assert_int_equal(coll_topk_k(0, 0.5), 0);
    assert_int_equal(coll_topk_k(1, 0.001), 1);
    assert_int_equal(coll_topk_k(100, 0.07), 7); /* 0.07 * 100 is 7.000000000000001 in double */
    assert_int_equal(coll_topk_k(1000, 0.001), 1);
    assert_int_equal(coll_topk_k(1001, 0.001), 2);
    assert_int_equal(coll_topk_k(1000003, 0.01), 10001);
    assert_int_equal(coll_topk_k(10, 0), 1);
    assert_int_equal(coll_topk_k(10, NAN), 1);
    assert_int_equal(coll_topk_k(10, 1), 10);
    assert_int_equal(coll_topk_k(10, 2.5), 10);
    assert_int_equal(coll_topk_k(3, 0.5), 2);
}

static void test_small_counts(void **state)
{
    static const size_t counts[] = {0, 1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 100, 1000};
    ref_seed(1);
    for (size_t c = 0; c < LEN(counts); c++) {
        size_t n = counts[c];
        float *g = ref_floats(n), *e = ref_floats(n);
        ref_fill(g, n, 1.0);
        ref_fill(e, n, 0.1);
        check_ratios(g, e, n, ratios, LEN(ratios));
        free(g);
        free(e);
    }
}

static void test_large_counts(void **state)
{
    static const size_t counts[] = {4096, 4097, 100003, 1000003};
    static const double large_ratios[] = {0.001, 0.01, 0.1, 1};
    ref_seed(2);
    for (size_t c = 0; c < LEN(counts); c++) {
        size_t n = counts[c];
        float *g = ref_floats(n), *e = ref_floats(n);
        ref_fill(g, n, 1e-3);
        ref_fill(e, n, 1e-4);
        check_ratios(g, e, n, large_ratios, LEN(large_ratios));
        free(g);
        free(e);
    }
}

/* Few distinct magnitudes (so the k-th is tied many times), zeros of both signs. */
static void test_ties(void **state)
{
    static const float mags[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, 3.0f};
    static const size_t counts[] = {9, 100, 5000, 100003};
    ref_seed(3);
    for (size_t c = 0; c < LEN(counts); c++) {
        size_t n = counts[c];
        float *g = ref_floats(n), *e = ref_floats(n);
        for (size_t i = 0; i < n; i++) {
            g[i] = mags[ref_rand() % LEN(mags)];
            e[i] = 0.0f;
        }
        check_ratios(g, e, n, ratios, LEN(ratios));
        free(g);
        free(e);
    }
}

/* All magnitudes equal: no bin splits them, so RADIX cannot gather and takes its 4 passes; the
 * lowest indices win. */
static void test_all_equal(void **state)
{
    const size_t n = 50000, k = coll_topk_k(n, 0.01);
    float *g = ref_floats(n), *e = ref_floats(n);

    for (size_t i = 0; i < n; i++) {
        g[i] = i % 3 ? 0.25f : -0.25f;
        e[i] = 0;
    }
    coll_topk_info_t info = check_case(g, e, n, k, variants[1]);
    assert_int_equal(info.method, COLL_TOPK_SELECT_RADIX);
    assert_int_equal(info.passes, 4);
    info = check_case(g, e, n, k, variants[2]); /* SAMPLED gathers too many, falls back */
    assert_int_equal(info.method, COLL_TOPK_SELECT_RADIX);
    free(g);
    free(e);
}

/* Which path ran: SAMPLED's one pass, RADIX's two, AUTO's choice. */
static void test_paths(void **state)
{
    const size_t n = 1000003, k = coll_topk_k(n, 0.01);
    float *g = ref_floats(n), *e = ref_floats(n);

    ref_seed(4);
    ref_fill(g, n, 1.0);
    ref_fill(e, n, 0.1);
    coll_topk_info_t info = check_case(g, e, n, k, variants[2]);
    assert_int_equal(info.method, COLL_TOPK_SELECT_SAMPLED);
    assert_int_equal(info.passes, 1);
    assert_true(info.candidates >= k && info.candidates <= 4 * k);
    info = check_case(g, e, n, k, variants[1]);
    assert_int_equal(info.method, COLL_TOPK_SELECT_RADIX);
    assert_int_equal(info.passes, 2);
    info = check_case(g, e, n, k, variants[0]);
    assert_int_equal(info.method, COLL_TOPK_SELECT_SAMPLED);
    info = check_case(g, e, n, k, variants[3]); /* no scratch: four passes over the data */
    assert_int_equal(info.passes, 4);
    info = check_case(g, e, n, 100, variants[0]); /* k below COLL_TOPK_SAMPLED_MIN_K */
    assert_int_equal(info.method, COLL_TOPK_SELECT_RADIX);
    free(g);
    free(e);
}

/* NaN and infinity are ordered by their bits (NaN above infinity); nothing crashes or loops. */
static void test_non_finite(void **state)
{
    const size_t n = 3001;
    float *g = ref_floats(n), *e = ref_floats(n);

    ref_seed(5);
    ref_fill(g, n, 1.0);
    memset(e, 0, n * sizeof(float));
    for (size_t i = 0; i < n; i += 97) {
        g[i] = i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : -INFINITY;
    }
    check_ratios(g, e, n, ratios, LEN(ratios));
    free(g);
    free(e);
}

static void test_arguments(void **state)
{
    float g[4] = {1, 2, 3, 4}, val[4];
    uint32_t idx[4];
    coll_topk_args_t a = {.grad = g, .count = 4, .k = 5, .indices = idx, .values = val};

    assert_int_equal(coll_topk_compress(NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_topk_compress(&a), COLL_ERR_INVALID); /* k > count */
    a.k = 2;
    a.select = (coll_topk_select_t)3;
    assert_int_equal(coll_topk_compress(&a), COLL_ERR_INVALID);
    a.select = COLL_TOPK_SELECT_AUTO;
    a.values = NULL;
    assert_int_equal(coll_topk_compress(&a), COLL_ERR_INVALID);
    a.values = val;
    a.count = (size_t)COLL_TOPK_MAX_COUNT + 1;
    assert_int_equal(coll_topk_compress(&a), COLL_ERR_INVALID);
    coll_topk_args_t empty = {0};
    assert_int_equal(coll_topk_compress(&empty), COLL_OK);
    /* k = 0: nothing sent, the residual keeps g + e. */
    float e[4] = {0.5f, 0, 0, 0};
    coll_topk_args_t none = {.grad = g, .residual = e, .count = 4};
    assert_int_equal(coll_topk_compress(&none), COLL_OK);
    assert_true(e[0] == 1.5f && e[3] == 4.0f);
    assert_int_equal(coll_topk_scratch_bytes(0, 0), 0);
    assert_true(coll_topk_scratch_bytes(1000, 10) <= 8 * 1000);
}

/* ---- Receiving ---- */

static void test_accumulate(void **state)
{
    const uint32_t idx[] = {0, 3, 4, 9};
    const float val[] = {1.5f, -2.0f, 0.25f, 8.0f};
    float acc[10], want[10];

    for (size_t i = 0; i < 10; i++) {
        acc[i] = want[i] = (float)i;
    }
    assert_int_equal(coll_topk_accumulate(idx, val, 4, 0.5f, acc, 10), COLL_OK);
    for (size_t j = 0; j < 4; j++) {
        want[idx[j]] = (float)((double)want[idx[j]] + 0.5 * val[j]);
    }
    assert_memory_equal(acc, want, sizeof(acc));
    /* Untrusted sets: out of range, repeated, descending; nothing may be written. */
    const uint32_t bad[][4] = {{0, 3, 4, 10}, {0, 3, 3, 9}, {0, 4, 3, 9}, {UINT32_MAX, 0, 0, 0}};
    for (size_t b = 0; b < LEN(bad); b++) {
        assert_int_equal(coll_topk_accumulate(bad[b], val, 4, 1, acc, 10), COLL_ERR_INVALID);
        assert_memory_equal(acc, want, sizeof(acc));
    }
    assert_int_equal(coll_topk_accumulate(NULL, NULL, 0, 1, NULL, 0), COLL_OK);
    assert_int_equal(coll_topk_accumulate(idx, NULL, 4, 1, acc, 10), COLL_ERR_INVALID);
}

/* A merge equals the dense sum of both sets. */
static void test_merge(void **state)
{
    enum { N = 500 };
    uint32_t ai[N], bi[N], oi[2 * N];
    float av[N], bv[N], ov[2 * N], dense[N] = {0}, from_merge[N] = {0};
    size_t ak = 0, bk = 0;

    ref_seed(6);
    for (uint32_t i = 0; i < N; i++) {
        if (ref_rand() % 3 == 0) {
            ai[ak] = i;
            av[ak++] = ref_grad(1.0);
        }
        if (ref_rand() % 4 == 0) {
            bi[bk] = i;
            bv[bk++] = ref_grad(1.0);
        }
    }
    size_t n = coll_topk_merge(ai, av, ak, bi, bv, bk, oi, ov);
    assert_true(n <= ak + bk);
    for (size_t j = 1; j < n; j++) {
        assert_true(oi[j] > oi[j - 1]);
    }
    assert_int_equal(coll_topk_accumulate(ai, av, ak, 1, dense, N), COLL_OK);
    assert_int_equal(coll_topk_accumulate(bi, bv, bk, 1, dense, N), COLL_OK);
    assert_int_equal(coll_topk_accumulate(oi, ov, n, 1, from_merge, N), COLL_OK);
    assert_memory_equal(dense, from_merge, sizeof(dense));
    assert_int_equal(coll_topk_merge(ai, av, ak, NULL, NULL, 0, oi, ov), ak);
}

/* ---- Instruction sets ---- */

/* Output of one compression, for comparison between instruction sets. */
static void run_once(const float *g, float *e, size_t n, size_t k, coll_topk_select_t sel,
                     uint32_t *idx, float *val)
{
    size_t sb = coll_topk_scratch_bytes(n, k);
    void *scratch = malloc(sb ? sb : 1);
    coll_topk_args_t a = {.grad = g, .residual = e, .count = n, .k = k, .select = sel,
                          .scratch = scratch, .scratch_bytes = sb, .indices = idx, .values = val};
    assert_int_equal(coll_topk_compress(&a), COLL_OK);
    free(scratch);
}

static void check_isa_matches_scalar(const char *isa)
{
    static const size_t counts[] = {1, 9, 65, 4097, 100003};
    ref_isa_force_or_skip(isa);
    for (size_t c = 0; c < LEN(counts); c++) {
        const size_t n = counts[c], k = coll_topk_k(n, 0.01);
        float *g = ref_floats(n), *e[2] = {ref_floats(n), ref_floats(n)};
        float *val[2] = {ref_floats(k), ref_floats(k)};
        uint32_t *idx[2] = {malloc(4 * k), malloc(4 * k)};
        ref_seed(300 + c);
        ref_fill(g, n, 1.0);
        for (int sel = 0; sel < 3; sel++) {
            ref_fill(e[0], n, 0.1);
            memcpy(e[1], e[0], n * sizeof(float));
            for (int run = 0; run < 2; run++) {
                assert_int_equal(coll_cpu_force_isa(run ? isa : "scalar"), 0);
                run_once(g, e[run], n, k, (coll_topk_select_t)sel, idx[run], val[run]);
            }
            assert_memory_equal(idx[0], idx[1], 4 * k);
            assert_memory_equal(val[0], val[1], 4 * k);
            assert_memory_equal(e[0], e[1], 4 * n);
        }
        free(g), free(e[0]), free(e[1]), free(val[0]), free(val[1]), free(idx[0]), free(idx[1]);
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
        cmocka_unit_test(test_k),
        cmocka_unit_test(test_small_counts),
        cmocka_unit_test(test_large_counts),
        cmocka_unit_test(test_ties),
        cmocka_unit_test(test_all_equal),
        cmocka_unit_test(test_paths),
        cmocka_unit_test(test_non_finite),
        cmocka_unit_test(test_arguments),
        cmocka_unit_test(test_accumulate),
        cmocka_unit_test(test_merge),
        cmocka_unit_test(test_isa_avx2),
        cmocka_unit_test(test_isa_avx512),
    };
    print_message("compression kernels: %s\n", coll_cpu_isa());
    return cmocka_run_group_tests_name("topk", tests, NULL, NULL);
}
