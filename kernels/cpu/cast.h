/**
 * @file cast.h
 * @brief Float32 gradients as float16 or bfloat16 on the wire, with optional error feedback and
 *        one power-of-two scale per span; received spans are accumulated in float32.
 *
 * Variant: mixed-precision communication with a per-span power-of-two scale, the static form of
 * loss scaling (Micikevicius et al., "Mixed Precision Training", ICLR 2018, which scales by a
 * power of two so that no bit of the significand changes) chosen per span from max|x| instead of
 * from the loss. Rounding is to nearest, ties to even, as half.h (which these kernels reuse).
 *
 * Overflow: a 16-bit value on the wire is never infinity. The encoder picks the scale exponent p
 * so that the largest magnitude times 2^p lies in [2^14, 2^15), a binade below float16's largest
 * (65504), and sends p with the span (compress_wire.h). bfloat16 has float32's range and needs no
 * scale; it gets the same rule so that both formats share one layout and one code path (a power
 * of two changes no significand bit, so it costs no precision). Reported instead of encoded
 * (COLL_ERR_INVALID, before anything is written: the encoder scans the span first): non-finite
 * x, and finite magnitudes so close to FLT_MAX that their 16-bit rounding is 2^128, infinity in
 * float32, whatever the scale: |x| >= 2^128 - 2^116 (about 3.4020e38) for float16,
 * |x| >= 2^128 - 2^119 (about 3.3961e38) for bfloat16.
 *
 * Precision: decode(encode(x)) = round16(x * 2^p) * 2^-p. Relative error at most 2^-8 for
 * bfloat16, down to 2^-140 times the span's largest magnitude (where bfloat16 subnormals start),
 * and 2^-11 for float16 down to 2^-28 times the largest; below that float16 subnormals keep fewer
 * bits, and magnitudes below 2^-39 times the largest become 0. The residual keeps what was lost.
 *
 * Error feedback (compress.h): x = g + e in float32; the span sent is round16(x * 2^p); the
 * residual becomes e' = x - decode(sent), one float32 subtraction per element. Without a
 * residual (NULL) x = g.
 *
 * A span is what one message carries: the caller cuts a bucket into spans (e.g. one per ring
 * chunk); every span gets its own exponent. Accumulation of received spans is always in float32.
 */
#ifndef COLL_KERNELS_CAST_H
#define COLL_KERNELS_CAST_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/compress.h"

/**
 * @brief Encode @p count float32 values of a span into 16-bit @p out, choosing the span's scale.
 *
 * Two passes: the first finds max|x| (and rejects non-finite x), the second writes @p out and
 * the residual. For count 0 nothing is read or written and *scale_exp is 0.
 *
 * @param [in]     fmt       COLL_CAST_FP16 or COLL_CAST_BF16.
 * @param [in]     grad      count float32 values g (this step's gradient).
 * @param [in,out] residual  count float32 values e, or NULL for no error feedback. In: the
 *                           residual of the last step; out: x - decode(out). Must not
 *                           overlap @p grad or @p out.
 * @param [in]     count     Elements.
 * @param [out]    out       count 16-bit values (host order; compress_wire.h places them).
 * @param [out]    scale_exp The p with decode(h) = widen(h) * 2^-p, in [COLL_CAST_EXP_MIN,
 *                           COLL_CAST_EXP_MAX]; 0 for a span of zeros.
 * @return COLL_OK;
 *         COLL_ERR_INVALID for an unknown @p fmt, a NULL pointer (other than @p residual) with
 *         count > 0, or an x that is non-finite (grad[i] + residual[i] may overflow to infinity
 *         too) or too close to FLT_MAX (see "Overflow"): then nothing was written, the residual
 *         included.
 * Thread-safe (no shared state). No allocation.
 */
coll_status_t coll_cast_encode(coll_cast_format_t fmt, const float *grad, float *residual,
                               size_t count, uint16_t *out, int32_t *scale_exp);

/**
 * @brief out[i] = widen(in[i]) * 2^-scale_exp: exact, except that results below 2^-126 round to
 *        float32 subnormals.
 * @param [in]  fmt       The format the span was encoded in.
 * @param [in]  in        count 16-bit values.
 * @param [in]  count     Elements (0: nothing happens).
 * @param [in]  scale_exp The span's exponent, as coll_cast_encode() gave it.
 * @param [out] out       count float32 values; must not overlap @p in.
 * @return COLL_OK; COLL_ERR_INVALID for an unknown @p fmt, @p scale_exp out of range or a NULL
 *         pointer with count > 0 (nothing written). Infinity and NaN patterns in @p in (which
 *         coll_cast_encode() never produces, but a faulty peer could send) decode as they are.
 * Thread-safe. No allocation.
 */
coll_status_t coll_cast_decode(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                               int32_t scale_exp, float *out);

/**
 * @brief acc[i] += widen(in[i]) * w, where w = weight * 2^-scale_exp rounded once to float32
 *        (exact unless it leaves float32's normal range), then one float32 product and one float32
 *        addition per element (no fused multiply-add). Received spans of several peers are
 *        summed this way, in float32; for bit-identical results on every node, add them in the
 *        same order everywhere (e.g. by rank).
 * @param [in]     fmt       The format the span was encoded in.
 * @param [in]     in        count 16-bit values.
 * @param [in]     count     Elements (0: nothing happens).
 * @param [in]     scale_exp The span's exponent.
 * @param [in]     weight    Factor for every value: 1 for a sum, 1/world_size for a mean.
 * @param [in,out] acc       count float32 values; must not overlap @p in.
 * @return COLL_OK; COLL_ERR_INVALID as coll_cast_decode() (nothing written).
 * Thread-safe. No allocation.
 */
coll_status_t coll_cast_accumulate(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                   int32_t scale_exp, float weight, float *acc);

#endif
