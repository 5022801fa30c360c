/*
 * The CUDA optimizers' element functions (kernels/cuda/elem_optim.h), compiled by the host's
 * compiler, against the host executor's steps (kernels/cpu/optim.h) for every optimizer and
 * every variant its coefficients select (weight decay, momentum, first step, Nesterov, decay on
 * the gradient, eps inside the root): the same bits for weights and state. The sums of squares
 * are replayed in the device's order (kernels/cuda/sum.cuh) and must agree with the host's
 * 16-lane sums to the accuracy kernels/optim.h states for sums of exact squares.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cuda/elem_optim.h"
#include "kernels/exec.h"
#include "reduce_ref.h"

#define N 1031

static float w[N], g[N], s0[N], s1[N];   /* the element functions' copies */
static float wh[N], s0h[N], s1h[N];      /* the host's */

static const coll_exec_t *host(void)
{
    return coll_exec_get(COLL_MEM_HOST);
}

static float rnd(double lo, double hi)
{
    return (float)(lo + (hi - lo) * (double)(ref_rand() >> 11) / 9007199254740992.0);
}

/* Fresh weights, gradients and state (the second state non-negative, as Adam's v). */
static void fill(void)
{
    for (size_t i = 0; i < N; i++) {
        w[i] = rnd(-2, 2);
        g[i] = rnd(-1, 1);
        s0[i] = rnd(-0.5, 0.5);
        s1[i] = rnd(0, 0.25);
    }
    memcpy(wh, w, sizeof(w));
    memcpy(s0h, s0, sizeof(s0));
    memcpy(s1h, s1, sizeof(s1));
}

static void assert_same(const float *a, const float *b, const char *what, unsigned variant)
{
    for (size_t i = 0; i < N; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            fail_msg("%s (variant 0x%x): element %zu is %a, the host's %a", what, variant, i,
                     (double)a[i], (double)b[i]);
        }
    }
}

/* sum.cuh's order: thread t of T = blocks * 256 adds elements t, t + T, ...; a tree per block;
 * one block adds the blocks' sums the same way. */
static double device_sumsq(const float *x, size_t n)
{
    size_t nb = (n + 2047) / 2048;
    nb = nb < 1 ? 1 : nb > 1024 ? 1024 : nb;
    double part[1024], t[256];

    for (size_t b = 0; b < nb; b++) {
        for (size_t th = 0; th < 256; th++) {
            t[th] = 0;
            for (size_t i = b * 256 + th; i < n; i += nb * 256) {
                t[th] += coll_hd_sq(x[i]);
            }
        }
        for (size_t half = 128; half > 0; half /= 2) {
            for (size_t th = 0; th < half; th++) {
                t[th] += t[th + half];
            }
        }
        part[b] = t[0];
    }
    for (size_t th = 0; th < 256; th++) {
        t[th] = 0;
        for (size_t b = th; b < nb; b += 256) {
            t[th] += part[b];
        }
    }
    for (size_t half = 128; half > 0; half /= 2) {
        for (size_t th = 0; th < half; th++) {
            t[th] += t[th + half];
        }
    }
    return t[0];
}

/* Sums of exact squares in two orders: within (n/16 + 4) roundings of 2^-53 (kernels/optim.h). */
static void assert_sums_agree(double dev, double host_sum, size_t n)
{
    double bound = ((double)n / 16 + 4) * 0x1p-53 * host_sum;
    if (fabs(dev - host_sum) > bound) {
        fail_msg("sum of squares %.17g, the host's %.17g", dev, host_sum);
    }
}

static void test_sgd_every_variant(void **state)
{
    const coll_optim_sgd_coef_t base = {.lr = 0.1f, .wd = 1e-3f, .mu = 0.9f, .damp1 = 0.75f};

    for (unsigned var = 0; var < 16; var++) {
        coll_optim_sgd_coef_t k = base;
        const int wd = var & COLL_OPTIM_COEF_WD, mom = (var & COLL_OPTIM_COEF_MOM) != 0;
        k.variant = var;
        fill();
        host()->optim_sgd(&k, wh, g, s0h, N);
        for (size_t i = 0; i < N; i++) {
            coll_hd_sgd(&k, &w[i], g[i], &s0[i], wd != 0, mom,
                        mom && (var & COLL_OPTIM_COEF_FIRST), mom && (var & COLL_OPTIM_COEF_NESTEROV));
        }
        assert_same(w, wh, "SGD weights", var);
        assert_same(s0, s0h, "SGD momentum", var);
    }
}

static void test_adamw(void **state)
{
    const coll_optim_adamw_coef_t k = {.decay = 0.999f, .b1 = 0.9f, .ob1 = 0.1f, .b2 = 0.999f,
                                       .ob2 = 1e-3f, .sbc2 = 0.0447f, .eps = 1e-8f,
                                       .neg_step = -0.0123f};

    fill();
    host()->optim_adamw(&k, wh, g, s0h, s1h, N);
    for (size_t i = 0; i < N; i++) {
        coll_hd_adamw(&k, &w[i], g[i], &s0[i], &s1[i]);
    }
    assert_same(w, wh, "AdamW weights", 0);
    assert_same(s0, s0h, "AdamW m", 0);
    assert_same(s1, s1h, "AdamW v", 0);
}

static void test_lars_every_variant(void **state)
{
    static const unsigned vars[] = {0, COLL_OPTIM_COEF_WD, COLL_OPTIM_COEF_NESTEROV,
                                    COLL_OPTIM_COEF_WD | COLL_OPTIM_COEF_NESTEROV};

    for (size_t j = 0; j < 4; j++) {
        const coll_optim_lars_coef_t k = {.lr_s = 0.37f, .wd = 1e-4f, .mu = 0.9f,
                                          .variant = vars[j]};
        fill();
        host()->optim_lars(&k, wh, g, s0h, N);
        for (size_t i = 0; i < N; i++) {
            coll_hd_lars(&k, &w[i], g[i], &s0[i], (vars[j] & COLL_OPTIM_COEF_WD) != 0,
                         (vars[j] & COLL_OPTIM_COEF_NESTEROV) != 0);
        }
        assert_same(w, wh, "LARS weights", vars[j]);
        assert_same(s0, s0h, "LARS momentum", vars[j]);
    }
}

/* Phase 1 and phase 2 of LAMB for decay in r, on the gradient or none, eps in or out. */
static void lamb_case(unsigned var)
{
    static float r[N];
    coll_optim_lamb_coef_t k = {.b1 = 0.9f, .b3 = 0.1f, .b2 = 0.999f, .ob2 = 1e-3f,
                                .c1 = 10.0f, .c2 = 1000.0f, .ginv = 0.5f, .eps = 1e-6f,
                                .wd = 0.01f, .coef = 0.002f, .variant = var};
    const int wd_g = (var & COLL_OPTIM_COEF_WD_G) != 0;
    const int wd = !wd_g && (var & COLL_OPTIM_COEF_WD), eps_in = (var & COLL_OPTIM_COEF_EPS_IN) != 0;
    double sums[2];

    fill();
    host()->optim_lamb_moments(&k, wh, g, s0h, s1h, N, sums);
    for (size_t i = 0; i < N; i++) {
        r[i] = coll_hd_lamb_moments(&k, w[i], g[i], &s0[i], &s1[i], wd, wd_g, eps_in);
    }
    assert_same(s0, s0h, "LAMB m", var);
    assert_same(s1, s1h, "LAMB v", var);
    assert_sums_agree(device_sumsq(w, N), sums[0], N);
    assert_sums_agree(device_sumsq(r, N), sums[1], N);

    host()->optim_lamb_apply(&k, wh, s0h, s1h, N);
    for (size_t i = 0; i < N; i++) {
        w[i] = coll_hd_lamb_apply(&k, w[i], s0[i], s1[i], (var & COLL_OPTIM_COEF_WD) != 0,
                                  eps_in);
    }
    assert_same(w, wh, "LAMB weights", var);
}

static void test_lamb_every_variant(void **state)
{
    static const unsigned vars[] = {0, COLL_OPTIM_COEF_WD, COLL_OPTIM_COEF_WD_G};

    for (size_t j = 0; j < 3; j++) {
        lamb_case(vars[j]);
        lamb_case(vars[j] | COLL_OPTIM_COEF_EPS_IN);
    }
}

static void test_sums_and_finiteness(void **state)
{
    static const size_t ns[] = {1, 17, N};
    double two[2];

    fill();
    for (size_t j = 0; j < 3; j++) {
        assert_sums_agree(device_sumsq(w, ns[j]), host()->optim_sumsq(w, ns[j]), ns[j]);
        host()->optim_sumsq2(w, g, ns[j], two);
        assert_sums_agree(device_sumsq(w, ns[j]), two[0], ns[j]);
        assert_sums_agree(device_sumsq(g, ns[j]), two[1], ns[j]);
    }
    const float bad[4] = {1.0f, -INFINITY, NAN, 0x1p-140f};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(coll_hd_nonfinite(bad[i]), !host()->optim_all_finite(&bad[i], 1));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_every_variant),
        cmocka_unit_test(test_adamw),
        cmocka_unit_test(test_lars_every_variant),
        cmocka_unit_test(test_lamb_every_variant),
        cmocka_unit_test(test_sums_and_finiteness),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
