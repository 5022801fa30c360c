/*
 * Bucket layout of the bucketer (client/bucketer/plan.c) against layouts computed by hand:
 * reverse registration order, the first bucket's smaller cap, a bucket that a large parameter
 * overfills, one bucket list per datatype, a rebuild order, parameters of 0 elements, and the
 * arguments it refuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "client/bucketer/plan.h"

/* Expected bucket: its parameters in layout order (terminated by -1) and its datatype. */
typedef struct {
    int members[8];
    coll_dtype_t dtype;
} want_bucket_t;

/* Check @p plan against @p want (nbuckets entries); offsets follow from the members' counts. */
static void check_plan(const coll__bplan_t *plan, const coll__bp_param_t *params,
                       const want_bucket_t *want, size_t nbuckets)
{
    assert_int_equal(plan->nbuckets, nbuckets);
    for (size_t b = 0; b < nbuckets; b++) {
        const coll__bp_bucket_t *bk = &plan->buckets[b];
        size_t off = 0, k = 0;

        assert_int_equal(bk->dtype, want[b].dtype);
        for (; want[b].members[k] >= 0; k++) {
            size_t p = (size_t)want[b].members[k];
            assert_int_equal(plan->members[bk->first + k], p);
            assert_int_equal(plan->bucket_of[p], b);
            assert_int_equal(plan->offset_of[p], off);
            off += params[p].count;
        }
        assert_int_equal(bk->nparams, k);
        assert_int_equal(bk->count, off);
    }
}

static void build_reverse(const coll__bp_param_t *params, size_t n, size_t first_cap, size_t cap,
                          coll__bplan_t *plan)
{
    size_t order[16];

    coll__bplan_reverse_order(order, n);
    assert_int_equal(coll__bplan_build(params, n, order, first_cap, cap, plan), COLL_OK);
}

/* float32 sizes 4000, 40, 2000, 400, 8000, 20 bytes; first cap 2048, cap 6000. Walking
 * p5, p4: 20 + 8000 >= 2048 closes bucket 0. Then p3, p2, p1, p0: 400 + 2000 + 40 + 4000 =
 * 6440 >= 6000 closes bucket 1 at p0. */
static void test_reverse_order_and_first_cap(void **state)
{
    static const coll__bp_param_t params[] = {{1000, COLL_FLOAT32}, {10, COLL_FLOAT32},
                                              {500, COLL_FLOAT32},  {100, COLL_FLOAT32},
                                              {2000, COLL_FLOAT32}, {5, COLL_FLOAT32}};
    static const want_bucket_t want[] = {{{5, 4, -1}, COLL_FLOAT32},
                                         {{3, 2, 1, 0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;

    build_reverse(params, 6, 2048, 6000, &plan);
    check_plan(&plan, params, want, 2);
    /* The views by hand: p5 at 0, p4 at 5; p3 at 0, p2 at 100, p1 at 600, p0 at 610. */
    assert_int_equal(plan.offset_of[4], 5);
    assert_int_equal(plan.offset_of[0], 610);
    assert_int_equal(plan.buckets[1].count, 1610);
    coll__bplan_free(&plan);
}

/* Same parameters with the caps swapped around: a first cap larger than everything puts all
 * of them into one bucket; a cap of one byte gives every parameter its own bucket. */
static void test_one_bucket_and_per_tensor(void **state)
{
    static const coll__bp_param_t params[] = {{1000, COLL_FLOAT32}, {10, COLL_FLOAT32},
                                              {500, COLL_FLOAT32}};
    static const want_bucket_t one[] = {{{2, 1, 0, -1}, COLL_FLOAT32}};
    static const want_bucket_t each[] = {{{2, -1}, COLL_FLOAT32},
                                         {{1, -1}, COLL_FLOAT32},
                                         {{0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;

    build_reverse(params, 3, SIZE_MAX, SIZE_MAX, &plan);
    check_plan(&plan, params, one, 1);
    coll__bplan_free(&plan);
    build_reverse(params, 3, 1, 1, &plan);
    check_plan(&plan, params, each, 3);
    coll__bplan_free(&plan);
}

/* A parameter far above the cap joins the open bucket and closes it (DDP's rule): sizes 40,
 * 20000, 40 bytes with caps of 100: p2 (40) opens bucket 0, p1 makes it 20040 and closes it,
 * p0 is left in bucket 1, below its cap. */
static void test_large_parameter(void **state)
{
    static const coll__bp_param_t params[] = {{10, COLL_FLOAT32}, {5000, COLL_FLOAT32},
                                              {10, COLL_FLOAT32}};
    static const want_bucket_t want[] = {{{2, 1, -1}, COLL_FLOAT32}, {{0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;

    build_reverse(params, 3, 100, 100, &plan);
    check_plan(&plan, params, want, 2);
    coll__bplan_free(&plan);
}

/* Datatypes fill separate buckets, each with its own first cap (1000 bytes, cap 1000):
 * walking p4 (f64, 400) opens b0; p3 (f16, 20) opens b1; p2 (f32, 1200) opens b2 and closes
 * it; p1 (f64, 800) brings b0 to 1200 and closes it; p0 (f32, 400) opens b3. Numbered in the
 * order they opened. */
static void test_datatypes(void **state)
{
    static const coll__bp_param_t params[] = {{100, COLL_FLOAT32}, {100, COLL_FLOAT64},
                                              {300, COLL_FLOAT32}, {10, COLL_FLOAT16},
                                              {50, COLL_FLOAT64}};
    static const want_bucket_t want[] = {{{4, 1, -1}, COLL_FLOAT64},
                                         {{3, -1}, COLL_FLOAT16},
                                         {{2, -1}, COLL_FLOAT32},
                                         {{0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;

    build_reverse(params, 5, 1000, 1000, &plan);
    check_plan(&plan, params, want, 4);
    assert_int_equal(plan.offset_of[1], 50);
    coll__bplan_free(&plan);
}

/* A rebuild walks the observed ready order: [2, 0, 3, 1], four parameters of 400 bytes, first
 * cap 500, cap 800: b0 = {p2, p0} (800 >= 500), b1 = {p3, p1} (800 >= 800). */
static void test_ready_order(void **state)
{
    static const coll__bp_param_t params[] = {{100, COLL_FLOAT32}, {100, COLL_FLOAT32},
                                              {100, COLL_FLOAT32}, {100, COLL_FLOAT32}};
    static const want_bucket_t want[] = {{{2, 0, -1}, COLL_FLOAT32},
                                         {{3, 1, -1}, COLL_FLOAT32}};
    static const size_t order[] = {2, 0, 3, 1};
    coll__bplan_t plan, initial;

    assert_int_equal(coll__bplan_build(params, 4, order, 500, 800, &plan), COLL_OK);
    check_plan(&plan, params, want, 2);
    build_reverse(params, 4, 500, 800, &initial);
    assert_false(coll__bplan_equal(&plan, &initial));
    assert_true(coll__bplan_equal(&plan, &plan));
    coll__bplan_free(&plan);
    coll__bplan_free(&initial);
}

/* The trainer's default network (784-256-10, float32: fc0.weight 200704, fc0.bias 256,
 * fc1.weight 2560, fc1.bias 10 floats) is 814120 bytes: one bucket under the 1 MiB first cap.
 * Its 784-2048x4-10 network with the default caps: b0 = fc4.bias, fc4.weight, fc3.bias,
 * fc3.weight (16.9 MB, past 1 MiB at fc3.weight), b1 = fc2.*, fc1.* (33.6 MB, past 25 MiB at
 * fc1.weight), b2 = fc0.*. */
static void test_trainer_models(void **state)
{
    static const coll__bp_param_t small[] = {{200704, COLL_FLOAT32}, {256, COLL_FLOAT32},
                                             {2560, COLL_FLOAT32}, {10, COLL_FLOAT32}};
    static const coll__bp_param_t wide[] = {
        {784 * 2048, COLL_FLOAT32},  {2048, COLL_FLOAT32}, {2048 * 2048, COLL_FLOAT32},
        {2048, COLL_FLOAT32},        {2048 * 2048, COLL_FLOAT32}, {2048, COLL_FLOAT32},
        {2048 * 2048, COLL_FLOAT32}, {2048, COLL_FLOAT32}, {10 * 2048, COLL_FLOAT32},
        {10, COLL_FLOAT32}};
    static const want_bucket_t want_small[] = {{{3, 2, 1, 0, -1}, COLL_FLOAT32}};
    static const want_bucket_t want_wide[] = {{{9, 8, 7, 6, -1}, COLL_FLOAT32},
                                              {{5, 4, 3, 2, -1}, COLL_FLOAT32},
                                              {{1, 0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;

    build_reverse(small, 4, COLL_BUCKETER_DEFAULT_FIRST_CAP_BYTES,
                  COLL_BUCKETER_DEFAULT_CAP_BYTES, &plan);
    check_plan(&plan, small, want_small, 1);
    coll__bplan_free(&plan);
    build_reverse(wide, 10, COLL_BUCKETER_DEFAULT_FIRST_CAP_BYTES,
                  COLL_BUCKETER_DEFAULT_CAP_BYTES, &plan);
    check_plan(&plan, wide, want_wide, 3);
    coll__bplan_free(&plan);
}

/* Parameters of 0 elements take no room and never close a bucket; no parameters: no bucket. */
static void test_empty(void **state)
{
    static const coll__bp_param_t params[] = {{0, COLL_FLOAT32}, {4, COLL_FLOAT32},
                                              {0, COLL_FLOAT32}};
    static const want_bucket_t want[] = {{{2, 1, 0, -1}, COLL_FLOAT32}};
    coll__bplan_t plan;
    size_t none = 0;

    build_reverse(params, 3, 32, 32, &plan);
    check_plan(&plan, params, want, 1);
    assert_int_equal(plan.offset_of[0], 4);
    coll__bplan_free(&plan);
    assert_int_equal(coll__bplan_build(params, 0, &none, 16, 16, &plan), COLL_OK);
    assert_int_equal(plan.nbuckets, 0);
    coll__bplan_free(&plan);
}

static void test_invalid(void **state)
{
    static const coll__bp_param_t params[] = {{1, COLL_FLOAT32}, {1, COLL_FLOAT32}};
    static const coll__bp_param_t bad_dtype[] = {{1, COLL_FLOAT32}, {1, (coll_dtype_t)99}};
    static const size_t dup[] = {0, 0}, out_of_range[] = {0, 2}, ok[] = {1, 0};
    coll__bplan_t plan = {0};

    assert_int_equal(coll__bplan_build(params, 2, dup, 8, 8, &plan), COLL_ERR_INVALID);
    assert_int_equal(coll__bplan_build(params, 2, out_of_range, 8, 8, &plan), COLL_ERR_INVALID);
    assert_int_equal(coll__bplan_build(params, 2, ok, 0, 8, &plan), COLL_ERR_INVALID);
    assert_int_equal(coll__bplan_build(params, 2, ok, 8, 0, &plan), COLL_ERR_INVALID);
    assert_int_equal(coll__bplan_build(bad_dtype, 2, ok, 8, 8, &plan), COLL_ERR_INVALID);
    assert_null(plan.buckets);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reverse_order_and_first_cap),
        cmocka_unit_test(test_one_bucket_and_per_tensor),
        cmocka_unit_test(test_large_parameter),
        cmocka_unit_test(test_datatypes),
        cmocka_unit_test(test_ready_order),
        cmocka_unit_test(test_trainer_models),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_invalid),
    };
    return cmocka_run_group_tests_name("bucket_plan", tests, NULL, NULL);
}
