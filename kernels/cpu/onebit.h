/**
 * @file onebit.h
 * @brief 1-bit compression with error feedback: the signs of a span packed 8 per byte plus one
 *        float32 scale, as in 1-bit Adam's compressed allreduce.
 *
 * Paper and variant: Tang et al., "1-bit Adam: Communication Efficient Large-Scale Training with
 * Adam's Convergence Speed", ICML 2021 (arXiv 2102.02888), and its reference implementation,
 * DeepSpeed deepspeed/runtime/comm/nccl.py (NcclBackend.compressed_allreduce). For a span x of n
 * elements (after the residual was added):
 * - scale = ||x||_2 / sqrt(n) (COLL_ONEBIT_SCALE_L2, DeepSpeed's rule and the default). The
 *   alternative COLL_ONEBIT_SCALE_L1, scale = ||x||_1 / n, is EF-SignSGD's (Karimireddy et al.,
 *   ICML 2019, "Error Feedback Fixes SignSGD"): it minimises ||x - scale * sign(x)||_2 for the
 *   given signs, where L2 matches the norm of x instead. Both are sums in double over the n
 *   elements, rounded once to float32.
 * - sign(x) = -1 for x < 0, +1 otherwise: sign(0) = sign(-0) = +1, as DeepSpeed's
 *   x.sign().add_(1).bool(). A NaN counts as +1 (but makes the scale NaN: see below).
 * - residual e' = x - scale * sign(x), with the float32 scale that goes on the wire, so that
 *   sender and receivers use the same number.
 * - Decode: scale * sign, optionally times a weight (1/world_size for the mean), added into a
 *   float32 accumulator.
 *
 * Bit order: element i is bit (i % 8) of byte i / 8, least significant bit first (numpy's
 * packbits(bitorder="little"); DeepSpeed's cupy packbits is most significant first). A set bit
 * means negative. The last byte's bits past n are written as 0 and ignored by the decoder.
 *
 * Padding never dilutes the scale: n is the span's real element count. (DeepSpeed pads the
 * buffer to a multiple of 8 * world_size with zeros and divides by the padded numel, which
 * lowers the scale, and keeps residuals of -scale in the padding. Here a span of any n is exact.)
 *
 * The compressed allreduce of 1-bit Adam, with these kernels: cut the bucket into world_size
 * chunks; each node encodes every chunk with its worker residual (one encode per chunk, so one
 * scale per chunk: the variant; DeepSpeed uses one worker scale for the whole buffer,
 * which is one encode over the bucket whose bytes are then cut at chunk boundaries that are
 * multiples of 8), sends chunk c to node c; node c accumulates the world_size received chunks
 * with weight 1/world_size into a zeroed float32 buffer (in rank order, for identical results),
 * encodes that with its server residual, and all-gathers; everyone decodes.
 */
#ifndef COLL_KERNELS_ONEBIT_H
#define COLL_KERNELS_ONEBIT_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/compress.h"

/**
 * @brief Encode a span: its scale and its packed signs; update the residual.
 *
 * Two passes over the span: the scale (which also rejects non-finite x), then signs and residual.
 *
 * @param [in]     rule     COLL_ONEBIT_SCALE_L2 or COLL_ONEBIT_SCALE_L1.
 * @param [in]     grad     count float32 values g.
 * @param [in,out] residual count float32 values e, or NULL for no error feedback (x = g). In: the
 *                          last step's residual; out: x - scale * sign(x). Must not overlap
 *                          @p grad or @p signs.
 * @param [in]     count    Elements n. For 0 nothing is read or written and *scale is 0.
 * @param [out]    signs    coll_onebit_sign_bytes(count) bytes, bit order above.
 * @param [out]    scale    The span's scale (>= 0, finite).
 * @return COLL_OK;
 *         COLL_ERR_INVALID for an unknown @p rule, a NULL pointer (other than @p residual) with
 *         count > 0, or a non-finite x: then nothing was written, the residual included.
 * Thread-safe (no shared state). No allocation.
 */
coll_status_t coll_onebit_encode(coll_onebit_scale_t rule, const float *grad, float *residual,
                                 size_t count, uint8_t *signs, float *scale);

/**
 * @brief out[i] = +w or -w by the sign bits, with w = scale * weight rounded once to float32.
 * @param [in]  signs  coll_onebit_sign_bytes(count) bytes.
 * @param [in]  count  Elements (0: nothing happens).
 * @param [in]  scale  The span's scale, as received.
 * @param [in]  weight Factor: 1, or 1/world_size for a mean.
 * @param [out] out    count float32 values; must not overlap @p signs.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL pointer with count > 0 (nothing written).
 * Thread-safe. No allocation.
 */
coll_status_t coll_onebit_decode(const uint8_t *signs, size_t count, float scale, float weight,
                                 float *out);

/**
 * @brief acc[i] += +w or -w by the sign bits, w = scale * weight rounded once to float32; one
 *        float32 addition per element. Several spans summed into one accumulator give the same
 *        bits on every node when added in the same order.
 * @param [in]     signs  coll_onebit_sign_bytes(count) bytes.
 * @param [in]     count  Elements (0: nothing happens).
 * @param [in]     scale  The span's scale, as received.
 * @param [in]     weight Factor: 1, or 1/world_size for a mean.
 * @param [in,out] acc    count float32 values; must not overlap @p signs.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL pointer with count > 0 (nothing written).
 * Thread-safe. No allocation.
 */
coll_status_t coll_onebit_accumulate(const uint8_t *signs, size_t count, float scale,
                                     float weight, float *acc);

#endif
