/*
 * The CUDA module's meeting point with the CUDA runtime (rt.h): errors converted once and logged
 * where they are decided, the device and stream of each entry, grid sizes.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

#include "kernels/cuda/rt.h"

/* Devices whose multiprocessor count is remembered; others ask the runtime each time. */
#define MAX_DEVICES 64
/* Resident blocks per multiprocessor that a grid-stride kernel is given: enough to hide the
 * memory latency of COLL__CUDA_THREADS-thread blocks (2048 threads per multiprocessor). */
#define BLOCKS_PER_SM 8

static _Atomic(coll_cuda_log_fn) log_fn;
static atomic_uint sm_count[MAX_DEVICES];

void coll__cuda_set_log(coll_cuda_log_fn log)
{
    atomic_store(&log_fn, log);
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

/* Make @p dev current for the entry, remembering the thread's device to restore. */
static coll_status_t enter(coll__cuda_run_t *r, int dev, cudaStream_t stream, int wait)
{
    r->dev = dev;
    r->stream = stream;
    r->wait = wait;
    if (cudaGetDevice(&r->prev) != cudaSuccess) {
        r->prev = dev;
    }
    if (dev != r->prev) {
        coll_status_t st = coll__cuda_status(cudaSetDevice(dev), "cudaSetDevice");
        if (st != COLL_OK) {
            r->dev = r->prev;
            return st;
        }
    }
    r->sms = sms_of(dev);
    return COLL_OK;
}

coll_status_t coll__cuda_begin(coll__cuda_run_t *r, const void *ptr)
{
    struct cudaPointerAttributes at;
    cudaError_t e = cudaPointerGetAttributes(&at, ptr);

    if (e != cudaSuccess || at.type == cudaMemoryTypeUnregistered || at.device < 0) {
        cudaGetLastError(); /* the query's error is answered here, not by a later entry */
        coll__cuda_log("%p: not memory a CUDA device can reach", ptr);
        return COLL_ERR_INVALID;
    }
    return enter(r, at.device, cudaStreamPerThread, 1);
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
    if (r->dev != r->prev) {
        cudaSetDevice(r->prev);
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
