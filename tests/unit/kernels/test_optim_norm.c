/*
 * Unit tests of the partial sums of squares and the finiteness check of the optimizer kernels
 * (coll_optim_sumsq, coll_optim_sumsq2, coll_optim_all_finite; kernels/cpu/optim.h): accuracy
 * against a long double reference, the same bits on every instruction set, shard sums against
 * the whole, and non-finite values anywhere in a buffer.
 */
#include <float.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "optim_ref.h"

#define N 100003

static long double ref_sumsq_f(const float *x, size_t n)
{
    long double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (long double)x[i] * x[i];
    }
    return s;
}

static void test_sumsq_small_exact(void **state)
{
    const float x[] = {3, 4, -12, 0.5f};

    assert_true(coll_optim_sumsq(NULL, 0) == 0);
    assert_true(coll_optim_sumsq(x, 2) == 25);
    assert_true(coll_optim_sumsq(x, 4) == 169.25);
    /* Squares of the largest floats are exact in double and do not overflow. */
    const float big[3] = {FLT_MAX, -FLT_MAX, FLT_MAX};
    assert_true(coll_optim_sumsq(big, 3) == 3.0 * (double)FLT_MAX * (double)FLT_MAX);
}

/* Within the documented bound, on every instruction set, and the same bits on all of them. */
static void test_sumsq_accuracy_and_isas(void **state)
{
    float *x = ref_alloc(N), *y = ref_alloc(N);
    double first = 0;
    int have_first = 0;

    ref_fill(x, N, -3, 3);
    ref_fill(y, N, -1e-3, 1e-3);
    const long double want = ref_sumsq_f(x, N);
    for (int k = 0; k < REF_OPTIM_NISAS; k++) {
        if (!ref_use_isa(ref_optim_isas[k])) {
            print_message("instruction set %s not on this CPU: not tested\n", ref_optim_isas[k]);
            continue;
        }
        double got = coll_optim_sumsq(x, N), two[2];
        assert_true(fabsl(got - want) <= want * 1e-14L);
        coll_optim_sumsq2(x, y, N, two);
        assert_memory_equal(&two[0], &got, sizeof(got));
        double gy = coll_optim_sumsq(y, N);
        assert_memory_equal(&two[1], &gy, sizeof(gy));
        if (have_first) {
            assert_memory_equal(&got, &first, sizeof(got));
        }
        first = got, have_first = 1;
    }
    free(x), free(y);
}

/* A layer's sum from its shards' partial sums: equal to the unsplit one to rounding. */
static void test_sumsq_shards_add_up(void **state)
{
    static const size_t cuts[] = {0, 1, 17, 4096, 4111, 60000, N};
    float *x = ref_alloc(N);
    double parts = 0;

    ref_fill(x, N, -1, 1);
    for (size_t s = 0; s + 1 < sizeof(cuts) / sizeof(cuts[0]); s++) {
        parts += coll_optim_sumsq(x + cuts[s], cuts[s + 1] - cuts[s]);
    }
    double whole = coll_optim_sumsq(x, N);
    assert_true(fabs(parts - whole) <= whole * 1e-14);
    free(x);
}

/* A non-finite element anywhere makes the sum non-finite and all_finite false. */
static void test_nonfinite_anywhere(void **state)
{
    static const size_t sizes[] = {1, 15, 16, 17, 33, 1000};
    const float bad[] = {INFINITY, -INFINITY, NAN};
    float *x = ref_alloc(1000);

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t n = sizes[s];
        const size_t where[] = {0, n / 2, n - 1};
        for (size_t b = 0; b < 3; b++) {
            for (size_t p = 0; p < 3; p++) {
                ref_fill(x, n, -1, 1);
                assert_int_equal(coll_optim_all_finite(x, n), 1);
                x[where[p]] = bad[b];
                assert_int_equal(coll_optim_all_finite(x, n), 0);
                assert_false(isfinite(coll_optim_sumsq(x, n)));
            }
        }
    }
    free(x);
}

/* The extremes of the finite range are finite. */
static void test_finite_extremes(void **state)
{
    const float x[] = {FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149f, -0.0f, 0.0f, -0x1p-149f};

    assert_int_equal(coll_optim_all_finite(x, sizeof(x) / sizeof(x[0])), 1);
    assert_int_equal(coll_optim_all_finite(NULL, 0), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sumsq_small_exact),
        cmocka_unit_test(test_sumsq_accuracy_and_isas),
        cmocka_unit_test(test_sumsq_shards_add_up),
        cmocka_unit_test(test_nonfinite_anywhere),
        cmocka_unit_test(test_finite_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
