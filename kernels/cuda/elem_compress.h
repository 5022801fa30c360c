/**
 * @file elem_compress.h
 * @brief The compressors' element functions (hd.h): the 16-bit cast with its per-span scale,
 *        1-bit packing, TopK's radix select and compaction, PowerSGD's seeded Q and
 *        reconstruction, each as the host computes one element (kernels/cpu/cast_loops.h,
 *        onebit_loops.h, topk.c, lowrank.c and lowrank_loops.h), with the same operations in the
 *        same order. Sums over a whole span (the 1-bit scale, Gram-Schmidt's dot products, the
 *        products M Q and M^T P) are not element functions: the device adds in another order
 *        (kernels/cuda/README.md says by how much the results may differ).
 */
#ifndef COLL_KERNELS_CUDA_ELEM_COMPRESS_H
#define COLL_KERNELS_CUDA_ELEM_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "kernels/cuda/hd.h"

/* ---- error feedback: v = g + e, in place in e (TopK, PowerSGD; the cast and 1-bit fuse it) --- */

COLL_HD float coll_hd_ef_add(float g, float e)
{
    return COLL_FADD(g, e);
}

/** @return The key of |x| (its bits without the sign), whose unsigned order is that of |x|. */
COLL_HD uint32_t coll_hd_mag_key(float x)
{
    return coll_hd_f32_bits(x) & 0x7fffffffu;
}

/* ---- the 16-bit cast (fmt: COLL_HD_F16 or COLL_HD_BF16) --------------------------------------- */

/** @return 2^p for p in [-126, 127], from its exponent bits (exact): the span's factors. */
COLL_HD float coll_hd_pow2(int p)
{
    return coll_hd_f32_from_bits((uint32_t)(p + 127) << 23);
}

/** @return x = g[i] + e[i], or g[i] without a residual (@p e NULL). */
COLL_HD float coll_hd_cast_x(const float *g, const float *e, size_t i)
{
    return e != NULL ? COLL_FADD(g[i], e[i]) : g[i];
}

/** @return x * 2^p rounded to the format (@p mul = 2^p). */
COLL_HD uint16_t coll_hd_cast_encode(int fmt, float x, float mul)
{
    return coll_hd_narrow(fmt, COLL_FMUL(x, mul));
}

/** @return The residual of x sent as @p h: x - widen(h) * 2^-p (@p inv = 2^-p). */
COLL_HD float coll_hd_cast_residual(int fmt, float x, uint16_t h, float inv)
{
    return COLL_FSUB(x, COLL_FMUL(coll_hd_widen(fmt, h), inv));
}

/** @return widen(h) * mul: the decoded value (mul = 2^-p), or its term (weight * 2^-p). */
COLL_HD float coll_hd_cast_decode(int fmt, uint16_t h, float mul)
{
    return COLL_FMUL(coll_hd_widen(fmt, h), mul);
}

/* ---- 1-bit ----------------------------------------------------------------------------------- */

/** @return The term of x in the span's sum, in double: x^2 (exact) or |x| for L1. */
COLL_HD double coll_hd_onebit_term(float x, int l1)
{
    double d = x;
    return l1 ? (d < 0 ? -d : d) : COLL_DMUL(d, d);
}

/**
 * @return The byte of elements g[0 .. len) (len <= 8): bit j set when x_j < 0 (x_j = g[j] +
 *         e[j], or g[j] when @p e is NULL); bits past len 0. With @p e, e[j] = x_j - (+-scale).
 */
COLL_HD uint8_t coll_hd_onebit_pack(const float *g, float *e, size_t len, float scale)
{
    unsigned v = 0;

    for (size_t j = 0; j < len; j++) {
        float x = e != NULL ? COLL_FADD(g[j], e[j]) : g[j];
        unsigned neg = x < 0.0f;
        v |= neg << j;
        if (e != NULL) {
            e[j] = COLL_FSUB(x, neg ? -scale : scale);
        }
    }
    return (uint8_t)v;
}

/** @return Element j of a byte of signs: -ws when its bit is set, else ws. */
COLL_HD float coll_hd_onebit_value(uint8_t byte, unsigned j, float ws)
{
    return (byte >> j) & 1u ? -ws : ws;
}

/* ---- TopK: a radix select on the keys, 11 + 10 + 10 bits, then an ordered compaction ------- */

/** Levels of the radix select, the top level first. */
#define COLL_HD_TOPK_LEVELS 3
/** Bins of the widest level. */
#define COLL_HD_TOPK_BINS 2048

/** @return The shift of level @p lvl's bits in a key; *width gets their number (11 for the
 *          top level, 10 below; a histogram has COLL_HD_TOPK_BINS bins, the unused ones 0). */
COLL_HD unsigned coll_hd_topk_level(unsigned lvl, unsigned *width)
{
    *width = lvl == 0 ? 11 : 10;
    return lvl == 0 ? 20 : lvl == 1 ? 10 : 0;
}

/**
 * @return Non-zero when @p key has the bits @p prefix above level @p lvl (the cut found so far);
 *         *bin gets its level bits then.
 */
COLL_HD int coll_hd_topk_bin(uint32_t key, unsigned lvl, uint32_t prefix, uint32_t *bin)
{
    unsigned width, shift = coll_hd_topk_level(lvl, &width);

    *bin = (key >> shift) & ((1u << width) - 1);
    return (key >> (shift + width)) == prefix;
}

/**
 * @return Non-zero when bin b of a level's histogram holds the need-th largest key (of those
 *         with the cut's prefix): the keys in bins b and above (@p incl) reach @p need, those
 *         above b (@p above) do not. Exactly one bin is that bin when 1 <= need <= all keys; it
 *         is where the host's walk from the top bin down stops (kernels/cpu/topk.c), and the cut
 *         goes on with prefix << width | b and need - above.
 */
COLL_HD int coll_hd_topk_cut_at(uint64_t incl, uint64_t above, uint64_t need)
{
    return incl >= need && above < need;
}

/**
 * @return Non-zero when the element with @p key is sent, for the k-th largest key @p t and
 *         @p need keys equal to it to send: above t, or equal with fewer than need equal keys
 *         before it (@p eq_before, in index order: the lower index wins).
 */
COLL_HD int coll_hd_topk_taken(uint32_t key, uint32_t t, uint64_t eq_before, uint64_t need)
{
    return key > t || (key == t && eq_before < need);
}

/** @return The output position of a sent element from the keys above t (@p gt_before) and
 *          equal to it (@p eq_before) at lower indices. */
COLL_HD uint64_t coll_hd_topk_pos(uint64_t gt_before, uint64_t eq_before, uint64_t need)
{
    return gt_before + (eq_before < need ? eq_before : need);
}

/** @return acc + weight * v: one received pair accumulated. */
COLL_HD float coll_hd_topk_acc(float acc, float weight, float v)
{
    return COLL_FADD(acc, COLL_FMUL(weight, v));
}

/* ---- PowerSGD ---------------------------------------------------------------------------------- */

/** @return Element @p l of the seeded Q: output l of splitmix64 from @p seed, its four 16-bit
 *          quarters summed, centred and scaled by sqrt(3) / 2^16 in double, rounded to float. */
COLL_HD float coll_hd_lowrank_q(uint64_t seed, uint64_t l)
{
    uint64_t z = seed + (l + 1) * 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    int64_t sum = (int64_t)(z & 0xffff) + (int64_t)((z >> 16) & 0xffff) +
                  (int64_t)((z >> 32) & 0xffff) + (int64_t)(z >> 48);
    return (float)COLL_DMUL((double)(sum - 131070), 1.7320508075688772 / 65536.0);
}

/**
 * @return Element (i, j) of P Q^T: the sum over c < r, in order, of p[c * ps] * q[c * qs], in
 *         float32 (@p p at row i of P, @p q at row j of Q; ps, qs their column strides).
 */
COLL_HD float coll_hd_lr_recon(const float *p, size_t ps, const float *q, size_t qs, unsigned r)
{
    float a = COLL_FMUL(p[0], q[0]);

    for (unsigned c = 1; c < r; c++) {
        a = COLL_FADD(a, COLL_FMUL(p[c * ps], q[c * qs]));
    }
    return a;
}

/** @return The product of two floats in double (exact): a term of Gram-Schmidt's dots. */
COLL_HD double coll_hd_lr_prod(float a, float b)
{
    return COLL_DMUL((double)a, (double)b);
}

/** @return y - a x in double, rounded to float: one element of a projection removed. */
COLL_HD float coll_hd_lr_sub_scaled(float y, double a, float x)
{
    return (float)COLL_DSUB((double)y, COLL_DMUL(a, (double)x));
}

/** @return x / d in double, rounded to float: one element of a column normalized. */
COLL_HD float coll_hd_lr_div(float x, double d)
{
    return (float)COLL_DDIV((double)x, d);
}

#endif
