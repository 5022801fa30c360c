/**
 * @file rt.h
 * @brief Internal to the CUDA module: how its entries meet the CUDA runtime. Errors converted
 *        once, where to run (device and stream) for a synchronous or an asynchronous entry, grid
 *        sizes, the module's log. C, included by the module's .c and .cu files alike.
 */
#ifndef COLL_KERNELS_CUDA_RT_H
#define COLL_KERNELS_CUDA_RT_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/cuda/module.h"
#include "kernels/exec.h"

/** Threads per block of every grid-stride kernel of the module. */
#define COLL__CUDA_THREADS 256

/** Where one entry runs: the device made current for it, its stream, how it ends. */
typedef struct {
    void *prev;          /**< the calling thread's current context before (a CUcontext, maybe
                              none), made current again at the end when @p switched */
    int switched;        /**< non-zero when the entry made its device's primary context current */
    int dev;             /**< the device the entry runs on */
    cudaStream_t stream; /**< its stream */
    int wait;            /**< non-zero for a synchronous entry: the end waits for the stream */
    unsigned sms;        /**< the device's multiprocessors */
} coll__cuda_run_t;

/**
 * @brief Prepare the module's runtime use, once, before any entry: where errors that an entry
 *        cannot return go (module.h; NULL: stderr), and the driver's functions through which
 *        an entry finds a buffer's device and leaves the calling thread's current context as it
 *        found it.
 * @return COLL_OK; COLL_ERR_UNSUPPORTED when the driver does not give them (logged).
 */
coll_status_t coll__cuda_rt_init(coll_cuda_log_fn log);

/** Log one line, printf-style, through the module's log. Thread-safe. */
void coll__cuda_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * @return COLL_OK for cudaSuccess; else the status for @p e (kernels/cuda/README.md: no memory,
 *         an invalid argument, no device or driver, anything else an I/O error), logged once
 *         here with @p what and the runtime's words.
 */
coll_status_t coll__cuda_status(cudaError_t e, const char *what);

/**
 * @brief Begin a synchronous entry on the device that holds @p ptr: that device current and the
 *        calling thread's per-thread stream (cudaStreamPerThread). The driver finds the device
 *        (cuPointerGetAttribute), which makes no context on another device.
 * @return COLL_OK; COLL_ERR_INVALID (logged) when @p ptr is not memory a device can reach.
 */
coll_status_t coll__cuda_begin(coll__cuda_run_t *r, const void *ptr);

/**
 * @brief Begin an asynchronous entry on @p ctx: its device current, its stream.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p ctx or a device that is none.
 */
coll_status_t coll__cuda_begin_ctx(coll__cuda_run_t *r, const coll_exec_ctx_t *ctx);

/**
 * @brief End an entry begun with coll__cuda_begin*(): check the launches, wait for the stream
 *        when synchronous, restore the calling thread's device.
 * @param [in] st The entry's status so far: an error is kept (the stream is still waited for).
 * @return @p st, or the first device error.
 */
coll_status_t coll__cuda_end(coll__cuda_run_t *r, coll_status_t st);

/**
 * @brief Working memory for one entry, from the device's stream-ordered pool on the entry's
 *        stream (cudaMallocAsync): a few bytes for a result or per-block sums, TopK's scratch
 *        when the caller gave too little. Give it back with coll__cuda_temp_free() on the same
 *        run before coll__cuda_end().
 * @return COLL_OK and *p; COLL_ERR_NOMEM (logged) when the pool has no room.
 */
coll_status_t coll__cuda_temp(coll__cuda_run_t *r, size_t bytes, void **p);

/** @brief Give back coll__cuda_temp()'s memory (after the work queued so far); NULL is none. */
void coll__cuda_temp_free(coll__cuda_run_t *r, void *p);

/**
 * @brief Copy @p bytes of device memory at @p src to the host at @p dst and wait for it: a
 *        result that the entry's next step needs on the host (a scale, a sum, a flag).
 * @return COLL_OK; the first device error of the stream.
 */
coll_status_t coll__cuda_fetch(coll__cuda_run_t *r, void *dst, const void *src, size_t bytes);

/** @return Blocks for a grid-stride kernel over @p n items: enough to fill the device, no more
 *          than the items need (at least 1). */
unsigned coll__cuda_blocks(const coll__cuda_run_t *r, size_t n);

/** @return Non-zero when @p p is a multiple of @p align bytes. */
static inline int coll__cuda_aligned(const void *p, size_t align)
{
    return ((uintptr_t)p & (align - 1)) == 0;
}

#ifdef __cplusplus
}
#endif

#endif
