#include "reduce.h"

#include <string.h>

/* Sources are combined in blocks that stay in L1 while all of them are added, so a kernel with
 * many sources still streams each input from memory once. */
#define COLL_REDUCE_BLOCK 2048u

static void add2_f32(float *restrict d, const float *restrict a, const float *restrict b,
                     size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d[i] = a[i] + b[i];
    }
}

static void acc_f32(float *restrict d, const float *restrict a, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d[i] += a[i];
    }
}

/* Division rather than multiplication by 1/w: the mean is then correctly rounded. */
static void div_f32(float *restrict d, float w, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        d[i] /= w;
    }
}

static void sum_block_f32(float *d, const float *const *s, unsigned nsrc, size_t off, size_t n)
{
    unsigned k = 1;
    if (nsrc == 1) {
        if (d != s[0]) {
            memcpy(d + off, s[0] + off, n * sizeof(float));
        }
        return;
    }
    if (d == s[0]) {
        acc_f32(d + off, s[1] + off, n);
    } else {
        add2_f32(d + off, s[0] + off, s[1] + off, n);
    }
    for (k = 2; k < nsrc; k++) {
        acc_f32(d + off, s[k] + off, n);
    }
}

static void reduce_f32(coll_redop_t op, int finalize, uint32_t world_size, float *d,
                       const float *const *s, unsigned nsrc, size_t count)
{
    int divide = finalize && op == COLL_AVG && world_size > 1;
    for (size_t off = 0; off < count; off += COLL_REDUCE_BLOCK) {
        size_t n = count - off < COLL_REDUCE_BLOCK ? count - off : COLL_REDUCE_BLOCK;
        sum_block_f32(d, s, nsrc, off, n);
        if (divide) {
            div_f32(d + off, (float)world_size, n);
        }
    }
}

void coll_reduce(coll_dtype_t dtype, coll_redop_t op, int finalize, uint32_t world_size, void *dst,
                 const void *const *srcs, unsigned nsrc, size_t count)
{
    switch (dtype) {
    case COLL_FLOAT32:
        reduce_f32(op, finalize, world_size, dst, (const float *const *)srcs, nsrc, count);
        break;
    case COLL_DTYPE_COUNT:
        break;
    }
}
