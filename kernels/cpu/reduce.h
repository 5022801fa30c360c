/**
 * @file reduce.h
 * @brief Element-wise reduction kernels on host memory.
 *
 * The engine combines several inputs in one pass (the received segment and every local rank's
 * buffer), so a kernel takes an array of sources rather than a pair: one pass over memory
 * instead of nsrc-1 passes.
 */
#ifndef COLL_KERNELS_REDUCE_H
#define COLL_KERNELS_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "collective.h"

/**
 * @brief dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) for 0 <= i < count, then, when
 *        @p finalize is set and @p op is COLL_AVG, divided by @p world_size.
 *
 * @param [in]  dtype      Element datatype.
 * @param [in]  op         Reduction; COLL_AVG combines as COLL_SUM until finalized.
 * @param [in]  finalize   Non-zero on the last combine of an operation.
 * @param [in]  world_size Divisor of COLL_AVG.
 * @param [out] dst        count elements; may be exactly srcs[0] (in place), must not partially
 *                         overlap any source.
 * @param [in]  srcs       nsrc >= 1 pointers to count elements each.
 * @param [in]  count      Elements (not bytes).
 * Thread-safe (no shared state). The caller validated dtype and op.
 */
void coll_reduce(coll_dtype_t dtype, coll_redop_t op, int finalize, uint32_t world_size, void *dst,
                 const void *const *srcs, unsigned nsrc, size_t count);

#endif
