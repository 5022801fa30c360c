/**
 * @file combine.h
 * @brief The reductions every algorithm does: a partial result (or nothing) plus every local
 *        rank's input over one piece of the buffer, in one kernel pass.
 */
#ifndef COLL_COMBINE_H
#define COLL_COMBINE_H

#include "op.h"

/**
 * @brief dst = partial (when not NULL) combined with in[l][off .. off+len) of every local rank.
 * @param [in] off      Element offset of the piece in the local ranks' inputs.
 * @param [in] len      Elements.
 * @param [in] finalize Last combine of these elements (COLL_AVG divides, see reduce.h).
 * @p dst may be @p partial or one of the inputs (in place); the kernel is given that source
 * first. The local inputs are raw inputs, @p partial is not.
 */
void coll_combine_locals(coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                         const void *partial, int finalize);

/**
 * @return 1 when a rank's raw input cannot be sent on as a partial result even alone: float16
 *         and bfloat16 COLL_AVG scale raw inputs by 1/world size first.
 */
int coll_combine_transforms_raw(const coll_op_t *op);

/** @brief dst = a combined with b (both partial results), @p len elements; dst may be a. */
void coll_combine_pair(coll_op_t *op, void *dst, const void *a, const void *b, uint64_t len);

#endif
