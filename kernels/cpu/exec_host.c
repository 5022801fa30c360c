/*
 * The host executor (exec_host.h): the table of the host kernels, each documented in the
 * kernels/cpu header of its name. Everything it names is free of libm, so that libcollective.a,
 * which holds it for the local ranks' reductions, links alone (kernels/CMakeLists.txt). Its
 * asynchronous entries do the work before they return (exec.h), so sync has nothing to wait for.
 */
#include <string.h>

#include "kernels/cpu/cast.h"
#include "kernels/cpu/exec_host.h"
#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/optim.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/topk.h"

static void host_copy(void *dst, const void *src, size_t bytes)
{
    memcpy(dst, src, bytes);
}

static void host_zero(void *dst, size_t bytes)
{
    memset(dst, 0, bytes);
}

static coll_status_t host_copy_async(const coll_exec_ctx_t *ctx, void *dst, const void *src,
                                     size_t bytes)
{
    if (bytes > 0 && (dst == NULL || src == NULL)) {
        return COLL_ERR_INVALID;
    }
    if (bytes > 0) {
        memcpy(dst, src, bytes);
    }
    return COLL_OK;
}

static coll_status_t host_zero_async(const coll_exec_ctx_t *ctx, void *dst, size_t bytes)
{
    if (bytes > 0 && dst == NULL) {
        return COLL_ERR_INVALID;
    }
    if (bytes > 0) {
        memset(dst, 0, bytes);
    }
    return COLL_OK;
}

static coll_status_t host_reduce_async(const coll_exec_ctx_t *ctx, const coll_reduce_args_t *a)
{
    coll_status_t st = coll_reduce_args_check(a);

    if (st == COLL_OK) {
        coll_reduce(a);
    }
    return st;
}

static coll_status_t host_sync(const coll_exec_ctx_t *ctx)
{
    return COLL_OK;
}

const coll_exec_t coll_exec_host = {
    .name = "host", .kind = COLL_MEM_HOST,
    .copy = host_copy, .zero = host_zero, .reduce = coll_reduce,
    .cast_encode = coll_cast_encode, .cast_decode = coll_cast_decode,
    .cast_accumulate = coll_cast_accumulate,
    .onebit_encode = coll_onebit_encode, .onebit_decode = coll_onebit_decode,
    .onebit_accumulate = coll_onebit_accumulate,
    .topk_scratch_bytes = coll_topk_scratch_bytes, .topk_compress = coll_topk_compress,
    .topk_accumulate = coll_topk_accumulate,
    .lowrank_init_q = coll_lowrank_init_q, .lowrank_mul_q = coll_lowrank_mul_q,
    .lowrank_ef_mul_q = coll_lowrank_ef_mul_q, .lowrank_mul_mt = coll_lowrank_mul_mt,
    .lowrank_orthonormalize = coll_lowrank_orthonormalize,
    .lowrank_reconstruct = coll_lowrank_reconstruct, .lowrank_residual = coll_lowrank_residual,
    .optim_sumsq = coll_optim_sumsq, .optim_sumsq2 = coll_optim_sumsq2,
    .optim_all_finite = coll_optim_all_finite,
    .optim_sgd = coll_optim_sgd_step, .optim_adamw = coll_optim_adamw_step,
    .optim_lars = coll_optim_lars_step, .optim_lamb_moments = coll_optim_lamb_moments_step,
    .optim_lamb_apply = coll_optim_lamb_apply_step,
    .copy_async = host_copy_async, .zero_async = host_zero_async,
    .reduce_async = host_reduce_async, .sync = host_sync,
};
