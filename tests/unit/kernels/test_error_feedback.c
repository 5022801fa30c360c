/*
 * The error-feedback identity for every compressor (kernels/cpu/compress.h): over 1,000 steps of
 * random gradients, the sum of what was sent (decoded here, in double, from the wire values) plus
 * the final residual equals the sum of the gradients, element by element, within the float32
 * rounding of the steps: with x = fl(g + e) and e' = fl(x - sent), each step adds at most
 * u * (|x| + |e'|) (u = 2^-24) of rounding, which the test sums in double next to the sums
 * themselves. Forgetting the residual or sending something other than what the residual assumes
 * breaks the identity by about a gradient, many orders of magnitude above that bound.
 */
#include "compress_ref.h"

#include "kernels/cpu/cast.h"
#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/topk.h"

#define STEPS 1000
#define COUNT 1003 /* not a multiple of 8 or 16 */
#define ROWS 40
#define COLS 37 /* ROWS * COLS = 1480 */
#define MAXN (ROWS * COLS)
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* One compressor under test: encode g with residual e, write the decoded values it sent. */
typedef struct {
    const char *name;
    void (*step)(const void *cfg, void *st, const float *g, float *e, size_t n, double *sent);
    const void *cfg;
    size_t n;
} ef_case_t;

/* Runs STEPS steps and checks the identity for every element. */
static void check_identity(const ef_case_t *c, void *st)
{
    static float g[MAXN], e[MAXN];
    static double sent[MAXN], sum_g[MAXN], sum_sent[MAXN], bound[MAXN];
    const size_t n = c->n;

    memset(e, 0, sizeof(e));
    memset(sum_g, 0, sizeof(sum_g));
    memset(sum_sent, 0, sizeof(sum_sent));
    memset(bound, 0, sizeof(bound));
    for (int t = 0; t < STEPS; t++) {
        double scale = pow(10, -3 + 3 * ref_unit());
        ref_fill(g, n, scale);
        for (size_t i = 0; i < n; i++) {
            bound[i] += 0x1p-24 * fabs((float)((double)g[i] + e[i])); /* u |x| */
        }
        c->step(c->cfg, st, g, e, n, sent);
        for (size_t i = 0; i < n; i++) {
            sum_g[i] += g[i];
            sum_sent[i] += sent[i];
            bound[i] += 0x1p-24 * fabs(e[i]) + 0x1p-45 * (fabs(g[i]) + fabs(sent[i]));
        }
    }
    for (size_t i = 0; i < n; i++) {
        double gap = fabs(sum_sent[i] + e[i] - sum_g[i]);
        if (!(gap <= bound[i])) {
            fail_msg("%s: element %zu: sent %.17g + residual %.9g - inputs %.17g = %g > %g",
                     c->name, i, sum_sent[i], e[i], sum_g[i], gap, bound[i]);
        }
    }
    print_message("%s: identity holds over %d steps of %zu elements\n", c->name, STEPS, n);
}

/* ---- Compressors ---- */

static void cast_step(const void *cfg, void *st, const float *g, float *e, size_t n,
                      double *sent)
{
    const coll_cast_format_t fmt = *(const coll_cast_format_t *)cfg;
    uint16_t h[MAXN];
    int32_t p;

    assert_int_equal(coll_cast_encode(fmt, g, e, n, h, &p), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        sent[i] = ldexp(fmt == COLL_CAST_FP16 ? ref_f16_value(h[i]) : ref_bf16_value(h[i]), -p);
    }
}

typedef struct {
    double ratio;
    coll_topk_select_t select;
} topk_cfg_t;

static void topk_step(const void *cfg, void *st, const float *g, float *e, size_t n,
                      double *sent)
{
    const topk_cfg_t *c = cfg;
    static uint32_t idx[MAXN], scratch[2 * MAXN];
    static float val[MAXN];
    coll_topk_args_t a = {.grad = g, .residual = e, .count = n, .k = coll_topk_k(n, c->ratio),
                          .select = c->select, .scratch = scratch,
                          .scratch_bytes = sizeof(scratch), .indices = idx, .values = val};

    assert_int_equal(coll_topk_compress(&a), COLL_OK);
    memset(sent, 0, n * sizeof(double));
    for (size_t j = 0; j < a.k; j++) {
        sent[idx[j]] = val[j];
    }
}

static void onebit_step(const void *cfg, void *st, const float *g, float *e, size_t n,
                        double *sent)
{
    uint8_t bits[MAXN / 8 + 1];
    float s;

    assert_int_equal(coll_onebit_encode(*(const coll_onebit_scale_t *)cfg, g, e, n, bits, &s),
                     COLL_OK);
    for (size_t i = 0; i < n; i++) {
        sent[i] = ((bits[i / 8] >> (i % 8)) & 1) ? -(double)s : (double)s;
    }
}

/* PowerSGD on one node: Q is warm-started across steps (the state). */
typedef struct {
    float q[COLS * 8];
    int started;
} lowrank_state_t;

static void lowrank_step(const void *cfg, void *st, const float *g, float *e, size_t n,
                         double *sent)
{
    const unsigned r = *(const unsigned *)cfg;
    lowrank_state_t *s = st;
    static float p[ROWS * 8], approx[MAXN];

    if (!s->started) {
        coll_lowrank_init_q(s->q, COLS, r, 2024);
        s->started = 1;
    }
    assert_int_equal(coll_lowrank_orthonormalize(s->q, COLS, r, 1e-8f), COLL_OK);
    assert_int_equal(coll_lowrank_ef_mul_q(g, e, ROWS, COLS, s->q, r, p), COLL_OK);
    assert_int_equal(coll_lowrank_orthonormalize(p, ROWS, r, 1e-8f), COLL_OK);
    assert_int_equal(coll_lowrank_mul_mt(e, ROWS, COLS, p, r, s->q), COLL_OK);
    assert_int_equal(coll_lowrank_residual(p, s->q, ROWS, COLS, r, e, approx), COLL_OK);
    for (size_t i = 0; i < n; i++) {
        sent[i] = approx[i];
    }
}

/* ---- Tests ---- */

static void test_cast(void **state)
{
    static const coll_cast_format_t fmts[] = {COLL_CAST_FP16, COLL_CAST_BF16};
    ref_seed(1);
    for (size_t f = 0; f < LEN(fmts); f++) {
        ef_case_t c = {fmts[f] == COLL_CAST_FP16 ? "fp16" : "bf16", cast_step, &fmts[f], COUNT};
        check_identity(&c, NULL);
    }
}

static void test_topk(void **state)
{
    static const topk_cfg_t cfgs[] = {{0.01, COLL_TOPK_SELECT_AUTO},
                                      {0.01, COLL_TOPK_SELECT_RADIX},
                                      {0.1, COLL_TOPK_SELECT_SAMPLED},
                                      {0.001, COLL_TOPK_SELECT_AUTO}};
    ref_seed(2);
    for (size_t i = 0; i < LEN(cfgs); i++) {
        char name[64];
        snprintf(name, sizeof(name), "topk %g select %d", cfgs[i].ratio, cfgs[i].select);
        ef_case_t c = {name, topk_step, &cfgs[i], COUNT};
        check_identity(&c, NULL);
    }
}

static void test_onebit(void **state)
{
    static const coll_onebit_scale_t rules[] = {COLL_ONEBIT_SCALE_L2, COLL_ONEBIT_SCALE_L1};
    ref_seed(3);
    for (size_t i = 0; i < LEN(rules); i++) {
        ef_case_t c = {i ? "onebit mean|x|" : "onebit l2/sqrt(n)", onebit_step, &rules[i], COUNT};
        check_identity(&c, NULL);
    }
}

static void test_lowrank(void **state)
{
    static const unsigned ranks[] = {1, 2, 4};
    ref_seed(4);
    for (size_t i = 0; i < LEN(ranks); i++) {
        char name[64];
        lowrank_state_t st = {.started = 0};
        snprintf(name, sizeof(name), "powersgd rank %u", ranks[i]);
        ef_case_t c = {name, lowrank_step, &ranks[i], ROWS * COLS};
        check_identity(&c, &st);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cast),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_onebit),
        cmocka_unit_test(test_lowrank),
    };
    return cmocka_run_group_tests_name("error_feedback", tests, NULL, NULL);
}
