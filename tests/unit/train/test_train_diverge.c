/*
 * coll-train's divergence check (examples/train/diverge.c): which epoch losses stop a run and
 * which do not, against the rules written out here: not finite; above 2 ln(10), twice the
 * loss of a uniform prediction over 10 classes; grown TRAIN_DIVERGE_EPOCHS epochs in a row;
 * and --on-divergence continue, which says it once and goes on.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "diverge.h"

/* The epoch at which @p losses (n of them) stop the run, or 0 when none does. */
static int stops_at(const double *losses, int n)
{
    train_diverge_t d;

    train_diverge_init(&d, 10, 0);
    for (int e = 1; e <= n; e++) {
        int rc = train_diverge_check(&d, e, losses[e - 1], 0.05, "sgd", 0);
        if (rc != 0) {
            assert_int_equal(rc, TRAIN_EXIT_DIVERGED);
            return e;
        }
    }
    return 0;
}

static void test_healthy_runs_go_on(void **state)
{
    /* A demo run (0.55, 0.38, ...), one that rises once or twice and recovers, and one at a
     * tiny lr that stays near its untrained start, above ln 10 (2.48 seen). */
    const double healthy[] = {0.55, 0.38, 0.33, 0.31, 0.30};
    const double bumpy[] = {0.55, 0.60, 0.65, 0.50, 0.52, 0.58, 0.40};
    const double untrained[] = {2.74, 2.48, 2.47};

    (void)state;
    assert_int_equal(stops_at(healthy, 5), 0);
    assert_int_equal(stops_at(bumpy, 7), 0);
    assert_int_equal(stops_at(untrained, 3), 0);
}

static void test_not_finite(void **state)
{
    const double nan_run[] = {0.55, NAN};
    const double inf_run[] = {INFINITY};

    (void)state;
    assert_int_equal(stops_at(nan_run, 2), 2);
    assert_int_equal(stops_at(inf_run, 1), 1);
}

static void test_worse_than_chance(void **state)
{
    /* LAMB at SGD's lr: loss 57 after one epoch. Just above 2 ln 10 = 4.6052 stops, just
     * below does not. */
    const double lamb[] = {57.0, 67.0};
    const double above[] = {4.61};
    const double below[] = {4.60};

    (void)state;
    assert_int_equal(stops_at(lamb, 2), 1);
    assert_int_equal(stops_at(above, 1), 1);
    assert_int_equal(stops_at(below, 1), 0);
}

static void test_growing_epochs(void **state)
{
    /* Growth in each of TRAIN_DIVERGE_EPOCHS (3) epochs in a row stops at the third. */
    const double growing[] = {0.50, 0.60, 0.70, 0.80, 0.90};

    (void)state;
    assert_int_equal(TRAIN_DIVERGE_EPOCHS, 3);
    assert_int_equal(stops_at(growing, 5), 4);
}

static void test_continue_says_once(void **state)
{
    train_diverge_t d;

    (void)state;
    train_diverge_init(&d, 10, 1);
    assert_int_equal(train_diverge_check(&d, 1, 90.0, 3.2, "sgd", 0), 0);
    assert_int_equal(d.said, 1);
    assert_int_equal(train_diverge_check(&d, 2, NAN, 3.2, "sgd", 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_runs_go_on),
        cmocka_unit_test(test_not_finite),
        cmocka_unit_test(test_worse_than_chance),
        cmocka_unit_test(test_growing_epochs),
        cmocka_unit_test(test_continue_says_once),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
