/*
 * Unit tests of LAMB (coll_optim_lamb_*; kernels/cpu/optim.h): hand-computed trust ratios,
 * clamps and clipping divisors; the bias correction of step 1; several steps of a model of
 * several layers (excluded, zero-norm, decay-only and trust-only layers) against the paper's
 * Algorithm 2 and the apex/DeepSpeed variants evaluated in double here, with global gradient
 * clipping; shards with reduced sums and every instruction set giving the same bits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optim_ref.h"

#define STEPS 5

#ifndef REL_TOL
#define REL_TOL 2e-6
#define ABS_TOL 2e-7
#define M_ABS_TOL 2e-8  /* first moments cancel: ulps of their terms (grad_averaging off) */
#define V_ABS_TOL 1e-13 /* g + wd w cancels in L2 mode: ulps of (1 - beta2) g^2 */
#endif

static coll_optim_lamb_params_t paper(void)
{
    coll_optim_lamb_params_t p;
    coll_optim_lamb_params_init(&p);
    return p;
}

static void test_lamb_trust_by_hand(void **state)
{
    coll_optim_lamb_params_t p = paper();
    coll_optim_layer_t l = {.w_sumsq = 100, .u_sumsq = 4}; /* ||w|| 10, ||r|| 2 */

    assert_true(coll_optim_lamb_trust(&p, &l) == 5.0);
    p.trust_max = 2;
    assert_true(coll_optim_lamb_trust(&p, &l) == 2.0);
    p.trust_max = INFINITY, p.trust_min = 8;
    assert_true(coll_optim_lamb_trust(&p, &l) == 8.0);
    p.trust_min = 0, p.phi_max = 4; /* phi(||w||) = 4 */
    assert_true(coll_optim_lamb_trust(&p, &l) == 2.0);
    p.phi_max = INFINITY, p.phi_min = 20;
    assert_true(coll_optim_lamb_trust(&p, &l) == 10.0);
    /* Zero norms and exclusion: 1, whatever the clamps say. */
    p = paper(), p.trust_min = 8;
    l.flags = COLL_OPTIM_NO_TRUST;
    assert_true(coll_optim_lamb_trust(&p, &l) == 1.0);
    l = (coll_optim_layer_t){.w_sumsq = 0, .u_sumsq = 4};
    assert_true(coll_optim_lamb_trust(&p, &l) == 1.0);
    l = (coll_optim_layer_t){.w_sumsq = 4, .u_sumsq = 0};
    assert_true(coll_optim_lamb_trust(&p, &l) == 1.0);
}

/* apex: g / (N / max) when N > max; DeepSpeed: q = (N + 1e-6) / max, applied when q > 1. */
static void test_lamb_clip_by_hand(void **state)
{
    coll_optim_lamb_params_t p = paper();
    coll_optim_step_t st = {.lr = 1, .step = 1, .grad_sumsq = 4}; /* N = 2 */

    assert_true(coll_optim_lamb_clip(&p, &st) == 1.0); /* off */
    p.max_grad_norm = 1.0;
    assert_true(coll_optim_lamb_clip(&p, &st) == 2.0);
    p.max_grad_norm = 4.0;
    assert_true(coll_optim_lamb_clip(&p, &st) == 1.0);
    p.max_grad_norm = 2.0; /* N == max: apex does not clip, DeepSpeed does */
    assert_true(coll_optim_lamb_clip(&p, &st) == 1.0);
    p.clip_eps = 1e-6;
    assert_float_equal(coll_optim_lamb_clip(&p, &st), (2.0 + 1e-6) / 2.0, 1e-16);
}

/*
 * Step 1 with the paper's bias correction: m_hat = g, v_hat = g^2, so r = g / (|g| + eps) +
 * wd * w. The returned sums are ||w||^2 as coll_optim_sumsq() gives it and ||r||^2.
 */
static void test_lamb_bias_correction_step1(void **state)
{
    const coll_optim_lamb_params_t p = paper();
    const float g[6] = {1e-3f, -2.0f, 5e-7f, 0.0f, 0.25f, -40.0f};
    float w[6] = {0.5f, 0.5f, -0.25f, 1.0f, 2.0f, -3.0f}, m[6] = {0}, v[6] = {0};
    double sums[2], r[6], want[6];
    coll_optim_step_t st = {.lr = 0.01, .step = 1};

    coll_optim_lamb_moments(&p, &st, 0, w, g, m, v, 6, sums);
    double want_w = coll_optim_sumsq(w, 6);
    assert_memory_equal(&sums[0], &want_w, sizeof(double));
    for (int i = 0; i < 6; i++) {
        r[i] = g[i] / (fabs(g[i]) + 1e-6) + 0.01 * w[i];
    }
    double rs = ref_sumsq_d(r, 6);
    assert_true(fabs(sums[1] - rs) <= 1e-6 * rs);
    coll_optim_layer_t l = {.w_sumsq = sums[0], .u_sumsq = sums[1]};
    const double trust = sqrt(want_w) / sqrt(rs);
    for (int i = 0; i < 6; i++) {
        want[i] = w[i] - 0.01 * trust * r[i];
    }
    coll_optim_lamb_apply(&p, &st, &l, w, m, v, 6);
    ref_check_close("w after step 1", w, want, 6, 1e-6, 1e-9);
}

/* ---- A model of several layers over several steps, against the double reference ---- */

typedef struct {
    size_t n;
    unsigned flags;
    int zero_w, zero_g;
} layer_spec_t;

static const layer_spec_t layers[] = {
    {1031, 0, 0, 0},
    {37, COLL_OPTIM_EXCLUDE, 0, 0},
    {64, 0, 1, 0}, /* zero weights: trust 1 on step 1 */
    {50, 0, 0, 1}, /* zero gradients: r is the decay alone */
    {100, COLL_OPTIM_NO_WEIGHT_DECAY, 0, 0},
    {100, COLL_OPTIM_NO_TRUST, 0, 0},
};
#define NLAYERS (sizeof(layers) / sizeof(layers[0]))

typedef struct {
    float *w, *g, *m, *v;
    double *wr, *gr, *mr, *vr, *r;
} layer_t;

/* r of the reference for one element: the paper's line, with each option as documented. */
static double ref_r(const coll_optim_lamb_params_t *p, double wd, unsigned t, double w, double m,
                    double v)
{
    const int corr = p->bias == COLL_OPTIM_LAMB_BIAS_PAPER;
    double mh = corr ? m / (1 - pow(p->beta1, t)) : m, vh = corr ? v / (1 - pow(p->beta2, t)) : v;
    double den = p->eps_inside_sqrt ? sqrt(vh + p->eps) : sqrt(vh) + p->eps;
    return mh / den + (p->l2 ? 0 : wd * w);
}

/* One step of the reference on one layer; q is the global clipping divisor of the step. */
static void ref_lamb(const coll_optim_lamb_params_t *p, double lr, unsigned t, double q,
                     unsigned flags, layer_t *L, size_t n)
{
    const double wd = (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0 : p->weight_decay;
    const double b3 = p->grad_averaging ? 1 - p->beta1 : 1;

    for (size_t i = 0; i < n; i++) {
        double gi = L->gr[i] / q + (p->l2 ? wd * L->wr[i] : 0);
        L->mr[i] = p->beta1 * L->mr[i] + b3 * gi;
        L->vr[i] = p->beta2 * L->vr[i] + (1 - p->beta2) * gi * gi;
        L->r[i] = ref_r(p, wd, t, L->wr[i], L->mr[i], L->vr[i]);
    }
    double trust = 1, wn = sqrt(ref_sumsq_d(L->wr, n)), rn = sqrt(ref_sumsq_d(L->r, n));
    if (!(flags & COLL_OPTIM_NO_TRUST) && wn > 0 && rn > 0) {
        double phi = wn < p->phi_min ? p->phi_min : wn > p->phi_max ? p->phi_max : wn;
        trust = phi / rn;
        trust = trust < p->trust_min ? p->trust_min : trust > p->trust_max ? p->trust_max : trust;
    }
    double scale = 1;
    if (p->bias == COLL_OPTIM_LAMB_BIAS_STEPSIZE) {
        scale = sqrt(1 - pow(p->beta2, t)) / (1 - pow(p->beta1, t));
    }
    for (size_t i = 0; i < n; i++) {
        L->wr[i] -= lr * trust * scale * L->r[i];
    }
}

static void layer_init(layer_t *L, const layer_spec_t *s)
{
    L->w = ref_alloc(s->n), L->g = ref_alloc(s->n), L->m = ref_alloc(s->n);
    L->v = ref_alloc(s->n), L->wr = ref_alloc_d(s->n), L->gr = ref_alloc_d(s->n);
    L->mr = ref_alloc_d(s->n), L->vr = ref_alloc_d(s->n), L->r = ref_alloc_d(s->n);
    if (!s->zero_w) {
        ref_fill(L->w, s->n, -0.5, 0.5);
    }
    ref_widen(L->wr, L->w, s->n);
}

static void layer_free(layer_t *L)
{
    free(L->w), free(L->g), free(L->m), free(L->v), free(L->wr), free(L->gr), free(L->mr);
    free(L->vr), free(L->r);
}

/* New gradients for every layer; @return the global sum of squares (the clipping input). */
static double model_gradients(layer_t *L)
{
    double sumsq = 0;
    for (size_t k = 0; k < NLAYERS; k++) {
        if (!layers[k].zero_g) {
            ref_fill(L[k].g, layers[k].n, -0.05, 0.05);
        }
        ref_widen(L[k].gr, L[k].g, layers[k].n);
        sumsq += coll_optim_sumsq(L[k].g, layers[k].n);
    }
    return sumsq;
}

/* The reference's clipping divisor, from the formula of the header. */
static double ref_clip(const coll_optim_lamb_params_t *p, double grad_sumsq)
{
    double q = (sqrt(grad_sumsq) + p->clip_eps) / p->max_grad_norm;
    return p->max_grad_norm > 0 && q > 1 ? q : 1;
}

static int model_config_now; /* for failure messages */

static void model_step(const coll_optim_lamb_params_t *p, unsigned t, layer_t *L)
{
    const coll_optim_step_t st = {.lr = 0.02 / (double)t, .step = t,
                                  .grad_sumsq = model_gradients(L)};
    const double q = ref_clip(p, st.grad_sumsq);

    for (size_t k = 0; k < NLAYERS; k++) {
        const layer_spec_t *s = &layers[k];
        double sums[2];
        coll_optim_lamb_moments(p, &st, s->flags, L[k].w, L[k].g, L[k].m, L[k].v, s->n, sums);
        coll_optim_layer_t l = {.flags = s->flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
        coll_optim_lamb_apply(p, &st, &l, L[k].w, L[k].m, L[k].v, s->n);
        ref_lamb(p, st.lr, t, q, s->flags, &L[k], s->n);
        char what[80];
        snprintf(what, sizeof(what), "config %d step %u layer %zu: m", model_config_now, t, k);
        ref_check_close(what, L[k].m, L[k].mr, s->n, REL_TOL, M_ABS_TOL);
        what[strlen(what) - 1] = 'v';
        ref_check_close(what, L[k].v, L[k].vr, s->n, REL_TOL, V_ABS_TOL);
        snprintf(what, sizeof(what), "config %d step %u layer %zu: w", model_config_now, t, k);
        ref_check_close(what, L[k].w, L[k].wr, s->n, REL_TOL, ABS_TOL);
    }
}

static void run_model(const coll_optim_lamb_params_t *p)
{
    layer_t L[NLAYERS];

    assert_int_equal(coll_optim_lamb_params_check(p), COLL_OK);
    for (size_t k = 0; k < NLAYERS; k++) {
        layer_init(&L[k], &layers[k]);
    }
    for (unsigned t = 1; t <= STEPS; t++) {
        model_step(p, t, L);
    }
    for (size_t k = 0; k < NLAYERS; k++) {
        layer_free(&L[k]);
    }
}

/* The paper, then each option. The model's global gradient norm is about 1.1. */
static coll_optim_lamb_params_t model_config(int which)
{
    coll_optim_lamb_params_t p = paper();
    switch (which) {
    case 1: p.bias = COLL_OPTIM_LAMB_BIAS_NONE; break;
    case 2: p.eps_inside_sqrt = 1, p.eps = 1e-4; break;
    case 3: p.trust_max = 0.1; break; /* binds: trust is about 0.3 */
    case 4: p.trust_min = 0.5; break;
    case 5: p.phi_max = 1.0; break;
    case 6: p.max_grad_norm = 0.5; break;  /* apex clipping, active */
    case 7: p.max_grad_norm = 100.0; break; /* inactive */
    case 8: p.grad_averaging = 0; break;
    case 9: p.l2 = 1; break;
    case 10: /* DeepSpeed FusedLamb as configured in its tests */
        p.bias = COLL_OPTIM_LAMB_BIAS_STEPSIZE, p.eps = 1e-8, p.eps_inside_sqrt = 1;
        p.trust_min = 0.01, p.trust_max = 10, p.max_grad_norm = 0.5, p.clip_eps = 1e-6;
        break;
    default: break;
    }
    return p;
}
#define NMODEL_CONFIGS 11

static void test_lamb_model_matches_formula(void **state)
{
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            print_message("instruction set %s not on this CPU: not tested\n", ref_optim_isas[k]);
            continue;
        }
        for (int c = 0; c < NMODEL_CONFIGS; c++) {
            coll_optim_lamb_params_t p = model_config(c);
            model_config_now = c;
            run_model(&p);
        }
    }
}

/* The clamp and the clipping options change the result: the model tests cannot pass vacuously. */
static void test_lamb_options_matter(void **state)
{
    const size_t n = 1031;
    float *w = ref_alloc(n), *g = ref_alloc(n), *m = ref_alloc(n), *v = ref_alloc(n);
    double base[2], sums[2];
    const coll_optim_step_t st = {.lr = 0.01, .step = 1, .grad_sumsq = 1.21};

    ref_fill(w, n, -0.5, 0.5);
    ref_fill(g, n, -0.05, 0.05);
    coll_optim_lamb_params_t p = paper();
    coll_optim_lamb_moments(&p, &st, 0, w, g, m, v, n, base);
    coll_optim_layer_t l = {.w_sumsq = base[0], .u_sumsq = base[1]};
    const double trust = coll_optim_lamb_trust(&p, &l);
    assert_true(trust > 0.1 && trust < 0.5); /* so configs 3 and 4 bind */
    p.max_grad_norm = 0.5; /* global norm 1.1: clipped by 2.2, r shrinks but stays about sign */
    memset(m, 0, n * sizeof(float)), memset(v, 0, n * sizeof(float));
    coll_optim_lamb_moments(&p, &st, 0, w, g, m, v, n, sums);
    assert_true(sums[1] != base[1]);
    free(w), free(g), free(m), free(v);
}

/* ---- Shards and instruction sets ---- */

#define SN 1031
static const size_t cuts[] = {0, 16, 333, 334, SN};
#define NCUTS (sizeof(cuts) / sizeof(cuts[0]))

typedef struct {
    float *w, *m, *v;
} lstate_t;

static lstate_t lstate_new(const float *w0)
{
    lstate_t s = {ref_alloc(SN), ref_alloc(SN), ref_alloc(SN)};
    memcpy(s.w, w0, SN * sizeof(float));
    return s;
}

/* Phase 1 on every shard, the sums added as an allreduce would, phase 2 on every shard. */
static void step_sharded(const coll_optim_lamb_params_t *p, const coll_optim_step_t *st,
                         unsigned flags, lstate_t *s, const float *g, double sums[2])
{
    sums[0] = sums[1] = 0;
    for (size_t k = 0; k + 1 < NCUTS; k++) {
        size_t o = cuts[k], n = cuts[k + 1] - o;
        double part[2];
        coll_optim_lamb_moments(p, st, flags, s->w + o, g + o, s->m + o, s->v + o, n, part);
        sums[0] += part[0], sums[1] += part[1];
    }
    coll_optim_layer_t l = {.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
    for (size_t k = 0; k + 1 < NCUTS; k++) {
        size_t o = cuts[k];
        coll_optim_lamb_apply(p, st, &l, s->w + o, s->m + o, s->v + o, cuts[k + 1] - o);
    }
}

/* The unsplit layer, phase 2 with the shards' reduced sums: the same bits as the shards. */
static void run_shards(const coll_optim_lamb_params_t *p, unsigned flags)
{
    float *w0 = ref_alloc(SN), *g = ref_alloc(SN);
    ref_fill(w0, SN, -0.5, 0.5);
    lstate_t sh = lstate_new(w0), wh = lstate_new(w0);

    for (unsigned t = 1; t <= 4; t++) {
        ref_fill(g, SN, -0.05, 0.05);
        const coll_optim_step_t st = {.lr = 0.01, .step = t, .grad_sumsq = 2.0};
        double sums[2], whole[2];
        step_sharded(p, &st, flags, &sh, g, sums);
        coll_optim_lamb_moments(p, &st, flags, wh.w, g, wh.m, wh.v, SN, whole);
        assert_true(fabs(sums[0] - whole[0]) <= 1e-14 * whole[0]);
        assert_true(fabs(sums[1] - whole[1]) <= 1e-14 * whole[1]);
        coll_optim_layer_t l = {.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
        coll_optim_lamb_apply(p, &st, &l, wh.w, wh.m, wh.v, SN);
        ref_check_same("m of shards vs whole", sh.m, wh.m, SN);
        ref_check_same("v of shards vs whole", sh.v, wh.v, SN);
        ref_check_same("w of shards vs whole", sh.w, wh.w, SN);
    }
    free(w0), free(g), free(sh.w), free(sh.m), free(sh.v), free(wh.w), free(wh.m), free(wh.v);
}

static void test_lamb_shards_same_bits(void **state)
{
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            continue;
        }
        for (int c = 0; c < NMODEL_CONFIGS; c++) {
            coll_optim_lamb_params_t p = model_config(c);
            run_shards(&p, 0);
            run_shards(&p, c == 0 ? COLL_OPTIM_EXCLUDE : COLL_OPTIM_NO_TRUST);
        }
    }
}

/* Phase 1 and 2 on an instruction set: the scalar bits, sums included. */
static void run_isa_case(const coll_optim_lamb_params_t *p, const float *w0, const float *g,
                         lstate_t *s, double sums[2])
{
    const coll_optim_step_t st = {.lr = 0.01, .step = 3, .grad_sumsq = 2.0};

    memcpy(s->w, w0, SN * sizeof(float));
    for (size_t i = 0; i < SN; i++) {
        s->m[i] = g[i] * 0.5f, s->v[i] = g[i] * g[i]; /* a state from earlier steps */
    }
    coll_optim_lamb_moments(p, &st, 0, s->w, g, s->m, s->v, SN, sums);
    coll_optim_layer_t l = {.w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lamb_apply(p, &st, &l, s->w, s->m, s->v, SN);
}

static void test_lamb_isas_same_bits(void **state)
{
    float *w0 = ref_alloc(SN), *g = ref_alloc(SN);
    ref_fill(w0, SN, -0.5, 0.5);
    ref_fill(g, SN, -0.05, 0.05);
    lstate_t gen = lstate_new(w0), other = lstate_new(w0);

    for (int c = 0; c < NMODEL_CONFIGS; c++) {
        coll_optim_lamb_params_t p = model_config(c);
        double want[2], got[2];
        assert_int_equal(coll_cpu_force_isa("scalar"), 0);
        run_isa_case(&p, w0, g, &gen, want);
        for (int k = 0; k < REF_OPTIM_NISAS; k++) {
            if (!ref_use_isa(ref_optim_isas[k])) {
                continue;
            }
            run_isa_case(&p, w0, g, &other, got);
            assert_memory_equal(got, want, sizeof(got));
            ref_check_same(ref_optim_isas[k], other.w, gen.w, SN);
            ref_check_same(ref_optim_isas[k], other.m, gen.m, SN);
            ref_check_same(ref_optim_isas[k], other.v, gen.v, SN);
        }
    }
    free(w0), free(g), free(gen.w), free(gen.m), free(gen.v);
    free(other.w), free(other.m), free(other.v);
}

static void test_lamb_params_check(void **state)
{
    coll_optim_lamb_params_t p = paper();
    assert_int_equal(coll_optim_lamb_params_check(&p), COLL_OK);
    assert_true(p.beta1 == 0.9 && p.beta2 == 0.999 && p.eps == 1e-6 && p.weight_decay == 0.01);

    for (int which = 0; which < 9; which++) {
        p = paper();
        switch (which) {
        case 0: p.beta1 = 1.0; break;
        case 1: p.beta2 = -0.5; break;
        case 2: p.eps = -1; break;
        case 3: p.bias = (coll_optim_lamb_bias_t)7; break;
        case 4: p.trust_min = 2, p.trust_max = 1; break;
        case 5: p.trust_max = NAN; break;
        case 6: p.phi_min = 3, p.phi_max = 2; break;
        case 7: p.max_grad_norm = -1; break;
        default: p.clip_eps = INFINITY; break;
        }
        assert_int_equal(coll_optim_lamb_params_check(&p), COLL_ERR_INVALID);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lamb_trust_by_hand),
        cmocka_unit_test(test_lamb_clip_by_hand),
        cmocka_unit_test(test_lamb_bias_correction_step1),
        cmocka_unit_test(test_lamb_model_matches_formula),
        cmocka_unit_test(test_lamb_options_matter),
        cmocka_unit_test(test_lamb_shards_same_bits),
        cmocka_unit_test(test_lamb_isas_same_bits),
        cmocka_unit_test(test_lamb_params_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
