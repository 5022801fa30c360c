/**
 * @file lowrank.h
 * @brief PowerSGD: rank-r factors of a gradient matrix by one step of power iteration, with error
 *        feedback and a warm-started Q.
 *
 * Paper: Vogels, Karimireddy, Jaggi, "PowerSGD: Practical Low-Rank Gradient Compression for
 * Distributed Optimization", NeurIPS 2019 (arXiv 1905.13727). Details as PyTorch's DDP hook
 * (torch/distributed/algorithms/ddp_comm_hooks/powerSGD_hook.py, powerSGD_hook()):
 * - A tensor of shape (d0, d1, ...) is the matrix M of n = d0 rows and m = d1 * ... columns,
 *   row-major (the tensor's own memory). Rank r = min(n, m, requested) (coll_lowrank_rank()).
 * - Compressed only when (n + m) * r * min_compression_rate < n * m
 *   (coll_lowrank_should_compress(), PyTorch's _should_compress; its default rate is 2). Vectors
 *   and the matrices this rejects are allreduced uncompressed, in one batch, by the caller.
 * - One step, M = g + e (error feedback):
 *     orthonormalize Q                       coll_lowrank_orthonormalize(Q, m, r)
 *     P = M Q                                coll_lowrank_ef_mul_q() (adds g into e = M first)
 *     allreduce P (a SUM: orthonormalization makes P's scale irrelevant)      -- caller
 *     orthonormalize P                       coll_lowrank_orthonormalize(P, n, r)
 *     Q = M^T P                              coll_lowrank_mul_mt()
 *     allreduce Q, divided by world_size (the mean)                           -- caller
 *     approx = P Q^T, e' = M - approx        coll_lowrank_residual()
 *   Q is kept for the next step (warm start) and re-orthonormalized at its start, as PyTorch
 *   does. The very first Q comes from coll_lowrank_init_q() with a seed every node shares.
 * - Orthonormalization: Gram-Schmidt column by column (modified: each projection uses the column
 *   as updated by the previous ones), dividing each column by its norm + epsilon, PyTorch's
 *   _orthogonalize_gram_schmidt() with orthogonalization_epsilon. We differ twice: (1) the
 *   projections are done twice ("twice is enough": Giraud, Langou, Rozloznik, 2005), which
 *   keeps P^T P = I to float32 rounding even when P's columns are nearly dependent (a rank
 *   below r), where one pass leaves rounding noise that normalizes to a non-orthogonal column;
 *   (2) for every rank, where PyTorch switches to a QR factorization (Householder) for rank > 2
 *   in float32. Both give the same columns up to rounding for independent columns (Householder's
 *   columns may differ in sign). A column of zeros stays zero (with epsilon 0 too: PyTorch's
 *   hook means to do that in its ZeroDivisionError branch, but a tensor division by zero raises
 *   nothing and gives NaN), so an all-zero matrix gives P = 0, Q = 0, approx = 0, no NaN.
 *
 * Storage: P (n x r) and Q (m x r) are column-major, column c of P at p + c * n, of Q at
 * q + c * m (so P^T and Q^T are row-major r x n and r x m, and every column is contiguous for
 * Gram-Schmidt). The allreduce sees flat float32 arrays of n * r and m * r elements.
 *
 * Cost: the products stream M once each (memory-bound for small r): P = M Q is a dot product of
 * each row with the r columns of Q, Q = M^T P adds r scaled rows into Q (Q stays in cache, in
 * column tiles of at most 128 KiB), the residual computes P Q^T row by row. Sums are float32 with
 * 16 fixed partial sums (dot products) or in row order (Q), Gram-Schmidt sums in double.
 *
 * Every function: pure, thread-safe on disjoint outputs, no allocation (the residual uses 1 KiB
 * of stack). Counts are elements. Non-finite values propagate (NaN in, NaN out); callers reject
 * them before.
 */
#ifndef COLL_KERNELS_LOWRANK_H
#define COLL_KERNELS_LOWRANK_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "kernels/compress.h"

/**
 * @brief The initial Q: cols x rank values, column-major, the same on every node for a seed.
 *
 * PRNG: splitmix64 (Steele, Lea, Flood, "Fast Splittable Pseudorandom Number Generators",
 * OOPSLA 2014) from state @p seed; element l of the array (l = c * cols + j) is made from output
 * l: its four 16-bit quarters summed (an Irwin-Hall sum of four uniforms), centred and scaled to
 * unit variance: ((sum - 131070) * sqrt(3) / 65536) in double, rounded to float32. That is a
 * bell curve on [-3.46, 3.46], not a normal distribution: any distribution with independent,
 * centred entries gives a full-rank Q almost surely, which is all PowerSGD needs, and this one
 * uses only exact integer arithmetic and one correctly rounded product, so every node gets the
 * same bits whatever its libm (Box-Muller's log and cos are not correctly rounded in glibc).
 * PyTorch fills Q with torch.randn under a seed from numpy; we cannot match its bits.
 * Orthonormalize it before the first step (as PyTorch does).
 *
 * @param [out] q    cols * rank float32.
 * @param [in]  cols Rows of Q (the matrix's columns m).
 * @param [in]  rank Columns of Q.
 * @param [in]  seed Shared by every node of the job (e.g. from the job id and the tensor).
 */
void coll_lowrank_init_q(float *q, size_t cols, unsigned rank, uint64_t seed);

/**
 * @brief P = M Q: p[c * rows + i] = sum over j of m[i * cols + j] * q[c * cols + j].
 * @param [in]  m    rows x cols float32, row-major.
 * @param [in]  rows n.
 * @param [in]  cols m.
 * @param [in]  q    cols x rank, column-major.
 * @param [in]  rank r, 1 .. COLL_LOWRANK_MAX_RANK.
 * @param [out] p    rows x rank, column-major; must not overlap the inputs.
 * @return COLL_OK; COLL_ERR_INVALID for a rank out of range or a NULL pointer with
 *         rows * cols > 0 (nothing written).
 */
coll_status_t coll_lowrank_mul_q(const float *m, size_t rows, size_t cols, const float *q,
                                 unsigned rank, float *p);

/**
 * @brief residual += grad (M = g + e, kept in @p residual), then P = M Q, in one pass over M.
 * @param [in]     grad     rows x cols float32 g, row-major.
 * @param [in,out] residual rows x cols float32: in e, out M = g + e (the input of this step,
 *                          which coll_lowrank_mul_mt() and coll_lowrank_residual() take next).
 *                          Must not overlap @p grad.
 * @param rows, cols, q, rank, p  As coll_lowrank_mul_q().
 * @return As coll_lowrank_mul_q().
 */
coll_status_t coll_lowrank_ef_mul_q(const float *grad, float *residual, size_t rows, size_t cols,
                                    const float *q, unsigned rank, float *p);

/**
 * @brief Q = M^T P: q[c * cols + j] = sum over i, in row order, of m[i * cols + j] * p[c * rows + i].
 * @param [in]  m    rows x cols float32, row-major.
 * @param [in]  rows n.
 * @param [in]  cols m.
 * @param [in]  p    rows x rank, column-major.
 * @param [in]  rank r, 1 .. COLL_LOWRANK_MAX_RANK.
 * @param [out] q    cols x rank, column-major; must not overlap the inputs.
 * @return COLL_OK; COLL_ERR_INVALID for a rank out of range or a NULL pointer with
 *         rows * cols > 0 (nothing written).
 */
coll_status_t coll_lowrank_mul_mt(const float *m, size_t rows, size_t cols, const float *p,
                                  unsigned rank, float *q);

/**
 * @brief Orthonormalize the columns of @p a in place: Gram-Schmidt with reorthogonalization,
 *        each column divided by (its norm + eps) (see the file comment).
 * @param [in,out] a    len x rank float32, column-major.
 * @param [in]     len  Length of a column (n for P, m for Q).
 * @param [in]     rank Columns, 1 .. min(len, COLL_LOWRANK_MAX_RANK).
 * @param [in]     eps  >= 0; PyTorch's orthogonalization_epsilon (e.g. 1e-8). A column whose
 *                      norm + eps is 0 is left zero.
 * @return COLL_OK; COLL_ERR_INVALID for a rank out of range, eps < 0 or NaN, or a NULL @p a.
 */
coll_status_t coll_lowrank_orthonormalize(float *a, size_t len, unsigned rank, float eps);

/**
 * @brief out = P Q^T: out[i * cols + j] = sum over c < rank, in order, of p[c * rows + i] *
 *        q[c * cols + j] (float32 products and sums).
 * @param [in]  p, q       The factors, column-major.
 * @param [in]  rows, cols The matrix's shape.
 * @param [in]  rank       r, 1 .. COLL_LOWRANK_MAX_RANK.
 * @param [out] out        rows x cols float32, row-major; must not overlap the factors.
 * @return COLL_OK; COLL_ERR_INVALID for a rank out of range or a NULL pointer with
 *         rows * cols > 0 (nothing written).
 */
coll_status_t coll_lowrank_reconstruct(const float *p, const float *q, size_t rows, size_t cols,
                                       unsigned rank, float *out);

/**
 * @brief The end of a step: approx = P Q^T (as coll_lowrank_reconstruct()) and, fused in the same
 *        pass, residual = M - approx, one float32 subtraction per element.
 * @param [in]     p, q       The factors after both allreduces (Q averaged).
 * @param [in]     rows, cols The matrix's shape.
 * @param [in]     rank       r, 1 .. COLL_LOWRANK_MAX_RANK.
 * @param [in,out] residual   rows x cols float32: in M (as coll_lowrank_ef_mul_q() left it), out
 *                            the residual e' for the next step.
 * @param [out]    approx     rows x cols float32, the decompressed gradient (typically the
 *                            bucket), or NULL when only the residual is wanted. Must not overlap
 *                            @p residual or the factors.
 * @return COLL_OK; COLL_ERR_INVALID for a rank out of range or a NULL pointer (other than
 *         @p approx) with rows * cols > 0 (nothing written).
 */
coll_status_t coll_lowrank_residual(const float *p, const float *q, size_t rows, size_t cols,
                                    unsigned rank, float *residual, float *approx);

#endif
