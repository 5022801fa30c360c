/*
 * The device check of copies and the reduction (kernel_check.h): every dtype and operation (the
 * bitwise ones of the integers only) at every count, three ways: aligned through the synchronous
 * entry; every pointer one element off (the kernels' element path) through reduce_async on a
 * stream of this program's, with float16 and bfloat16 mixing raw, partial and float32 sources
 * into a float32 destination; and in place.
 * The host's bits, except the payload of a NaN that SUM, AVG or PROD produce.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/kernel_check.h"

#define NSRC_MAX 5

static const char *const dtype_names[COLL_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"};
static const char *const op_names[COLL_REDOP_COUNT] = {"sum", "avg", "prod", "min",
                                                        "max", "band", "bor", "bxor"};

void kc_check_copy(kc_t *kc)
{
    const size_t n = 4 * 1023 + 5;
    uint8_t *h = kc_host(n), *back = kc_host(n), *pinned = kc_pinned(n);
    uint8_t *d1 = kc_dev(n), *d2 = kc_dev(n);
    coll_exec_ctx_t ctx;

    kc_stream(&ctx);
    for (size_t i = 0; i < n; i++) {
        h[i] = (uint8_t)kc_rand();
    }
    kc_up(d1, h, n);
    kc->dev->copy(d2, d1, n);
    kc_down(back, d2, n);
    kc_expect(kc, memcmp(back, h, n) == 0, "copy on the device");
    kc->dev->zero(d2 + 1, n - 2);
    kc_down(back, d2, n);
    kc_expect(kc, back[0] == h[0] && back[n - 1] == h[n - 1] && back[1] == 0 && back[n - 2] == 0,
              "zero on the device");
    kc_expect(kc, kc->dev->copy_async(&ctx, pinned, d1, n) == COLL_OK &&
                      kc->dev->zero_async(&ctx, d1, n) == COLL_OK &&
                      kc->dev->copy_async(&ctx, d2, d1, n) == COLL_OK &&
                      kc->dev->sync(&ctx) == COLL_OK,
              "queued copies and sync");
    kc_down(back, d2, n);
    kc_expect(kc, memcmp(pinned, h, n) == 0 && back[0] == 0 && back[n / 2] == 0,
              "queued copy to pinned host memory, zero, copy");
    kc_pinned_free(pinned);
    kc_stream_free(&ctx);
    kc_dev_free(d1);
    kc_dev_free(d2);
    free(h);
    free(back);
}

static int nan16(coll_dtype_t dt, uint16_t h)
{
    return dt == COLL_FLOAT16 ? (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0
                              : (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0;
}

/* Whether element i of two outputs of @p dt agree: the same bits, or NaN both for an operation
 * that computes. */
static int same_elem(coll_dtype_t dt, int op, const uint8_t *a, const uint8_t *b, size_t i)
{
    const size_t es = kc_esize(dt);

    if (memcmp(a + i * es, b + i * es, es) == 0) {
        return 1;
    }
    if (op == COLL_MIN || op == COLL_MAX || dt > COLL_BFLOAT16) {
        return 0;
    }
    if (es == 2) {
        uint16_t x, y;
        memcpy(&x, a + 2 * i, 2);
        memcpy(&y, b + 2 * i, 2);
        return nan16(dt, x) && nan16(dt, y);
    }
    if (es == 4) {
        float x, y;
        memcpy(&x, a + 4 * i, 4);
        memcpy(&y, b + 4 * i, 4);
        return x != x && y != y;
    }
    double x, y;
    memcpy(&x, a + 8 * i, 8);
    memcpy(&y, b + 8 * i, 8);
    return x != x && y != y;
}

/* One reduction's buffers on both sides: sources (float32 ones where f32_mask says) and the
 * destination, each @p skew elements into its allocation. */
typedef struct {
    coll_reduce_args_t a; /* the host's; the device's differs in its pointers */
    uint8_t *hsrc[NSRC_MAX], *hdst, *dsrc[NSRC_MAX], *ddst, *back;
    const void *hp[NSRC_MAX], *dp[NSRC_MAX];
} red_t;

static void red_make(red_t *r, size_t skew)
{
    const coll_reduce_args_t *a = &r->a;
    const size_t es = kc_esize(a->dtype), out_es = a->dst_f32 ? 4 : es;

    for (unsigned k = 0; k < a->nsrc; k++) {
        const int f32 = (a->f32_mask >> k) & 1;
        const size_t bytes = (a->count + 1) * (f32 ? 4 : es);
        r->hsrc[k] = kc_host(bytes);
        if (f32) {
            kc_elements(COLL_FLOAT32, r->hsrc[k], a->count + 1);
        } else {
            kc_elements(a->dtype, r->hsrc[k], a->count + 1);
        }
        r->dsrc[k] = kc_dev(bytes);
        kc_up(r->dsrc[k], r->hsrc[k], bytes);
        r->hp[k] = r->hsrc[k] + skew * (f32 ? 4 : es);
        r->dp[k] = r->dsrc[k] + skew * (f32 ? 4 : es);
    }
    r->hdst = kc_host((a->count + 1) * out_es);
    r->back = kc_host((a->count + 1) * out_es);
    r->ddst = kc_dev((a->count + 1) * out_es);
}

static void red_free(red_t *r)
{
    for (unsigned k = 0; k < r->a.nsrc; k++) {
        free(r->hsrc[k]);
        kc_dev_free(r->dsrc[k]);
    }
    free(r->hdst);
    free(r->back);
    kc_dev_free(r->ddst);
}

/* Runs the case on both sides (@p in_place: into source 0) and compares. */
static void red_run(kc_t *kc, red_t *r, size_t skew, int in_place, const coll_exec_ctx_t *ctx,
                    const char *how)
{
    coll_reduce_args_t h = r->a, d = r->a;
    const size_t out_es = r->a.dst_f32 ? 4 : kc_esize(r->a.dtype);
    const uint8_t *dev_out = r->ddst + skew * out_es, *host_out = r->hdst + skew * out_es;

    h.src = r->hp;
    d.src = r->dp;
    h.dst = in_place ? (void *)r->hp[0] : r->hdst + skew * out_es;
    d.dst = in_place ? (void *)r->dp[0] : r->ddst + skew * out_es;
    if (in_place) {
        dev_out = r->dp[0];
        host_out = r->hp[0];
    }
    kc->host->reduce(&h);
    if (ctx != NULL) {
        kc_expect(kc, kc->dev->reduce_async(ctx, &d) == COLL_OK && kc->dev->sync(ctx) == COLL_OK,
                  "reduce_async %s", how);
    } else {
        kc->dev->reduce(&d);
    }
    kc_down(r->back, dev_out, r->a.count * out_es);
    for (size_t i = 0; i < r->a.count; i++) {
        coll_dtype_t out_dt = r->a.dst_f32 ? COLL_FLOAT32 : r->a.dtype;
        if (!same_elem(out_dt, r->a.op, r->back, host_out, i)) {
            kc_fail(kc, "reduce %s %s, %u sources, count %zu, %s: element %zu differs",
                    dtype_names[r->a.dtype], op_names[r->a.op], r->a.nsrc, r->a.count, how, i);
            return;
        }
    }
    kc->checks++;
}

static void reduce_case(kc_t *kc, coll_dtype_t dt, int op, size_t count, const coll_exec_ctx_t *ctx)
{
    const int half = dt == COLL_FLOAT16 || dt == COLL_BFLOAT16;
    red_t r = {.a = {.dtype = dt, .op = (coll_redop_t)op, .world_size = 3, .finalize = 1,
                     .nsrc = 3, .raw_mask = half ? 7 : 0, .count = count}};

    red_make(&r, 0);
    red_run(kc, &r, 0, 0, NULL, "aligned");
    red_run(kc, &r, 0, 1, NULL, "in place");
    red_free(&r);

    red_t m = {.a = {.dtype = dt, .op = (coll_redop_t)op, .world_size = 5, .finalize = 0,
                     .nsrc = 5, .raw_mask = half ? 0x15 : 0, .f32_mask = half ? 0x0a : 0,
                     .dst_f32 = half, .count = count}};
    red_make(&m, 1);
    red_run(kc, &m, 1, 0, ctx, "one element off, on a stream");
    red_free(&m);
}

void kc_check_reduce(kc_t *kc)
{
    coll_exec_ctx_t ctx;

    kc_stream(&ctx);
    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        for (int dt = 0; dt < COLL_DTYPE_COUNT; dt++) {
            for (int op = 0; op < COLL_REDOP_COUNT; op++) {
                if (coll_reduce_op_fits((coll_dtype_t)dt, (coll_redop_t)op)) {
                    reduce_case(kc, (coll_dtype_t)dt, op, kc_counts[c], &ctx);
                }
            }
        }
    }
    kc_stream_free(&ctx);
}
