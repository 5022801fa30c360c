/*
 * The device check of the compressors (kernel_check.h) at every count: the 16-bit cast and TopK
 * (the host's bits, with and without a residual; TopK at several k, with ties, and a malformed
 * set refused unwritten), 1-bit (the scale within a float32 step of the host's, whose sum adds
 * in another order; the signs and residual the host's for that scale), PowerSGD at matrix
 * shapes of about those counts (the seeded Q, P Q^T and the residual the host's bits; cuBLAS's
 * products and Gram-Schmidt within the bounds kernels/cuda/README.md states).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/gpu/kernel_check.h"

/* A float array on both sides, the same values. */
typedef struct {
    float *h, *d;
    size_t n;
} pair_t;

static pair_t pair(size_t n, double mag, unsigned levels)
{
    pair_t p = {kc_host(n * sizeof(float)), kc_dev(n * sizeof(float)), n};
    kc_floats(p.h, n, mag, levels, 1);
    kc_up(p.d, p.h, n * sizeof(float));
    return p;
}

static void pair_free(pair_t *p)
{
    free(p->h);
    kc_dev_free(p->d);
}

/* Whether the device's copy equals the host's, bit for bit. */
static int pair_same(kc_t *kc, const pair_t *p, const char *what)
{
    float *back = kc_host(p->n * sizeof(float));
    kc_down(back, p->d, p->n * sizeof(float));
    int ok = kc_same_floats(kc, back, p->h, p->n, what);
    free(back);
    return ok;
}

/* ---- the cast ---- */

static void cast_case(kc_t *kc, coll_cast_format_t f, size_t n, int residual)
{
    pair_t g = pair(n, 3.0, 0), e = pair(n, 0.01, 0), acc = pair(n, 1.0, 0), out = pair(n, 0, 0);
    uint16_t *hh = kc_host(2 * n + 2), *dh = kc_dev(2 * n + 2), *back = kc_host(2 * n + 2);
    int32_t ph = -1, pd = -2;
    char what[96];

    snprintf(what, sizeof(what), "cast %s, count %zu%s", f == COLL_CAST_FP16 ? "fp16" : "bf16",
             n, residual ? ", residual" : "");
    coll_status_t sh = kc->host->cast_encode(f, g.h, residual ? e.h : NULL, n, hh, &ph);
    coll_status_t sd = kc->dev->cast_encode(f, g.d, residual ? e.d : NULL, n, dh, &pd);
    kc_down(back, dh, 2 * n);
    kc_expect(kc, sh == COLL_OK && sd == COLL_OK && ph == pd && memcmp(back, hh, 2 * n) == 0,
              "%s: encode (exponent %d, host %d)", what, pd, ph);
    pair_same(kc, &e, what);
    kc_expect(kc, kc->host->cast_decode(f, hh, n, ph, out.h) == COLL_OK &&
                      kc->dev->cast_decode(f, dh, n, ph, out.d) == COLL_OK, "%s: decode", what);
    pair_same(kc, &out, what);
    kc_expect(kc, kc->host->cast_accumulate(f, hh, n, ph, 0.25f, acc.h) == COLL_OK &&
                      kc->dev->cast_accumulate(f, dh, n, ph, 0.25f, acc.d) == COLL_OK,
              "%s: accumulate", what);
    pair_same(kc, &acc, what);
    pair_free(&g), pair_free(&e), pair_free(&acc), pair_free(&out);
    free(hh), free(back), kc_dev_free(dh);
}

void kc_check_cast(kc_t *kc)
{
    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        for (int f = COLL_CAST_FP16; f <= COLL_CAST_BF16; f++) {
            cast_case(kc, (coll_cast_format_t)f, kc_counts[c], 1);
            cast_case(kc, (coll_cast_format_t)f, kc_counts[c], 0);
        }
    }
}

/* ---- 1-bit ---- */

static void onebit_case(kc_t *kc, coll_onebit_scale_t rule, size_t n)
{
    pair_t g = pair(n, 2.0, 0), e = pair(n, 0.1, 0), out = pair(n, 0, 0), acc = pair(n, 1, 0);
    const size_t nb = (n + 7) / 8;
    uint8_t *sh = kc_host(nb), *sd = kc_dev(nb), *back = kc_host(nb);
    float scale_h = -1, scale_d = -2;
    char what[80];

    snprintf(what, sizeof(what), "1-bit %s, count %zu", rule == COLL_ONEBIT_SCALE_L1 ? "L1" : "L2",
             n);
    kc_expect(kc, kc->dev->onebit_encode(rule, g.d, e.d, n, sd, &scale_d) == COLL_OK &&
                      kc->host->onebit_encode(rule, g.h, e.h, n, sh, &scale_h) == COLL_OK,
              "%s: encode", what);
    if (scale_d == scale_h) { /* then the signs and residual must be the host's */
        kc_down(back, sd, nb);
        kc_expect(kc, memcmp(back, sh, nb) == 0, "%s: signs", what);
        pair_same(kc, &e, what);
    } else {
        kc_expect(kc, fabsf(scale_d - scale_h) <= nextafterf(scale_h, INFINITY) - scale_h,
                  "%s: scale %a more than a float32 step from the host's %a", what,
                  (double)scale_d, (double)scale_h);
        printf("kernel_check: %s: scale %a, the host's %a (sums in another order)\n", what,
               (double)scale_d, (double)scale_h);
    }
    kc_up(sd, sh, nb);
    kc_expect(kc, kc->host->onebit_decode(sh, n, scale_h, 0.5f, out.h) == COLL_OK &&
                      kc->dev->onebit_decode(sd, n, scale_h, 0.5f, out.d) == COLL_OK &&
                      kc->host->onebit_accumulate(sh, n, scale_h, 0.5f, acc.h) == COLL_OK &&
                      kc->dev->onebit_accumulate(sd, n, scale_h, 0.5f, acc.d) == COLL_OK,
              "%s: decode", what);
    pair_same(kc, &out, what);
    pair_same(kc, &acc, what);
    pair_free(&g), pair_free(&e), pair_free(&out), pair_free(&acc);
    free(sh), free(back), kc_dev_free(sd);
}

void kc_check_onebit(kc_t *kc)
{
    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        onebit_case(kc, COLL_ONEBIT_SCALE_L2, kc_counts[c]);
        onebit_case(kc, COLL_ONEBIT_SCALE_L1, kc_counts[c]);
    }
}

/* ---- TopK ---- */

static void topk_case(kc_t *kc, size_t n, size_t k, unsigned levels, int residual)
{
    pair_t g = pair(n, 3.0, levels), e = pair(n, levels ? 0 : 0.5, 0);
    pair_t vh = {kc_host(k * 4 + 4), kc_dev(k * 4 + 4), k}, acc = pair(n, 1.0, 0);
    uint32_t *ih = kc_host(k * 4 + 4), *id = kc_dev(k * 4 + 4), *back = kc_host(k * 4 + 4);
    size_t sb = kc->dev->topk_scratch_bytes(n, k), hb = kc->host->topk_scratch_bytes(n, k);
    void *sd = kc_dev(sb), *sh = kc_host(hb);
    char what[96];

    snprintf(what, sizeof(what), "TopK count %zu, k %zu%s%s", n, k, levels ? ", ties" : "",
             residual ? ", residual" : "");
    coll_topk_args_t ah = {.grad = g.h, .residual = residual ? e.h : NULL, .count = n, .k = k,
                           .scratch = sh, .scratch_bytes = hb, .indices = ih, .values = vh.h};
    coll_topk_args_t ad = {.grad = g.d, .residual = residual ? e.d : NULL, .count = n, .k = k,
                           .scratch = sd, .scratch_bytes = sb, .indices = id, .values = vh.d};
    kc_expect(kc, kc->host->topk_compress(&ah) == COLL_OK && kc->dev->topk_compress(&ad) == COLL_OK,
              "%s: compress", what);
    kc_down(back, id, k * 4);
    kc_expect(kc, memcmp(back, ih, k * 4) == 0, "%s: indices", what);
    pair_same(kc, &vh, what);
    pair_same(kc, &e, what);
    kc_expect(kc, kc->host->topk_accumulate(ih, vh.h, k, 0.5f, acc.h, n) == COLL_OK &&
                      kc->dev->topk_accumulate(id, vh.d, k, 0.5f, acc.d, n) == COLL_OK,
              "%s: accumulate", what);
    pair_same(kc, &acc, what);
    if (k >= 2) { /* a set not ascending: refused, nothing written */
        kc_up(id, &ih[1], 4);
        kc_expect(kc, kc->dev->topk_accumulate(id, vh.d, k, 0.5f, acc.d, n) == COLL_ERR_INVALID,
                  "%s: a malformed set refused", what);
        pair_same(kc, &acc, what);
    }
    pair_free(&g), pair_free(&e), pair_free(&vh), pair_free(&acc);
    free(ih), free(back), free(sh), kc_dev_free(id), kc_dev_free(sd);
}

void kc_check_topk(kc_t *kc)
{
    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        const size_t n = kc_counts[c];
        const size_t ks[5] = {0, n > 0, n / 100 + (n > 0), n / 2, n};
        for (size_t j = 0; j < 5; j++) {
            topk_case(kc, n, ks[j], 0, 1);
            topk_case(kc, n, ks[j], 7, 1);
            topk_case(kc, n, ks[j], 0, 0);
        }
    }
}

/* ---- PowerSGD ---- */

/* |dev - host| of a product over @p len terms: a float32 rounding per term, of the sum of the
 * terms' magnitudes (tol holds that sum, scaled here). */
static void scale_tol(float *tol, size_t n, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        tol[i] = (float)(tol[i] * (double)(len + 2) * 0x1p-23) + 1e-30f;
    }
}

/* Sum of |m_ij| |q_jc| for P = M Q, the scale of each element's rounding. */
static void mul_q_tol(const float *m, size_t rows, size_t cols, const float *q, unsigned r,
                      float *tol)
{
    for (unsigned c = 0; c < r; c++) {
        for (size_t i = 0; i < rows; i++) {
            double s = 0;
            for (size_t j = 0; j < cols; j++) {
                s += fabs((double)m[i * cols + j] * q[c * cols + j]);
            }
            tol[c * rows + i] = (float)s;
        }
    }
    scale_tol(tol, rows * r, cols);
}

static void mul_mt_tol(const float *m, size_t rows, size_t cols, const float *p, unsigned r,
                       float *tol)
{
    for (unsigned c = 0; c < r; c++) {
        for (size_t j = 0; j < cols; j++) {
            double s = 0;
            for (size_t i = 0; i < rows; i++) {
                s += fabs((double)m[i * cols + j] * p[c * rows + i]);
            }
            tol[c * cols + j] = (float)s;
        }
    }
    scale_tol(tol, cols * r, rows);
}

static void lowrank_case(kc_t *kc, size_t rows, size_t cols, unsigned r)
{
    pair_t g = pair(rows * cols, 1.0, 0), e = pair(rows * cols, 0.1, 0);
    pair_t q = pair(cols * r, 1, 0), p = pair(rows * r, 1, 0), out = pair(rows * cols, 0, 0);
    float *tol = kc_host((rows + cols) * r * sizeof(float) + 4), *back;
    char what[80];

    snprintf(what, sizeof(what), "PowerSGD %zu x %zu, rank %u", rows, cols, r);
    kc->host->lowrank_init_q(q.h, cols, r, 77);
    kc->dev->lowrank_init_q(q.d, cols, r, 77);
    pair_same(kc, &q, what);
    if (r <= cols) {
        kc_expect(kc, kc->host->lowrank_orthonormalize(q.h, cols, r, 1e-8f) == COLL_OK &&
                          kc->dev->lowrank_orthonormalize(q.d, cols, r, 1e-8f) == COLL_OK,
                  "%s: orthonormalize", what);
        back = kc_host(cols * r * sizeof(float));
        kc_down(back, q.d, cols * r * sizeof(float));
        const float unit_tol = 1e-5f;
        kc_close_floats(kc, back, q.h, &unit_tol, 0, cols * r, what);
        free(back);
        kc_up(q.d, q.h, cols * r * sizeof(float)); /* the same Q from here on */
    }
    kc_expect(kc, kc->host->lowrank_ef_mul_q(g.h, e.h, rows, cols, q.h, r, p.h) == COLL_OK &&
                      kc->dev->lowrank_ef_mul_q(g.d, e.d, rows, cols, q.d, r, p.d) == COLL_OK,
              "%s: P = M Q", what);
    pair_same(kc, &e, what);
    mul_q_tol(e.h, rows, cols, q.h, r, tol);
    back = kc_host(rows * r * sizeof(float) + 4);
    kc_down(back, p.d, rows * r * sizeof(float));
    kc_close_floats(kc, back, p.h, tol, 1, rows * r, what);
    free(back);
    kc_up(p.d, p.h, rows * r * sizeof(float));
    kc_expect(kc, kc->host->lowrank_mul_mt(e.h, rows, cols, p.h, r, q.h) == COLL_OK &&
                      kc->dev->lowrank_mul_mt(e.d, rows, cols, p.d, r, q.d) == COLL_OK,
              "%s: Q = M^T P", what);
    mul_mt_tol(e.h, rows, cols, p.h, r, tol);
    back = kc_host(cols * r * sizeof(float) + 4);
    kc_down(back, q.d, cols * r * sizeof(float));
    kc_close_floats(kc, back, q.h, tol, 1, cols * r, what);
    free(back);
    kc_up(q.d, q.h, cols * r * sizeof(float));
    kc_expect(kc, kc->host->lowrank_residual(p.h, q.h, rows, cols, r, e.h, out.h) == COLL_OK &&
                      kc->dev->lowrank_residual(p.d, q.d, rows, cols, r, e.d, out.d) == COLL_OK,
              "%s: residual", what);
    pair_same(kc, &e, what);
    pair_same(kc, &out, what);
    pair_free(&g), pair_free(&e), pair_free(&q), pair_free(&p), pair_free(&out);
    free(tol);
}

void kc_check_lowrank(kc_t *kc)
{
    /* rows x cols of about each count: 0, 1, 1023 and 2^20 + 3 elements */
    static const size_t shapes[KC_NCOUNTS][2] = {{0, 0}, {1, 1}, {31, 33}, {1021, 1027}};

    for (size_t c = 0; c < kc_ncounts(kc); c++) {
        lowrank_case(kc, shapes[c][0], shapes[c][1], 1);
        lowrank_case(kc, shapes[c][0], shapes[c][1], 4);
    }
}
