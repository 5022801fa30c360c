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
 */
#ifndef COLL_KERNELS_EXEC_H
#define COLL_KERNELS_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/compress.h"
#include "kernels/mem_kind.h"
#include "kernels/optim.h"
#include "kernels/reduce.h"

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
} coll_exec_t;

/**
 * @return The executor of memory kind @p kind; NULL when this build has none for it (or
 *         @p kind is no kind). The host's is always there. Thread-safe.
 */
const coll_exec_t *coll_exec_get(coll_mem_kind_t kind);

#endif
