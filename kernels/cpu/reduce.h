/**
 * @file reduce.h
 * @brief The host's reduction (the host executor's reduce, kernels/exec.h): every dtype and
 *        reduction of collective.h on host memory, vectorized per instruction set (isa.h).
 */
#ifndef COLL_KERNELS_CPU_REDUCE_H
#define COLL_KERNELS_CPU_REDUCE_H

#include "kernels/reduce.h"

/**
 * @brief dst[i] = op(src[0][i], ..., src[nsrc-1][i]) for 0 <= i < count, with the COLL_AVG
 *        scaling described in coll_reduce_args_t. 16-bit floats are combined in float32 and
 *        rounded to nearest even once. MIN and MAX return NaN when any source is NaN.
 *
 * Thread-safe (no shared state). The caller validated dtype, op (coll_reduce_op_fits()) and
 * nsrc; count 0 is a no-op.
 * Runs on the instruction set chosen once for every host kernel (kernels/cpu/isa.h).
 */
void coll_reduce(const coll_reduce_args_t *args);

#endif
