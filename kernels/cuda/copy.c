/*
 * The CUDA executor's data movement (exec.h: copy, zero and their queued forms) and sync:
 * the runtime's copy and set on the entry's stream (rt.h). A copy may have host memory the
 * device can reach on either side (cudaMemcpyDefault), which is how staging moves data.
 */
#include "kernels/cuda/cuda_entries.h"

static coll_status_t copy_on(coll__cuda_run_t *r, void *dst, const void *src, size_t bytes)
{
    return coll__cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, r->stream),
                             "cudaMemcpyAsync");
}

static coll_status_t zero_on(coll__cuda_run_t *r, void *dst, size_t bytes)
{
    return coll__cuda_status(cudaMemsetAsync(dst, 0, bytes, r->stream), "cudaMemsetAsync");
}

void coll__cuda_copy(void *dst, const void *src, size_t bytes)
{
    coll__cuda_run_t r;

    if (bytes > 0 && coll__cuda_begin(&r, dst) == COLL_OK) {
        coll__cuda_end(&r, copy_on(&r, dst, src, bytes));
    }
}

void coll__cuda_zero(void *dst, size_t bytes)
{
    coll__cuda_run_t r;

    if (bytes > 0 && coll__cuda_begin(&r, dst) == COLL_OK) {
        coll__cuda_end(&r, zero_on(&r, dst, bytes));
    }
}

coll_status_t coll__cuda_copy_async(const coll_exec_ctx_t *ctx, void *dst, const void *src,
                                    size_t bytes)
{
    coll__cuda_run_t r;

    if (bytes == 0) {
        return COLL_OK;
    }
    if (dst == NULL || src == NULL) {
        return COLL_ERR_INVALID;
    }
    coll_status_t st = coll__cuda_begin_ctx(&r, ctx);
    return st == COLL_OK ? coll__cuda_end(&r, copy_on(&r, dst, src, bytes)) : st;
}

coll_status_t coll__cuda_zero_async(const coll_exec_ctx_t *ctx, void *dst, size_t bytes)
{
    coll__cuda_run_t r;

    if (bytes == 0) {
        return COLL_OK;
    }
    if (dst == NULL) {
        return COLL_ERR_INVALID;
    }
    coll_status_t st = coll__cuda_begin_ctx(&r, ctx);
    return st == COLL_OK ? coll__cuda_end(&r, zero_on(&r, dst, bytes)) : st;
}

coll_status_t coll__cuda_sync(const coll_exec_ctx_t *ctx)
{
    coll__cuda_run_t r;
    coll_status_t st = coll__cuda_begin_ctx(&r, ctx);

    if (st != COLL_OK) {
        return st;
    }
    r.wait = 1;
    return coll__cuda_end(&r, COLL_OK);
}
