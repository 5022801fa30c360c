/*
 * Unit tests of LARS (coll_optim_lars_trust, coll_optim_lars_update; kernels/cpu/optim.h):
 * hand-computed trust ratios, zero-norm and excluded layers, several steps of a model of
 * several layers against the MLPerf reference's formulas evaluated in double here, Nesterov,
 * and a layer updated as shards with reduced sums giving the bits of the unsplit layer.
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
#endif

static void test_lars_trust_by_hand(void **state)
{
    coll_optim_lars_params_t p = {.momentum = 0.9, .weight_decay = 1e-2, .eta = 1e-3};
    coll_optim_layer_t l = {.flags = 0, .w_sumsq = 25, .u_sumsq = 1}; /* ||w|| 5, ||g|| 1 */

    assert_float_equal(coll_optim_lars_trust(&p, &l), 0.005 / 1.05, 1e-18);
    p.eps = 0.05;
    assert_float_equal(coll_optim_lars_trust(&p, &l), 0.005 / 1.1, 1e-18);
    l.flags = COLL_OPTIM_NO_WEIGHT_DECAY; /* no decay: none in the denominator either */
    assert_float_equal(coll_optim_lars_trust(&p, &l), 0.005 / 1.05, 1e-18);
    l.flags = COLL_OPTIM_NO_TRUST;
    assert_true(coll_optim_lars_trust(&p, &l) == 1.0);
    l.flags = COLL_OPTIM_EXCLUDE;
    assert_true(coll_optim_lars_trust(&p, &l) == 1.0);
    l = (coll_optim_layer_t){.w_sumsq = 0, .u_sumsq = 4};
    assert_true(coll_optim_lars_trust(&p, &l) == 1.0);
    l = (coll_optim_layer_t){.w_sumsq = 4, .u_sumsq = 0};
    assert_true(coll_optim_lars_trust(&p, &l) == 1.0);
}

/* One step on the hand case, checked bit for bit against the reference's float operations:
 * mom = mom * mu - grad * lr_s and var + mom, with v = -mom. */
static void test_lars_one_step_float_order(void **state)
{
    const coll_optim_lars_params_t p = {.momentum = 0.9, .weight_decay = 1e-2, .eta = 1e-3};
    float w[2] = {3, 4}, g[2] = {0.6f, 0.8f}, v[2] = {0.25f, -0.5f}, w0[2], v0[2];
    coll_optim_layer_t l = {.w_sumsq = 25, .u_sumsq = 1};
    coll_optim_step_t st = {.lr = 2.0, .step = 7};

    memcpy(w0, w, sizeof(w)), memcpy(v0, v, sizeof(v));
    const float lr_s = (float)(2.0 * (0.005 / 1.05));
    coll_optim_lars_update(&p, &st, &l, w, g, v, 2);
    for (int i = 0; i < 2; i++) {
        float d = g[i] + 0.01f * w0[i];
        float mom = -v0[i] * 0.9f - d * lr_s;
        assert_true(v[i] == -mom);
        assert_true(w[i] == w0[i] + mom);
    }
}

/* ---- A model of several layers over several steps, against the double reference ---- */

typedef struct {
    size_t n;
    unsigned flags;
    int zero_w; /* weights start at 0: trust 1 on step 1 */
    int zero_g; /* gradients always 0: trust 1, only the decay moves the weights */
} layer_spec_t;

static const layer_spec_t layers[] = {
    {1031, 0, 0, 0},                          /* a weight matrix */
    {37, COLL_OPTIM_EXCLUDE, 0, 0},           /* a bias: neither trust nor decay */
    {64, 0, 1, 0},                            /* zero weights */
    {50, 0, 0, 1},                            /* zero gradients */
    {100, COLL_OPTIM_NO_WEIGHT_DECAY, 0, 0},  /* trust without decay */
    {100, COLL_OPTIM_NO_TRUST, 0, 0},         /* decay without trust */
};
#define NLAYERS (sizeof(layers) / sizeof(layers[0]))

typedef struct {
    float *w, *g, *v;
    double *wr, *gr, *vr;
} layer_t;

/* The MLPerf reference's compute_lr and resource_apply_dense, in double, v = -mom. */
static void ref_lars(const coll_optim_lars_params_t *p, double lr, unsigned flags, double *w,
                     const double *g, double *v, size_t n)
{
    const double wd = (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0 : p->weight_decay;
    double trust = 1;

    if (!(flags & COLL_OPTIM_NO_TRUST)) {
        double wn = sqrt(ref_sumsq_d(w, n)), gn = sqrt(ref_sumsq_d(g, n));
        if (wn > 0 && gn > 0) {
            trust = p->eta * wn / (gn + wd * wn + p->eps);
        }
    }
    for (size_t i = 0; i < n; i++) {
        double d = g[i] + wd * w[i];
        v[i] = p->momentum * v[i] + lr * trust * d;
        w[i] = p->nesterov ? w[i] - p->momentum * v[i] - lr * trust * d : w[i] - v[i];
    }
}

static void layer_init(layer_t *L, const layer_spec_t *s)
{
    L->w = ref_alloc(s->n), L->g = ref_alloc(s->n), L->v = ref_alloc(s->n);
    L->wr = ref_alloc_d(s->n), L->gr = ref_alloc_d(s->n), L->vr = ref_alloc_d(s->n);
    if (!s->zero_w) {
        ref_fill(L->w, s->n, -0.5, 0.5);
    }
    ref_widen(L->wr, L->w, s->n);
}

static void layer_free(layer_t *L)
{
    free(L->w), free(L->g), free(L->v), free(L->wr), free(L->gr), free(L->vr);
}

/* One step of one layer: phase 1 (its sums), phase 2 (the update), and the reference. */
static void layer_step(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                       layer_t *L, const layer_spec_t *s)
{
    double sums[2];
    char what[64];

    if (!s->zero_g) {
        ref_fill(L->g, s->n, -0.05, 0.05);
    }
    ref_widen(L->gr, L->g, s->n);
    coll_optim_sumsq2(L->w, L->g, s->n, sums);
    coll_optim_layer_t l = {.flags = s->flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lars_update(p, st, &l, L->w, L->g, L->v, s->n);
    ref_lars(p, st->lr, s->flags, L->wr, L->gr, L->vr, s->n);
    snprintf(what, sizeof(what), "step %llu layer of %zu: w", (unsigned long long)st->step,
             s->n);
    ref_check_close(what, L->w, L->wr, s->n, REL_TOL, ABS_TOL);
    ref_check_close("v", L->v, L->vr, s->n, REL_TOL, ABS_TOL);
}

static void run_model(const coll_optim_lars_params_t *p)
{
    layer_t L[NLAYERS];

    assert_int_equal(coll_optim_lars_params_check(p), COLL_OK);
    for (size_t k = 0; k < NLAYERS; k++) {
        layer_init(&L[k], &layers[k]);
    }
    for (unsigned t = 1; t <= STEPS; t++) {
        coll_optim_step_t st = {.lr = 5.0 / (double)t, .step = t};
        for (size_t k = 0; k < NLAYERS; k++) {
            layer_step(p, &st, &L[k], &layers[k]);
        }
    }
    for (size_t k = 0; k < NLAYERS; k++) {
        layer_free(&L[k]);
    }
}

static void test_lars_model_matches_formula(void **state)
{
    coll_optim_lars_params_t mlperf, nesterov = {
        .momentum = 0.9, .weight_decay = 5e-3, .eta = 0.02, .eps = 0, .nesterov = 1};

    coll_optim_lars_params_init(&mlperf);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            print_message("instruction set %s not on this CPU: not tested\n", ref_optim_isas[k]);
            continue;
        }
        run_model(&mlperf);
        run_model(&nesterov);
    }
}

/* ---- Shards ---- */

#define SN 1031
static const size_t cuts[] = {0, 333, 334, SN}; /* three shards, one of one element */
#define NCUTS (sizeof(cuts) / sizeof(cuts[0]))

/* One step of the layer as shards: partial sums, "allreduce" (a sum), update per shard. */
static void step_sharded(const coll_optim_lars_params_t *p, const coll_optim_step_t *st,
                         unsigned flags, float *w, const float *g, float *v, double sums[2])
{
    sums[0] = sums[1] = 0;
    for (size_t s = 0; s + 1 < NCUTS; s++) {
        double part[2];
        coll_optim_sumsq2(w + cuts[s], g + cuts[s], cuts[s + 1] - cuts[s], part);
        sums[0] += part[0], sums[1] += part[1];
    }
    coll_optim_layer_t l = {.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
    for (size_t s = 0; s + 1 < NCUTS; s++) {
        size_t o = cuts[s];
        coll_optim_lars_update(p, st, &l, w + o, g + o, v + o, cuts[s + 1] - o);
    }
}

static void run_shards(const coll_optim_lars_params_t *p, unsigned flags)
{
    float *w = ref_alloc(SN), *g = ref_alloc(SN), *v = ref_alloc(SN);
    float *ww = ref_alloc(SN), *vw = ref_alloc(SN);

    ref_fill(w, SN, -0.5, 0.5);
    memcpy(ww, w, SN * sizeof(float));
    for (unsigned t = 1; t <= 4; t++) {
        coll_optim_step_t st = {.lr = 2.0, .step = t};
        double sums[2], whole[2];
        ref_fill(g, SN, -0.05, 0.05);
        coll_optim_sumsq2(ww, g, SN, whole);
        step_sharded(p, &st, flags, w, g, v, sums);
        assert_true(fabs(sums[0] - whole[0]) <= 1e-14 * whole[0]);
        assert_true(fabs(sums[1] - whole[1]) <= 1e-14 * whole[1]);
        /* The unsplit layer with the same reduced sums: the same bits. */
        coll_optim_layer_t l = {.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
        coll_optim_lars_update(p, &st, &l, ww, g, vw, SN);
        ref_check_same("w of shards vs whole", w, ww, SN);
        ref_check_same("v of shards vs whole", v, vw, SN);
    }
    free(w), free(g), free(v), free(ww), free(vw);
}

static void test_lars_shards_same_bits(void **state)
{
    coll_optim_lars_params_t p;

    coll_optim_lars_params_init(&p);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            continue;
        }
        p.nesterov = 0;
        run_shards(&p, 0);
        run_shards(&p, COLL_OPTIM_EXCLUDE);
        p.nesterov = 1;
        run_shards(&p, 0);
    }
}

/* Every instruction set gives the scalar bits. */
static void test_lars_isas_same_bits(void **state)
{
    coll_optim_lars_params_t p;
    float *w0 = ref_alloc(SN), *v0 = ref_alloc(SN), *g = ref_alloc(SN);
    float *w = ref_alloc(SN), *v = ref_alloc(SN), *wg = ref_alloc(SN), *vg = ref_alloc(SN);
    const coll_optim_layer_t l = {.w_sumsq = 80.0, .u_sumsq = 0.9};
    const coll_optim_step_t st = {.lr = 3.0, .step = 2};

    coll_optim_lars_params_init(&p);
    ref_fill(w0, SN, -0.5, 0.5);
    ref_fill(v0, SN, -0.01, 0.01);
    ref_fill(g, SN, -0.05, 0.05);
    memcpy(wg, w0, SN * sizeof(float)), memcpy(vg, v0, SN * sizeof(float));
    assert_int_equal(coll_cpu_force_isa("scalar"), 0);
    coll_optim_lars_update(&p, &st, &l, wg, g, vg, SN);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            continue;
        }
        memcpy(w, w0, SN * sizeof(float)), memcpy(v, v0, SN * sizeof(float));
        coll_optim_lars_update(&p, &st, &l, w, g, v, SN);
        ref_check_same(ref_optim_isas[k], w, wg, SN);
        ref_check_same(ref_optim_isas[k], v, vg, SN);
    }
    free(w0), free(v0), free(g), free(w), free(v), free(wg), free(vg);
}

static void test_lars_params_check(void **state)
{
    coll_optim_lars_params_t p;

    coll_optim_lars_params_init(&p);
    assert_int_equal(coll_optim_lars_params_check(&p), COLL_OK);
    assert_true(p.momentum == 0.9 && p.weight_decay == 1e-4 && p.eta == 1e-3 && p.eps == 1e-7);
    const coll_optim_lars_params_t bad[] = {
        {.momentum = 1.5, .eta = 1e-3},
        {.momentum = -0.1, .eta = 1e-3},
        {.momentum = 0.9, .eta = 0},
        {.momentum = 0.9, .eta = 1e-3, .weight_decay = -1},
        {.momentum = 0.9, .eta = 1e-3, .eps = NAN},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(coll_optim_lars_params_check(&bad[i]), COLL_ERR_INVALID);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lars_trust_by_hand),
        cmocka_unit_test(test_lars_one_step_float_order),
        cmocka_unit_test(test_lars_model_matches_formula),
        cmocka_unit_test(test_lars_shards_same_bits),
        cmocka_unit_test(test_lars_isas_same_bits),
        cmocka_unit_test(test_lars_params_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
