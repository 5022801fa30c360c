/*
 * Unit tests of the parameter service's names and defaults (common/ps_names.c): names parse
 * back, unknown ones are refused, and each optimizer's defaults are its kernel's reference
 * defaults (kernels/cpu/optim.h), so the service runs what the kernels' tests checked.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <collective.h>

#include "kernels/cpu/optim.h"

static void test_names(void **state)
{
    coll_ps_optimizer_t k;
    (void)state;
    for (unsigned i = 0; i < COLL_PS_OPTIMIZER_COUNT; i++) {
        assert_int_equal(coll_ps_optimizer_parse(coll_ps_optimizer_name(i), &k), COLL_OK);
        assert_int_equal(k, i);
    }
    assert_int_equal(coll_ps_optimizer_parse("adam", &k), COLL_ERR_INVALID);
    assert_int_equal(coll_ps_optimizer_parse(NULL, &k), COLL_ERR_INVALID);
    assert_string_equal(coll_ps_optimizer_name(COLL_PS_OPTIMIZER_COUNT), "unknown");
}

static void test_defaults_are_the_kernels(void **state)
{
    coll_ps_optim_t o;
    coll_optim_adamw_params_t a;
    coll_optim_lars_params_t l;
    coll_optim_lamb_params_t b;
    (void)state;
    coll_optim_adamw_params_init(&a);
    coll_optim_lars_params_init(&l);
    coll_optim_lamb_params_init(&b);
    coll_ps_optim_init(COLL_PS_ADAMW, &o);
    assert_true(o.beta1 == a.beta1 && o.beta2 == a.beta2 && o.eps == a.eps &&
                o.weight_decay == a.weight_decay);
    coll_ps_optim_init(COLL_PS_LARS, &o);
    assert_true(o.momentum == l.momentum && o.weight_decay == l.weight_decay &&
                o.eta == l.eta && o.eps == l.eps && o.nesterov == l.nesterov);
    coll_ps_optim_init(COLL_PS_LAMB, &o);
    assert_true(o.beta1 == b.beta1 && o.beta2 == b.beta2 && o.eps == b.eps &&
                o.weight_decay == b.weight_decay && (int)o.lamb_bias == (int)b.bias &&
                o.eps_inside_sqrt == b.eps_inside_sqrt && o.trust_min == b.trust_min &&
                o.trust_max == b.trust_max && o.phi_min == b.phi_min &&
                o.phi_max == b.phi_max && o.grad_averaging == b.grad_averaging &&
                o.l2 == b.l2 && o.clip_grad_norm == b.max_grad_norm);
    coll_ps_optim_init(COLL_PS_SGD, &o);
    assert_true(o.momentum == 0 && o.weight_decay == 0 && o.clip_grad_norm == 0);
}

static void test_constant_schedule(void **state)
{
    coll_ps_schedule_t s;
    (void)state;
    coll_ps_schedule_constant(0.5, &s);
    assert_true(s.base_lr == 0.5 && s.warmup_steps == 0 && s.warmup_start_lr < 0 &&
                s.decay == COLL_PS_DECAY_CONSTANT && s.base_batch == 0);
}

/* Each optimizer's default lr is its source's value square-root scaled to batch 256
 * (collective_ps.h), rounded to 2 or 3 figures: within 1.5 % of the derivation. */
static void test_default_lr(void **state)
{
    const double derived[COLL_PS_OPTIMIZER_COUNT] = {
        [COLL_PS_SGD] = 0.05,                        /* coll-train's own */
        [COLL_PS_ADAMW] = 1e-3,                      /* torch.optim.AdamW */
        [COLL_PS_LARS] = 10.0 * sqrt(256.0 / 8192.0), /* MLPerf's base lr 10 at 8192 */
        [COLL_PS_LAMB] = 0.02 * sqrt(256.0 / 512.0), /* pytorch-lamb's MNIST, 0.02 at 512 */
    };
    (void)state;
    for (int k = 0; k < COLL_PS_OPTIMIZER_COUNT; k++) {
        double lr = coll_ps_optim_default_lr((coll_ps_optimizer_t)k);
        assert_true(fabs(lr - derived[k]) <= 0.015 * derived[k]);
    }
    assert_true(coll_ps_optim_default_lr(COLL_PS_OPTIMIZER_COUNT) == 0.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_defaults_are_the_kernels),
        cmocka_unit_test(test_constant_schedule),
        cmocka_unit_test(test_default_lr),
    };
    return cmocka_run_group_tests_name("parameter service names", tests, NULL, NULL);
}
