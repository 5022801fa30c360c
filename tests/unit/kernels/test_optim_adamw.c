/*
 * Unit tests of AdamW (coll_optim_adamw_update, kernels/cpu/optim.h): several steps against
 * Loshchilov & Hutter's decoupled AdamW with Adam's bias correction, evaluated in double here;
 * the bias correction of step 1; values PyTorch itself produced (embedded below); every
 * instruction set and every split of a layer into shards giving the same bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optim_ref.h"

#define N 1031
#define STEPS 6

#ifndef REL_TOL
#define REL_TOL 1e-6 /* weights and second moments, of order 1 and positive */
#define ABS_TOL 1e-7
#define M_ABS_TOL 2e-8 /* first moments cancel: a few ulps of gradients of order 0.1 */
#endif

static double step_lr(unsigned t)
{
    return 1e-2 * (1.0 - 0.1 * (double)t); /* changes every step */
}

/* AdamW, Algorithm 2 of Loshchilov & Hutter with schedule multiplier 1 and the decay scaled by
 * lr as PyTorch does: w <- w - lr (wd w + m_hat / (sqrt(v_hat) + eps)), the decay from the
 * weights before the step. */
static void ref_adamw(const coll_optim_adamw_params_t *p, double lr, unsigned t, double *w,
                      const double *g, double *m, double *v, size_t n)
{
    const double bc1 = 1 - pow(p->beta1, t), bc2 = 1 - pow(p->beta2, t);

    for (size_t i = 0; i < n; i++) {
        m[i] = p->beta1 * m[i] + (1 - p->beta1) * g[i];
        v[i] = p->beta2 * v[i] + (1 - p->beta2) * g[i] * g[i];
        double m_hat = m[i] / bc1, v_hat = v[i] / bc2;
        w[i] -= lr * (p->weight_decay * w[i] + m_hat / (sqrt(v_hat) + p->eps));
    }
}

static const coll_optim_adamw_params_t configs[] = {
    {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2},
    {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0},
    {.beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3, .weight_decay = 0.1},
    {.beta1 = 0, .beta2 = 0.5, .eps = 1e-6, .weight_decay = 0.5},
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

static void run_reference(const coll_optim_adamw_params_t *c)
{
    float *w = ref_alloc(N), *g = ref_alloc(N), *m = ref_alloc(N), *v = ref_alloc(N);
    double *wr = ref_alloc_d(N), *gr = ref_alloc_d(N), *mr = ref_alloc_d(N);
    double *vr = ref_alloc_d(N);

    assert_int_equal(coll_optim_adamw_params_check(c), COLL_OK);
    ref_fill(w, N, -1, 1);
    ref_widen(wr, w, N);
    for (unsigned t = 1; t <= STEPS; t++) {
        coll_optim_step_t st = {.lr = step_lr(t), .step = t};
        ref_fill(g, N, -0.1, 0.1);
        ref_widen(gr, g, N);
        coll_optim_adamw_update(c, &st, w, g, m, v, N);
        ref_adamw(c, st.lr, t, wr, gr, mr, vr, N);
        ref_check_close("w", w, wr, N, REL_TOL, ABS_TOL);
        ref_check_close("m", m, mr, N, REL_TOL, M_ABS_TOL);
        ref_check_close("v", v, vr, N, REL_TOL, 0);
    }
    free(w), free(g), free(m), free(v), free(wr), free(gr), free(mr), free(vr);
}

static void test_adamw_matches_formula(void **state)
{
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            print_message("instruction set %s not on this CPU: not tested\n", ref_optim_isas[k]);
            continue;
        }
        for (size_t c = 0; c < NCONFIGS; c++) {
            run_reference(&configs[c]);
        }
    }
}

/*
 * Step 1 with bias correction: m_hat = g and v_hat = g^2 exactly, so every weight moves by
 * lr * g / (|g| + eps), i.e. by about lr whatever the gradient's scale; without the correction
 * it would move by (1 - beta1) / sqrt(1 - beta2) = 3.16 times that.
 */
static void test_adamw_bias_correction_step1(void **state)
{
    const coll_optim_adamw_params_t p = {
        .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.1};
    const float g[8] = {1e-3f, -2.0f, 5e-8f, 0.0f, -1e-8f, 123.0f, 0.25f, -0.5f};
    float w[8] = {0.5f, 0.5f, -0.25f, 1.0f, 2.0f, -3.0f, 0.0f, 1.0f};
    float m[8] = {0}, v[8] = {0};
    double want[8];

    for (size_t i = 0; i < 8; i++) {
        want[i] = w[i] * (1 - 0.01 * 0.1) - 0.01 * g[i] / (fabs(g[i]) + 1e-8);
    }
    coll_optim_step_t st = {.lr = 0.01, .step = 1};
    coll_optim_adamw_update(&p, &st, w, g, m, v, 8);
    ref_check_close("w after step 1", w, want, 8, 1e-6, 1e-9);
}

/*
 * Produced once by tests/unit/kernels/gen_torch_expect.py with Debian's python3-torch 1.13 on
 * the CPU (torch.optim.AdamW, amsgrad=False): W0 and G below, lr 0.1, 0.05, 0.02 for steps 1-3.
 * PyTorch's CPU kernels contract into fused multiply-adds, ours do not: a few ulps apart.
 */
static const float W0[6] = {0.5f, -1.25f, 2.0f, 0.0f, -0.75f, 3.5f};
static const float G[3][6] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.05f, 0.0f},
                              {-0.3f, 0.1f, 0.2f, 0.25f, -0.05f, 1.5f},
                              {0.2f, 0.2f, -0.1f, 0.0f, 0.5f, -0.6f}};
static const double LR[3] = {0.1, 0.05, 0.02};

/* adamw_default: betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2 */
static const float adamw_default_w[3][6] = {
    {0.399500012f, -1.14874995f, 1.898f, 0.100000001f, -0.849249959f, 3.49650002f},
    {0.42400974f, -1.13485873f, 1.84853339f, 0.108629741f, -0.846193731f, 3.4575448f},
    {0.423549205f, -1.1400857f, 1.8371259f, 0.111291803f, -0.858561218f, 3.45091963f}};
static const float adamw_default_m[6] = {0.00109999918f, 0.0128000006f, 0.0322999991f,
                                         -0.00990000181f, 0.0495500006f, 0.075000003f};
static const float adamw_default_v[6] = {0.00013989002f, 8.99100414e-05f, 0.00013978011f,
                                         0.000222117684f, 0.000254992512f, 0.00260774978f};
/* adamw_big_eps: betas (0.8, 0.99), eps 1e-3, weight_decay 0.1 */
static const float adamw_big_eps_w[3][6] = {
    {0.395990103f, -1.13799751f, 1.88033223f, 0.099750638f, -0.840539217f, 3.46500015f},
    {0.421163917f, -1.12181711f, 1.82313228f, 0.105070546f, -0.83088994f, 3.40852666f},
    {0.41941613f, -1.12672532f, 1.80994105f, 0.106545798f, -0.842946589f, 3.39644623f}};
static const float adamw_big_eps_m[6] = {0.00479999743f, 0.0304000005f, 0.0504000075f,
                                         -0.0112000024f, 0.0984000042f, 0.120000005f};
static const float adamw_big_eps_v[6] = {0.00138901011f, 0.000891040079f, 0.00137809012f,
                                         0.00218691002f, 0.00254925247f, 0.0258749984f};

#ifndef TORCH_REL
#define TORCH_REL 5e-7
#define TORCH_ABS 3e-8 /* moments cancel: ulps of their terms, not of the result */
#endif

static void run_torch_case(const coll_optim_adamw_params_t *p, const float want_w[3][6],
                           const float *want_m, const float *want_v)
{
    float w[6], m[6] = {0}, v[6] = {0};
    double want[6];

    memcpy(w, W0, sizeof(w));
    for (unsigned t = 1; t <= 3; t++) {
        coll_optim_step_t st = {.lr = LR[t - 1], .step = t};
        coll_optim_adamw_update(p, &st, w, G[t - 1], m, v, 6);
        ref_widen(want, want_w[t - 1], 6);
        ref_check_close("w vs torch", w, want, 6, TORCH_REL, TORCH_ABS);
    }
    ref_widen(want, want_m, 6);
    ref_check_close("exp_avg vs torch", m, want, 6, TORCH_REL, TORCH_ABS);
    ref_widen(want, want_v, 6);
    ref_check_close("exp_avg_sq vs torch", v, want, 6, TORCH_REL, TORCH_ABS);
}

static void test_adamw_matches_torch(void **state)
{
    coll_optim_adamw_params_t def;
    const coll_optim_adamw_params_t big_eps = {
        .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-3, .weight_decay = 0.1};

    coll_optim_adamw_params_init(&def); /* PyTorch's defaults */
    run_torch_case(&def, adamw_default_w, adamw_default_m, adamw_default_v);
    run_torch_case(&big_eps, adamw_big_eps_w, adamw_big_eps_m, adamw_big_eps_v);
}

static const size_t cuts[] = {0, 3, 64, 65, 700, N};
#define NCUTS (sizeof(cuts) / sizeof(cuts[0]))

static void run_split(const coll_optim_adamw_params_t *p, float *w, const float *g, float *m,
                      float *v, unsigned t)
{
    coll_optim_step_t st = {.lr = step_lr(t), .step = t};
    for (size_t s = 0; s + 1 < NCUTS; s++) {
        size_t o = cuts[s];
        coll_optim_adamw_update(p, &st, w + o, g + o, m + o, v + o, cuts[s + 1] - o);
    }
}

static void test_adamw_isas_and_shards_same_bits(void **state)
{
    const coll_optim_adamw_params_t *p = &configs[0];
    float *w0 = ref_alloc(N), *g = ref_alloc(N), *w = ref_alloc(N), *m = ref_alloc(N);
    float *v = ref_alloc(N), *ww = ref_alloc(N), *mw = ref_alloc(N), *vw = ref_alloc(N);

    ref_fill(w0, N, -1, 1);
    ref_fill(g, N, -0.1, 0.1);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            continue;
        }
        memcpy(w, w0, N * sizeof(float));
        memset(m, 0, N * sizeof(float)), memset(v, 0, N * sizeof(float));
        for (unsigned t = 1; t <= 3; t++) {
            run_split(p, w, g, m, v, t);
        }
        assert_int_equal(coll_cpu_force_isa("scalar"), 0);
        memcpy(ww, w0, N * sizeof(float));
        memset(mw, 0, N * sizeof(float)), memset(vw, 0, N * sizeof(float));
        for (unsigned t = 1; t <= 3; t++) {
            coll_optim_step_t st = {.lr = step_lr(t), .step = t};
            coll_optim_adamw_update(p, &st, ww, g, mw, vw, N);
        }
        ref_check_same(ref_optim_isas[k], w, ww, N);
        ref_check_same(ref_optim_isas[k], m, mw, N);
        ref_check_same(ref_optim_isas[k], v, vw, N);
    }
    free(w0), free(g), free(w), free(m), free(v), free(ww), free(mw), free(vw);
}

static void test_adamw_params_check(void **state)
{
    const coll_optim_adamw_params_t bad[] = {
        {.beta1 = 1.0, .beta2 = 0.999},
        {.beta1 = -0.1, .beta2 = 0.999},
        {.beta1 = 0.9, .beta2 = 1.0},
        {.beta1 = 0.9, .beta2 = NAN},
        {.beta1 = 0.9, .beta2 = 0.999, .eps = -1e-8},
        {.beta1 = 0.9, .beta2 = 0.999, .weight_decay = INFINITY},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(coll_optim_adamw_params_check(&bad[i]), COLL_ERR_INVALID);
    }
    coll_optim_adamw_params_t p;
    coll_optim_adamw_params_init(&p);
    assert_int_equal(coll_optim_adamw_params_check(&p), COLL_OK);
    assert_true(p.beta1 == 0.9 && p.beta2 == 0.999 && p.eps == 1e-8 && p.weight_decay == 1e-2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_formula),
        cmocka_unit_test(test_adamw_bias_correction_step1),
        cmocka_unit_test(test_adamw_matches_torch),
        cmocka_unit_test(test_adamw_isas_and_shards_same_bits),
        cmocka_unit_test(test_adamw_params_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
