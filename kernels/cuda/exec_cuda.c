/*
 * The CUDA module's entry point (module.h) and its table: every entry of exec.h for memory of
 * kind COLL_MEM_CUDA, each defined in the file of its family (cuda_entries.h).
 */
#include <pthread.h>
#include <stdio.h>

#include "kernels/cuda/cuda_entries.h"

static const coll_exec_t exec_cuda = {
    .name = "cuda", .kind = COLL_MEM_CUDA,
    .copy = coll__cuda_copy, .zero = coll__cuda_zero, .reduce = coll__cuda_reduce,
    .cast_encode = coll__cuda_cast_encode, .cast_decode = coll__cuda_cast_decode,
    .cast_accumulate = coll__cuda_cast_accumulate,
    .onebit_encode = coll__cuda_onebit_encode, .onebit_decode = coll__cuda_onebit_decode,
    .onebit_accumulate = coll__cuda_onebit_accumulate,
    .topk_scratch_bytes = coll__cuda_topk_scratch_bytes,
    .topk_compress = coll__cuda_topk_compress, .topk_accumulate = coll__cuda_topk_accumulate,
    .lowrank_init_q = coll__cuda_lowrank_init_q, .lowrank_mul_q = coll__cuda_lowrank_mul_q,
    .lowrank_ef_mul_q = coll__cuda_lowrank_ef_mul_q, .lowrank_mul_mt = coll__cuda_lowrank_mul_mt,
    .lowrank_orthonormalize = coll__cuda_lowrank_orthonormalize,
    .lowrank_reconstruct = coll__cuda_lowrank_reconstruct,
    .lowrank_residual = coll__cuda_lowrank_residual,
    .optim_sumsq = coll__cuda_optim_sumsq, .optim_sumsq2 = coll__cuda_optim_sumsq2,
    .optim_all_finite = coll__cuda_optim_all_finite,
    .optim_sgd = coll__cuda_optim_sgd, .optim_adamw = coll__cuda_optim_adamw,
    .optim_lars = coll__cuda_optim_lars, .optim_lamb_moments = coll__cuda_optim_lamb_moments,
    .optim_lamb_apply = coll__cuda_optim_lamb_apply,
    .copy_async = coll__cuda_copy_async, .zero_async = coll__cuda_zero_async,
    .reduce_async = coll__cuda_reduce_async, .sync = coll__cuda_sync,
};

/* What the first call found: the devices, or why there are none. */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
static int probed, probe_devices;
static char probe_why[192];

static void probe(coll_cuda_log_fn log)
{
    cudaError_t e = cudaGetDeviceCount(&probe_devices);

    if (e == cudaSuccess && probe_devices > 0 && coll__cuda_rt_init(log) != COLL_OK) {
        snprintf(probe_why, sizeof(probe_why), "the CUDA driver lacks the context functions");
        probe_devices = 0;
        return;
    }
    if (e == cudaErrorInsufficientDriver) {
        snprintf(probe_why, sizeof(probe_why), "no CUDA driver (%s)", cudaGetErrorString(e));
    } else if (e == cudaErrorNoDevice || (e == cudaSuccess && probe_devices == 0)) {
        snprintf(probe_why, sizeof(probe_why), "no CUDA device");
    } else if (e != cudaSuccess) {
        snprintf(probe_why, sizeof(probe_why), "CUDA runtime: %s (%s)", cudaGetErrorString(e),
                 cudaGetErrorName(e));
    }
    if (e != cudaSuccess) {
        probe_devices = 0;
        cudaGetLastError();
    }
}

const coll_exec_t *coll_cuda_module_exec(unsigned abi, coll_cuda_log_fn log, char *why,
                                         size_t why_len)
{
    if (abi != COLL_EXEC_ABI) {
        if (why != NULL && why_len > 0) {
            snprintf(why, why_len, "the CUDA module was built for executor ABI %u, not %u",
                     (unsigned)COLL_EXEC_ABI, abi);
        }
        return NULL;
    }
    pthread_mutex_lock(&probe_lock);
    if (!probed) {
        probe(log);
        probed = 1;
    }
    int devices = probe_devices;
    if (devices == 0 && why != NULL && why_len > 0) {
        snprintf(why, why_len, "%s", probe_why);
    }
    pthread_mutex_unlock(&probe_lock);
    return devices > 0 ? &exec_cuda : NULL;
}
