/*
 * Unit tests of float32 partial results for float16 and bfloat16 (coll_reduce_args_t.f32_mask
 * and dst_f32): a partial result kept in float32 combined with 16-bit raw inputs, left to right
 * in float32, rounded to 16 bits once (or stored in float32 for a partial destination), in
 * place or not, with the float32 source first or in the middle, across accumulator blocks, on
 * every instruction set. The reference is computed here in float32 in the same order and
 * rounded with reduce_ref.h's own rounding.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kernels/cpu/isa.h"
#include "reduce_ref.h"

#define COUNT 10007 /* more than one 16 KiB accumulator block of float32 */
#define NSRC 4

typedef struct {
    coll_dtype_t dt;
    coll_redop_t op;
    unsigned f32_at;  /* which source is the float32 partial */
    int dst_f32;
    int in_place;     /* dst is the float32 source (needs dst_f32 and f32_at 0) */
} case_t;

static float widen(coll_dtype_t dt, uint16_t h)
{
    return (float)(dt == COLL_FLOAT16 ? ref_f16_value(h) : ref_bf16_value(h));
}

static uint16_t narrow(coll_dtype_t dt, float f)
{
    return dt == COLL_FLOAT16 ? ref_to_f16(f) : ref_to_bf16(f);
}

/* Element @p i of the reduction of case @p k: float32, left to right, AVG scaling raw inputs
 * by fl(1/world). */
static float reference(const case_t *k, float *const f32, uint16_t *const h[NSRC], size_t i)
{
    const float inv = 1.0f / 4.0f;
    float acc = 0;

    for (unsigned s = 0; s < NSRC; s++) {
        float x = s == k->f32_at ? f32[i] : widen(k->dt, h[s][i]);
        if (k->op == COLL_AVG && s != k->f32_at) {
            x = x * inv;
        }
        acc = s == 0 ? x : k->op == COLL_PROD ? acc * x : acc + x;
    }
    return acc;
}

static void fill(const case_t *k, float *f32, uint16_t *h[NSRC])
{
    for (size_t i = 0; i < COUNT; i++) {
        f32[i] = (float)((double)(ref_rand() % 200001) / 1000.0 - 100.0) * 1.0009765625f;
        for (unsigned s = 0; s < NSRC; s++) {
            double v = (double)(ref_rand() % 4001) / 100.0 - 20.0;
            h[s][i] = narrow(k->dt, (float)(k->op == COLL_PROD ? 1.0 + v / 400.0 : v));
        }
    }
}

static void run_case(const case_t *k, const char *isa)
{
    float *f32 = calloc(COUNT, sizeof(float)), *f32_copy = calloc(COUNT, sizeof(float));
    uint16_t *h[NSRC];
    const void *src[NSRC];
    void *dst = k->in_place ? (void *)f32 : calloc(COUNT, k->dst_f32 ? 4 : 2);

    for (unsigned s = 0; s < NSRC; s++) {
        h[s] = calloc(COUNT, 2);
        src[s] = s == k->f32_at ? (const void *)f32 : h[s];
    }
    fill(k, f32, h);
    memcpy(f32_copy, f32, COUNT * sizeof(float));
    coll_reduce_args_t a = {.dtype = k->dt, .op = k->op, .world_size = NSRC, .finalize = 1,
                            .dst = dst, .src = src, .nsrc = NSRC,
                            .raw_mask = ~(1ull << k->f32_at), .f32_mask = 1ull << k->f32_at,
                            .dst_f32 = k->dst_f32, .count = COUNT};
    assert_int_equal(coll_cpu_force_isa(isa), 0);
    coll_reduce(&a);
    for (size_t i = 0; i < COUNT; i++) {
        float want = reference(k, f32_copy, h, i);
        if (k->dst_f32) {
            float got = ((const float *)dst)[i];
            if (memcmp(&got, &want, 4) != 0) {
                fail_msg("%s %s %s f32 at %u: element %zu is %.9g, want %.9g", isa,
                         ref_dtype_names[k->dt], ref_op_names[k->op], k->f32_at, i, got, want);
            }
        } else if (((const uint16_t *)dst)[i] != narrow(k->dt, want)) {
            fail_msg("%s %s %s f32 at %u: element %zu is %.9g, want %.9g rounded once", isa,
                     ref_dtype_names[k->dt], ref_op_names[k->op], k->f32_at, i,
                     widen(k->dt, ((const uint16_t *)dst)[i]), want);
        }
    }
    for (unsigned s = 0; s < NSRC; s++) {
        free(h[s]);
    }
    if (!k->in_place) {
        free(dst);
    }
    free(f32);
    free(f32_copy);
}

static void run_all(const case_t *k)
{
    for (size_t i = 0; i < sizeof(ref_isas) / sizeof(ref_isas[0]); i++) {
        if (coll_cpu_force_isa(ref_isas[i]) == 0) {
            run_case(k, ref_isas[i]);
        }
    }
}

static void test_partial_first_rounded_once(void **state)
{
    static const coll_redop_t ops[] = {COLL_SUM, COLL_AVG, COLL_PROD};
    for (int dt = COLL_FLOAT16; dt <= COLL_BFLOAT16; dt++) {
        for (size_t o = 0; o < 3; o++) {
            run_all(&(case_t){(coll_dtype_t)dt, ops[o], 0, 0, 0});
        }
    }
}

static void test_partial_destination_kept_in_f32(void **state)
{
    for (int dt = COLL_FLOAT16; dt <= COLL_BFLOAT16; dt++) {
        run_all(&(case_t){(coll_dtype_t)dt, COLL_AVG, 0, 1, 0});
        run_all(&(case_t){(coll_dtype_t)dt, COLL_SUM, 0, 1, 1}); /* in place */
    }
}

static void test_partial_in_the_middle(void **state)
{
    for (int dt = COLL_FLOAT16; dt <= COLL_BFLOAT16; dt++) {
        run_all(&(case_t){(coll_dtype_t)dt, COLL_SUM, 2, 0, 0});
        run_all(&(case_t){(coll_dtype_t)dt, COLL_AVG, 3, 1, 0});
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_partial_first_rounded_once),
        cmocka_unit_test(test_partial_destination_kept_in_f32),
        cmocka_unit_test(test_partial_in_the_middle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
