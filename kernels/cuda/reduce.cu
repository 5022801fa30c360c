/*
 * The CUDA executor's reduction (exec.h: reduce, reduce_async): every source combined into the
 * destination in one pass, as the host's coll_reduce() (kernels/cpu/reduce.h), element by
 * element with elem_reduce.h's functions.
 *
 * One kernel per dtype and operation (40), the number of sources a loop. Every thread takes
 * 16-byte vectors, UNROLL of them at a time from each source before it combines them, so that
 * several loads are in flight per thread, over a grid-stride loop of a grid that fills the
 * device once (NCCL's and UCC's reduce kernels do the same). When a pointer is not 16-byte
 * aligned, or for the elements past the last whole vector, threads take single elements through
 * the whole-element functions the unit tests check (coll_hd_reduce_*).
 */
#include "kernels/cuda/rt.h"

#include "kernels/cuda/cuda_entries.h"
#include "kernels/cuda/elem_reduce.h"

namespace {

/* Vectors each thread loads from every source before combining them. */
constexpr int UNROLL = 4;

/* Everything a reduction kernel reads, by value (about 800 bytes of parameters). */
struct Params {
    const void *src[COLL_REDUCE_MAX_SRCS];
    float scale[COLL_REDUCE_MAX_SRCS]; /* 16-bit floats: AVG's factor of each source */
    void *dst;
    uint64_t f32_mask;
    size_t count;
    size_t nvec; /* whole 16-byte vectors (of 16-bit elements: of 8 elements) taken as vectors */
    unsigned nsrc;
    uint32_t world;
    int divide;  /* AVG of float32, float64 and integers: divide on this combine */
    int dst_f32;
};

template <typename T> union Vec {
    uint4 u;
    T e[16 / sizeof(T)];
};

__device__ size_t thread_index()
{
    return (size_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ size_t thread_count()
{
    return (size_t)gridDim.x * blockDim.x;
}

/* ---- float32, float64, integers ------------------------------------------------------------ */

/* The element functions of one storage type. */
template <typename T> struct Elem;
#define ELEM(T, sfx)                                                                            \
    template <> struct Elem<T> {                                                                \
        static __device__ T op(int o, T a, T b) { return coll_hd_op_##sfx(o, a, b); }           \
        static __device__ T avg(T x, uint32_t w) { return coll_hd_avg_##sfx(x, w); }            \
        static __device__ T whole(int o, const Params &p, size_t i)                            \
        {                                                                                       \
            return coll_hd_reduce_##sfx(o, p.divide, p.world, p.src, p.nsrc, i);                \
        }                                                                                       \
    };
ELEM(float, f32)
ELEM(double, f64)
ELEM(int8_t, i8)
ELEM(uint8_t, u8)
ELEM(int32_t, i32)
ELEM(int64_t, i64)
#undef ELEM

template <typename T, int OP> __device__ void vectors(const Params &p)
{
    constexpr int L = 16 / sizeof(T);
    const size_t stride = thread_count();

    for (size_t g0 = thread_index(); g0 < p.nvec; g0 += stride * UNROLL) {
        Vec<T> acc[UNROLL], x[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            size_t g = g0 + u * stride;
            if (g < p.nvec) {
                acc[u].u = ((const uint4 *)p.src[0])[g];
            }
        }
        for (unsigned k = 1; k < p.nsrc; k++) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                size_t g = g0 + u * stride;
                if (g < p.nvec) {
                    x[u].u = ((const uint4 *)p.src[k])[g];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
#pragma unroll
                for (int j = 0; j < L; j++) {
                    acc[u].e[j] = Elem<T>::op(OP, acc[u].e[j], x[u].e[j]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            size_t g = g0 + u * stride;
            if (g < p.nvec) {
                if (OP == COLL_AVG && p.divide) {
#pragma unroll
                    for (int j = 0; j < L; j++) {
                        acc[u].e[j] = Elem<T>::avg(acc[u].e[j], p.world);
                    }
                }
                ((uint4 *)p.dst)[g] = acc[u].u;
            }
        }
    }
}

template <typename T, int OP> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
reduce_kernel(const Params p)
{
    vectors<T, OP>(p);
    for (size_t i = p.nvec * (16 / sizeof(T)) + thread_index(); i < p.count; i += thread_count()) {
        ((T *)p.dst)[i] = Elem<T>::whole(OP, p, i);
    }
}

/* ---- float16, bfloat16: float32 accumulators, one rounding --------------------------------- */

/* Adds source k's 8 elements of vector g into (or, for k = 0, as) the accumulators. */
template <int FMT, int OP> __device__ void half_fold(const Params &p, unsigned k, size_t g,
                                                    float *acc)
{
    float x[8];

    if ((p.f32_mask >> k) & 1) {
        const float4 *s = (const float4 *)p.src[k] + 2 * g;
        float4 a = s[0], b = s[1];
        x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
        x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    } else {
        Vec<uint16_t> h;
        h.u = ((const uint4 *)p.src[k])[g];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            x[j] = coll_hd_half_term(FMT, OP, h.e[j], p.scale[k]);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        acc[j] = k == 0 ? x[j] : coll_hd_op_f32(OP, acc[j], x[j]);
    }
}

template <int FMT> __device__ void half_store(const Params &p, size_t g, const float *acc)
{
    if (p.dst_f32) {
        float4 *d = (float4 *)p.dst + 2 * g;
        d[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
        d[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
        return;
    }
    Vec<uint16_t> h;
#pragma unroll
    for (int j = 0; j < 8; j++) {
        h.e[j] = coll_hd_narrow(FMT, acc[j]);
    }
    ((uint4 *)p.dst)[g] = h.u;
}

template <int FMT, int OP> __global__ void __launch_bounds__(COLL__CUDA_THREADS)
half_kernel(const Params p)
{
    const size_t stride = thread_count();

    for (size_t g0 = thread_index(); g0 < p.nvec; g0 += stride * UNROLL) {
        float acc[UNROLL][8];
        for (unsigned k = 0; k < p.nsrc; k++) {
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                if (g0 + u * stride < p.nvec) {
                    half_fold<FMT, OP>(p, k, g0 + u * stride, acc[u]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (g0 + u * stride < p.nvec) {
                half_store<FMT>(p, g0 + u * stride, acc[u]);
            }
        }
    }
    for (size_t i = p.nvec * 8 + thread_index(); i < p.count; i += stride) {
        float v = coll_hd_reduce_half(FMT, OP, p.src, p.nsrc, p.f32_mask, p.scale, i);
        if (p.dst_f32) {
            ((float *)p.dst)[i] = v;
        } else {
            ((uint16_t *)p.dst)[i] = coll_hd_narrow(FMT, v);
        }
    }
}

/* ---- launch -------------------------------------------------------------------------------- */

typedef void (*kernel_t)(const Params);

template <typename T> kernel_t pick_op(coll_redop_t op)
{
    switch (op) {
    case COLL_SUM: return reduce_kernel<T, COLL_SUM>;
    case COLL_AVG: return reduce_kernel<T, COLL_AVG>;
    case COLL_PROD: return reduce_kernel<T, COLL_PROD>;
    case COLL_MIN: return reduce_kernel<T, COLL_MIN>;
    default: return reduce_kernel<T, COLL_MAX>;
    }
}

/* The integers: the bitwise operations besides (a float's were refused by the argument check). */
template <typename T> kernel_t pick_int(coll_redop_t op)
{
    switch (op) {
    case COLL_BAND: return reduce_kernel<T, COLL_BAND>;
    case COLL_BOR: return reduce_kernel<T, COLL_BOR>;
    case COLL_BXOR: return reduce_kernel<T, COLL_BXOR>;
    default: return pick_op<T>(op);
    }
}

template <int FMT> kernel_t pick_half(coll_redop_t op)
{
    switch (op) {
    case COLL_SUM: return half_kernel<FMT, COLL_SUM>;
    case COLL_AVG: return half_kernel<FMT, COLL_AVG>;
    case COLL_PROD: return half_kernel<FMT, COLL_PROD>;
    case COLL_MIN: return half_kernel<FMT, COLL_MIN>;
    default: return half_kernel<FMT, COLL_MAX>;
    }
}

kernel_t pick(coll_dtype_t dt, coll_redop_t op)
{
    switch (dt) {
    case COLL_FLOAT32: return pick_op<float>(op);
    case COLL_FLOAT64: return pick_op<double>(op);
    case COLL_FLOAT16: return pick_half<COLL_HD_F16>(op);
    case COLL_BFLOAT16: return pick_half<COLL_HD_BF16>(op);
    case COLL_INT8: return pick_int<int8_t>(op);
    case COLL_UINT8: return pick_int<uint8_t>(op);
    case COLL_INT32: return pick_int<int32_t>(op);
    default: return pick_int<int64_t>(op);
    }
}

/* Elements per 16-byte vector of the destination's dtype (8 for the 16-bit floats). */
size_t lanes(coll_dtype_t dt)
{
    switch (dt) {
    case COLL_FLOAT64:
    case COLL_INT64: return 2;
    case COLL_FLOAT32:
    case COLL_INT32: return 4;
    case COLL_FLOAT16:
    case COLL_BFLOAT16: return 8;
    default: return 16;
    }
}

/* The kernel's parameters from a checked @p a: vectors only when every pointer is aligned. */
void params_of(const coll_reduce_args_t *a, Params *p)
{
    int aligned = coll__cuda_aligned(a->dst, 16);
    const float inv_world = 1.0f / (float)a->world_size;

    for (unsigned k = 0; k < a->nsrc; k++) {
        p->src[k] = a->src[k];
        p->scale[k] = a->op == COLL_AVG && ((a->raw_mask >> k) & 1) ? inv_world : 1.0f;
        aligned &= coll__cuda_aligned(a->src[k], 16);
    }
    p->dst = a->dst;
    p->f32_mask = a->f32_mask;
    p->count = a->count;
    p->nvec = aligned ? a->count / lanes(a->dtype) : 0;
    p->nsrc = a->nsrc;
    p->world = a->world_size;
    p->divide = a->finalize && a->world_size > 1;
    p->dst_f32 = a->dst_f32;
}

coll_status_t launch(coll__cuda_run_t *r, const coll_reduce_args_t *a)
{
    Params p;

    params_of(a, &p);
    size_t items = (p.nvec + UNROLL - 1) / UNROLL + (p.count - p.nvec * lanes(a->dtype));
    pick(a->dtype, a->op)<<<coll__cuda_blocks(r, items), COLL__CUDA_THREADS, 0, r->stream>>>(p);
    return COLL_OK;
}

} // namespace

extern "C" void coll__cuda_reduce(const coll_reduce_args_t *a)
{
    coll__cuda_run_t r;

    if (a != NULL && a->count == 0) {
        return;
    }
    coll_status_t st = coll_reduce_args_check(a);
    if (st != COLL_OK) {
        coll__cuda_log("reduce: invalid arguments");
        return;
    }
    if (coll__cuda_begin(&r, a->dst) == COLL_OK) {
        coll__cuda_end(&r, launch(&r, a));
    }
}

extern "C" coll_status_t coll__cuda_reduce_async(const coll_exec_ctx_t *ctx,
                                                 const coll_reduce_args_t *a)
{
    coll__cuda_run_t r;
    coll_status_t st = coll_reduce_args_check(a);

    if (st != COLL_OK || a->count == 0) {
        return st;
    }
    st = coll__cuda_begin_ctx(&r, ctx);
    return st == COLL_OK ? coll__cuda_end(&r, launch(&r, a)) : st;
}
