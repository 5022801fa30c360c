/*
 * Unit tests of the executor table (kernels/exec.h): the table per memory kind, every entry of
 * the host executor against values computed here (the reduction for every dtype and op against
 * reduce_ref.h's element-by-element reference, each other entry on inputs whose results are
 * known exactly), and the one instruction-set dispatch (kernels/cpu/isa.h): the default is the
 * widest set this CPU has, and every set it has gives the same bits through the table.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/optim.h"
#include "kernels/exec.h"
#include "reduce_ref.h"

#define N 1027   /* a prime: whole vectors and a tail on every instruction set */
#define NSRC 3

static const coll_exec_t *host(void)
{
    const coll_exec_t *ex = coll_exec_get(COLL_MEM_HOST);
    assert_non_null(ex);
    return ex;
}

/* The set a process starts on, read before any test forces one. */
static const char *default_isa;

static void test_table_per_kind(void **state)
{
    const coll_exec_t *ex = host();

    assert_string_equal(ex->name, "host");
    assert_int_equal(ex->kind, COLL_MEM_HOST);
    assert_string_equal(coll_mem_kind_name(COLL_MEM_HOST), "host");
    assert_string_equal(coll_mem_kind_name(COLL_MEM_CUDA), "cuda");
    assert_null(coll_exec_get(COLL_MEM_KINDS));
    assert_null(coll_exec_get((coll_mem_kind_t)-1));
    assert_string_equal(coll_mem_kind_name(COLL_MEM_KINDS), "unknown");
}

/* A device kind has no executor until one is registered; then that one, for good: the same
 * table again is fine, another one, the host's kind, no kind or a missing entry are refused.
 * The stand-in is the host's table under the device kind (this process has no module). */
static void test_register_a_device_kind(void **state)
{
    static coll_exec_t fake, other, holed;

    fake = *host();
    fake.name = "fake";
    fake.kind = COLL_MEM_CUDA;
    other = fake;
    holed = fake;
    holed.sync = NULL;

    assert_null(coll_exec_get(COLL_MEM_CUDA));
    assert_int_equal(coll_exec_register(NULL), COLL_ERR_INVALID);
    assert_int_equal(coll_exec_register(host()), COLL_ERR_INVALID);
    assert_int_equal(coll_exec_register(&holed), COLL_ERR_INVALID);
    holed = fake;
    holed.kind = COLL_MEM_KINDS;
    assert_int_equal(coll_exec_register(&holed), COLL_ERR_INVALID);
    assert_null(coll_exec_get(COLL_MEM_CUDA));

    assert_int_equal(coll_exec_register(&fake), COLL_OK);
    assert_ptr_equal(coll_exec_get(COLL_MEM_CUDA), &fake);
    assert_int_equal(coll_exec_register(&fake), COLL_OK);
    assert_int_equal(coll_exec_register(&other), COLL_ERR_BUSY);
    assert_ptr_equal(coll_exec_get(COLL_MEM_CUDA), &fake);
    assert_ptr_equal(coll_exec_get(COLL_MEM_HOST), host());
}

/* The host's queued entries do the work before they return, and sync has nothing to wait for;
 * their arguments are checked (coll_reduce_args_check()). */
static void test_host_async_entries(void **state)
{
    const coll_exec_t *ex = host();
    const coll_exec_ctx_t ctx = {0, NULL};
    float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4];
    const void *srcs[2] = {a, b};
    coll_reduce_args_t r = {.dtype = COLL_FLOAT32, .op = COLL_SUM, .world_size = 1,
                            .dst = out, .src = srcs, .nsrc = 2, .count = 4};

    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_OK);
    assert_true(out[0] == 11 && out[1] == 22 && out[2] == 33 && out[3] == 44);
    assert_int_equal(ex->copy_async(&ctx, out, a, sizeof(a)), COLL_OK);
    assert_memory_equal(out, a, sizeof(a));
    assert_int_equal(ex->zero_async(&ctx, out + 1, 2 * sizeof(float)), COLL_OK);
    assert_true(out[0] == 1 && out[1] == 0 && out[2] == 0 && out[3] == 4);
    assert_int_equal(ex->sync(&ctx), COLL_OK);

    assert_int_equal(ex->copy_async(&ctx, NULL, a, 4), COLL_ERR_INVALID);
    assert_int_equal(ex->zero_async(&ctx, NULL, 4), COLL_ERR_INVALID);
    assert_int_equal(ex->copy_async(&ctx, NULL, NULL, 0), COLL_OK);
    r.nsrc = 0;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.nsrc = COLL_REDUCE_MAX_SRCS + 1;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.nsrc = 2;
    r.f32_mask = 1; /* a float32 partial of a float32 reduction */
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.f32_mask = 0;
    r.raw_mask = 4; /* a bit past nsrc */
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.raw_mask = 0;
    r.world_size = 0;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.world_size = 1;
    r.dtype = COLL_DTYPE_COUNT;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    for (coll_redop_t op = COLL_BAND; op <= COLL_BXOR; op++) {
        r.op = op; /* bitwise: integers only */
        r.dtype = COLL_FLOAT32;
        assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
        r.dtype = COLL_BFLOAT16;
        assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    }
    r.op = COLL_SUM;
    r.dtype = COLL_FLOAT16;
    r.f32_mask = 3;
    r.raw_mask = 1; /* raw and float32 at once */
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.raw_mask = 0;
    srcs[1] = NULL;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_ERR_INVALID);
    r.count = 0;
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_OK);
}

/* Values every op keeps finite and away from overflow: PROD of three stays small. */
static void fill(coll_dtype_t dt, void *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (ref_is_float(dt)) {
            double v = 0.5 + (double)(ref_rand() % 3000) / 2000.0;
            ref_put_f(dt, p, i, ref_rand() & 1 ? -v : v);
        } else {
            ref_put_i(dt, p, i, ref_rand());
        }
    }
}

/* The reduction @p a of NSRC fresh sources through @p ex into @p got; want gets the reference. */
static void reduce_case(const coll_exec_t *ex, coll_reduce_args_t *a, uint8_t *got, uint8_t *want)
{
    static uint8_t src[NSRC][N * 8];
    const void *srcs[NSRC];

    for (unsigned k = 0; k < NSRC; k++) {
        fill(a->dtype, src[k], N);
        srcs[k] = src[k];
    }
    a->src = srcs;
    a->dst = got;
    ref_reduce(a, srcs, want);
    ex->reduce(a);
}

static void check_reduce_all(const coll_exec_t *ex)
{
    static uint8_t got[N * 8], want[N * 8];

    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        for (int op = 0; op < COLL_REDOP_COUNT; op++) {
            if (!ref_op_applies((coll_dtype_t)dt, (coll_redop_t)op)) {
                continue;
            }
            coll_reduce_args_t a = {.dtype = (coll_dtype_t)dt, .op = (coll_redop_t)op,
                                    .world_size = 5, .finalize = 1, .nsrc = NSRC,
                                    .raw_mask = (1u << NSRC) - 1, .count = N};
            reduce_case(ex, &a, got, want);
            for (size_t i = 0; i < N; i++) {
                if (!ref_elem_equal(a.dtype, got, want, i)) {
                    fail_msg("%s %s %s: element %zu differs from the reference", coll_cpu_isa(),
                             ref_dtype_names[dt], ref_op_names[op], i);
                }
            }
        }
    }
}

static void test_reduce_every_dtype_and_op(void **state)
{
    check_reduce_all(host());
}

static void test_copy_and_zero(void **state)
{
    const coll_exec_t *ex = host();
    uint8_t a[N], b[N];

    for (size_t i = 0; i < N; i++) {
        a[i] = (uint8_t)(i * 7 + 1);
    }
    ex->copy(b, a, N);
    assert_memory_equal(a, b, N);
    ex->zero(b + 1, N - 2);
    assert_int_equal(b[0], a[0]);
    assert_int_equal(b[N - 1], a[N - 1]);
    for (size_t i = 1; i < N - 1; i++) {
        assert_int_equal(b[i], 0);
    }
}

/* Powers of two and small integers are exact in both 16-bit formats: the cast round-trips
 * them, and the largest magnitude 3 times 2^13 lies in [2^14, 2^15). */
static void test_cast_round_trip(void **state)
{
    const coll_exec_t *ex = host();
    const float g[5] = {1.0f, -3.0f, 0.5f, 2.0f, 0.0f};
    float e[5] = {0}, out[5], acc[5] = {1, 1, 1, 1, 1};
    uint16_t h[5];
    int32_t p = 0;

    for (int f = COLL_CAST_FP16; f <= COLL_CAST_BF16; f++) {
        assert_int_equal(ex->cast_encode((coll_cast_format_t)f, g, e, 5, h, &p), COLL_OK);
        assert_int_equal(p, 13);
        assert_int_equal(ex->cast_decode((coll_cast_format_t)f, h, 5, p, out), COLL_OK);
        assert_memory_equal(out, g, sizeof(g));
        for (int i = 0; i < 5; i++) {
            assert_true(e[i] == 0.0f);
        }
    }
    assert_int_equal(ex->cast_accumulate(COLL_CAST_BF16, h, 5, p, 2.0f, acc), COLL_OK);
    assert_true(acc[0] == 3.0f && acc[1] == -5.0f && acc[2] == 2.0f && acc[4] == 1.0f);
}

/* Signs of {1, -2, 3, -4}: bits 1 and 3; L2 scale sqrt(30 / 4); decode gives +-scale. */
static void test_onebit_signs_and_scale(void **state)
{
    const coll_exec_t *ex = host();
    const float g[4] = {1.0f, -2.0f, 3.0f, -4.0f};
    float out[4], acc[4] = {0};
    uint8_t signs[1];
    float scale;

    assert_int_equal(ex->onebit_encode(COLL_ONEBIT_SCALE_L2, g, NULL, 4, signs, &scale), COLL_OK);
    assert_int_equal(signs[0], 0x0a);
    assert_true(scale == (float)sqrt(30.0 / 4.0));
    assert_int_equal(ex->onebit_decode(signs, 4, scale, 1.0f, out), COLL_OK);
    assert_true(out[0] == scale && out[1] == -scale && out[2] == scale && out[3] == -scale);
    assert_int_equal(ex->onebit_accumulate(signs, 4, scale, 1.0f, acc), COLL_OK);
    assert_memory_equal(acc, out, sizeof(out));
}

/* The two largest magnitudes of {0.1, -5, 3, 0.2}, their residual cleared. */
static void test_topk_selects_the_largest(void **state)
{
    const coll_exec_t *ex = host();
    const float g[4] = {0.1f, -5.0f, 3.0f, 0.2f};
    float e[4] = {0}, values[2], acc[4] = {0};
    uint32_t idx[2];
    uint8_t scratch[256];
    coll_topk_args_t a = {.grad = g, .residual = e, .count = 4, .k = 2,
                          .select = COLL_TOPK_SELECT_AUTO, .scratch = scratch,
                          .scratch_bytes = sizeof(scratch), .indices = idx, .values = values};

    assert_true(ex->topk_scratch_bytes(4, 2) <= sizeof(scratch));
    assert_int_equal(ex->topk_compress(&a), COLL_OK);
    assert_int_equal(idx[0], 1);
    assert_int_equal(idx[1], 2);
    assert_true(values[0] == -5.0f && values[1] == 3.0f);
    assert_true(e[0] == 0.1f && e[1] == 0.0f && e[2] == 0.0f && e[3] == 0.2f);
    assert_int_equal(ex->topk_accumulate(idx, values, 2, 0.5f, acc, 4), COLL_OK);
    assert_true(acc[0] == 0.0f && acc[1] == -2.5f && acc[2] == 1.5f && acc[3] == 0.0f);
}

/* M (2 x 3) times the unit column e_1 is M's second column; M^T P, P Q^T by hand. */
static void test_lowrank_products(void **state)
{
    const coll_exec_t *ex = host();
    const float m[6] = {1, 2, 3, 4, 5, 6};
    float q[3] = {0, 1, 0}, p[2], qt[3], out[6], res[6];

    assert_int_equal(ex->lowrank_orthonormalize(q, 3, 1, 0.0f), COLL_OK);
    assert_int_equal(ex->lowrank_mul_q(m, 2, 3, q, 1, p), COLL_OK);
    assert_true(p[0] == 2.0f && p[1] == 5.0f);
    assert_int_equal(ex->lowrank_mul_mt(m, 2, 3, p, 1, qt), COLL_OK);
    assert_true(qt[0] == 22.0f && qt[1] == 29.0f && qt[2] == 36.0f);
    assert_int_equal(ex->lowrank_reconstruct(p, q, 2, 3, 1, out), COLL_OK);
    assert_true(out[0] == 0.0f && out[1] == 2.0f && out[4] == 5.0f && out[5] == 0.0f);
    memcpy(res, m, sizeof(m));
    assert_int_equal(ex->lowrank_residual(p, q, 2, 3, 1, res, NULL), COLL_OK);
    assert_true(res[0] == 1.0f && res[1] == 0.0f && res[4] == 0.0f && res[5] == 6.0f);
}

/* The seeded Q as kernels/cpu/lowrank.h specifies it: splitmix64 from the seed, each output's
 * four 16-bit quarters summed, centred and scaled by sqrt(3) / 2^16, rounded to float. */
static void test_lowrank_seeded_q(void **state)
{
    uint64_t st = 42;
    float q[4];

    host()->lowrank_init_q(q, 2, 2, 42);
    for (int l = 0; l < 4; l++) {
        uint64_t z = (st += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        double sum = (double)(z & 0xffff) + (double)((z >> 16) & 0xffff) +
                     (double)((z >> 32) & 0xffff) + (double)(z >> 48);
        assert_true(q[l] == (float)((sum - 131070.0) * (sqrt(3.0) / 65536.0)));
    }
}

/* Sums of squares, the finiteness check and an SGD step without momentum, exact here. */
static void test_optimizer_steps(void **state)
{
    const coll_exec_t *ex = host();
    float w[3] = {1.0f, 2.0f, -3.0f};
    const float g[3] = {0.5f, -1.0f, 2.0f};
    const float bad[2] = {1.0f, INFINITY};
    coll_optim_sgd_coef_t k = {.lr = 0.5f};
    double two[2];

    assert_true(ex->optim_sumsq(w, 3) == 14.0);
    ex->optim_sumsq2(w, g, 3, two);
    assert_true(two[0] == 14.0 && two[1] == 5.25);
    assert_int_equal(ex->optim_all_finite(w, 3), 1);
    assert_int_equal(ex->optim_all_finite(bad, 2), 0);
    ex->optim_sgd(&k, w, g, NULL, 3);
    assert_true(w[0] == 0.75f && w[1] == 2.5f && w[2] == -4.0f);
}

/* The other optimizers' entries are the host's steps: the same bits as their one-call updates
 * (kernels/cpu/optim.h) on the same coefficients. */
static void test_optimizer_entries_are_the_host_steps(void **state)
{
    const coll_exec_t *ex = host();

    assert_ptr_equal(ex->optim_adamw, coll_optim_adamw_step);
    assert_ptr_equal(ex->optim_lars, coll_optim_lars_step);
    assert_ptr_equal(ex->optim_lamb_moments, coll_optim_lamb_moments_step);
    assert_ptr_equal(ex->optim_lamb_apply, coll_optim_lamb_apply_step);
}

/* The first set that can be forced, widest first, is the one a process starts on. */
static void test_default_is_the_widest(void **state)
{
    const char *widest = NULL;

    for (int i = 0; i < REF_NISAS && widest == NULL; i++) {
        if (coll_cpu_force_isa(ref_isas[i]) == 0) {
            widest = ref_isas[i];
        }
    }
    assert_non_null(widest);
    assert_string_equal(default_isa, widest);
    assert_int_equal(coll_cpu_force_isa("sse9"), -1);
    assert_string_equal(coll_cpu_isa(), widest);
}

/* Every set this CPU has, through the table: the reference's values, so the same bits. */
static void test_every_isa_agrees(void **state)
{
    int ran = 0;

    for (int i = 0; i < REF_NISAS; i++) {
        if (coll_cpu_force_isa(ref_isas[i]) != 0) {
            print_message("instruction set %s not on this CPU: not run\n", ref_isas[i]);
            continue;
        }
        assert_string_equal(coll_cpu_isa(), ref_isas[i]);
        check_reduce_all(host());
        ran++;
    }
    assert_true(ran >= 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_per_kind),
        cmocka_unit_test(test_register_a_device_kind),
        cmocka_unit_test(test_host_async_entries),
        cmocka_unit_test(test_reduce_every_dtype_and_op),
        cmocka_unit_test(test_copy_and_zero),
        cmocka_unit_test(test_cast_round_trip),
        cmocka_unit_test(test_onebit_signs_and_scale),
        cmocka_unit_test(test_topk_selects_the_largest),
        cmocka_unit_test(test_lowrank_products),
        cmocka_unit_test(test_lowrank_seeded_q),
        cmocka_unit_test(test_optimizer_steps),
        cmocka_unit_test(test_optimizer_entries_are_the_host_steps),
        cmocka_unit_test(test_default_is_the_widest),
        cmocka_unit_test(test_every_isa_agrees),
    };
    default_isa = coll_cpu_isa();
    return cmocka_run_group_tests(tests, NULL, NULL);
}
