/**
 * @file reduce.h
 * @brief One element-wise reduction, every dtype and reduction of collective.h: its arguments,
 *        the same for every memory kind (kernels/exec.h runs it; kernels/cpu/reduce.h is the
 *        host's, the reference).
 *
 * The engine combines several inputs in one pass (a partial result received from a peer and
 * every local rank's buffer), so a reduction takes an array of sources rather than a pair: each
 * input is streamed from memory once.
 *
 * Sources are either raw inputs (a rank's own buffer) or partial results (already combined,
 * e.g. received from the previous node). The difference matters for COLL_AVG only; see
 * coll_reduce_args_t and the coll_redop_t documentation.
 */
#ifndef COLL_KERNELS_REDUCE_H
#define COLL_KERNELS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Most sources one call combines. */
#define COLL_REDUCE_MAX_SRCS 64

/** One reduction. */
typedef struct {
    coll_dtype_t dtype;
    coll_redop_t op;
    uint32_t world_size; /**< COLL_AVG divisor, >= 1 */
    /**
     * Non-zero on the last combine of an operation's element: COLL_AVG of float32, float64 and
     * the integer types then divides the result by world_size.
     */
    int finalize;
    void *dst;               /**< count elements; may be exactly src[0] (in place) */
    const void *const *src;  /**< nsrc pointers to count elements each; must not partially
                                  overlap dst */
    unsigned nsrc;           /**< 1 .. COLL_REDUCE_MAX_SRCS */
    /**
     * Bit k set: src[k] is a rank's raw input, not a partial result. COLL_AVG of float16 and
     * bfloat16 multiplies raw inputs by 1/world_size (in float32) before combining them, so
     * partial sums stay within range; partial results were scaled already.
     */
    uint64_t raw_mask;
    /**
     * float16 and bfloat16 only. Bit k set: src[k] holds float32 values, a partial result kept
     * in float32 so that a sum over many nodes rounds to 16 bits once, at the end (never a raw
     * input). 0 for every other dtype.
     */
    uint64_t f32_mask;
    /** float16 and bfloat16 only: non-zero when dst receives the float32 accumulator (a
     *  partial result to send on) instead of the rounded 16-bit result. */
    int dst_f32;
    size_t count;            /**< elements, not bytes */
} coll_reduce_args_t;

/**
 * @return 1 when @p op applies to @p dtype: every reduction to every dtype, except the bitwise
 *         ones (COLL_BAND, COLL_BOR, COLL_BXOR), which apply to the integer dtypes only; 0
 *         otherwise, and for a dtype or op out of range. Pure, thread-safe.
 */
static inline int coll_reduce_op_fits(coll_dtype_t dtype, coll_redop_t op)
{
    int bitwise = op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR;
    int is_float = dtype == COLL_FLOAT32 || dtype == COLL_FLOAT64 || dtype == COLL_FLOAT16 ||
                   dtype == COLL_BFLOAT16;

    return (unsigned)dtype < COLL_DTYPE_COUNT && (unsigned)op < COLL_REDOP_COUNT &&
           !(bitwise && is_float);
}

/**
 * @brief Check a reduction's arguments as every executor's reduce_async does (the synchronous
 *        reduce trusts its caller).
 * @return COLL_OK; COLL_ERR_INVALID for NULL @p a or src, a dtype or op that is none or that do
 *         not fit (coll_reduce_op_fits(): a bitwise op of a float dtype), world_size
 *         0, nsrc outside 1 .. COLL_REDUCE_MAX_SRCS, a mask bit at or past nsrc, a source both
 *         raw and float32, f32_mask or dst_f32 for a dtype other than float16 and bfloat16, or
 *         a NULL dst or source with count > 0. Pure, thread-safe.
 */
coll_status_t coll_reduce_args_check(const coll_reduce_args_t *a);

#endif
