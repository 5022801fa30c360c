/*
 * The CUDA reduction's element functions (kernels/cuda/elem_reduce.h, hd.h), compiled by the
 * host's compiler, against the host executor's reduce (kernels/cpu/reduce.h) for every dtype and
 * operation: 1 to 9 sources, AVG finalized or not, float16 and bfloat16 with raw, partial and
 * float32 sources and both destinations, on values that include NaNs with payloads, infinities,
 * signed zeros, subnormals and the integers' extremes. Bit for bit, except the payload of a NaN
 * that SUM, AVG or PROD produce (the host's vector code and a scalar compiler may pick either
 * operand's). The 16-bit conversions against the host's (kernels/cpu/half.h): every float16,
 * and a sweep of float32 patterns that covers every exponent and rounding case.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cpu/half.h"
#include "kernels/cuda/elem_reduce.h"
#include "kernels/exec.h"
#include "reduce_ref.h"

#define N 1027
#define MAX_SRC 9

static uint8_t src[MAX_SRC][N * 8], host_out[N * 8];
static float partial[MAX_SRC][N];

/* Float values: mostly ordinary, 1 in 8 special (NaN with a payload, infinity, zero of either
 * sign, a subnormal, a huge value), so that MIN and MAX meet every case. */
static double special(uint64_t r)
{
    static const double v[] = {INFINITY, -INFINITY, 0.0, -0.0, 1e-40, -3e-39, 1e300, 65504.0,
                               70000.0, 3.0e38};
    return v[r % (sizeof(v) / sizeof(v[0]))];
}

static void put_float(coll_dtype_t dt, void *p, size_t i, uint64_t r)
{
    double v = (double)(r >> 11 & 0xffff) / 4096.0 - 8.0;
    uint64_t nan = 0x7ff8000000000000ull | (r >> 20 & 0xfffffffffull) << 12 |
                   (r & 2 ? 1ull << 63 : 0); /* a NaN with a payload and a sign */

    if (r % 16 == 1) {
        v = special(r >> 8);
    }
    if (dt == COLL_FLOAT16 || dt == COLL_BFLOAT16) {
        /* 1 in 16 any bit pattern: NaNs, infinities, subnormals, zeros of either sign */
        uint16_t h = r % 16 == 0 ? (uint16_t)(r >> 40)
                     : dt == COLL_FLOAT16 ? coll__f32_to_f16((float)v) : coll__f32_to_bf16((float)v);
        memcpy((uint8_t *)p + 2 * i, &h, 2);
    } else if (dt == COLL_FLOAT32) {
        float f = (float)v;
        uint32_t u = (uint32_t)(nan >> 32);
        memcpy((uint8_t *)p + 4 * i, r % 16 == 0 ? (const void *)&u : (const void *)&f, 4);
    } else {
        memcpy((uint8_t *)p + 8 * i, r % 16 == 0 ? (const void *)&nan : (const void *)&v, 8);
    }
}

static void fill(coll_dtype_t dt, unsigned nsrc)
{
    for (unsigned k = 0; k < nsrc; k++) {
        for (size_t i = 0; i < N; i++) {
            uint64_t r = ref_rand();
            if (ref_is_float(dt)) {
                put_float(dt, src[k], i, r);
            } else {
                ref_put_i(dt, src[k], i, (int64_t)r);
            }
            put_float(COLL_FLOAT32, partial[k], i, ref_rand());
        }
    }
}

static int nan_result_op(int op)
{
    return op == COLL_SUM || op == COLL_AVG || op == COLL_PROD;
}

/* Element @p i of the host's output against the element function's @p want (its bytes). */
static void check(coll_dtype_t dt, int op, size_t i, const void *want, size_t es,
                  const char *what)
{
    const uint8_t *got = host_out + i * es;

    if (memcmp(got, want, es) == 0) {
        return;
    }
    if (nan_result_op(op) && ref_is_float(dt)) {
        double a = es == 8 ? *(const double *)(const void *)got : 0, b = a;
        if (es == 4) {
            a = *(const float *)(const void *)got;
            b = *(const float *)want;
        } else if (es == 8) {
            b = *(const double *)want;
        } else {
            uint16_t ha, hb;
            memcpy(&ha, got, 2);
            memcpy(&hb, want, 2);
            a = dt == COLL_FLOAT16 ? coll__f16_to_f32(ha) : coll__bf16_to_f32(ha);
            b = dt == COLL_FLOAT16 ? coll__f16_to_f32(hb) : coll__bf16_to_f32(hb);
        }
        if (isnan(a) && isnan(b)) {
            return;
        }
    }
    fail_msg("%s %s %s: element %zu differs from the host", ref_dtype_names[dt],
             ref_op_names[op], what, i);
}

/* float32, float64 and the integers: the whole-element function against the host. */
static void check_plain(coll_dtype_t dt, int op, unsigned nsrc, int finalize, uint32_t world)
{
    const void *srcs[MAX_SRC];
    const size_t es = ref_esize(dt);
    const int divide = finalize && world > 1;

    for (unsigned k = 0; k < nsrc; k++) {
        srcs[k] = src[k];
    }
    coll_reduce_args_t a = {.dtype = dt, .op = (coll_redop_t)op, .world_size = world,
                            .finalize = finalize, .dst = host_out, .src = srcs, .nsrc = nsrc,
                            .count = N};
    coll_exec_get(COLL_MEM_HOST)->reduce(&a);
    for (size_t i = 0; i < N; i++) {
        uint8_t want[8] = {0};
        switch (dt) {
#define CASE(DT, T, f)                                                                          \
    case DT: {                                                                                  \
        T v = f(op, divide, world, srcs, nsrc, i);                                              \
        memcpy(want, &v, sizeof(v));                                                            \
        break;                                                                                  \
    }
            CASE(COLL_FLOAT32, float, coll_hd_reduce_f32)
            CASE(COLL_FLOAT64, double, coll_hd_reduce_f64)
            CASE(COLL_INT8, int8_t, coll_hd_reduce_i8)
            CASE(COLL_UINT8, uint8_t, coll_hd_reduce_u8)
            CASE(COLL_INT32, int32_t, coll_hd_reduce_i32)
            CASE(COLL_INT64, int64_t, coll_hd_reduce_i64)
#undef CASE
        default: fail();
        }
        check(dt, op, i, want, es, finalize ? "finalized" : "partial");
    }
}

/* float16 and bfloat16: sources raw (@p raw_mask) or partial, some float32 (@p f32_mask),
 * into a 16-bit or a float32 (@p dst_f32) destination. */
static void check_half(coll_dtype_t dt, int op, unsigned nsrc, uint64_t raw_mask,
                       uint64_t f32_mask, int dst_f32, uint32_t world)
{
    const void *srcs[MAX_SRC];
    float scale[MAX_SRC];
    const int fmt = dt == COLL_BFLOAT16 ? COLL_HD_BF16 : COLL_HD_F16;

    for (unsigned k = 0; k < nsrc; k++) {
        srcs[k] = (f32_mask >> k) & 1 ? (const void *)partial[k] : (const void *)src[k];
        scale[k] = coll_hd_half_scale(op, (raw_mask >> k) & 1, world);
    }
    coll_reduce_args_t a = {.dtype = dt, .op = (coll_redop_t)op, .world_size = world,
                            .finalize = 1, .dst = host_out, .src = srcs, .nsrc = nsrc,
                            .raw_mask = raw_mask, .f32_mask = f32_mask, .dst_f32 = dst_f32,
                            .count = N};
    coll_exec_get(COLL_MEM_HOST)->reduce(&a);
    for (size_t i = 0; i < N; i++) {
        float v = coll_hd_reduce_half(fmt, op, srcs, nsrc, f32_mask, scale, i);
        if (dst_f32) {
            check(COLL_FLOAT32, op, i, &v, 4, "to float32");
        } else {
            uint16_t h = coll_hd_narrow(fmt, v);
            check(dt, op, i, &h, 2, "to 16 bits");
        }
    }
}

static const unsigned nsrcs[] = {1, 2, 3, 5, MAX_SRC};
#define NSRCS (sizeof(nsrcs) / sizeof(nsrcs[0]))

static void test_float_and_integer_dtypes(void **state)
{
    static const coll_dtype_t dts[] = {COLL_FLOAT32, COLL_FLOAT64, COLL_INT8, COLL_UINT8,
                                       COLL_INT32, COLL_INT64};

    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
        for (int op = 0; op < COLL_REDOP_COUNT; op++) {
            for (size_t s = 0; s < NSRCS && ref_op_applies(dts[d], (coll_redop_t)op); s++) {
                fill(dts[d], nsrcs[s]);
                check_plain(dts[d], op, nsrcs[s], 1, 7);
                check_plain(dts[d], op, nsrcs[s], 0, 7);
                check_plain(dts[d], op, nsrcs[s], 1, 1);
            }
        }
    }
}

static void test_half_dtypes(void **state)
{
    for (int dt = COLL_FLOAT16; dt <= COLL_BFLOAT16; dt++) {
        for (int op = 0; op < COLL_REDOP_COUNT; op++) {
            for (size_t s = 0; s < NSRCS && ref_op_applies(dt, (coll_redop_t)op); s++) {
                const unsigned n = nsrcs[s];
                const uint64_t all = (1ull << n) - 1;
                fill((coll_dtype_t)dt, n);
                check_half((coll_dtype_t)dt, op, n, all, 0, 0, 6);
                check_half((coll_dtype_t)dt, op, n, 0, 0, 1, 6);
                /* odd sources float32 partials, the others raw */
                check_half((coll_dtype_t)dt, op, n, all & 0x155, all & 0xaa, 0, 6);
                check_half((coll_dtype_t)dt, op, n, all & 0xaa, all & 0x155, 1, 3);
            }
        }
    }
}

/* In place (dst = src[0]): the host's result equals the element function on the inputs. */
static void test_in_place(void **state)
{
    static uint8_t copy[N * 8];
    const void *srcs[3] = {src[0], src[1], src[2]};

    fill(COLL_FLOAT32, 3);
    memcpy(copy, src[0], sizeof(copy));
    const void *orig[3] = {copy, src[1], src[2]};
    coll_reduce_args_t a = {.dtype = COLL_FLOAT32, .op = COLL_MAX, .world_size = 1,
                            .dst = src[0], .src = srcs, .nsrc = 3, .count = N};
    coll_exec_get(COLL_MEM_HOST)->reduce(&a);
    for (size_t i = 0; i < N; i++) {
        float v = coll_hd_reduce_f32(COLL_MAX, 0, 1, orig, 3, i);
        assert_memory_equal(&v, src[0] + 4 * i, 4);
    }
}

static void test_f16_widening_every_value(void **state)
{
    for (uint32_t h = 0; h < 0x10000; h++) {
        float a = coll_hd_f16_to_f32((uint16_t)h), b = coll__f16_to_f32((uint16_t)h);
        if (memcmp(&a, &b, 4) != 0) {
            fail_msg("float16 0x%04x widens differently", h);
        }
        assert_true(coll_hd_bf16_to_f32((uint16_t)h) == coll__bf16_to_f32((uint16_t)h) ||
                    isnan(coll__bf16_to_f32((uint16_t)h)));
    }
}

/* Every sign and exponent with low mantissa patterns around every rounding point of both
 * formats (bits 13 and 16), and a prime-strided sweep of the rest. */
static void narrow_check(uint32_t u)
{
    float f = coll__f32_from_bits(u);

    if (coll_hd_f32_to_f16(f) != coll__f32_to_f16(f) ||
        coll_hd_f32_to_bf16(f) != coll__f32_to_bf16(f)) {
        fail_msg("float32 0x%08x narrows differently", u);
    }
}

static void test_narrowing(void **state)
{
    static const uint32_t low[] = {0,      1,      0xfff,  0x1000, 0x1001, 0x1fff, 0x2000,
                                   0x3000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x10000, 0x18000,
                                   0x7fffff, 0x400000, 0x7fe000, 0x7ff000};

    for (uint32_t se = 0; se < 512; se++) {
        for (size_t j = 0; j < sizeof(low) / sizeof(low[0]); j++) {
            narrow_check(se << 23 | low[j]);
            narrow_check(se << 23 | (low[j] ^ (0x5a5a5a & 0x7fffff)));
        }
    }
    for (uint64_t u = 0; u < 0x100000000ull; u += 4099) {
        narrow_check((uint32_t)u);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_and_integer_dtypes),
        cmocka_unit_test(test_half_dtypes),
        cmocka_unit_test(test_in_place),
        cmocka_unit_test(test_f16_widening_every_value),
        cmocka_unit_test(test_narrowing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
