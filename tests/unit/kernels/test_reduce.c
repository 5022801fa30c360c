/*
 * Unit tests of the host reduction kernels (kernels/cpu/reduce.h): every dtype x op on every
 * instruction set this CPU has, against the independent reference of reduce_ref.h. Covers source
 * counts 1..8 and 64, in place and out of place, aligned and one element off, counts around
 * vector widths, around the kernels' block size and a large prime, random AVG world sizes and
 * raw masks, and bytes around the destination left untouched. Special values and fixed
 * examples are in test_reduce_special.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/reduce_isa.h" /* block size, to test around block boundaries */
#include "reduce_ref.h"

#define MAX_NSRC COLL_REDUCE_MAX_SRCS
#define GUARD_BYTES 64
#define GUARD_BYTE 0xa5

/* ---- Buffers with GUARD_BYTES of GUARD_BYTE on both sides ---- */

typedef struct {
    uint8_t *mem;
    uint8_t *data;
    size_t total;
    size_t bytes;
} ref_buf_t;

/* count elements of esize bytes, starting shift elements past a 64-byte boundary. */
static ref_buf_t ref_buf_new(size_t count, size_t esize, size_t shift)
{
    ref_buf_t b;
    b.bytes = count * esize;
    b.total = (GUARD_BYTES + shift * esize + b.bytes + GUARD_BYTES + 63) / 64 * 64;
    b.mem = aligned_alloc(64, b.total);
    if (b.mem == NULL) {
        abort();
    }
    memset(b.mem, GUARD_BYTE, b.total);
    b.data = b.mem + GUARD_BYTES + shift * esize;
    return b;
}

/* @return 1 when every byte outside [data, data + bytes) still holds GUARD_BYTE. */
static int ref_buf_guards_ok(const ref_buf_t *b)
{
    for (uint8_t *p = b->mem; p < b->mem + b->total; p++) {
        if ((p < b->data || p >= b->data + b->bytes) && *p != GUARD_BYTE) {
            return 0;
        }
    }
    return 1;
}

/* ---- Inputs ---- */

/* A random finite float of magnitude about 2^-range .. 2^range, sometimes 0, -0, a subnormal
 * or an infinity. */
static double rand_float(coll_dtype_t dt, int range)
{
    uint64_t r = ref_rand();
    double sign = (r & 1) ? -1.0 : 1.0;
    double v;

    switch ((r >> 1) % 128) {
    case 0:
    case 1: return sign * 0.0;
    case 2: return sign * INFINITY;
    case 3: /* a subnormal: a small multiple of the smallest one */
        v = dt == COLL_FLOAT16 ? 0x1p-24 : dt == COLL_BFLOAT16 ? 0x1p-133
                                         : dt == COLL_FLOAT32 ? 0x1p-149 : 0x1p-1074;
        return sign * v * (double)((r >> 8) % 100 + 1);
    default:
        v = 1.0 + (double)((r >> 8) & 0xfffff) / 0x1p20;
        return sign * ldexp(v, (int)((r >> 32) % (2 * range + 1)) - range);
    }
}

static void fill_source(coll_dtype_t dt, coll_redop_t op, void *p, size_t count)
{
    /* Products of 64 sources stay mostly finite with small magnitudes. */
    int range = op == COLL_PROD ? 1 : dt == COLL_FLOAT16 ? 10 : 20;

    for (size_t i = 0; i < count; i++) {
        if (ref_is_float(dt)) {
            double v = rand_float(dt, range);
            if (dt == COLL_FLOAT32) {
                v = (float)v; /* stores exactly; ref_put_f rounds the 16-bit ones */
            }
            ref_put_f(dt, p, i, v);
        } else if (op == COLL_BAND || op == COLL_BOR) {
            /* Bits set 7 times in 8 for AND, 1 in 8 for OR: results of many sources that are
             * neither all zeros nor all ones. */
            uint64_t x = ref_rand(), y = ref_rand(), z = ref_rand();
            ref_put_i(dt, p, i, op == COLL_BAND ? x | y | z : x & y & z);
        } else {
            ref_put_i(dt, p, i, ref_rand());
        }
    }
}

/* ---- One case ---- */

typedef struct {
    coll_reduce_args_t args; /* dst and src are filled in by run_case() */
    int in_place;
    size_t shift; /* elements past a 64-byte boundary */
} case_t;

static void describe(const case_t *c, char *buf, size_t len)
{
    const coll_reduce_args_t *a = &c->args;
    snprintf(buf, len, "isa %s %s %s nsrc %u count %zu %s shift %zu world %u fin %d mask %#llx",
             coll_cpu_isa(), ref_dtype_names[a->dtype], ref_op_names[a->op], a->nsrc, a->count,
             c->in_place ? "in-place" : "out-of-place", c->shift, a->world_size, a->finalize,
             (unsigned long long)a->raw_mask);
}

static void check_result(const case_t *c, const ref_buf_t *out, const void *want)
{
    const coll_reduce_args_t *a = &c->args;
    char what[256];

    for (size_t i = 0; i < a->count; i++) {
        if (!ref_elem_equal(a->dtype, out->data, want, i)) {
            describe(c, what, sizeof(what));
            fail_msg("%s: element %zu differs from the reference", what, i);
        }
    }
    if (!ref_buf_guards_ok(out)) {
        describe(c, what, sizeof(what));
        fail_msg("%s: bytes around the destination were written", what);
    }
}

static void run_case(case_t *c)
{
    coll_reduce_args_t *a = &c->args;
    const size_t es = ref_esize(a->dtype);
    ref_buf_t src[MAX_NSRC], out;
    const void *srcs[MAX_NSRC], *ref_srcs[MAX_NSRC];
    uint8_t *src0_copy = malloc(a->count * es + 1), *want = malloc(a->count * es + 1);

    assert_non_null(src0_copy);
    assert_non_null(want);
    for (unsigned k = 0; k < a->nsrc; k++) {
        /* Sources at different offsets from the destination when shifted. */
        src[k] = ref_buf_new(a->count, es, c->shift ? c->shift + k % 3 : 0);
        fill_source(a->dtype, a->op, src[k].data, a->count);
        srcs[k] = ref_srcs[k] = src[k].data;
    }
    memcpy(src0_copy, src[0].data, a->count * es);
    ref_srcs[0] = src0_copy;
    out = c->in_place ? src[0] : ref_buf_new(a->count, es, c->shift);
    ref_reduce(a, ref_srcs, want);

    a->src = srcs;
    a->dst = out.data;
    coll_reduce(a);
    check_result(c, &out, want);

    for (unsigned k = c->in_place ? 1 : 0; k < a->nsrc; k++) {
        assert_true(ref_buf_guards_ok(&src[k]));
        free(src[k].mem);
    }
    free(out.mem);
    free(src0_copy);
    free(want);
}

/* Runs one case with random AVG parameters; placement and alignment from @p variant. */
static void run(coll_dtype_t dt, coll_redop_t op, unsigned nsrc, size_t count, unsigned variant)
{
    case_t c = {
        .args = {.dtype = dt, .op = op, .nsrc = nsrc, .count = count,
                 .world_size = 1 + (uint32_t)(ref_rand() % (nsrc + 3)),
                 .finalize = (int)(ref_rand() & 1), .raw_mask = ref_rand()},
        .in_place = variant & 1,
        .shift = (variant >> 1) & 1,
    };
    if (ref_rand() % 4 == 0) {
        c.args.raw_mask = ~0ull; /* the common case: all raw inputs */
    }
    run_case(&c);
}

/* ---- The matrix ---- */

static const unsigned nsrcs[] = {1, 2, 3, 4, 5, 6, 7, 8, 64};
static const size_t small_counts[] = {0, 1, 7, 15, 16, 17, 31, 33, 63, 64, 65};
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Sources per pass change at FANIN + 1 (first pass) and FANIN: nsrc 5, 6, 9 cross them. */
static const unsigned block_nsrcs[] = {1, 2, 5, 6, 9};

static void run_dtype_op(coll_dtype_t dt, coll_redop_t op)
{
    const size_t blk = coll__reduce_block_elems(dt);
    const size_t block_counts[] = {blk - 1, blk, blk + 1, 2 * blk + 1};

    for (size_t n = 0; n < LEN(nsrcs); n++) {
        for (size_t c = 0; c < LEN(small_counts); c++) {
            for (unsigned variant = 0; variant < 4; variant++) {
                run(dt, op, nsrcs[n], small_counts[c], variant);
            }
        }
    }
    for (size_t n = 0; n < LEN(block_nsrcs); n++) {
        for (size_t c = 0; c < LEN(block_counts); c++) {
            run(dt, op, block_nsrcs[n], block_counts[c], (unsigned)(n + c));
        }
    }
    run(dt, op, 64, blk + 1, 1);
    run(dt, op, 64, blk + 1, 2);
    run(dt, op, 2, 100003, 0); /* a large prime */
    run(dt, op, 3, 100003, 3);
}

/* Every dtype and op on @p isa; skipped, saying why, when this CPU lacks it. */
static void run_isa(const char *isa)
{
    if (coll_cpu_force_isa(isa) != 0) {
        print_message("%s: not supported by this CPU, not run\n", isa);
        skip();
    }
    assert_string_equal(coll_cpu_isa(), isa);
    for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
        for (int op = 0; op < COLL_REDOP_COUNT; op++) {
            if (ref_op_applies((coll_dtype_t)dt, (coll_redop_t)op)) {
                run_dtype_op((coll_dtype_t)dt, (coll_redop_t)op);
            }
        }
    }
}

static void test_matrix_scalar(void **state)
{
    run_isa("scalar");
}

static void test_matrix_avx2(void **state)
{
    run_isa("avx2");
}

static void test_matrix_avx512(void **state)
{
    run_isa("avx512");
}

/* The default is the widest supported set; unknown names change nothing. */
static void test_isa_selection(void **state)
{
    const char *widest = NULL;

    for (int i = 0; i < REF_NISAS; i++) {
        if (coll_cpu_force_isa(ref_isas[i]) == 0 && widest == NULL) {
            widest = ref_isas[i];
        }
    }
    assert_non_null(widest); /* at least scalar */
    assert_int_equal(coll_cpu_force_isa(widest), 0);
    assert_int_equal(coll_cpu_force_isa("sse9"), -1);
    assert_int_equal(coll_cpu_force_isa(""), -1);
    assert_string_equal(coll_cpu_isa(), widest);
    print_message("kernels: %s\n", widest);
}

static void test_count_zero_touches_nothing(void **state)
{
    uint8_t dst[8], src[8];
    const void *srcs[1] = {src};

    for (int i = 0; i < REF_NISAS; i++) {
        if (coll_cpu_force_isa(ref_isas[i]) != 0) {
            continue;
        }
        for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
            coll_reduce_args_t a = {.dtype = (coll_dtype_t)dt, .op = COLL_AVG, .world_size = 3,
                                    .finalize = 1, .dst = dst, .src = srcs, .nsrc = 1,
                                    .raw_mask = 1, .count = 0};
            memset(dst, 0x5a, sizeof(dst));
            memset(src, 0x11, sizeof(src));
            coll_reduce(&a);
            for (size_t k = 0; k < sizeof(dst); k++) {
                assert_int_equal(dst[k], 0x5a);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isa_selection),
        cmocka_unit_test(test_count_zero_touches_nothing),
        cmocka_unit_test(test_matrix_scalar),
        cmocka_unit_test(test_matrix_avx2),
        cmocka_unit_test(test_matrix_avx512),
    };
    return cmocka_run_group_tests_name("reduce", tests, NULL, NULL);
}
