/*
 * The CUDA module's meeting point with the CUDA runtime (rt.h): errors converted once and logged
 * where they are decided, the device and stream of each entry, grid sizes.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include <cuda.h>

#include "kernels/cuda/rt.h"

/* Devices whose multiprocessor count is remembered; others ask the runtime each time. */
#define MAX_DEVICES 64
/* Resident blocks per multiprocessor that a grid-stride kernel is given: enough to hide the
 * memory latency of COLL__CUDA_THREADS-thread blocks (2048 threads per multiprocessor). */
#define BLOCKS_PER_SM 8

static _Atomic(coll_cuda_log_fn) log_fn;
static atomic_uint sm_count[MAX_DEVICES];

/* The driver's cuCtxGetCurrent, cuCtxSetCurrent and cuPointerGetAttribute, from the runtime
 * (the module links no driver library: the runtime finds it); none of them needs or makes a
 * context. Set once by coll__cuda_rt_init(), before any entry. */
static CUresult (*ctx_get)(CUcontext *ctx);
static CUresult (*ctx_set)(CUcontext ctx);
static CUresult (*ptr_attr)(void *data, CUpointer_attribute attr, CUdeviceptr ptr);

static coll_status_t driver_fn(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);

    if (e != cudaSuccess || q != cudaDriverEntryPointSuccess) {
        coll__cuda_log("the driver does not give %s", name);
        return COLL_ERR_UNSUPPORTED;
    }
    return COLL_OK;
}

coll_status_t coll__cuda_rt_init(coll_cuda_log_fn log)
{
    atomic_store(&log_fn, log);
    coll_status_t st = driver_fn("cuCtxGetCurrent", (void **)&ctx_get);
    st = st == COLL_OK ? driver_fn("cuCtxSetCurrent", (void **)&ctx_set) : st;
    return st == COLL_OK ? driver_fn("cuPointerGetAttribute", (void **)&ptr_attr) : st;
}

void coll__cuda_log(const char *fmt, ...)
{
    char line[512];
    va_list ap;
    coll_cuda_log_fn log = atomic_load(&log_fn);

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (log != NULL) {
        log(line);
    } else {
        fprintf(stderr, "collective_cuda: %s\n", line);
    }
}

coll_status_t coll__cuda_status(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) {
        return COLL_OK;
    }
    coll__cuda_log("%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
    switch (e) {
    case cudaErrorMemoryAllocation:
        return COLL_ERR_NOMEM;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidDevice:
    case cudaErrorInvalidResourceHandle:
        return COLL_ERR_INVALID;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
        return COLL_ERR_UNSUPPORTED;
    default:
        return COLL_ERR_IO;
    }
}

static unsigned sms_of(int dev)
{
    unsigned n = dev >= 0 && dev < MAX_DEVICES ? atomic_load(&sm_count[dev]) : 0;
    int v = 0;

    if (n == 0 && cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess &&
        v > 0) {
        n = (unsigned)v;
        if (dev >= 0 && dev < MAX_DEVICES) {
            atomic_store(&sm_count[dev], n);
        }
    }
    return n > 0 ? n : 1;
}

/*
 * Make @p dev's primary context current for the entry, unless it is already, remembering the
 * thread's context (none, or another device's) to make current again at the end: an entry
 * creates no context on a device the caller did not name, and leaves the thread as it was.
 */
static coll_status_t enter(coll__cuda_run_t *r, int dev, cudaStream_t stream, int wait)
{
    CUcontext prev = NULL;
    int cur = -1;

    r->dev = dev;
    r->stream = stream;
    r->wait = wait;
    r->switched = 0;
    if (ctx_get(&prev) != CUDA_SUCCESS || prev == NULL || cudaGetDevice(&cur) != cudaSuccess ||
        cur != dev) {
        coll_status_t st = coll__cuda_status(cudaSetDevice(dev), "cudaSetDevice");
        if (st != COLL_OK) {
            return st;
        }
        r->prev = prev;
        r->switched = 1;
    }
    r->sms = sms_of(dev);
    return COLL_OK;
}

coll_status_t coll__cuda_begin(coll__cuda_run_t *r, const void *ptr)
{
    int dev = -1;

    if (ptr_attr(&dev, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, (CUdeviceptr)(uintptr_t)ptr) !=
            CUDA_SUCCESS ||
        dev < 0) {
        coll__cuda_log("%p: not memory a CUDA device can reach", ptr);
        return COLL_ERR_INVALID;
    }
    return enter(r, dev, cudaStreamPerThread, 1);
}

coll_status_t coll__cuda_begin_ctx(coll__cuda_run_t *r, const coll_exec_ctx_t *ctx)
{
    if (ctx == NULL || ctx->device < 0) {
        return COLL_ERR_INVALID;
    }
    return enter(r, ctx->device, (cudaStream_t)ctx->stream, 0);
}

coll_status_t coll__cuda_end(coll__cuda_run_t *r, coll_status_t st)
{
    coll_status_t launch = coll__cuda_status(cudaGetLastError(), "kernel launch");

    st = st != COLL_OK ? st : launch;
    if (r->wait) {
        coll_status_t done = coll__cuda_status(cudaStreamSynchronize(r->stream), "device work");
        st = st != COLL_OK ? st : done;
    }
    if (r->switched) {
        ctx_set((CUcontext)r->prev);
    }
    return st;
}

unsigned coll__cuda_blocks(const coll__cuda_run_t *r, size_t n)
{
    size_t want = (n + COLL__CUDA_THREADS - 1) / COLL__CUDA_THREADS;
    size_t most = (size_t)r->sms * BLOCKS_PER_SM;

    want = want < most ? want : most;
    return want > 0 ? (unsigned)want : 1;
}

coll_status_t coll__cuda_temp(coll__cuda_run_t *r, size_t bytes, void **p)
{
    return coll__cuda_status(cudaMallocAsync(p, bytes, r->stream), "cudaMallocAsync");
}

void coll__cuda_temp_free(coll__cuda_run_t *r, void *p)
{
    if (p != NULL) {
        coll__cuda_status(cudaFreeAsync(p, r->stream), "cudaFreeAsync");
    }
}

coll_status_t coll__cuda_fetch(coll__cuda_run_t *r, void *dst, const void *src, size_t bytes)
{
    coll_status_t st = coll__cuda_status(cudaGetLastError(), "kernel launch");

    if (st == COLL_OK) {
        st = coll__cuda_status(
            cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, r->stream), "cudaMemcpyAsync");
    }
    if (st == COLL_OK) {
        st = coll__cuda_status(cudaStreamSynchronize(r->stream), "device work");
    }
    return st;
}
