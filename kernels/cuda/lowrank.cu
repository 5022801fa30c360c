/*
 * The CUDA executor's PowerSGD kernels (exec.h: lowrank_*), as the host's (kernels/cpu/lowrank.h):
 * - the seeded Q, one thread per element (the host's splitmix64 outputs, position by position);
 * - P = M Q and Q = M^T P: cuBLAS's SGEMM in its pedantic mode (float32 throughout, no TF32),
 *   which adds in its own order with fused multiply-adds: the products agree with the host's to
 *   float32 rounding over the sum, not bit for bit (kernels/cuda/README.md);
 * - Gram-Schmidt, twice per column as the host, in one thread block: the columns are sequential
 *   and the work O(len rank^2); dot products in double in a fixed order of the block;
 * - P Q^T and the residual, one thread per element with the host's operations in the host's
 *   order (elem_compress.h): the same bits.
 * One cuBLAS handle per device, made when first needed and kept, guarded by a lock.
 */
#include <pthread.h>

#include <cublas_v2.h>

#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_compress.h"

namespace {

/* Threads of the Gram-Schmidt block. */
constexpr unsigned GS_THREADS = 1024;
/* Devices with a cuBLAS handle of their own. */
constexpr int MAX_DEVICES = 64;

struct Blas {
    pthread_mutex_t lock;
    cublasHandle_t handle[MAX_DEVICES];
} blas = {PTHREAD_MUTEX_INITIALIZER, {}};

__device__ size_t tid()
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t nthreads()
{
    return (size_t)gridDim.x * blockDim.x;
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS) init_q_kernel(float *q, size_t n,
                                                                    uint64_t seed)
{
    for (size_t l = tid(); l < n; l += nthreads()) {
        q[l] = coll_hd_lowrank_q(seed, l);
    }
}

/* dot(a, b) over len elements in double, the same value in every thread of the block. */
__device__ double block_dot(const float *a, const float *b, size_t len, double *red)
{
    double s = 0.0;

    for (size_t i = threadIdx.x; i < len; i += GS_THREADS) {
        s = __dadd_rn(s, coll_hd_lr_prod(a[i], b[i]));
    }
    red[threadIdx.x] = s;
    __syncthreads();
    for (unsigned half = GS_THREADS / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            red[threadIdx.x] = __dadd_rn(red[threadIdx.x], red[threadIdx.x + half]);
        }
        __syncthreads();
    }
    s = red[0];
    __syncthreads();
    return s;
}

__global__ void __launch_bounds__(GS_THREADS) gs_kernel(float *a, size_t len, unsigned rank,
                                                        float eps)
{
    __shared__ double red[GS_THREADS];

    for (unsigned c = 0; c < rank; c++) {
        float *col = a + c * len;
        for (int pass = 0; pass < 2; pass++) {
            for (unsigned j = 0; j < c; j++) {
                const float *qj = a + j * len;
                double d = block_dot(qj, col, len, red);
                for (size_t i = threadIdx.x; i < len; i += GS_THREADS) {
                    col[i] = coll_hd_lr_sub_scaled(col[i], d, qj[i]);
                }
                __syncthreads();
            }
        }
        double d = __dadd_rn(__dsqrt_rn(block_dot(col, col, len, red)), (double)eps);
        for (size_t i = threadIdx.x; i < len; i += GS_THREADS) {
            col[i] = d > 0 ? coll_hd_lr_div(col[i], d) : 0.0f;
        }
        __syncthreads();
    }
}

/* out[i * cols + j] = (P Q^T)(i, j) where out is set; resid[i * cols + j] -= it where set. */
__global__ void __launch_bounds__(COLL__CUDA_THREADS)
recon_kernel(const float *p, const float *q, size_t rows, size_t cols, unsigned rank,
             float *out, float *resid)
{
    for (size_t i = blockIdx.y; i < rows; i += gridDim.y) {
        for (size_t j = tid(); j < cols; j += nthreads()) {
            float a = coll_hd_lr_recon(p + i, rows, q + j, cols, rank);
            if (out != NULL) {
                out[i * cols + j] = a;
            }
            if (resid != NULL) {
                resid[i * cols + j] = COLL_FSUB(resid[i * cols + j], a);
            }
        }
    }
}

int rank_ok(unsigned rank)
{
    return rank >= 1 && rank <= COLL_LOWRANK_MAX_RANK;
}

int product_ok(const void *a, const void *b, const void *c, size_t rows, size_t cols,
               unsigned rank)
{
    return rank_ok(rank) && (rows == 0 || cols == 0 || (a != NULL && b != NULL && c != NULL));
}

/* The device's handle, on the run's stream; the lock is held on success until blas_done(). */
coll_status_t blas_take(coll__cuda_run_t *r, cublasHandle_t *h)
{
    if (r->dev >= MAX_DEVICES) {
        coll__cuda_log("cuBLAS: device %d past the module's %d", r->dev, MAX_DEVICES);
        return COLL_ERR_UNSUPPORTED;
    }
    pthread_mutex_lock(&blas.lock);
    cublasStatus_t bs = CUBLAS_STATUS_SUCCESS;
    if (blas.handle[r->dev] == NULL) {
        bs = cublasCreate(&blas.handle[r->dev]);
        if (bs == CUBLAS_STATUS_SUCCESS) {
            bs = cublasSetMathMode(blas.handle[r->dev], CUBLAS_PEDANTIC_MATH);
        }
    }
    if (bs == CUBLAS_STATUS_SUCCESS) {
        bs = cublasSetStream(blas.handle[r->dev], r->stream);
    }
    if (bs != CUBLAS_STATUS_SUCCESS) {
        pthread_mutex_unlock(&blas.lock);
        coll__cuda_log("cuBLAS: %s", cublasGetStatusString(bs));
        return bs == CUBLAS_STATUS_ALLOC_FAILED ? COLL_ERR_NOMEM : COLL_ERR_IO;
    }
    *h = blas.handle[r->dev];
    return COLL_OK;
}

coll_status_t blas_done(cublasStatus_t bs)
{
    pthread_mutex_unlock(&blas.lock);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        coll__cuda_log("cublasSgemm: %s", cublasGetStatusString(bs));
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

/* C (m x n, column-major, ldc m) = op(A) B, float32. */
coll_status_t gemm(coll__cuda_run_t *r, cublasOperation_t ta, int64_t m, int64_t n, int64_t k,
                   const float *A, int64_t lda, const float *B, int64_t ldb, float *C)
{
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    coll_status_t st = blas_take(r, &h);

    if (st != COLL_OK) {
        return st;
    }
    return blas_done(cublasSgemm_64(h, ta, CUBLAS_OP_N, m, n, k, &one, A, lda, B, ldb, &zero, C,
                                    m));
}

/* P = M Q for rows, cols > 0. */
coll_status_t mul_q(coll__cuda_run_t *r, const float *m, size_t rows, size_t cols,
                    const float *q, unsigned rank, float *p)
{
    return gemm(r, CUBLAS_OP_T, (int64_t)rows, rank, (int64_t)cols, m, (int64_t)cols, q,
                (int64_t)cols, p);
}

/* An entry on the device of @p ptr: @p body between begin and end. */
template <typename F> coll_status_t on_device(const void *ptr, F body)
{
    coll__cuda_run_t r;
    coll_status_t st = coll__cuda_begin(&r, ptr);

    return st == COLL_OK ? coll__cuda_end(&r, body(&r)) : st;
}

/* Zero @p floats at @p p (a product over an empty dimension), when there is any. */
coll_status_t zero_floats(float *p, size_t floats)
{
    if (p == NULL || floats == 0) {
        return COLL_OK;
    }
    return on_device(p, [&](coll__cuda_run_t *r) {
        return coll__cuda_status(cudaMemsetAsync(p, 0, floats * sizeof(float), r->stream),
                                 "cudaMemsetAsync");
    });
}

coll_status_t recon(const float *p, const float *q, size_t rows, size_t cols, unsigned rank,
                    float *out, float *resid)
{
    if (rows == 0 || cols == 0) {
        return COLL_OK;
    }
    return on_device(out != NULL ? out : resid, [&](coll__cuda_run_t *r) {
        unsigned bx = coll__cuda_blocks(r, cols);
        size_t by = (size_t)r->sms * 8 / bx;
        by = by < 1 ? 1 : by > rows ? rows : by > 65535 ? 65535 : by;
        recon_kernel<<<dim3(bx, (unsigned)by), COLL__CUDA_THREADS, 0, r->stream>>>(
            p, q, rows, cols, rank, out, resid);
        return COLL_OK;
    });
}

} // namespace

extern "C" void coll__cuda_lowrank_init_q(float *q, size_t cols, unsigned rank, uint64_t seed)
{
    const size_t n = cols * rank;

    if (n > 0) {
        on_device(q, [&](coll__cuda_run_t *r) {
            init_q_kernel<<<coll__cuda_blocks(r, n), COLL__CUDA_THREADS, 0, r->stream>>>(q, n,
                                                                                      seed);
            return COLL_OK;
        });
    }
}

extern "C" coll_status_t coll__cuda_lowrank_mul_q(const float *m, size_t rows, size_t cols,
                                                  const float *q, unsigned rank, float *p)
{
    if (!product_ok(m, q, p, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    if (rows == 0 || cols == 0) {
        return zero_floats(p, rows * rank);
    }
    return on_device(p, [&](coll__cuda_run_t *r) { return mul_q(r, m, rows, cols, q, rank, p); });
}

extern "C" coll_status_t coll__cuda_lowrank_ef_mul_q(const float *grad, float *residual,
                                                     size_t rows, size_t cols, const float *q,
                                                     unsigned rank, float *p)
{
    if (!product_ok(grad, q, p, rows, cols, rank) || (rows * cols > 0 && residual == NULL)) {
        return COLL_ERR_INVALID;
    }
    if (rows == 0 || cols == 0) {
        return zero_floats(p, rows * rank);
    }
    return on_device(p, [&](coll__cuda_run_t *r) {
        coll__cuda_ef_add(r, grad, residual, rows * cols);
        return mul_q(r, residual, rows, cols, q, rank, p);
    });
}

extern "C" coll_status_t coll__cuda_lowrank_mul_mt(const float *m, size_t rows, size_t cols,
                                                   const float *p, unsigned rank, float *q)
{
    if (!product_ok(m, p, q, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    if (rows == 0 || cols == 0) {
        return zero_floats(q, cols * rank);
    }
    return on_device(q, [&](coll__cuda_run_t *r) {
        return gemm(r, CUBLAS_OP_N, (int64_t)cols, rank, (int64_t)rows, m, (int64_t)cols, p,
                    (int64_t)rows, q);
    });
}

extern "C" coll_status_t coll__cuda_lowrank_orthonormalize(float *a, size_t len, unsigned rank,
                                                           float eps)
{
    if (!rank_ok(rank) || rank > len || a == NULL || !(eps >= 0)) {
        return COLL_ERR_INVALID;
    }
    return on_device(a, [&](coll__cuda_run_t *r) {
        gs_kernel<<<1, GS_THREADS, 0, r->stream>>>(a, len, rank, eps);
        return COLL_OK;
    });
}

extern "C" coll_status_t coll__cuda_lowrank_reconstruct(const float *p, const float *q,
                                                        size_t rows, size_t cols, unsigned rank,
                                                        float *out)
{
    if (!product_ok(p, q, out, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    return recon(p, q, rows, cols, rank, out, NULL);
}

extern "C" coll_status_t coll__cuda_lowrank_residual(const float *p, const float *q, size_t rows,
                                                     size_t cols, unsigned rank, float *residual,
                                                     float *approx)
{
    if (!product_ok(p, q, residual, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    return recon(p, q, rows, cols, rank, approx, residual);
}
