/**
 * @file compress_isa.h
 * @brief Internal interface between the compression drivers (cast.c, onebit.c, topk.c,
 *        lowrank.c) and their inner loops, which exist once per instruction set (isa.h).
 *
 * The loops are written once, in plain C, in cast_loops.h, onebit_loops.h, topk_loops.h and
 * lowrank_loops.h, which isa_<set>.c compile for each set, so that gcc vectorizes the same
 * source for each. Intrinsics only where gcc's vectorizer fails or cannot know the instruction:
 * float16 conversions (F16C, which round like half.h), packing and unpacking sign bits and
 * building TopK's threshold masks (AVX2 compare + movemask); each has the plain C loop next to
 * it as the reference and for tails.
 *
 * Identical results on every set follow from the source: no -ffast-math, no contraction into
 * fused multiply-adds (-ffp-contract=off), and every sum over many elements is written with
 * COLL__LANES explicit partial sums combined in a fixed order, so vectorizing it changes nothing
 * but speed.
 *
 * All loops take unaligned pointers and counts in elements; they are pure (thread-safe).
 */
#ifndef COLL_KERNELS_COMPRESS_ISA_H
#define COLL_KERNELS_COMPRESS_ISA_H

#include <stddef.h>
#include <stdint.h>

/** Partial sums per reduction: one 512-bit vector of float32, two of float64 per half. */
#define COLL__LANES 16

/** Float32 magnitude key: the bits of |x|, whose unsigned order is the order of |x| (NaN on top). */
static inline uint32_t coll__mag_key(uint32_t bits)
{
    return bits & 0x7fffffffu;
}

/** The 16-bit formats of the cast kernels (the values of coll_cast_format_t). */
enum { COLL__CAST_FP16 = 1, COLL__CAST_BF16 = 2 };

/** The inner loops of one instruction set (a part of coll__isa_t). */
typedef struct {
    /* ---- cast_loops.h: x = g[i] + e[i], or g[i] when e is NULL ---- */

    /** @return max over i of the magnitude key of x (0 when n is 0). */
    uint32_t (*cast_maxkey)(const float *g, const float *e, size_t n);
    /** out[i] = round16(x * mul); with e: e[i] = x - widen(out[i]) * inv. */
    void (*cast_encode)(int fmt, const float *g, float *e, size_t n, float mul, float inv,
                        uint16_t *out);
    /** v = widen(in[i]) * mul; out[i] = accumulate ? out[i] + v : v. */
    void (*cast_decode)(int fmt, const uint16_t *in, size_t n, float mul, int accumulate,
                        float *out);

    /* ---- onebit_loops.h ---- */

    /** @return sum over i of x*x (l1 == 0) or |x| (l1 != 0), in double. */
    double (*onebit_sum)(const float *g, const float *e, size_t n, int l1);
    /**
     * bits: ceil(n/8) bytes, bit (i % 8) of byte i / 8 set when x < 0, padding bits 0;
     * with e: e[i] = x - (x < 0 ? -scale : scale).
     */
    void (*onebit_pack)(const float *g, float *e, size_t n, float scale, uint8_t *bits);
    /** v = bit i set ? -ws : ws; out[i] = accumulate ? out[i] + v : v. */
    void (*onebit_unpack)(const uint8_t *bits, size_t n, float ws, int accumulate, float *out);

    /* ---- topk_loops.h ---- */

    /** e[i] = g[i] + e[i] (also the error-feedback addition of lowrank.c). */
    void (*ef_add)(const float *g, float *e, size_t n);
    /** @return Bit l set for each l < len (len <= 64) with coll__mag_key(bits of v[l]) >= t. */
    uint64_t (*topk_mask)(const float *v, size_t len, uint32_t t);

    /* ---- lowrank_loops.h: factors are column-major, column c at + c * stride ---- */

    /** out[c * os] = dot(row, q + c * qs) over len elements, for c < r (float32 sums). */
    void (*lr_dots)(const float *row, size_t len, const float *q, size_t qs, unsigned r,
                    float *out, size_t os);
    /** q[c * qs + j] += p[c * ps] * row[j] for c < r, j < len. */
    void (*lr_axpy)(float *q, size_t qs, const float *row, size_t len, const float *p,
                    size_t ps, unsigned r);
    /**
     * a[j] = sum over c < r, in order, of p[c * ps] * q[c * qs + j], for j < len; then
     * approx[j] = a[j] when approx is not NULL and resid[j] -= a[j] when resid is not NULL.
     */
    void (*lr_recon)(const float *p, size_t ps, const float *q, size_t qs, unsigned r,
                     size_t len, float *approx, float *resid);
    /** @return dot(a, b) over n elements, in double. */
    double (*lr_dot)(const float *a, const float *b, size_t n);
    /** y[i] = (float)(y[i] - a * x[i]), in double. */
    void (*lr_sub_scaled)(float *y, const float *x, double a, size_t n);
    /** x[i] = (float)(x[i] / d), in double. */
    void (*lr_div)(float *x, size_t n, double d);
} coll__compress_loops_t;

#endif
