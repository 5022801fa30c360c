/*
 * The device check of the optimizer steps (kernel_check.h) at every count: SGD, AdamW, LARS and
 * LAMB in every variant their coefficients select give the host's bits for weights and state;
 * the sums of squares agree with the host's to the accuracy kernels/optim.h states (another
 * order of exact squares); the finiteness check finds an infinity and a NaN.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/kernel_check.h"

/* Weights, gradients and two states on both sides. */
typedef struct {
    size_t n;
    float *h[4], *d[4];
} arrays_t;

enum { W, G, S0, S1 };

static void arrays_make(arrays_t *a, size_t n)
{
    static const double mag[4] = {2.0, 1.0, 0.5, 0.25};

    a->n = n;
    for (int j = 0; j < 4; j++) {
        a->h[j] = kc_host(n * sizeof(float));
        a->d[j] = kc_dev(n * sizeof(float));
        kc_floats(a->h[j], n, mag[j], 0, 0);
        if (j == S1) { /* a second moment is not negative */
            for (size_t i = 0; i < n; i++) {
                a->h[j][i] = fabsf(a->h[j][i]);
            }
        }
        kc_up(a->d[j], a->h[j], n * sizeof(float));
    }
}

static void arrays_free(arrays_t *a)
{
    for (int j = 0; j < 4; j++) {
        free(a->h[j]);
        kc_dev_free(a->d[j]);
    }
}

/* Every array of the device's the host's bits. */
static void arrays_same(kc_t *kc, const arrays_t *a, const char *what)
{
    float *back = kc_host(a->n * sizeof(float));

    for (int j = 0; j < 4; j++) {
        kc_down(back, a->d[j], a->n * sizeof(float));
        if (!kc_same_floats(kc, back, a->h[j], a->n, what)) {
            break;
        }
    }
    free(back);
}

static void sums_agree(kc_t *kc, double dev, double host, size_t n, const char *what)
{
    double bound = ((double)n / 16 + 4) * 0x1p-53 * host;
    kc_expect(kc, fabs(dev - host) <= bound, "%s: sum of squares %.17g, host %.17g", what, dev,
              host);
}

static void sgd_all(kc_t *kc, size_t n)
{
    char what[64];

    for (unsigned var = 0; var < 16; var++) {
        const coll_optim_sgd_coef_t k = {.lr = 0.1f, .wd = 1e-3f, .mu = 0.9f, .damp1 = 0.75f,
                                         .variant = var};
        arrays_t a;
        arrays_make(&a, n);
        snprintf(what, sizeof(what), "SGD variant 0x%x, count %zu", var, n);
        kc->host->optim_sgd(&k, a.h[W], a.h[G], a.h[S0], n);
        kc->dev->optim_sgd(&k, a.d[W], a.d[G], a.d[S0], n);
        arrays_same(kc, &a, what);
        arrays_free(&a);
    }
}

static void adamw_lars(kc_t *kc, size_t n)
{
    const coll_optim_adamw_coef_t ka = {.decay = 0.999f, .b1 = 0.9f, .ob1 = 0.1f, .b2 = 0.999f,
                                        .ob2 = 1e-3f, .sbc2 = 0.0447f, .eps = 1e-8f,
                                        .neg_step = -0.0123f};
    char what[64];
    arrays_t a;

    arrays_make(&a, n);
    kc->host->optim_adamw(&ka, a.h[W], a.h[G], a.h[S0], a.h[S1], n);
    kc->dev->optim_adamw(&ka, a.d[W], a.d[G], a.d[S0], a.d[S1], n);
    snprintf(what, sizeof(what), "AdamW, count %zu", n);
    arrays_same(kc, &a, what);
    arrays_free(&a);
    for (unsigned var = 0; var < 16; var += 1) {
        if (var & ~(COLL_OPTIM_COEF_WD | COLL_OPTIM_COEF_NESTEROV)) {
            continue;
        }
        const coll_optim_lars_coef_t kl = {.lr_s = 0.37f, .wd = 1e-4f, .mu = 0.9f, .variant = var};
        arrays_make(&a, n);
        kc->host->optim_lars(&kl, a.h[W], a.h[G], a.h[S0], n);
        kc->dev->optim_lars(&kl, a.d[W], a.d[G], a.d[S0], n);
        snprintf(what, sizeof(what), "LARS variant 0x%x, count %zu", var, n);
        arrays_same(kc, &a, what);
        arrays_free(&a);
    }
}

static void lamb(kc_t *kc, size_t n, unsigned var)
{
    const coll_optim_lamb_coef_t k = {.b1 = 0.9f, .b3 = 0.1f, .b2 = 0.999f, .ob2 = 1e-3f,
                                      .c1 = 10.0f, .c2 = 1000.0f, .ginv = 0.5f, .eps = 1e-6f,
                                      .wd = 0.01f, .coef = 0.002f, .variant = var};
    double sh[2], sd[2];
    char what[64];
    arrays_t a;

    arrays_make(&a, n);
    snprintf(what, sizeof(what), "LAMB variant 0x%x, count %zu", var, n);
    kc->host->optim_lamb_moments(&k, a.h[W], a.h[G], a.h[S0], a.h[S1], n, sh);
    kc->dev->optim_lamb_moments(&k, a.d[W], a.d[G], a.d[S0], a.d[S1], n, sd);
    arrays_same(kc, &a, what);
    sums_agree(kc, sd[0], sh[0], n, what);
    sums_agree(kc, sd[1], sh[1], n, what);
    kc->host->optim_lamb_apply(&k, a.h[W], a.h[S0], a.h[S1], n);
    kc->dev->optim_lamb_apply(&k, a.d[W], a.d[S0], a.d[S1], n);
    arrays_same(kc, &a, what);
    arrays_free(&a);
}

static void sums_and_finiteness(kc_t *kc, size_t n)
{
    char what[64];
    double two_h[2], two_d[2];
    arrays_t a;

    arrays_make(&a, n);
    snprintf(what, sizeof(what), "sums, count %zu", n);
    sums_agree(kc, kc->dev->optim_sumsq(a.d[W], n), kc->host->optim_sumsq(a.h[W], n), n, what);
    kc->host->optim_sumsq2(a.h[W], a.h[G], n, two_h);
    kc->dev->optim_sumsq2(a.d[W], a.d[G], n, two_d);
    sums_agree(kc, two_d[0], two_h[0], n, what);
    sums_agree(kc, two_d[1], two_h[1], n, what);
    kc_expect(kc, kc->dev->optim_all_finite(a.d[W], n) == 1, "%s: all finite", what);
    if (n > 0) {
        const float bad[2] = {INFINITY, NAN};
        for (int j = 0; j < 2; j++) {
            kc_up(a.d[G] + n - 1, &bad[j], sizeof(float));
            kc_expect(kc, kc->dev->optim_all_finite(a.d[G], n) == 0, "%s: %g found", what,
                      bad[j]);
        }
    }
    arrays_free(&a);
}

void kc_check_optim(kc_t *kc)
{
    static const unsigned lamb_vars[6] = {
        0, COLL_OPTIM_COEF_WD, COLL_OPTIM_COEF_WD_G, COLL_OPTIM_COEF_EPS_IN,
        COLL_OPTIM_COEF_WD | COLL_OPTIM_COEF_EPS_IN, COLL_OPTIM_COEF_WD_G | COLL_OPTIM_COEF_EPS_IN};

    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        const size_t n = kc_counts[c];
        sgd_all(kc, n);
        adamw_lars(kc, n);
        for (int j = 0; j < 6; j++) {
            lamb(kc, n, lamb_vars[j]);
        }
        sums_and_finiteness(kc, n);
    }
}
