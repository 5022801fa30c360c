/*
 * The CUDA executor's optimizer steps (exec.h: optim_*), as the host's (kernels/cpu/optim.h):
 * one thread per element through elem_optim.h's updates (the same bits), the loop-invariant
 * choices as template arguments so that each combination is a kernel without branches; the sums
 * of squares in double in sum.cuh's fixed order (kernels/cuda/README.md: not the host's order).
 * The entries that return a value (sums, finiteness) wait for it; on a device error they log it
 * and return NaN (sums) or 0 (finiteness), which every caller already treats as a step to skip.
 */
#include <math.h>

#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_optim.h"
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

/* ---- sums of squares and finiteness ---- */

template <int W> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
sumsq_kernel(const float *a, const float *b, size_t n, double *part)
{
    double v[W] = {};

    for (size_t i = tid(); i < n; i += nthreads()) {
        v[0] = __dadd_rn(v[0], coll_hd_sq(a[i]));
        if (W == 2) {
            v[W - 1] = __dadd_rn(v[W - 1], coll_hd_sq(b[i]));
        }
    }
    coll_sum::block_store<W>(v, part + blockIdx.x * W);
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
nonfinite_kernel(const float *x, size_t n, unsigned *bad)
{
    int any = 0;

    for (size_t i = tid(); i < n; i += nthreads()) {
        any |= coll_hd_nonfinite(x[i]);
    }
    if (__any_sync(0xffffffffu, any) && (threadIdx.x & 31) == 0) {
        atomicOr(bad, 1u);
    }
}

/* ---- updates ---- */

template <int WD, int MOM, int FIRST, int NEST> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
sgd_kernel(const coll_optim_sgd_coef_t k, float *w, const float *g, float *buf, size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float wi = w[i], b = MOM && !FIRST ? buf[i] : 0.0f;
        coll_hd_sgd(&k, &wi, g[i], &b, WD, MOM, FIRST, NEST);
        w[i] = wi;
        if (MOM) {
            buf[i] = b;
        }
    }
}

__global__ void __launch_bounds__(COLL__CUDA_THREADS)
adamw_kernel(const coll_optim_adamw_coef_t k, float *w, const float *g, float *m, float *v,
             size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float wi = w[i], mi = m[i], vi = v[i];
        coll_hd_adamw(&k, &wi, g[i], &mi, &vi);
        w[i] = wi, m[i] = mi, v[i] = vi;
    }
}

template <int WD, int NEST> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
lars_kernel(const coll_optim_lars_coef_t k, float *w, const float *g, float *v, size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        float wi = w[i], vi = v[i];
        coll_hd_lars(&k, &wi, g[i], &vi, WD, NEST);
        w[i] = wi, v[i] = vi;
    }
}

template <int WD, int WD_G, int EPS_IN> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
lamb_moments_kernel(const coll_optim_lamb_coef_t k, const float *w, const float *g, float *m,
                    float *v, size_t n, double *part)
{
    double s[2] = {};

    for (size_t i = tid(); i < n; i += nthreads()) {
        float wi = w[i], mi = m[i], vi = v[i];
        float r = coll_hd_lamb_moments(&k, wi, g[i], &mi, &vi, WD, WD_G, EPS_IN);
        m[i] = mi, v[i] = vi;
        s[0] = __dadd_rn(s[0], coll_hd_sq(wi));
        s[1] = __dadd_rn(s[1], coll_hd_sq(r));
    }
    coll_sum::block_store<2>(s, part + blockIdx.x * 2);
}

template <int WD, int EPS_IN> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
lamb_apply_kernel(const coll_optim_lamb_coef_t k, float *w, const float *m, const float *v,
                  size_t n)
{
    for (size_t i = tid(); i < n; i += nthreads()) {
        w[i] = coll_hd_lamb_apply(&k, w[i], m[i], v[i], WD, EPS_IN);
    }
}

/* ---- launch ---- */

/* Runs @p body on the device of @p ptr, waits; a device error is logged (rt.c) and reported. */
template <typename F> coll_status_t on_device(const void *ptr, F body)
{
    coll__cuda_run_t r;
    coll_status_t st = coll__cuda_begin(&r, ptr);

    return st == COLL_OK ? coll__cuda_end(&r, body(&r)) : st;
}

/* W sums of squares over n > 0 elements by @p launch (which writes W per block into part), into
 * out. */
template <int W, typename F> coll_status_t sums(coll__cuda_run_t *r, size_t n, F launch,
                                                double *out)
{
    const unsigned nb = coll_sum::blocks(n);
    double *part = NULL;
    coll_status_t st = coll__cuda_temp(r, (nb + 1) * W * sizeof(double), (void **)&part);

    if (st == COLL_OK) {
        launch(nb, part);
        coll_sum::finish<W><<<1, COLL__CUDA_THREADS, 0, r->stream>>>(part, nb, part + nb * W);
        st = coll__cuda_fetch(r, out, part + nb * W, W * sizeof(double));
    }
    coll__cuda_temp_free(r, part);
    return st;
}

#define GRID(r, n) coll__cuda_blocks(r, n), COLL__CUDA_THREADS, 0, (r)->stream

template <int WD> void sgd_launch(coll__cuda_run_t *r, const coll_optim_sgd_coef_t *k, float *w,
                                  const float *g, float *buf, size_t n)
{
    const unsigned var = k->variant;
    const int nest = (var & COLL_OPTIM_COEF_NESTEROV) != 0;

    if (!(var & COLL_OPTIM_COEF_MOM)) {
        sgd_kernel<WD, 0, 0, 0><<<GRID(r, n)>>>(*k, w, g, buf, n);
    } else if (var & COLL_OPTIM_COEF_FIRST) {
        nest ? sgd_kernel<WD, 1, 1, 1><<<GRID(r, n)>>>(*k, w, g, buf, n)
             : sgd_kernel<WD, 1, 1, 0><<<GRID(r, n)>>>(*k, w, g, buf, n);
    } else {
        nest ? sgd_kernel<WD, 1, 0, 1><<<GRID(r, n)>>>(*k, w, g, buf, n)
             : sgd_kernel<WD, 1, 0, 0><<<GRID(r, n)>>>(*k, w, g, buf, n);
    }
}

template <int WD, int WD_G> void lamb_moments_launch(coll__cuda_run_t *r, unsigned nb,
                                                     const coll_optim_lamb_coef_t *k,
                                                     const float *w, const float *g, float *m,
                                                     float *v, size_t n, double *part)
{
    if (k->variant & COLL_OPTIM_COEF_EPS_IN) {
        lamb_moments_kernel<WD, WD_G, 1><<<nb, COLL__CUDA_THREADS, 0, r->stream>>>(*k, w, g, m,
                                                                                   v, n, part);
    } else {
        lamb_moments_kernel<WD, WD_G, 0><<<nb, COLL__CUDA_THREADS, 0, r->stream>>>(*k, w, g, m,
                                                                                   v, n, part);
    }
}

} // namespace

extern "C" double coll__cuda_optim_sumsq(const float *x, size_t n)
{
    double s = 0.0;

    if (n == 0) {
        return 0.0;
    }
    coll_status_t st = on_device(x, [&](coll__cuda_run_t *r) {
        return sums<1>(r, n, [&](unsigned nb, double *part) {
            sumsq_kernel<1><<<nb, COLL__CUDA_THREADS, 0, r->stream>>>(x, x, n, part);
        }, &s);
    });
    return st == COLL_OK ? s : NAN;
}

extern "C" void coll__cuda_optim_sumsq2(const float *a, const float *b, size_t n, double out[2])
{
    double s[2] = {0.0, 0.0};

    if (n > 0 && on_device(a, [&](coll__cuda_run_t *r) {
            return sums<2>(r, n, [&](unsigned nb, double *part) {
                sumsq_kernel<2><<<nb, COLL__CUDA_THREADS, 0, r->stream>>>(a, b, n, part);
            }, s);
        }) != COLL_OK) {
        s[0] = s[1] = NAN;
    }
    out[0] = s[0];
    out[1] = s[1];
}

extern "C" int coll__cuda_optim_all_finite(const float *x, size_t n)
{
    unsigned bad = 0;

    if (n == 0) {
        return 1;
    }
    coll_status_t st = on_device(x, [&](coll__cuda_run_t *r) {
        unsigned *d = NULL;
        coll_status_t s = coll__cuda_temp(r, sizeof(*d), (void **)&d);
        if (s == COLL_OK) {
            cudaMemsetAsync(d, 0, sizeof(*d), r->stream);
            nonfinite_kernel<<<GRID(r, n)>>>(x, n, d);
            s = coll__cuda_fetch(r, &bad, d, sizeof(bad));
        }
        coll__cuda_temp_free(r, d);
        return s;
    });
    return st == COLL_OK && bad == 0;
}

extern "C" void coll__cuda_optim_sgd(const coll_optim_sgd_coef_t *k, float *w, const float *g,
                                     float *buf, size_t n)
{
    if (n > 0) {
        on_device(w, [&](coll__cuda_run_t *r) {
            if (k->variant & COLL_OPTIM_COEF_WD) {
                sgd_launch<1>(r, k, w, g, buf, n);
            } else {
                sgd_launch<0>(r, k, w, g, buf, n);
            }
            return COLL_OK;
        });
    }
}

extern "C" void coll__cuda_optim_adamw(const coll_optim_adamw_coef_t *k, float *w,
                                       const float *g, float *m, float *v, size_t n)
{
    if (n > 0) {
        on_device(w, [&](coll__cuda_run_t *r) {
            adamw_kernel<<<GRID(r, n)>>>(*k, w, g, m, v, n);
            return COLL_OK;
        });
    }
}

extern "C" void coll__cuda_optim_lars(const coll_optim_lars_coef_t *k, float *w, const float *g,
                                      float *v, size_t n)
{
    const int wd = (k->variant & COLL_OPTIM_COEF_WD) != 0;
    const int nest = (k->variant & COLL_OPTIM_COEF_NESTEROV) != 0;

    if (n > 0) {
        on_device(w, [&](coll__cuda_run_t *r) {
            if (nest) {
                wd ? lars_kernel<1, 1><<<GRID(r, n)>>>(*k, w, g, v, n)
                   : lars_kernel<0, 1><<<GRID(r, n)>>>(*k, w, g, v, n);
            } else {
                wd ? lars_kernel<1, 0><<<GRID(r, n)>>>(*k, w, g, v, n)
                   : lars_kernel<0, 0><<<GRID(r, n)>>>(*k, w, g, v, n);
            }
            return COLL_OK;
        });
    }
}

extern "C" void coll__cuda_optim_lamb_moments(const coll_optim_lamb_coef_t *k, const float *w,
                                              const float *g, float *m, float *v, size_t n,
                                              double sumsq[2])
{
    double s[2] = {0.0, 0.0};

    /* Decay is in r (WD), on the gradient (WD_G) or absent; the front end never sets both. */
    if (n > 0 && on_device(m, [&](coll__cuda_run_t *r) {
            return sums<2>(r, n, [&](unsigned nb, double *part) {
                if (k->variant & COLL_OPTIM_COEF_WD_G) {
                    lamb_moments_launch<0, 1>(r, nb, k, w, g, m, v, n, part);
                } else if (k->variant & COLL_OPTIM_COEF_WD) {
                    lamb_moments_launch<1, 0>(r, nb, k, w, g, m, v, n, part);
                } else {
                    lamb_moments_launch<0, 0>(r, nb, k, w, g, m, v, n, part);
                }
            }, s);
        }) != COLL_OK) {
        s[0] = s[1] = NAN;
    }
    sumsq[0] = s[0];
    sumsq[1] = s[1];
}

extern "C" void coll__cuda_optim_lamb_apply(const coll_optim_lamb_coef_t *k, float *w,
                                            const float *m, const float *v, size_t n)
{
    const int wd = (k->variant & COLL_OPTIM_COEF_WD) != 0;
    const int eps_in = (k->variant & COLL_OPTIM_COEF_EPS_IN) != 0;

    if (n > 0) {
        on_device(w, [&](coll__cuda_run_t *r) {
            if (eps_in) {
                wd ? lamb_apply_kernel<1, 1><<<GRID(r, n)>>>(*k, w, m, v, n)
                   : lamb_apply_kernel<0, 1><<<GRID(r, n)>>>(*k, w, m, v, n);
            } else {
                wd ? lamb_apply_kernel<1, 0><<<GRID(r, n)>>>(*k, w, m, v, n)
                   : lamb_apply_kernel<0, 0><<<GRID(r, n)>>>(*k, w, m, v, n);
            }
            return COLL_OK;
        });
    }
}
