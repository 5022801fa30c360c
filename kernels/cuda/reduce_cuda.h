/**
 * @file reduce_cuda.h
 * @brief Element-wise reduction kernels on GPU memory (the GPU path's local reduce).
 *
 * Same contract as kernels/cpu/reduce.h, for device pointers, asynchronous on a stream.
 */
#ifndef COLL_KERNELS_REDUCE_CUDA_H
#define COLL_KERNELS_REDUCE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Most sources one launch combines. */
#define COLL_CUDA_MAX_SRCS 16

/**
 * @brief Enqueue dst[i] = op(srcs[0][i], ..., srcs[nsrc-1][i]) on @p stream, divided by
 *        @p world_size when @p finalize and @p op is COLL_AVG.
 * @param [in] stream A cudaStream_t (void * keeps CUDA headers out of C callers); NULL: default.
 * @param [out] dst   Device pointer, count elements; may equal srcs[0].
 * @param [in] srcs   Host array of 1..COLL_CUDA_MAX_SRCS device pointers.
 * @return COLL_OK once enqueued; COLL_ERR_INVALID (nsrc out of range, dtype/op unsupported);
 *         COLL_ERR_IO when the launch fails (no device, bad pointer).
 */
coll_status_t coll_cuda_reduce(coll_dtype_t dtype, coll_redop_t op, int finalize,
                               uint32_t world_size, void *dst, const void *const *srcs,
                               unsigned nsrc, size_t count, void *stream);

#ifdef __cplusplus
}
#endif

#endif
