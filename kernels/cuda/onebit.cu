/*
 * The CUDA executor's 1-bit packing (exec.h: onebit_encode, onebit_decode, onebit_accumulate),
 * as the host's (kernels/cpu/onebit.h): the span's sum in double (sum.cuh), its scale on the
 * host (coll_onebit_scale(), the host's own rule), then one thread per byte of signs packs 8
 * elements and updates their residual; decoding one thread per element. Every element through
 * elem_compress.h.
 */
#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_compress.h"
#include "kernels/cuda/sum.cuh"

namespace {

__device__ size_t tid()
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t nthreads()
{
    return (size_t)gridDim.x * blockDim.x;
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
sum_kernel(const float *g, const float *e, size_t n, int l1, double *part)
{
    double v[1] = {0.0};

    for (size_t i = tid(); i < n; i += nthreads()) {
        float x = e != NULL ? coll_hd_ef_add(g[i], e[i]) : g[i];
        v[0] = __dadd_rn(v[0], coll_hd_onebit_term(x, l1));
    }
    coll_sum::block_store<1>(v, part + blockIdx.x);
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
pack_kernel(const float *g, float *e, size_t n, float scale, uint8_t *bits)
{
    const size_t nbytes = (n + 7) / 8;

    for (size_t b = tid(); b < nbytes; b += nthreads()) {
        size_t len = n - 8 * b < 8 ? n - 8 * b : 8;
        bits[b] = coll_hd_onebit_pack(g + 8 * b, e != NULL ? e + 8 * b : NULL, len, scale);
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
unpack_kernel(const uint8_t *bits, size_t n, float ws, int accumulate, float *out)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float v = coll_hd_onebit_value(bits[i / 8], (unsigned)(i % 8), ws);
        out[i] = accumulate ? COLL_FADD(out[i], v) : v;
    }
}

/* The span's sum of terms, from the device. */
coll_status_t span_sum(coll__cuda_run_t *r, const float *g, const float *e, size_t n, int l1,
                       double *sum)
{
    const unsigned nb = coll_sum::blocks(n);
    double *part = NULL;
    coll_status_t st = coll__cuda_temp(r, (nb + 1) * sizeof(double), (void **)&part);

    if (st == COLL_OK) {
        sum_kernel<<<nb, COLL__CUDA_THREADS, 0, r->stream>>>(g, e, n, l1, part);
        coll_sum::finish<1><<<1, COLL__CUDA_THREADS, 0, r->stream>>>(part, nb, part + nb);
        st = coll__cuda_fetch(r, sum, part + nb, sizeof(*sum));
    }
    coll__cuda_temp_free(r, part);
    return st;
}

coll_status_t encode(coll__cuda_run_t *r, coll_onebit_scale_t rule, const float *g, float *e,
                     size_t n, uint8_t *signs, float *scale)
{
    double sum = 0;
    coll_status_t st = span_sum(r, g, e, n, rule == COLL_ONEBIT_SCALE_L1, &sum);

    if (st == COLL_OK) {
        st = coll_onebit_scale(rule, sum, n, scale);
    }
    if (st == COLL_OK) {
        pack_kernel<<<coll__cuda_blocks(r, (n + 7) / 8), COLL__CUDA_THREADS, 0, r->stream>>>(
            g, e, n, *scale, signs);
    }
    return st;
}

coll_status_t unpack(const uint8_t *signs, size_t n, float scale, float weight, int accumulate,
                     float *out)
{
    coll__cuda_run_t r;

    if (n > 0 && (signs == NULL || out == NULL)) {
        return COLL_ERR_INVALID;
    }
    if (n == 0) {
        return COLL_OK;
    }
    coll_status_t st = coll__cuda_begin(&r, out);
    if (st == COLL_OK) {
        unpack_kernel<<<coll__cuda_blocks(&r, n), COLL__CUDA_THREADS, 0, r.stream>>>(
            signs, n, scale * weight, accumulate, out);
        st = coll__cuda_end(&r, COLL_OK);
    }
    return st;
}

} // namespace

extern "C" coll_status_t coll__cuda_onebit_encode(coll_onebit_scale_t rule, const float *grad,
                                                  float *residual, size_t count, uint8_t *signs,
                                                  float *scale)
{
    coll__cuda_run_t r;
    float s = 0.0f;

    if ((rule != COLL_ONEBIT_SCALE_L2 && rule != COLL_ONEBIT_SCALE_L1) || scale == NULL ||
        (count > 0 && (grad == NULL || signs == NULL))) {
        return COLL_ERR_INVALID;
    }
    if (count == 0) {
        *scale = 0.0f;
        return COLL_OK;
    }
    coll_status_t st = coll__cuda_begin(&r, signs);
    if (st == COLL_OK) {
        st = coll__cuda_end(&r, encode(&r, rule, grad, residual, count, signs, &s));
    }
    if (st == COLL_OK) {
        *scale = s;
    }
    return st;
}

extern "C" coll_status_t coll__cuda_onebit_decode(const uint8_t *signs, size_t count, float scale,
                                                  float weight, float *out)
{
    return unpack(signs, count, scale, weight, 0, out);
}

extern "C" coll_status_t coll__cuda_onebit_accumulate(const uint8_t *signs, size_t count,
                                                      float scale, float weight, float *acc)
{
    return unpack(signs, count, scale, weight, 1, acc);
}
