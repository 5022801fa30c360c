#include "kernels/cuda/reduce_cuda.h"

#include <cuda_runtime.h>

namespace {

struct Srcs {
    const float *p[COLL_CUDA_MAX_SRCS];
};

// Grid-stride loop: one pass over memory whatever the number of sources.
__global__ void sum_f32(float *dst, Srcs srcs, unsigned nsrc, size_t count, float divisor)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count; i += stride) {
        float acc = srcs.p[0][i];
        for (unsigned k = 1; k < nsrc; k++) {
            acc += srcs.p[k][i];
        }
        dst[i] = divisor != 1.0f ? acc / divisor : acc;
    }
}

} // namespace

extern "C" coll_status_t coll_cuda_reduce(coll_dtype_t dtype, coll_redop_t op, int finalize,
                                          uint32_t world_size, void *dst,
                                          const void *const *srcs, unsigned nsrc, size_t count,
                                          void *stream)
{
    Srcs s;
    float divisor = (finalize && op == COLL_AVG) ? (float)world_size : 1.0f;
    const unsigned threads = 256;
    size_t blocks = (count + threads - 1) / threads;

    if (dtype != COLL_FLOAT32 || nsrc == 0 || nsrc > COLL_CUDA_MAX_SRCS || op >= COLL_REDOP_COUNT) {
        return COLL_ERR_INVALID;
    }
    if (count == 0) {
        return COLL_OK;
    }
    for (unsigned k = 0; k < nsrc; k++) {
        s.p[k] = static_cast<const float *>(srcs[k]);
    }
    blocks = blocks > 4096 ? 4096 : blocks;
    sum_f32<<<(unsigned)blocks, threads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<float *>(dst), s, nsrc, count, divisor);
    return cudaGetLastError() == cudaSuccess ? COLL_OK : COLL_ERR_IO;
}
