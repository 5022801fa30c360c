/*
 * Unit tests of SGD with momentum (coll_optim_sgd_update, kernels/cpu/optim.h): several steps
 * against torch.optim.SGD's formulas evaluated in double here, against values PyTorch itself
 * produced (embedded below), the first momentum step, Nesterov, dampening, weight decay, every
 * instruction set and every split of a layer into shards giving the same bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optim_ref.h"

#define N 1031 /* a prime: vector bodies and tails on every instruction set */
#define STEPS 5

/* Float rounding of a few operations per step over STEPS steps, on values of order 1. */
#ifndef REL_TOL
#define REL_TOL 1e-6
#define ABS_TOL 1e-7
#endif

static double step_lr(unsigned t)
{
    return 0.1 / (double)t; /* a decaying lr, so lr changes between steps */
}

/* torch.optim.SGD._single_tensor_sgd in double, one step (t >= 1). */
static void ref_sgd(const coll_optim_sgd_params_t *p, double lr, unsigned t, double *w,
                    const double *g, double *buf, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double d = g[i];
        if (p->weight_decay != 0) {
            d += p->weight_decay * w[i];
        }
        if (p->momentum != 0) {
            buf[i] = t == 1 ? d : p->momentum * buf[i] + (1 - p->dampening) * d;
            d = p->nesterov ? d + p->momentum * buf[i] : buf[i];
        }
        w[i] -= lr * d;
    }
}

static const coll_optim_sgd_params_t configs[] = {
    {.momentum = 0, .dampening = 0, .weight_decay = 0, .nesterov = 0},
    {.momentum = 0, .dampening = 0, .weight_decay = 0.05, .nesterov = 0},
    {.momentum = 0.9, .dampening = 0, .weight_decay = 0, .nesterov = 0},
    {.momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-2, .nesterov = 0},
    {.momentum = 0.9, .dampening = 0, .weight_decay = 5e-4, .nesterov = 1},
    {.momentum = 0.5, .dampening = 0, .weight_decay = 0, .nesterov = 1},
};
#define NCONFIGS (sizeof(configs) / sizeof(configs[0]))

/* STEPS steps of config @p c, every step checked against the double reference. */
static void run_reference(const coll_optim_sgd_params_t *c)
{
    float *w = ref_alloc(N), *g = ref_alloc(N), *buf = ref_alloc(N);
    double *wr = ref_alloc_d(N), *gr = ref_alloc_d(N), *bufr = ref_alloc_d(N);

    assert_int_equal(coll_optim_sgd_params_check(c), COLL_OK);
    ref_fill(w, N, -1, 1);
    ref_widen(wr, w, N);
    for (unsigned t = 1; t <= STEPS; t++) {
        coll_optim_step_t st = {.lr = step_lr(t), .step = t};
        ref_fill(g, N, -0.1, 0.1);
        ref_widen(gr, g, N);
        coll_optim_sgd_update(c, &st, w, g, buf, N);
        ref_sgd(c, st.lr, t, wr, gr, bufr, N);
        ref_check_close("w", w, wr, N, REL_TOL, ABS_TOL);
        if (c->momentum != 0) {
            ref_check_close("buf", buf, bufr, N, REL_TOL, ABS_TOL);
        }
    }
    free(w), free(g), free(buf), free(wr), free(gr), free(bufr);
}

static void test_sgd_matches_formula(void **state)
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

/* Step 1 stores d itself (no dampening, buf not read); step 2 applies dampening. */
static void test_sgd_first_step(void **state)
{
    const coll_optim_sgd_params_t p = {.momentum = 0.9, .dampening = 0.5, .weight_decay = 0.01};
    float w[7], g[7], buf[7], d[7];

    ref_fill(w, 7, -1, 1);
    ref_fill(g, 7, -1, 1);
    for (size_t i = 0; i < 7; i++) {
        d[i] = g[i] + 0.01f * w[i];
        buf[i] = NAN; /* garbage a read would propagate */
    }
    coll_optim_step_t st = {.lr = 0.1, .step = 1};
    coll_optim_sgd_update(&p, &st, w, g, buf, 7);
    ref_check_same("buf after step 1", buf, d, 7);

    float b2[7], w_before[7];
    memcpy(w_before, w, sizeof(w));
    for (size_t i = 0; i < 7; i++) {
        float d2 = g[i] + 0.01f * w[i];
        b2[i] = buf[i] * 0.9f + 0.5f * d2;
    }
    st.step = 2;
    coll_optim_sgd_update(&p, &st, w, g, buf, 7);
    ref_check_same("buf after step 2", buf, b2, 7);
    for (size_t i = 0; i < 7; i++) {
        assert_true(w[i] == w_before[i] - 0.1f * b2[i]);
    }
}

/* Without momentum the buffer is not touched, so it may be NULL. */
static void test_sgd_no_momentum_needs_no_buffer(void **state)
{
    const coll_optim_sgd_params_t p = {.weight_decay = 0.1};
    float w[3] = {1, -2, 0}, g[3] = {0.5f, 0.5f, -1};
    coll_optim_step_t st = {.lr = 0.5, .step = 3};

    coll_optim_sgd_update(&p, &st, w, g, NULL, 3);
    assert_true(w[0] == 1.0f - 0.5f * (0.5f + 0.1f * 1.0f));
    assert_true(w[1] == -2.0f - 0.5f * (0.5f + 0.1f * -2.0f));
    assert_true(w[2] == 0.0f - 0.5f * -1.0f);
}

/*
 * Produced once by tests/unit/kernels/gen_torch_expect.py with Debian's python3-torch 1.13 on
 * the CPU (torch.optim.SGD, foreach=False): W0 and G below, lr 0.1, 0.05, 0.02 for steps 1-3.
 * PyTorch's CPU kernels contract a * b + c into fused multiply-adds, ours do not, so the values
 * agree to a few ulps rather than bit for bit.
 */
static const float W0[6] = {0.5f, -1.25f, 2.0f, 0.0f, -0.75f, 3.5f};
static const float G[3][6] = {{0.1f, -0.2f, 0.3f, -0.4f, 0.05f, 0.0f},
                              {-0.3f, 0.1f, 0.2f, 0.25f, -0.05f, 1.5f},
                              {0.2f, 0.2f, -0.1f, 0.0f, 0.5f, -0.6f}};
static const double LR[3] = {0.1, 0.05, 0.02};

/* sgd_nesterov: momentum 0.9, dampening 0, weight_decay 1e-2, nesterov */
static const float sgd_nesterov_w[3][6] = {
    {0.480049998f, -1.20962501f, 1.93920004f, 0.0759999976f, -0.758074999f, 3.49335003f},
    {0.50384146f, -1.20936966f, 1.90539777f, 0.0683778003f, -0.754326105f, 3.34611392f},
    {0.499301344f, -1.21483588f, 1.90025401f, 0.0701215044f, -0.772726297f, 3.34226608f}};
static const float sgd_nesterov_buf[6] = {0.024408862f,  0.0948946923f, 0.375706792f,
                                          -0.0976322144f, 0.475059062f, 0.843251169f};
/* sgd_dampening: momentum 0.8, dampening 0.3, weight_decay 0 */
static const float sgd_dampening_w[3][6] = {
    {0.49000001f, -1.23000002f, 1.97000003f, 0.0400000028f, -0.754999995f, 3.5f},
    {0.496500015f, -1.22549999f, 1.95099998f, 0.0472500026f, -0.755249977f, 3.44749999f},
    {0.495780021f, -1.22686005f, 1.94631994f, 0.0495700017f, -0.762329996f, 3.43910003f}};
static const float sgd_dampening_buf[6] = {0.0360000059f, 0.0679999888f, 0.233999997f,
                                           -0.116000019f, 0.354000002f,  0.419999957f};
/* sgd_plain: momentum 0, weight_decay 0.1 */
static const float sgd_plain_w[3][6] = {
    {0.484999985f, -1.21749997f, 1.95000005f, 0.0400000028f, -0.747500002f, 3.46499991f},
    {0.497574985f, -1.21641243f, 1.93025005f, 0.0273000021f, -0.741262496f, 3.37267494f},
    {0.492579848f, -1.21797955f, 1.92838955f, 0.0272454023f, -0.749779999f, 3.37792969f}};

/* Agreement with PyTorch: a few float ulps. */
#ifndef TORCH_REL
#define TORCH_REL 5e-7
#define TORCH_ABS 1e-9
#endif

static void run_torch_case(const coll_optim_sgd_params_t *p, const float want_w[3][6],
                           const float *want_buf)
{
    float w[6], buf[6];
    double want[6];

    memcpy(w, W0, sizeof(w));
    for (unsigned t = 1; t <= 3; t++) {
        coll_optim_step_t st = {.lr = LR[t - 1], .step = t};
        coll_optim_sgd_update(p, &st, w, G[t - 1], buf, 6);
        ref_widen(want, want_w[t - 1], 6);
        ref_check_close("w vs torch", w, want, 6, TORCH_REL, TORCH_ABS);
    }
    if (want_buf != NULL) {
        ref_widen(want, want_buf, 6);
        ref_check_close("momentum_buffer vs torch", buf, want, 6, TORCH_REL, TORCH_ABS);
    }
}

static void test_sgd_matches_torch(void **state)
{
    const coll_optim_sgd_params_t nesterov = {.momentum = 0.9, .weight_decay = 1e-2,
                                              .nesterov = 1};
    const coll_optim_sgd_params_t damp = {.momentum = 0.8, .dampening = 0.3};
    const coll_optim_sgd_params_t plain = {.weight_decay = 0.1};

    run_torch_case(&nesterov, sgd_nesterov_w, sgd_nesterov_buf);
    run_torch_case(&damp, sgd_dampening_w, sgd_dampening_buf);
    run_torch_case(&plain, sgd_plain_w, NULL);
}

/* Shard boundaries of the split runs: odd sizes and offsets, a one-element shard. */
static const size_t cuts[] = {0, 1, 18, 517, N};
#define NCUTS (sizeof(cuts) / sizeof(cuts[0]))

/* Every instruction set, and the layer cut into shards, give the bits of the scalar whole. */
static void test_sgd_isas_and_shards_same_bits(void **state)
{
    const coll_optim_sgd_params_t *p = &configs[4]; /* Nesterov with weight decay */
    float *w0 = ref_alloc(N), *g = ref_alloc(N), *want_w = ref_alloc(N), *want_b = ref_alloc(N);
    float *w = ref_alloc(N), *b = ref_alloc(N);

    ref_fill(w0, N, -1, 1);
    ref_fill(g, N, -0.1, 0.1);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            continue;
        }
        memcpy(w, w0, N * sizeof(float));
        for (unsigned t = 1; t <= 3; t++) {
            coll_optim_step_t st = {.lr = step_lr(t), .step = t};
            for (size_t s = 0; s + 1 < NCUTS; s++) {
                coll_optim_sgd_update(p, &st, w + cuts[s], g + cuts[s], b + cuts[s],
                                      cuts[s + 1] - cuts[s]);
            }
        }
        assert_int_equal(coll_cpu_force_isa("scalar"), 0);
        memcpy(want_w, w0, N * sizeof(float));
        for (unsigned t = 1; t <= 3; t++) {
            coll_optim_step_t st = {.lr = step_lr(t), .step = t};
            coll_optim_sgd_update(p, &st, want_w, g, want_b, N);
        }
        ref_check_same(ref_optim_isas[k], w, want_w, N);
        ref_check_same(ref_optim_isas[k], b, want_b, N);
    }
    free(w0), free(g), free(want_w), free(want_b), free(w), free(b);
}

static void test_sgd_params_check(void **state)
{
    const coll_optim_sgd_params_t bad[] = {
        {.momentum = -0.1},
        {.weight_decay = -1},
        {.momentum = NAN},
        {.dampening = INFINITY},
        {.nesterov = 1},                                   /* no momentum */
        {.momentum = 0.9, .dampening = 0.1, .nesterov = 1} /* dampening */
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(coll_optim_sgd_params_check(&bad[i]), COLL_ERR_INVALID);
    }
    const coll_optim_sgd_params_t zero = {0};
    assert_int_equal(coll_optim_sgd_params_check(&zero), COLL_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_formula),
        cmocka_unit_test(test_sgd_first_step),
        cmocka_unit_test(test_sgd_no_momentum_needs_no_buffer),
        cmocka_unit_test(test_sgd_matches_torch),
        cmocka_unit_test(test_sgd_isas_and_shards_same_bits),
        cmocka_unit_test(test_sgd_params_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
