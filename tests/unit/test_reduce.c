/* Unit tests of the host reduction kernel (kernels/cpu/reduce.h). Inputs are small integers,
 * so sums are exact in float and every expected value is computed in integers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "reduce.h"

#define MAX_SRC 8
#define GUARD 16
#define GUARD_VALUE -7777.0f

/* One float array with GUARD sentinels on both sides; data starts @p shift floats in. */
typedef struct {
    float *mem;
    float *data;
    size_t count;
} buf_t;

static buf_t buf_new(size_t count, size_t shift)
{
    buf_t b;
    /* Aligned allocation so that shift 0 is 64-byte aligned and shift 1 is not. */
    size_t total = count + 2 * GUARD + shift;
    b.mem = aligned_alloc(64, (total * sizeof(float) + 63) / 64 * 64);
    assert_non_null(b.mem);
    for (size_t i = 0; i < total; i++) {
        b.mem[i] = GUARD_VALUE;
    }
    b.data = b.mem + GUARD + shift;
    b.count = count;
    return b;
}

static void assert_guards(const buf_t *b)
{
    for (size_t i = 0; i < GUARD; i++) {
        assert_true(b->data[-1 - (ptrdiff_t)i] == GUARD_VALUE);
        assert_true(b->data[b->count + i] == GUARD_VALUE);
    }
}

/* Element i of source k: an integer in -8..8. */
static int value(unsigned k, size_t i)
{
    return (int)((i * 7 + k * 13 + (i >> 11)) % 17) - 8;
}

static int sum_at(unsigned nsrc, size_t i)
{
    int s = 0;
    for (unsigned k = 0; k < nsrc; k++) {
        s += value(k, i);
    }
    return s;
}

typedef struct {
    coll_redop_t op;
    int finalize;
    uint32_t world;
    int in_place;
    size_t shift; /* floats of misalignment of every buffer */
} reduce_mode_t;

static float expected(const reduce_mode_t *m, unsigned nsrc, size_t i)
{
    int s = sum_at(nsrc, i);
    if (m->op == COLL_AVG && m->finalize && m->world > 1) {
        /* The correctly rounded quotient: what IEEE division of the exact sum gives. */
        return (float)s / (float)m->world;
    }
    return (float)s;
}

static void run_case(const reduce_mode_t *m, unsigned nsrc, size_t count)
{
    buf_t src[MAX_SRC], out;
    const void *srcs[MAX_SRC];

    for (unsigned k = 0; k < nsrc; k++) {
        /* Sources at different offsets within their lines when shifted. */
        src[k] = buf_new(count, m->shift ? m->shift + k % 3 : 0);
        for (size_t i = 0; i < count; i++) {
            src[k].data[i] = (float)value(k, i);
        }
        srcs[k] = src[k].data;
    }
    out = m->in_place ? src[0] : buf_new(count, m->shift);
    coll_reduce(COLL_FLOAT32, m->op, m->finalize, m->world, out.data, srcs, nsrc, count);

    for (size_t i = 0; i < count; i++) {
        float want = expected(m, nsrc, i);
        if (out.data[i] != want) {
            fail_msg("op %d fin %d world %u nsrc %u count %zu in_place %d shift %zu: "
                     "[%zu] = %.9g, expected %.9g",
                     m->op, m->finalize, m->world, nsrc, count, m->in_place, m->shift, i,
                     (double)out.data[i], (double)want);
        }
    }
    assert_guards(&out);
    /* Sources other than the in-place destination are left untouched. */
    for (unsigned k = m->in_place ? 1 : 0; k < nsrc; k++) {
        for (size_t i = 0; i < count; i++) {
            assert_true(src[k].data[i] == (float)value(k, i));
        }
        assert_guards(&src[k]);
        free(src[k].mem);
    }
    free(out.mem);
}

static const size_t counts[] = {0, 1, 7, 2047, 2048, 2049, 100003};
#define NCOUNTS (sizeof(counts) / sizeof(counts[0]))

static void run_all(const reduce_mode_t *m)
{
    for (unsigned nsrc = 1; nsrc <= MAX_SRC; nsrc++) {
        for (size_t c = 0; c < NCOUNTS; c++) {
            run_case(m, nsrc, counts[c]);
        }
    }
}

static void test_sum_out_of_place(void **state)
{
    reduce_mode_t m = {COLL_SUM, 0, 4, 0, 0};
    run_all(&m);
}

static void test_sum_in_place(void **state)
{
    reduce_mode_t m = {COLL_SUM, 0, 4, 1, 0};
    run_all(&m);
}

static void test_sum_finalize_does_not_divide(void **state)
{
    reduce_mode_t m = {COLL_SUM, 1, 4, 0, 0};
    run_all(&m);
}

static void test_sum_unaligned_out_of_place(void **state)
{
    reduce_mode_t m = {COLL_SUM, 0, 4, 0, 1};
    run_all(&m);
}

static void test_sum_unaligned_in_place(void **state)
{
    reduce_mode_t m = {COLL_SUM, 0, 4, 1, 1};
    run_all(&m);
}

/* Before the last combine, AVG accumulates exactly like SUM. */
static void test_avg_without_finalize_is_sum(void **state)
{
    reduce_mode_t m = {COLL_AVG, 0, 4, 0, 0};
    run_all(&m);
    m.in_place = 1;
    run_all(&m);
}

static void test_avg_finalize_divides_by_world_size(void **state)
{
    for (uint32_t w = 1; w <= 5; w++) {
        reduce_mode_t m = {COLL_AVG, 1, w, 0, 0};
        run_all(&m);
        m.in_place = 1;
        m.shift = 1;
        run_all(&m);
    }
}

/* When every source holds the same integer v and nsrc equals the world size, the mean is
 * exactly v. */
static void test_avg_of_equal_inputs_is_exact(void **state)
{
    const size_t count = 5000;
    for (uint32_t w = 1; w <= MAX_SRC; w++) {
        buf_t src[MAX_SRC];
        const void *srcs[MAX_SRC];
        for (unsigned k = 0; k < w; k++) {
            src[k] = buf_new(count, 0);
            for (size_t i = 0; i < count; i++) {
                src[k].data[i] = (float)((int)(i % 29) - 14);
            }
            srcs[k] = src[k].data;
        }
        coll_reduce(COLL_FLOAT32, COLL_AVG, 1, w, src[0].data, srcs, w, count);
        for (size_t i = 0; i < count; i++) {
            assert_true(src[0].data[i] == (float)((int)(i % 29) - 14));
        }
        assert_guards(&src[0]);
        for (unsigned k = 0; k < w; k++) {
            free(src[k].mem);
        }
    }
}

static void test_avg_known_values(void **state)
{
    float a[3] = {1, 2, 10}, b[3] = {2, 2, 5}, c[3] = {3, 5, 0}, out[3];
    const void *srcs[3] = {a, b, c};

    coll_reduce(COLL_FLOAT32, COLL_AVG, 1, 3, out, srcs, 3, 3);
    assert_true(out[0] == 2.0f);
    assert_true(out[1] == 3.0f);
    assert_true(out[2] == 5.0f);
    coll_reduce(COLL_FLOAT32, COLL_AVG, 1, 2, out, srcs, 3, 3);
    assert_true(out[0] == 3.0f);
    assert_true(out[1] == 4.5f);
    assert_true(out[2] == 7.5f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_out_of_place),
        cmocka_unit_test(test_sum_in_place),
        cmocka_unit_test(test_sum_finalize_does_not_divide),
        cmocka_unit_test(test_sum_unaligned_out_of_place),
        cmocka_unit_test(test_sum_unaligned_in_place),
        cmocka_unit_test(test_avg_without_finalize_is_sum),
        cmocka_unit_test(test_avg_finalize_divides_by_world_size),
        cmocka_unit_test(test_avg_of_equal_inputs_is_exact),
        cmocka_unit_test(test_avg_known_values),
    };
    return cmocka_run_group_tests_name("reduce", tests, NULL, NULL);
}
