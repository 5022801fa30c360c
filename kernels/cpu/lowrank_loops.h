/*
 * Inner loops of PowerSGD (lowrank.c), compiled once per instruction set by isa_<set>.c
 * (isa.h); see compress_isa.h for the contract of each. Plain C that gcc vectorizes. Dot
 * products keep COLL__LANES partial sums (lane l takes elements l, l + 16, ...; the tail goes
 * to lanes 0, 1, ...) combined pairwise in a fixed order: float32 for the products with M,
 * double for the Gram-Schmidt steps, whose only cost is O(n r^2).
 */
#ifndef COLL_KERNELS_LOWRANK_LOOPS_H
#define COLL_KERNELS_LOWRANK_LOOPS_H

#include "kernels/cpu/compress_isa.h"

/* Columns of approximation lr_recon computes at a time without an output row (on the stack). */
#define LR_RECON_BLOCK 256

static float lr_dot_f32(const float *a, const float *b, size_t n)
{
    float acc[COLL__LANES] = {0};
    size_t i = 0;

    for (; i + COLL__LANES <= n; i += COLL__LANES) {
        for (size_t l = 0; l < COLL__LANES; l++) {
            acc[l] += a[i + l] * b[i + l];
        }
    }
    for (size_t l = 0; i + l < n; l++) {
        acc[l] += a[i + l] * b[i + l];
    }
    for (size_t w = COLL__LANES / 2; w > 0; w /= 2) {
        for (size_t l = 0; l < w; l++) {
            acc[l] += acc[l + w];
        }
    }
    return acc[0];
}

static void lr_dots(const float *row, size_t len, const float *q, size_t qs, unsigned r,
                    float *out, size_t os)
{
    for (unsigned c = 0; c < r; c++) {
        out[c * os] = lr_dot_f32(row, q + c * qs, len);
    }
}

static void lr_axpy(float *q, size_t qs, const float *row, size_t len, const float *p, size_t ps,
                    unsigned r)
{
    for (unsigned c = 0; c < r; c++) {
        const float pc = p[c * ps];
        float *qc = q + c * qs;
        for (size_t j = 0; j < len; j++) {
            qc[j] += pc * row[j];
        }
    }
}

/* One block of at most LR_RECON_BLOCK columns of lr_recon. */
static void lr_recon_block(const float *p, size_t ps, const float *q, size_t qs, unsigned r,
                           size_t len, float *a, float *resid)
{
    const float p0 = p[0];

    for (size_t j = 0; j < len; j++) {
        a[j] = p0 * q[j];
    }
    for (unsigned c = 1; c < r; c++) {
        const float pc = p[c * ps];
        const float *qc = q + c * qs;
        for (size_t j = 0; j < len; j++) {
            a[j] += pc * qc[j];
        }
    }
    if (resid != NULL) {
        for (size_t j = 0; j < len; j++) {
            resid[j] -= a[j];
        }
    }
}

static void lr_recon(const float *p, size_t ps, const float *q, size_t qs, unsigned r, size_t len,
                     float *approx, float *resid)
{
    float tmp[LR_RECON_BLOCK];

    for (size_t j = 0; j < len; j += LR_RECON_BLOCK) {
        size_t nb = len - j < LR_RECON_BLOCK ? len - j : LR_RECON_BLOCK;
        lr_recon_block(p, ps, q + j, qs, r, nb, approx ? approx + j : tmp,
                       resid ? resid + j : NULL);
    }
}

static double lr_dot(const float *a, const float *b, size_t n)
{
    double acc[COLL__LANES] = {0};
    size_t i = 0;

    for (; i + COLL__LANES <= n; i += COLL__LANES) {
        for (size_t l = 0; l < COLL__LANES; l++) {
            acc[l] += (double)a[i + l] * (double)b[i + l];
        }
    }
    for (size_t l = 0; i + l < n; l++) {
        acc[l] += (double)a[i + l] * (double)b[i + l];
    }
    for (size_t w = COLL__LANES / 2; w > 0; w /= 2) {
        for (size_t l = 0; l < w; l++) {
            acc[l] += acc[l + w];
        }
    }
    return acc[0];
}

static void lr_sub_scaled(float *y, const float *x, double a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        y[i] = (float)((double)y[i] - a * (double)x[i]);
    }
}

static void lr_div(float *x, size_t n, double d)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((double)x[i] / d);
    }
}

#endif
