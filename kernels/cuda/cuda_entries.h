/**
 * @file cuda_entries.h
 * @brief Internal to the CUDA module: the entries of its table (exec_cuda.c), each defined in the
 *        file of its family (reduce.cu, copy.c, cast.cu, onebit.cu, topk.cu, lowrank.cu,
 *        optim.cu). Each computes what the host's entry of the same name computes (exec.h,
 *        kernels/cpu/<name>.h), with the differences kernels/cuda/README.md lists.
 */
#ifndef COLL_KERNELS_CUDA_ENTRIES_H
#define COLL_KERNELS_CUDA_ENTRIES_H

#include "kernels/cuda/rt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- copy.c, reduce.cu ---- */
void coll__cuda_copy(void *dst, const void *src, size_t bytes);
void coll__cuda_zero(void *dst, size_t bytes);
coll_status_t coll__cuda_copy_async(const coll_exec_ctx_t *ctx, void *dst, const void *src,
                                    size_t bytes);
coll_status_t coll__cuda_zero_async(const coll_exec_ctx_t *ctx, void *dst, size_t bytes);
coll_status_t coll__cuda_sync(const coll_exec_ctx_t *ctx);
void coll__cuda_reduce(const coll_reduce_args_t *a);
coll_status_t coll__cuda_reduce_async(const coll_exec_ctx_t *ctx, const coll_reduce_args_t *a);

/* ---- cast.cu, onebit.cu ---- */
coll_status_t coll__cuda_cast_encode(coll_cast_format_t fmt, const float *grad, float *residual,
                                     size_t count, uint16_t *out, int32_t *scale_exp);
coll_status_t coll__cuda_cast_decode(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                     int32_t scale_exp, float *out);
coll_status_t coll__cuda_cast_accumulate(coll_cast_format_t fmt, const uint16_t *in,
                                         size_t count, int32_t scale_exp, float weight,
                                         float *acc);
coll_status_t coll__cuda_onebit_encode(coll_onebit_scale_t rule, const float *grad,
                                       float *residual, size_t count, uint8_t *signs,
                                       float *scale);
coll_status_t coll__cuda_onebit_decode(const uint8_t *signs, size_t count, float scale,
                                       float weight, float *out);
coll_status_t coll__cuda_onebit_accumulate(const uint8_t *signs, size_t count, float scale,
                                           float weight, float *acc);

/* ---- topk.cu ---- */
size_t coll__cuda_topk_scratch_bytes(size_t count, size_t k);
coll_status_t coll__cuda_topk_compress(const coll_topk_args_t *a);
coll_status_t coll__cuda_topk_accumulate(const uint32_t *indices, const float *values, size_t k,
                                         float weight, float *acc, size_t count);
/** e[i] = g[i] + e[i] for i < n, queued on @p r's stream (TopK, PowerSGD); nothing for NULL e. */
void coll__cuda_ef_add(coll__cuda_run_t *r, const float *g, float *e, size_t n);

/* ---- lowrank.cu ---- */
void coll__cuda_lowrank_init_q(float *q, size_t cols, unsigned rank, uint64_t seed);
coll_status_t coll__cuda_lowrank_mul_q(const float *m, size_t rows, size_t cols, const float *q,
                                       unsigned rank, float *p);
coll_status_t coll__cuda_lowrank_ef_mul_q(const float *grad, float *residual, size_t rows,
                                          size_t cols, const float *q, unsigned rank, float *p);
coll_status_t coll__cuda_lowrank_mul_mt(const float *m, size_t rows, size_t cols, const float *p,
                                        unsigned rank, float *q);
coll_status_t coll__cuda_lowrank_orthonormalize(float *a, size_t len, unsigned rank, float eps);
coll_status_t coll__cuda_lowrank_reconstruct(const float *p, const float *q, size_t rows,
                                             size_t cols, unsigned rank, float *out);
coll_status_t coll__cuda_lowrank_residual(const float *p, const float *q, size_t rows,
                                          size_t cols, unsigned rank, float *residual,
                                          float *approx);

/* ---- optim.cu ---- */
double coll__cuda_optim_sumsq(const float *x, size_t n);
void coll__cuda_optim_sumsq2(const float *a, const float *b, size_t n, double out[2]);
int coll__cuda_optim_all_finite(const float *x, size_t n);
void coll__cuda_optim_sgd(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                          size_t n);
void coll__cuda_optim_adamw(const coll_optim_adamw_coef_t *k, float *w, const float *g,
                            float *m, float *v, size_t n);
void coll__cuda_optim_lars(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v,
                           size_t n);
void coll__cuda_optim_lamb_moments(const coll_optim_lamb_coef_t *k, const float *w,
                                   const float *g, float *m, float *v, size_t n,
                                   double sumsq[2]);
void coll__cuda_optim_lamb_apply(const coll_optim_lamb_coef_t *k, float *w, const float *m,
                                 const float *v, size_t n);

#ifdef __cplusplus
}
#endif

#endif
