/**
 * @file reduce_isa.h
 * @brief Internal interface between the reduction driver (reduce.c) and its element loops
 *        (reduce_loops.h), which exist once per instruction set (isa.h).
 *
 * The driver cuts a reduction into blocks of COLL__REDUCE_BLOCK_BYTES of accumulator and, per
 * block, folds the sources into the accumulator a few at a time (passes), so that with many
 * sources every source is read from memory once while the accumulator stays in L1. The kernels
 * below run one pass over one block. They take unaligned pointers, count in elements, and are
 * pure functions of their arguments (thread-safe).
 *
 * Every instruction set runs the same source: the sources combine in the same order (left to
 * right) with the same rounding steps and no fused multiply-add, so all of them give
 * bit-identical results except for the payload of a NaN produced by SUM, AVG or PROD.
 */
#ifndef COLL_KERNELS_REDUCE_ISA_H
#define COLL_KERNELS_REDUCE_ISA_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/**
 * Bytes of accumulator per block: the destination itself for float32, float64 and integers, a
 * float32 scratch array on the stack for float16 and bfloat16. Small enough for L1 with room
 * for the source lines in flight. Overridable (-D) for tuning experiments only; 8-64 KiB
 * measured within noise of each other on an AMD EPYC (Zen 3) guest.
 */
#ifndef COLL__REDUCE_BLOCK_BYTES
#define COLL__REDUCE_BLOCK_BYTES 16384
#endif

/** Most sources one pass folds into the accumulator (in addition to the accumulator). */
#define COLL__REDUCE_FANIN 4

/** @return Bytes of one element of @p dtype (the dtype was validated by the caller). */
static inline size_t coll__reduce_esize(coll_dtype_t dtype)
{
    /* A switch rather than a table, so that a constant dtype folds to a constant size. */
    switch (dtype) {
    case COLL_FLOAT64:
    case COLL_INT64: return 8;
    case COLL_FLOAT32:
    case COLL_INT32: return 4;
    case COLL_FLOAT16:
    case COLL_BFLOAT16: return 2;
    default: return 1;
    }
}

/** @return Non-zero for float16 and bfloat16, which accumulate in float32. */
static inline int coll__reduce_is_half(coll_dtype_t dtype)
{
    return dtype == COLL_FLOAT16 || dtype == COLL_BFLOAT16;
}

/** @return Elements of @p dtype per block (a multiple of 64, so only the last block has a tail). */
static inline size_t coll__reduce_block_elems(coll_dtype_t dtype)
{
    return COLL__REDUCE_BLOCK_BYTES /
           (coll__reduce_is_half(dtype) ? sizeof(float) : coll__reduce_esize(dtype));
}

/** The element loops of one instruction set (a part of coll__isa_t). */
typedef struct {
    /**
     * out[i] = op(in[0][i], ..., in[m-1][i]) for 0 <= i < n, left to right, for every dtype
     * except float16 and bfloat16. COLL_AVG combines as COLL_SUM; COLL_BAND, COLL_BOR and
     * COLL_BXOR only for the integer dtypes. 2 <= m <= FANIN + 1.
     * @p out may be exactly in[0]; it overlaps no other input.
     */
    void (*combine)(coll_dtype_t dtype, coll_redop_t op, void *out, const void *const *in,
                    unsigned m, size_t n);

    /**
     * For float16 and bfloat16: v[i] = op(acc[i] when @p has_acc, x[0], ..., x[m-1]) in
     * float32, where x[k] = widen(in[k][i]), times scale[k] for COLL_AVG (scale is read for
     * COLL_AVG only). 1 <= m <= FANIN. v goes to acc[i]; or, on the last pass (@p out not
     * NULL), rounded to the 16-bit dtype (nearest even, half.h) into out[i] instead. @p out may
     * be exactly in[0]; it overlaps no other input.
     */
    void (*combine_half)(coll_dtype_t dtype, coll_redop_t op, float *acc, int has_acc,
                         const void *const *in, const float *scale, unsigned m, size_t n,
                         void *out);

    /**
     * buf[i] /= world_size for float32, float64 (IEEE division, so correctly rounded) and the
     * integer types (truncating toward zero).
     */
    void (*divide)(coll_dtype_t dtype, void *buf, uint32_t world_size, size_t n);
} coll__reduce_loops_t;

#endif
