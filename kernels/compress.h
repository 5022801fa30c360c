/**
 * @file compress.h
 * @brief Gradient compression with error feedback: what every compressor's kernels promise,
 *        their arguments, and the arithmetic every memory kind shares (sizes, k, ranks).
 *
 * The kernels themselves run through the executor of the buffers' memory kind (kernels/exec.h);
 * the host's, the reference every executor matches, are documented one header each:
 * - cpu/cast.h     float32 -> float16 / bfloat16 on the wire, a power-of-two scale per span.
 * - cpu/topk.h     the k largest magnitudes as (index, value) pairs (Stich et al. 2018; Lin et al.
 *                  2018, Deep Gradient Compression), exact selection, sparse accumulate and merge.
 * - cpu/onebit.h   signs packed 8 per byte and one scale per span (Tang et al. 2021, 1-bit Adam).
 * - cpu/lowrank.h  PowerSGD rank-r factors P and Q (Vogels et al. 2019).
 * - compress_wire.h  the byte layout of each on the wire, and the receiver's checks.
 *
 * Error feedback (Seide et al. 2014; Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"):
 * a compressor sends C(g + e) and keeps e' = (g + e) - D(C(g + e)), where g is this step's
 * gradient, e the residual kept from the last step and D the decoder. Every encoder here fuses the
 * addition and the residual update into its passes over the data (the residual is read and written
 * in place), and takes the residual as optional (NULL: no error feedback).
 *
 * Conventions of every kernel in these headers:
 * - Counts are in elements, never bytes. A count of 0 is valid and does nothing (documented per
 *   kernel where it still writes a scale or a header value).
 * - Pure functions of their arguments, no global state except the host's instruction-set
 *   choice (kernels/cpu/isa.h): thread-safe for calls on disjoint output buffers.
 * - No allocation on the data path. A kernel that needs working memory takes it from the caller
 *   (TopK's candidate scratch); where it uses the stack, its header says how much.
 * - Non-finite input (NaN, infinity): callers reject it before (a NaN gradient fails its bucket).
 *   The kernels never crash or loop on it; what each one does with it is documented per kernel.
 * - Every instruction set of the host gives bit-identical results: the kernels are written once
 *   in C (cpu/<name>_loops.h) and compiled per instruction set, float operations are never
 *   reassociated or contracted into fused multiply-adds, and sums run over a fixed number of
 *   lanes in a fixed order.
 */
#ifndef COLL_KERNELS_COMPRESS_H
#define COLL_KERNELS_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/* ---- the 16-bit cast (cpu/cast.h) ------------------------------------------------------------ */

/** The 16-bit wire formats. */
typedef enum {
    COLL_CAST_FP16 = 1, /**< IEEE 754 binary16 */
    COLL_CAST_BF16 = 2, /**< bfloat16 (the upper half of a float32) */
} coll_cast_format_t;

/** The largest magnitude of a span, times 2^p, lies in [2^COLL_CAST_TARGET_EXP, twice that). */
#define COLL_CAST_TARGET_EXP 14
/**
 * Range of the scale exponent p. The smallest comes from FLT_MAX (2^127 binade); the largest is
 * a clamp for spans of magnitudes below 2^-112, so that 2^p and 2^-p are normal floats.
 */
#define COLL_CAST_EXP_MIN (-113)
#define COLL_CAST_EXP_MAX 126

/**
 * @brief A span's scale exponent from its largest magnitude (cpu/cast.h, "Overflow"): the p that
 *        puts it into [2^COLL_CAST_TARGET_EXP, twice that), at most COLL_CAST_EXP_MAX; 0 for a
 *        span of zeros.
 * @param [in]  fmt       COLL_CAST_FP16 or COLL_CAST_BF16 (the caller checked it).
 * @param [in]  maxkey    The bits of the largest |x| of the span (a float32's bits without sign).
 * @param [out] scale_exp p, set on success only.
 * @return COLL_OK; COLL_ERR_INVALID when that magnitude cannot be encoded (non-finite, or so
 *         close to FLT_MAX that its 16-bit rounding is infinity). Pure.
 */
coll_status_t coll_cast_scale_exp(coll_cast_format_t fmt, uint32_t maxkey, int32_t *scale_exp);

/* ---- 1-bit (cpu/onebit.h) -------------------------------------------------------------------- */

/** How the scale of a span is computed. */
typedef enum {
    COLL_ONEBIT_SCALE_L2 = 0, /**< ||x||_2 / sqrt(n): 1-bit Adam (DeepSpeed) */
    COLL_ONEBIT_SCALE_L1 = 1, /**< ||x||_1 / n = mean |x|: EF-SignSGD */
} coll_onebit_scale_t;

/** @return Bytes of packed signs for @p count elements: ceil(count / 8). */
size_t coll_onebit_sign_bytes(size_t count);

/**
 * @brief A span's scale from the sum of its terms (cpu/onebit.h): sqrt(sum / n) for L2 (the sum
 *        of squares), sum / n for L1 (of magnitudes), in double, rounded once to float32.
 * @param [in]  rule  COLL_ONEBIT_SCALE_L2 or COLL_ONEBIT_SCALE_L1 (the caller checked it).
 * @param [in]  sum   The sum over the span, in double.
 * @param [in]  count Elements n, > 0.
 * @param [out] scale Set on success only.
 * @return COLL_OK; COLL_ERR_INVALID for a sum that is not finite (some x was not). Pure.
 */
coll_status_t coll_onebit_scale(coll_onebit_scale_t rule, double sum, size_t count, float *scale);

/* ---- TopK (cpu/topk.h) ----------------------------------------------------------------------- */

/** Most elements one call selects from: indices are uint32. */
#define COLL_TOPK_MAX_COUNT UINT32_MAX

/**
 * @return k = max(1, ceil(ratio * count)), at most count; 0 for count 0. The product is taken
 *         in double less a relative 2^-40, so that a ratio like 0.07 (0.0700000000000000067 as a
 *         double) gives 7 of 100 rather than 8; ratio <= 0 or NaN gives 1 (for count > 0),
 *         ratio >= 1 gives count. Pure: every rank computes the same k.
 */
size_t coll_topk_k(size_t count, double ratio);

/**
 * How the k-th largest magnitude is found. Both methods give the same, exact result; they differ
 * in speed only (bench/compress-bw.c measures both).
 */
typedef enum {
    /**
     * SAMPLED when it pays: COLL_TOPK_SAMPLED_MIN_K <= k <= count / COLL_TOPK_SAMPLED_MAX_DIV
     * and scratch of at least coll_topk_scratch_bytes(count, k); else RADIX. Measured with
     * bench/compress-bw.c (-t) from 2K to 16M elements (topk.c has the numbers): SAMPLED is
     * 1.1x to 2x faster in that range, as fast or slower below it (the sample is a large part
     * of small spans) and above it (it gathers about 2k candidates where RADIX gathers about k).
     */
    COLL_TOPK_SELECT_AUTO = 0,
    /**
     * Radix select on the bits of |v|, 11 + 10 + 10 bits. Pass 1 adds the residual and builds the
     * histogram of the top 11 bits; pass 2 gathers the elements at or above the bin that holds
     * the k-th largest into the scratch, where the select and the output run on them. When they
     * do not fit (many equal magnitudes), passes 2 and 3 build the other two histograms over all
     * elements and pass 4 writes the output: never more than 4 passes.
     */
    COLL_TOPK_SELECT_RADIX = 1,
    /**
     * Sampled threshold, as DGC, made exact: a seeded sample of about 16 * count / k magnitudes
     * gives a threshold t that about 2k elements exceed; the one pass over the data adds the
     * residual and gathers the elements with |v| >= t into the scratch; the exact k are then
     * chosen from those by the radix select. When fewer than k elements pass t (the sample was
     * unlucky) or more than the scratch holds, the result comes from RADIX over the data instead
     * (coll_topk_info_t says so; up to 5 passes then). The sample's positions are fixed by
     * count and k.
     */
    COLL_TOPK_SELECT_SAMPLED = 2,
} coll_topk_select_t;

/** Below this k, AUTO does not sample (the sample, about 16 * count / k, is 1/16 of the data). */
#define COLL_TOPK_SAMPLED_MIN_K 256
/** Above k = count / COLL_TOPK_SAMPLED_MAX_DIV, AUTO does not sample either. */
#define COLL_TOPK_SAMPLED_MAX_DIV 16

/** What one coll_topk_compress() did; for metrics and benchmarks. */
typedef struct {
    coll_topk_select_t method; /**< RADIX or SAMPLED: the method that produced the result */
    unsigned passes;           /**< passes over all count elements (reads or writes) */
    size_t candidates;         /**< elements gathered after the first pass; 0 if none were */
} coll_topk_info_t;

/** One TopK compression. */
typedef struct {
    const float *grad;  /**< count float32 values g */
    float *residual;    /**< count float32 values e, in/out (e' above), or NULL for no error
                             feedback (v = g, nothing written but the output); must not overlap
                             @p grad or the outputs */
    size_t count;       /**< elements, at most COLL_TOPK_MAX_COUNT */
    size_t k;           /**< elements to select, 0 .. count (coll_topk_k()) */
    coll_topk_select_t select;
    void *scratch;      /**< working memory, 4-byte aligned, or NULL; its contents are undefined
                             after the call */
    size_t scratch_bytes; /**< coll_topk_scratch_bytes(count, k) for the fast paths; any size
                               (0 included) works, more slowly */
    uint32_t *indices;  /**< [out] k indices, strictly ascending */
    float *values;      /**< [out] k values v[indices[j]] */
    coll_topk_info_t *info; /**< [out] optional, may be NULL */
} coll_topk_args_t;

/**
 * @brief Check a TopK compression's arguments as every executor does (cpu/topk.h).
 * @return COLL_OK; COLL_ERR_INVALID for NULL @p a, k > count, count > COLL_TOPK_MAX_COUNT, an
 *         unknown method, or a NULL grad (count > 0), indices or values (k > 0). Pure.
 */
coll_status_t coll_topk_args_check(const coll_topk_args_t *a);

/* ---- PowerSGD (cpu/lowrank.h) --------------------------------------------------------------- */

/** Largest rank the kernels accept (PowerSGD uses 1 to 32 in practice). */
#define COLL_LOWRANK_MAX_RANK 64

/** @return min(rows, cols, rank): the rank PyTorch's hook uses for an n x m matrix. */
unsigned coll_lowrank_rank(size_t rows, size_t cols, unsigned rank);

/**
 * @return Non-zero when compressing an n x m matrix at @p rank (as coll_lowrank_rank() gives it)
 *         is worth it: (n + m) * rank * min_rate < n * m, evaluated in double. Pure.
 */
int coll_lowrank_should_compress(size_t rows, size_t cols, unsigned rank, double min_rate);

#endif
