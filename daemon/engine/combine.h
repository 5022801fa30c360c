/**
 * @file combine.h
 * @brief The reductions every algorithm does: a partial result (or nothing) plus every local
 *        rank's input over one piece of the buffer, in one kernel pass.
 */
#ifndef COLL_COMBINE_H
#define COLL_COMBINE_H

#include "engine/op.h"
#include "kernels/reduce.h"

/**
 * @return 1 when partial results of @p op over @p dtype are kept in float32: float16 and
 *         bfloat16 sums, averages and products, so that a reduction over any number of nodes
 *         rounds to 16 bits once, at the end, whatever the algorithm (min and max round
 *         nothing, and keep 16 bits).
 */
int coll_partial_is_f32(coll_dtype_t dtype, coll_redop_t op);

/** @return Bytes of one element of a partial result: 4 where coll_partial_is_f32(), else the
 *          dtype's size. Partials travel between nodes in this size. */
size_t coll_partial_esize(coll_dtype_t dtype, coll_redop_t op);

/** @return coll_partial_esize() of the operation's dtype and reduction. */
size_t coll_combine_partial_esize(const coll_op_t *op);

/**
 * @brief dst = partial (when not NULL) combined with in[l][off .. off+len) of every local
 *        member of the operation's group (of its one node buffer, op->nbufs == 1, for a
 *        node-reduced allreduce).
 *        @p partial and, unless @p finalize, @p dst hold partial results
 *        (coll_combine_partial_esize() per element); with @p finalize, @p dst is an output.
 * @param [in] off      Element offset of the piece in the local ranks' inputs.
 * @param [in] len      Elements.
 * @param [in] finalize Last combine of these elements (COLL_AVG divides, see reduce.h).
 * @p dst may be @p partial or one of the inputs (in place); the kernel is given that source
 * first. The local inputs are raw inputs, @p partial is not.
 */
void coll_combine_locals(coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                         const void *partial, int finalize);

/** Room for the sources of coll_combine_locals_args(): a partial and every local member. */
#define COLL_COMBINE_MAX_SRC (1 + COLL_MAX_LOCAL)

/**
 * @brief The reduction coll_combine_locals() runs, for a caller that runs it through another
 *        executor or queued on a stream (reduce_async: the NCCL path's local reduce on the
 *        device). Arguments as coll_combine_locals()'s.
 * @param [out] src Room for COLL_COMBINE_MAX_SRC sources, which @p a_p points to: it must live
 *                  as long as @p a_p is used.
 * @param [out] a_p The reduction's arguments.
 */
void coll_combine_locals_args(const coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                              const void *partial, int finalize, const void **src,
                              coll_reduce_args_t *a_p);

/**
 * @return 1 when a rank's raw input cannot be sent on as a partial result even alone: float16
 *         and bfloat16 COLL_AVG scale raw inputs by 1/world size first.
 */
int coll_combine_transforms_raw(const coll_op_t *op);

/** @brief dst = a combined with b (all three partial results), @p len elements; dst may be a. */
void coll_combine_pair(coll_op_t *op, void *dst, const void *a, const void *b, uint64_t len);

/** @brief The output @p dst from the final partial result @p partial, @p len elements (rounded
 *         to 16 bits where partials are float32; COLL_AVG divides for the other dtypes). */
void coll_combine_finish(coll_op_t *op, void *dst, const void *partial, uint64_t len);

#endif
