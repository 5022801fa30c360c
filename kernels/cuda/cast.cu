/*
 * The CUDA executor's 16-bit cast (exec.h: cast_encode, cast_decode, cast_accumulate), as the
 * host's (kernels/cpu/cast.h): a pass for the span's largest magnitude (an unsigned maximum,
 * exact in any order), the exponent on the host (coll_cast_scale_exp(), the host's own rule),
 * then a pass that writes the 16-bit values and the residual; decoding one pass. Every element
 * through elem_compress.h.
 */
#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_compress.h"

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
maxkey_kernel(const float *g, const float *e, size_t n, unsigned *out)
{
    unsigned m = 0;

    for (size_t i = tid(); i < n; i += nthreads()) {
        unsigned k = coll_hd_mag_key(coll_hd_cast_x(g, e, i));
        m = k > m ? k : m;
    }
    m = __reduce_max_sync(0xffffffffu, m);
    if ((threadIdx.x & 31) == 0 && m != 0) {
        atomicMax(out, m);
    }
}

template <int FMT> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
encode_kernel(const float *g, float *e, size_t n, float mul, float inv, uint16_t *out)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float x = coll_hd_cast_x(g, e, i);
        uint16_t h = coll_hd_cast_encode(FMT, x, mul);
        out[i] = h;
        if (e != NULL) {
            e[i] = coll_hd_cast_residual(FMT, x, h, inv);
        }
    }
}

template <int FMT> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
decode_kernel(const uint16_t *in, size_t n, float mul, int accumulate, float *out)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float v = coll_hd_cast_decode(FMT, in[i], mul);
        out[i] = accumulate ? COLL_FADD(out[i], v) : v;
    }
}

int fmt_of(coll_cast_format_t f)
{
    return f == COLL_CAST_BF16 ? COLL_HD_BF16 : COLL_HD_F16;
}

/* The span's largest magnitude key, from the device. */
coll_status_t maxkey(coll__cuda_run_t *r, const float *g, const float *e, size_t n,
                     uint32_t *key)
{
    unsigned *d = NULL;
    coll_status_t st = coll__cuda_temp(r, sizeof(*d), (void **)&d);

    if (st == COLL_OK) {
        st = coll__cuda_status(cudaMemsetAsync(d, 0, sizeof(*d), r->stream), "cudaMemsetAsync");
    }
    if (st == COLL_OK) {
        maxkey_kernel<<<coll__cuda_blocks(r, n), COLL__CUDA_THREADS, 0, r->stream>>>(g, e, n, d);
        st = coll__cuda_fetch(r, key, d, sizeof(*key));
    }
    coll__cuda_temp_free(r, d);
    return st;
}

coll_status_t encode(coll__cuda_run_t *r, coll_cast_format_t fmt, const float *g, float *e,
                     size_t n, uint16_t *out, int32_t *scale_exp)
{
    uint32_t key = 0;
    int32_t p = 0;
    coll_status_t st = maxkey(r, g, e, n, &key);

    if (st == COLL_OK) {
        st = coll_cast_scale_exp(fmt, key, &p);
    }
    if (st != COLL_OK) {
        return st;
    }
    unsigned b = coll__cuda_blocks(r, n);
    float mul = coll_hd_pow2(p), inv = coll_hd_pow2(-p);
    if (fmt == COLL_CAST_BF16) {
        encode_kernel<COLL_HD_BF16><<<b, COLL__CUDA_THREADS, 0, r->stream>>>(g, e, n, mul, inv, out);
    } else {
        encode_kernel<COLL_HD_F16><<<b, COLL__CUDA_THREADS, 0, r->stream>>>(g, e, n, mul, inv, out);
    }
    *scale_exp = p;
    return COLL_OK;
}

coll_status_t decode(coll_cast_format_t fmt, const uint16_t *in, size_t n, int32_t scale_exp,
                     float weight, int accumulate, float *out)
{
    coll__cuda_run_t r;

    if ((fmt != COLL_CAST_FP16 && fmt != COLL_CAST_BF16) || scale_exp < COLL_CAST_EXP_MIN ||
        scale_exp > COLL_CAST_EXP_MAX || (n > 0 && (in == NULL || out == NULL))) {
        return COLL_ERR_INVALID;
    }
    if (n == 0) {
        return COLL_OK;
    }
    coll_status_t st = coll__cuda_begin(&r, out);
    if (st != COLL_OK) {
        return st;
    }
    float mul = accumulate ? weight * coll_hd_pow2(-scale_exp) : coll_hd_pow2(-scale_exp);
    unsigned b = coll__cuda_blocks(&r, n);
    if (fmt_of(fmt) == COLL_HD_BF16) {
        decode_kernel<COLL_HD_BF16><<<b, COLL__CUDA_THREADS, 0, r.stream>>>(in, n, mul, accumulate, out);
    } else {
        decode_kernel<COLL_HD_F16><<<b, COLL__CUDA_THREADS, 0, r.stream>>>(in, n, mul, accumulate, out);
    }
    return coll__cuda_end(&r, COLL_OK);
}

} // namespace

extern "C" coll_status_t coll__cuda_cast_encode(coll_cast_format_t fmt, const float *grad,
                                                float *residual, size_t count, uint16_t *out,
                                                int32_t *scale_exp)
{
    coll__cuda_run_t r;

    if ((fmt != COLL_CAST_FP16 && fmt != COLL_CAST_BF16) || scale_exp == NULL ||
        (count > 0 && (grad == NULL || out == NULL))) {
        return COLL_ERR_INVALID;
    }
    if (count == 0) {
        *scale_exp = 0;
        return COLL_OK;
    }
    int32_t p = 0;
    coll_status_t st = coll__cuda_begin(&r, out);
    if (st == COLL_OK) {
        st = coll__cuda_end(&r, encode(&r, fmt, grad, residual, count, out, &p));
    }
    if (st == COLL_OK) {
        *scale_exp = p;
    }
    return st;
}

extern "C" coll_status_t coll__cuda_cast_decode(coll_cast_format_t fmt, const uint16_t *in,
                                                size_t count, int32_t scale_exp, float *out)
{
    return decode(fmt, in, count, scale_exp, 1.0f, 0, out);
}

extern "C" coll_status_t coll__cuda_cast_accumulate(coll_cast_format_t fmt, const uint16_t *in,
                                                    size_t count, int32_t scale_exp,
                                                    float weight, float *acc)
{
    return decode(fmt, in, count, scale_exp, weight, 1, acc);
}
