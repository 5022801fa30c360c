/*
 * Unit tests of the learning-rate schedules (common/schedule.h) against learning rates computed
 * by hand at chosen steps: step 0, mid-warmup, the last warmup step and the end of warmup,
 * around each milestone, the cosine's midpoint, three quarters and end, and the checks.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "common/schedule.h"

/* Hand values carry 12 significant digits or are exact decimals; the code differs from them
 * by rounding of a few double operations. */
static void assert_lr(const coll_schedule_t *s, uint64_t step, double want)
{
    double got = coll_schedule_lr(s, step);
    if (!(fabs(got - want) <= 1e-11 * fabs(want))) {
        fail_msg("step %llu: lr %.17g, expected %.17g", (unsigned long long)step, got, want);
    }
}

static void test_linear_scaling_rule(void **state)
{
    assert_true(coll_schedule_scale_lr(0.1, 256, 8192) == 3.2); /* Goyal et al.: kn = 8k */
    assert_true(coll_schedule_scale_lr(0.1, 256, 32768) == 12.8);
    assert_true(coll_schedule_scale_lr(0.05, 512, 256) == 0.025);
    assert_true(coll_schedule_scale_lr(0.1, 256, 256) == 0.1);
    /* Multiplied first, as the rule is written: 0.1 * (10 / 100.) would be 0.010000000000000002. */
    assert_true(coll_schedule_scale_lr(0.1, 100, 10) == 0.01);
}

/* Goyal et al.'s ResNet-50 recipe at batch 8192 with 100 steps per epoch: warmup over 5 epochs
 * from 0.1 to 3.2, then x0.1 at epochs 30, 60 and 80. */
static coll_schedule_t goyal(void)
{
    return (coll_schedule_t){
        .field_mask = COLL_SCHEDULE_FIELD_SCALING | COLL_SCHEDULE_FIELD_WARMUP |
                      COLL_SCHEDULE_FIELD_DECAY,
        .base_lr = 0.1,
        .base_batch = 256,
        .global_batch = 8192,
        .warmup_steps = 500,
        .decay = COLL_SCHEDULE_STEP,
        .milestones = {3000, 6000, 8000},
        .num_milestones = 3,
        .gamma = 0.1,
    };
}

static void test_warmup_then_step_decay(void **state)
{
    const coll_schedule_t s = goyal();

    assert_int_equal(coll_schedule_check(&s), COLL_OK);
    assert_true(coll_schedule_peak_lr(&s) == 3.2);
    assert_true(coll_schedule_lr(&s, 0) == 0.1); /* exactly base_lr */
    assert_lr(&s, 1, 0.1062);                     /* 0.1 + 3.1 / 500 */
    assert_lr(&s, 250, 1.65);                     /* mid-warmup: (0.1 + 3.2) / 2 */
    assert_lr(&s, 499, 3.1938);                   /* 0.1 + 3.1 * 499 / 500 */
    assert_true(coll_schedule_lr(&s, 500) == 3.2); /* end of warmup: exactly the peak */
    assert_true(coll_schedule_lr(&s, 2999) == 3.2);
    assert_lr(&s, 3000, 0.32);
    assert_lr(&s, 5999, 0.32);
    assert_lr(&s, 6000, 0.032);
    assert_lr(&s, 8000, 0.0032);
    assert_lr(&s, 1000000, 0.0032);
}

/* Warmup from 0.1 to 0.4 over 100 steps, then a cosine to 0.004 at step 1100. */
static coll_schedule_t cosine(void)
{
    return (coll_schedule_t){
        .field_mask = COLL_SCHEDULE_FIELD_SCALING | COLL_SCHEDULE_FIELD_WARMUP |
                      COLL_SCHEDULE_FIELD_DECAY,
        .base_lr = 0.1,
        .base_batch = 256,
        .global_batch = 1024,
        .warmup_steps = 100,
        .decay = COLL_SCHEDULE_COSINE,
        .total_steps = 1100,
        .final_lr = 0.004,
    };
}

static void test_warmup_then_cosine(void **state)
{
    const coll_schedule_t s = cosine();

    assert_int_equal(coll_schedule_check(&s), COLL_OK);
    assert_true(coll_schedule_lr(&s, 0) == 0.1);
    assert_lr(&s, 50, 0.25);
    assert_true(coll_schedule_lr(&s, 100) == 0.4); /* the cosine starts at the peak exactly */
    assert_lr(&s, 101, 0.39999902291);  /* 0.004 + 0.396 (1 + cos(pi / 1000)) / 2 */
    assert_lr(&s, 600, 0.202);          /* midpoint: (0.4 + 0.004) / 2 */
    assert_lr(&s, 850, 0.0619928573251); /* 0.004 + 0.396 (1 + cos(3 pi / 4)) / 2 */
    assert_lr(&s, 1099, 0.00400097709003); /* 0.004 + 0.396 (1 - cos(pi / 1000)) / 2 */
    assert_true(coll_schedule_lr(&s, 1100) == 0.004); /* the end: exactly final_lr */
    assert_true(coll_schedule_lr(&s, 5000) == 0.004);
}

static void test_defaults_and_variants(void **state)
{
    coll_schedule_t s = {.field_mask = 0, .base_lr = 0.05};

    assert_int_equal(coll_schedule_check(&s), COLL_OK); /* constant base_lr */
    assert_true(coll_schedule_lr(&s, 0) == 0.05 && coll_schedule_lr(&s, 123456) == 0.05);

    /* A warmup from zero (WARMUP_START), as MLPerf's ResNet and BERT recipes do. */
    s = (coll_schedule_t){.field_mask = COLL_SCHEDULE_FIELD_WARMUP |
                                        COLL_SCHEDULE_FIELD_WARMUP_START,
                          .base_lr = 0.1, .warmup_steps = 10, .warmup_start_lr = 0};
    assert_int_equal(coll_schedule_check(&s), COLL_OK);
    assert_true(coll_schedule_lr(&s, 0) == 0.0);
    assert_lr(&s, 5, 0.05);
    assert_true(coll_schedule_lr(&s, 10) == 0.1);

    /* Scaling without warmup: the scaled lr from step 0. */
    s = (coll_schedule_t){.field_mask = COLL_SCHEDULE_FIELD_SCALING, .base_lr = 0.1,
                          .base_batch = 256, .global_batch = 4096};
    assert_true(coll_schedule_lr(&s, 0) == 1.6);

    /* A milestone at the end of the warmup applies there. */
    s = goyal();
    s.milestones[0] = 500;
    assert_int_equal(coll_schedule_check(&s), COLL_OK);
    assert_lr(&s, 499, 3.1938);
    assert_lr(&s, 500, 0.32);

    /* Cosine without warmup starts at the peak. */
    s = cosine();
    s.field_mask &= ~(uint64_t)COLL_SCHEDULE_FIELD_WARMUP;
    assert_true(coll_schedule_lr(&s, 0) == 0.4);
    assert_lr(&s, 550, 0.202);
}

static void test_check_rejects(void **state)
{
    for (int which = 0; which < 14; which++) {
        coll_schedule_t s = which < 9 ? goyal() : cosine();
        switch (which) {
        case 0: s.field_mask |= 1u << 9; break;
        case 1: s.base_lr = -0.1; break;
        case 2: s.base_lr = NAN; break;
        case 3: s.base_batch = 0; break;
        case 4: s.milestones[1] = 3000; break; /* not strictly increasing */
        case 5: s.milestones[0] = 499; break;  /* inside the warmup */
        case 6: s.gamma = 0; break;
        case 7: s.num_milestones = COLL_SCHEDULE_MAX_MILESTONES + 1; break;
        case 8:
            s.field_mask |= COLL_SCHEDULE_FIELD_WARMUP_START;
            s.warmup_start_lr = INFINITY;
            break;
        case 9: s.total_steps = 100; break; /* no room after the warmup */
        case 10: s.final_lr = -1; break;
        case 11: s.decay = (coll_schedule_decay_t)7; break;
        case 12: s.global_batch = 0; break;
        default: s.final_lr = NAN; break;
        }
        if (coll_schedule_check(&s) != COLL_ERR_INVALID) {
            fail_msg("case %d accepted", which);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linear_scaling_rule),
        cmocka_unit_test(test_warmup_then_step_decay),
        cmocka_unit_test(test_warmup_then_cosine),
        cmocka_unit_test(test_defaults_and_variants),
        cmocka_unit_test(test_check_rejects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
