/**
 * @file topk.h
 * @brief TopK sparsification with error feedback: the k largest magnitudes of g + e as
 *        (index, value) pairs, exact selection without a sort; sparse accumulate and merge.
 *
 * Papers and variant: Stich, Cordonnier, Jaggi, "Sparsified SGD with Memory", NeurIPS 2018 (top-k
 * with the residual, "memory", kept and added back), and Lin et al., "Deep Gradient Compression",
 * ICLR 2018 (DGC; synxlin/deep-gradient-compression dgc/compression.py). We keep Stich's exact
 * top-k, not DGC's approximate one: DGC estimates a threshold from a sample and sends whatever
 * lies above it (about k elements); we use a sample the same way, but only to find a superset of
 * the top k, and then select exactly (see coll_topk_select_t). DGC's momentum correction, masking
 * and density warm-up belong to the caller (the optimizer, the policy), not to this kernel.
 *
 * The step, for v = g + e (float32; v = g without a residual):
 * - k = coll_topk_k(count, ratio) = max(1, ceil(ratio * count)), and 0 for count 0.
 * - Selected: the k elements of largest |v|. Order: by the bits of |v| as an unsigned integer,
 *   which is the order of |v| for all finite values and infinities, with +0 == -0, and puts NaN
 *   above infinity (by payload). Ties at the k-th magnitude: the lower index wins.
 * - Sent: their indices, ascending, and their signed values v.
 * - Residual: e' = v with the selected elements set to +0 (everything else kept for later).
 *
 * Indices are uint32 within a bucket, so count <= COLL_TOPK_MAX_COUNT (2^32 - 1 elements, 16 GiB
 * of float32); cut larger buckets into spans.
 *
 * Non-finite input: the kernel does not check it (callers reject a NaN gradient before, as the
 * residual is updated in the same pass as the selection). NaNs are ordered as above: no crash,
 * no loop, the same answer on every instruction set.
 */
#ifndef COLL_KERNELS_TOPK_H
#define COLL_KERNELS_TOPK_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/compress.h"

/**
 * @return Bytes of scratch that let either method run its fast path for (count, k): room for
 *         min(count, 4k + 64) candidates (8 bytes each) and, for k >= COLL_TOPK_SAMPLED_MIN_K,
 *         SAMPLED's sample (4 bytes per sampled element, about 16 * count / k of them); never
 *         more than 8 * count. 0 when there is nothing to select (k 0 or count). Pure.
 */
size_t coll_topk_scratch_bytes(size_t count, size_t k);

/**
 * @brief Select the k largest |g + e|, write them out, update the residual (topk.h's step).
 *
 * Memory traffic per element, with a residual: SAMPLED's fast path reads g and e and writes e
 * once (plus the sample); RADIX reads e once more. Stack: about 32 KiB of histograms.
 * k == count sends every element (residual becomes 0); k == 0 sends nothing (residual becomes v).
 *
 * @param [in] args The compression; args->info, when set, is filled on success.
 * @return COLL_OK;
 *         COLL_ERR_INVALID for a NULL pointer where count > 0 needs one (grad; indices and values
 *         when k > 0), k > count, count > COLL_TOPK_MAX_COUNT or an unknown method (nothing is
 *         written then).
 * Thread-safe (no shared state); calls on disjoint buffers may run concurrently. No allocation.
 */
coll_status_t coll_topk_compress(const coll_topk_args_t *args);

/**
 * @brief acc[indices[j]] += weight * values[j] for j < k (one float32 product and one addition;
 *        with weight 1 the product is exact). Summing the sets of several nodes in the same
 *        order everywhere (by rank) gives the same bits everywhere.
 *
 * The indices come from a peer: they are checked first (strictly ascending, below @p count), so a
 * malformed set changes nothing.
 *
 * @param [in]     indices k indices.
 * @param [in]     values  k values.
 * @param [in]     k       Pairs (0: nothing happens).
 * @param [in]     weight  1 for a sum, 1/world_size for a mean.
 * @param [in,out] acc     count float32 values; must not overlap the set.
 * @param [in]     count   Elements of @p acc.
 * @return COLL_OK; COLL_ERR_INVALID for indices that are not strictly ascending or not below
 *         @p count, or a NULL pointer with k > 0 (nothing written).
 * Thread-safe. No allocation.
 */
coll_status_t coll_topk_accumulate(const uint32_t *indices, const float *values, size_t k,
                                   float weight, float *acc, size_t count);

/**
 * @brief Merge two sparse sets into their sum: the union of the indices, ascending, values of
 *        equal indices added (a + b, one float32 addition). The building block of a sparse
 *        allreduce that stays sparse (recursive doubling or a tree over the sets; SparCML,
 *        Renggli et al., SC 2019), instead of all-gathering every set into a dense buffer.
 *
 * @param [in]  a_idx, a_val, a_k  First set: a_k pairs, indices strictly ascending.
 * @param [in]  b_idx, b_val, b_k  Second set, the same.
 * @param [out] out_idx, out_val   Room for a_k + b_k pairs; must not overlap the inputs.
 * @return The number of pairs written (a_k + b_k less the common indices). With inputs that are
 *         not ascending the result is still a_k + b_k or fewer pairs (no write out of bounds), but
 *         not a set sum. Thread-safe. No allocation.
 */
size_t coll_topk_merge(const uint32_t *a_idx, const float *a_val, size_t a_k,
                       const uint32_t *b_idx, const float *b_val, size_t b_k, uint32_t *out_idx,
                       float *out_val);

#endif
