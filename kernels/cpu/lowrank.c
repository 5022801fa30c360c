/*
 * PowerSGD kernels (lowrank.h): row and tile loops over M, Gram-Schmidt, the seeded Q. The
 * vector loops are in lowrank_loops.h, per instruction set.
 */
#include <math.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/lowrank.h"

/* Q = M^T P updates the tile of Q for a range of columns with every row of M; tiles of at most
 * this many bytes of Q (all r columns) stay in L2 while M streams through. */
#define MT_TILE_BYTES (128 * 1024)

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void coll_lowrank_init_q(float *q, size_t cols, unsigned rank, uint64_t seed)
{
    const double unit = 1.7320508075688772 / 65536.0; /* sqrt(3) / 2^16 */
    uint64_t state = seed;

    for (size_t l = 0; l < cols * rank; l++) {
        uint64_t z = splitmix64(&state);
        int64_t sum = (int64_t)(z & 0xffff) + (int64_t)((z >> 16) & 0xffff) +
                      (int64_t)((z >> 32) & 0xffff) + (int64_t)(z >> 48);
        q[l] = (float)((double)(sum - 131070) * unit);
    }
}

static int rank_ok(unsigned rank)
{
    return rank >= 1 && rank <= COLL_LOWRANK_MAX_RANK;
}

/* The common checks of the products: rank, and pointers when there is data. */
static int product_ok(const void *a, const void *b, const void *c, size_t rows, size_t cols,
                      unsigned rank)
{
    return rank_ok(rank) && (rows == 0 || cols == 0 || (a != NULL && b != NULL && c != NULL));
}

coll_status_t coll_lowrank_mul_q(const float *m, size_t rows, size_t cols, const float *q,
                                 unsigned rank, float *p)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!product_ok(m, q, p, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    for (size_t i = 0; i < rows; i++) {
        isa->lr_dots(m + i * cols, cols, q, cols, rank, p + i, rows);
    }
    return COLL_OK;
}

coll_status_t coll_lowrank_ef_mul_q(const float *grad, float *residual, size_t rows, size_t cols,
                                    const float *q, unsigned rank, float *p)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!product_ok(grad, q, p, rows, cols, rank) || (rows * cols > 0 && residual == NULL)) {
        return COLL_ERR_INVALID;
    }
    /* Row by row: the updated row is still in L1 for its r dot products. */
    for (size_t i = 0; i < rows; i++) {
        isa->ef_add(grad + i * cols, residual + i * cols, cols);
        isa->lr_dots(residual + i * cols, cols, q, cols, rank, p + i, rows);
    }
    return COLL_OK;
}

coll_status_t coll_lowrank_mul_mt(const float *m, size_t rows, size_t cols, const float *p,
                                  unsigned rank, float *q)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;
    size_t tile = MT_TILE_BYTES / (sizeof(float) * rank);

    if (!product_ok(m, p, q, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    if (cols > 0) {
        memset(q, 0, cols * rank * sizeof(float));
    }
    for (size_t j = 0; j < cols; j += tile) {
        size_t len = cols - j < tile ? cols - j : tile;
        for (size_t i = 0; i < rows; i++) {
            isa->lr_axpy(q + j, cols, m + i * cols + j, len, p + i, rows, rank);
        }
    }
    return COLL_OK;
}

/* Column @p c of @p a made orthonormal to columns 0 .. c-1 (already orthonormal). */
static void orthonormalize_column(const coll__compress_loops_t *isa, float *a, size_t len,
                                  unsigned c, float eps)
{
    float *col = a + c * len;

    /* Twice: the second pass removes what rounding left of the first one's projections. */
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned j = 0; j < c; j++) {
            const float *qj = a + j * len;
            isa->lr_sub_scaled(col, qj, isa->lr_dot(qj, col, len), len);
        }
    }
    double d = sqrt(isa->lr_dot(col, col, len)) + (double)eps;
    if (d > 0) {
        isa->lr_div(col, len, d);
    } else {
        memset(col, 0, len * sizeof(float)); /* all zero already, but -0 becomes +0 */
    }
}

coll_status_t coll_lowrank_orthonormalize(float *a, size_t len, unsigned rank, float eps)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!rank_ok(rank) || rank > len || a == NULL || !(eps >= 0)) {
        return COLL_ERR_INVALID;
    }
    for (unsigned c = 0; c < rank; c++) {
        orthonormalize_column(isa, a, len, c, eps);
    }
    return COLL_OK;
}

coll_status_t coll_lowrank_reconstruct(const float *p, const float *q, size_t rows, size_t cols,
                                       unsigned rank, float *out)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!product_ok(p, q, out, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    for (size_t i = 0; i < rows; i++) {
        isa->lr_recon(p + i, rows, q, cols, rank, cols, out + i * cols, NULL);
    }
    return COLL_OK;
}

coll_status_t coll_lowrank_residual(const float *p, const float *q, size_t rows, size_t cols,
                                    unsigned rank, float *residual, float *approx)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!product_ok(p, q, residual, rows, cols, rank)) {
        return COLL_ERR_INVALID;
    }
    for (size_t i = 0; i < rows; i++) {
        isa->lr_recon(p + i, rows, q, cols, rank, cols, approx ? approx + i * cols : NULL,
                      residual + i * cols);
    }
    return COLL_OK;
}
