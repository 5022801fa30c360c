/*
 * The executors by memory kind (exec.h) and the kinds' names. The host's is built in; a device
 * kind's is registered at run time by the code that loaded its module (kernels/README.md).
 */
#include <stdatomic.h>

#include "kernels/exec.h"

#include "kernels/cpu/exec_host.h"

static const char *const kind_names[COLL_MEM_KINDS] = {
    [COLL_MEM_HOST] = "host",
    [COLL_MEM_CUDA] = "cuda",
};

/* Written once per kind (coll_exec_register()), read from any thread. */
static _Atomic(const coll_exec_t *) executors[COLL_MEM_KINDS];

const char *coll_mem_kind_name(coll_mem_kind_t kind)
{
    return (unsigned)kind < COLL_MEM_KINDS ? kind_names[kind] : "unknown";
}

const coll_exec_t *coll_exec_get(coll_mem_kind_t kind)
{
    if (kind == COLL_MEM_HOST) {
        return &coll_exec_host;
    }
    return (unsigned)kind < COLL_MEM_KINDS ? atomic_load(&executors[kind]) : NULL;
}

/* Whether every entry of @p ex is there: a caller calls them without looking. */
static int table_complete(const coll_exec_t *e)
{
#define HAS(f) (e->f != NULL)
    return e->name != NULL && HAS(copy) && HAS(zero) && HAS(reduce) && HAS(cast_encode) &&
           HAS(cast_decode) && HAS(cast_accumulate) && HAS(onebit_encode) &&
           HAS(onebit_decode) && HAS(onebit_accumulate) && HAS(topk_scratch_bytes) &&
           HAS(topk_compress) && HAS(topk_accumulate) && HAS(lowrank_init_q) &&
           HAS(lowrank_mul_q) && HAS(lowrank_ef_mul_q) && HAS(lowrank_mul_mt) &&
           HAS(lowrank_orthonormalize) && HAS(lowrank_reconstruct) && HAS(lowrank_residual) &&
           HAS(optim_sumsq) && HAS(optim_sumsq2) && HAS(optim_all_finite) && HAS(optim_sgd) &&
           HAS(optim_adamw) && HAS(optim_lars) && HAS(optim_lamb_moments) &&
           HAS(optim_lamb_apply) && HAS(copy_async) && HAS(zero_async) && HAS(reduce_async) &&
           HAS(sync);
#undef HAS
}

coll_status_t coll_exec_register(const coll_exec_t *ex)
{
    const coll_exec_t *none = NULL;

    if (ex == NULL || ex->kind == COLL_MEM_HOST || (unsigned)ex->kind >= COLL_MEM_KINDS ||
        !table_complete(ex)) {
        return COLL_ERR_INVALID;
    }
    if (atomic_compare_exchange_strong(&executors[ex->kind], &none, ex) || none == ex) {
        return COLL_OK;
    }
    return COLL_ERR_BUSY;
}
