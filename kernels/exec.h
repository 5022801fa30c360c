/**
 * @file exec.h
 * @brief The executor of a memory kind: one table of the data kernels (copy and zero, reduce,
 *        the 16-bit cast, the compressors' kernels, the optimizer steps) for buffers of that
 *        kind, as UCC's execution components (src/components/ec) give every memory type its own
 *        executor. A caller asks for the executor of its buffers' kind and never names an
 *        implementation, so a device kind is one more table (kernels/README.md), not a branch
 *        in every caller.
 *
 * What every entry computes is what the host's kernel of the same name computes: the host
 * executor (kernels/cpu) is the reference, documented entry by entry in kernels/cpu/<name>.h;
 * the arguments' types, limits and the arithmetic every kind shares are in kernels/reduce.h,
 * kernels/compress.h and kernels/optim.h. Every pointer an entry takes is memory of the
 * executor's kind (the scalars, the argument structs and the returned values are host values).
 * Counts are in elements unless an entry says bytes.
 *
 * An entry runs synchronously: its results are in place when it returns. Every entry is
 * thread-safe for calls on disjoint outputs, allocates nothing and keeps no pointer. Errors:
 * the coll_status_t of the host kernel of the same name, for the same reasons.
 *
 * Asynchrony. A device executor also queues work on a stream the caller owns (the entries under
 * "asynchrony" below, which take a coll_exec_ctx_t): they return once the work is queued, after
 * the work already queued on that stream, and the caller learns of its completion from the stream
 * (an event it records after the call, which other streams can wait on) or from sync. The host's
 * asynchronous entries complete their work before they return, so a caller written against them
 * runs on every kind. The synchronous entries of a device kind run on the calling thread's own
 * stream and wait for it (kernels/cuda/README.md says what else they assume).
 */
#ifndef COLL_KERNELS_EXEC_H
#define COLL_KERNELS_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/* C++ callers (the CUDA module's kernels, its device check) see C names for the whole family. */
#ifdef __cplusplus
extern "C" {
#endif

#include "kernels/compress.h"
#include "kernels/mem_kind.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"

/**
 * The version of coll_exec_t's layout. An executor built apart from its caller (a module loaded at
 * run time, kernels/cuda/module.h) is taken only when it was built for the same version; any
 * change to the table below changes it.
 */
#define COLL_EXEC_ABI 1

/**
 * Where an executor's asynchronous entries run: for a device kind, one stream of one device. The
 * caller fills it and owns the stream, which must outlive the work queued on it; the host's
 * entries ignore it. A value, read during the call only.
 */
typedef struct {
    int device;   /**< the device ordinal (CUDA: as cudaSetDevice() takes it); 0 for the host */
    void *stream; /**< CUDA: a cudaStream_t (the same handle as a CUstream) of @p device's
                       primary context; NULL is that device's legacy default stream */
} coll_exec_ctx_t;

/** The kernels of one memory kind. Immutable; executors are constants. */
typedef struct coll_exec {
    const char *name;     /**< "host", ... */
    coll_mem_kind_t kind; /**< the kind of every buffer its entries take */

    /* ---- data movement and reduction (kernels/cpu/reduce.h) ---- */

    /** dst = src, @p bytes bytes; the two must not overlap. */
    void (*copy)(void *dst, const void *src, size_t bytes);
    /** dst = 0, @p bytes bytes. */
    void (*zero)(void *dst, size_t bytes);
    /** coll_reduce(): every source combined into the destination in one pass. */
    void (*reduce)(const coll_reduce_args_t *args);

    /* ---- the 16-bit cast, fp32 <-> fp16 / bf16 with a scale per span (kernels/cpu/cast.h) -- */

    coll_status_t (*cast_encode)(coll_cast_format_t fmt, const float *grad, float *residual,
                                 size_t count, uint16_t *out, int32_t *scale_exp);
    coll_status_t (*cast_decode)(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                 int32_t scale_exp, float *out);
    coll_status_t (*cast_accumulate)(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                     int32_t scale_exp, float weight, float *acc);

    /* ---- 1-bit packing with a scale per span (kernels/cpu/onebit.h) ---- */

    coll_status_t (*onebit_encode)(coll_onebit_scale_t rule, const float *grad, float *residual,
                                   size_t count, uint8_t *signs, float *scale);
    coll_status_t (*onebit_decode)(const uint8_t *signs, size_t count, float scale,
                                   float weight, float *out);
    coll_status_t (*onebit_accumulate)(const uint8_t *signs, size_t count, float scale,
                                       float weight, float *acc);

    /* ---- TopK selection (kernels/cpu/topk.h) ---- */

    /** @return Bytes of scratch (of this kind) this executor's selection runs fastest with. */
    size_t (*topk_scratch_bytes)(size_t count, size_t k);
    coll_status_t (*topk_compress)(const coll_topk_args_t *args);
    coll_status_t (*topk_accumulate)(const uint32_t *indices, const float *values, size_t k,
                                     float weight, float *acc, size_t count);

    /* ---- PowerSGD's products and orthonormalization (kernels/cpu/lowrank.h) ---- */

    void (*lowrank_init_q)(float *q, size_t cols, unsigned rank, uint64_t seed);
    coll_status_t (*lowrank_mul_q)(const float *m, size_t rows, size_t cols, const float *q,
                                   unsigned rank, float *p);
    coll_status_t (*lowrank_ef_mul_q)(const float *grad, float *residual, size_t rows,
                                      size_t cols, const float *q, unsigned rank, float *p);
    coll_status_t (*lowrank_mul_mt)(const float *m, size_t rows, size_t cols, const float *p,
                                    unsigned rank, float *q);
    coll_status_t (*lowrank_orthonormalize)(float *a, size_t len, unsigned rank, float eps);
    coll_status_t (*lowrank_reconstruct)(const float *p, const float *q, size_t rows,
                                         size_t cols, unsigned rank, float *out);
    coll_status_t (*lowrank_residual)(const float *p, const float *q, size_t rows, size_t cols,
                                      unsigned rank, float *residual, float *approx);

    /* ---- optimizer steps on a step's coefficients (kernels/cpu/optim.h) ---- */

    double (*optim_sumsq)(const float *x, size_t n);
    void (*optim_sumsq2)(const float *a, const float *b, size_t n, double out[2]);
    int (*optim_all_finite)(const float *x, size_t n);
    void (*optim_sgd)(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                      size_t n);
    void (*optim_adamw)(const coll_optim_adamw_coef_t *k, float *w, const float *g, float *m,
                        float *v, size_t n);
    void (*optim_lars)(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v,
                       size_t n);
    void (*optim_lamb_moments)(const coll_optim_lamb_coef_t *k, const float *w, const float *g,
                               float *m, float *v, size_t n, double sumsq[2]);
    void (*optim_lamb_apply)(const coll_optim_lamb_coef_t *k, float *w, const float *m,
                             const float *v, size_t n);

    /* ---- asynchrony: queued on ctx's stream (see the file comment) ---- */

    /**
     * copy, queued. For a device kind either side may also be host memory the device can reach
     * (pinned or registered), which makes it a transfer between host and device.
     * @return COLL_OK once queued; COLL_ERR_INVALID for a NULL pointer with @p bytes > 0 or a
     *         context the executor cannot use; a device's error (kernels/cuda/README.md).
     */
    coll_status_t (*copy_async)(const coll_exec_ctx_t *ctx, void *dst, const void *src,
                                size_t bytes);
    /** zero, queued. @return As copy_async. */
    coll_status_t (*zero_async)(const coll_exec_ctx_t *ctx, void *dst, size_t bytes);
    /**
     * reduce, queued: one pass over every source as reduce. @p args and its source array are
     * read before the call returns; the buffers they name must stay until the work completed.
     * @return COLL_OK once queued; COLL_ERR_INVALID for a dtype, op, nsrc, world size or mask
     *         out of range or a NULL pointer with count > 0; a device's error.
     */
    coll_status_t (*reduce_async)(const coll_exec_ctx_t *ctx, const coll_reduce_args_t *args);
    /**
     * Wait until the work queued on ctx's stream completed.
     * @return COLL_OK; the first error the device met in that work (kernels/cuda/README.md).
     */
    coll_status_t (*sync)(const coll_exec_ctx_t *ctx);
} coll_exec_t;

/**
 * @return The executor of memory kind @p kind; NULL when none is registered for it (or @p kind
 *         is no kind). The host's is always there; a device kind's once its module registered it
 *         (coll_exec_register()). Thread-safe.
 */
const coll_exec_t *coll_exec_get(coll_mem_kind_t kind);

/**
 * @brief Make @p ex the executor of its kind (ex->kind), for the life of the process: a device
 *        kind's table, once the module that holds it was loaded (kernels/cuda/module.h).
 * @param [in] ex A table that stays valid and unchanged for the life of the process.
 * @return COLL_OK, also when @p ex is already the kind's executor; COLL_ERR_INVALID for NULL, a
 *         kind that is none or the host (whose executor is built in), or a table with an entry
 *         missing; COLL_ERR_BUSY when another table holds the kind already.
 * Thread-safe; coll_exec_get() sees the table from any thread once this returned.
 */
coll_status_t coll_exec_register(const coll_exec_t *ex);

#ifdef __cplusplus
}
#endif

#endif
