/*
 * Internal to the CUDA module's .cu files: sums in double over a whole array (the 1-bit scale,
 * the optimizers' sums of squares), in an order fixed by the array's length alone, so that a
 * sum is the same on every run and every device. Each of SUM_BLOCKS(n) blocks adds the terms of
 * its threads (thread t of the grid takes elements t, t + T, t + 2T, ... in turn, T the grid's
 * threads) and then its threads' sums in a tree; one block adds the blocks' sums the same way.
 * Not the host's order (16 lanes, kernels/cpu/optim_isa.h): squares are exact in double, so the
 * two agree to the accuracy kernels/optim.h states.
 */
#ifndef COLL_KERNELS_CUDA_SUM_CUH
#define COLL_KERNELS_CUDA_SUM_CUH

#include "kernels/cuda/rt.h"

namespace coll_sum {

/* Most blocks of a sum; elements per thread before a sum takes another block. */
constexpr unsigned MAX_BLOCKS = 1024;
constexpr size_t PER_THREAD = 8;

/* Blocks for a sum over @p n elements. */
inline unsigned blocks(size_t n)
{
    size_t b = (n + COLL__CUDA_THREADS * PER_THREAD - 1) / (COLL__CUDA_THREADS * PER_THREAD);
    return b < 1 ? 1 : b > MAX_BLOCKS ? MAX_BLOCKS : (unsigned)b;
}

/* Adds @p v[W] of every thread of the block in a fixed tree; thread 0 stores the W sums at
 * out[0 .. W). */
template <int W> __device__ void block_store(double *v, double *out)
{
    __shared__ double s[W][COLL__CUDA_THREADS];

#pragma unroll
    for (int w = 0; w < W; w++) {
        s[w][threadIdx.x] = v[w];
    }
    __syncthreads();
    for (unsigned half = COLL__CUDA_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
#pragma unroll
            for (int w = 0; w < W; w++) {
                s[w][threadIdx.x] = __dadd_rn(s[w][threadIdx.x], s[w][threadIdx.x + half]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
#pragma unroll
        for (int w = 0; w < W; w++) {
            out[w] = s[w][0];
        }
    }
}

/* One block: out[w] = the sum of part[b * W + w] over @p nblocks blocks. */
template <int W> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
finish(const double *part, unsigned nblocks, double *out)
{
    double v[W] = {};

    for (unsigned b = threadIdx.x; b < nblocks; b += COLL__CUDA_THREADS) {
#pragma unroll
        for (int w = 0; w < W; w++) {
            v[w] = __dadd_rn(v[w], part[b * W + w]);
        }
    }
    block_store<W>(v, out);
}

} // namespace coll_sum

#endif
