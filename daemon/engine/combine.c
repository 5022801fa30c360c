#include "engine/combine.h"

#include "engine/exec.h"

int coll_partial_is_f32(coll_dtype_t dtype, coll_redop_t op)
{
    return (dtype == COLL_FLOAT16 || dtype == COLL_BFLOAT16) &&
           (op == COLL_SUM || op == COLL_AVG || op == COLL_PROD);
}

size_t coll_partial_esize(coll_dtype_t dtype, coll_redop_t op)
{
    return coll_partial_is_f32(dtype, op) ? sizeof(float) : coll_dtype_size(dtype);
}

static int partial_f32(const coll_op_t *op)
{
    return coll_partial_is_f32((coll_dtype_t)op->desc.dtype, (coll_redop_t)op->desc.op);
}

size_t coll_combine_partial_esize(const coll_op_t *op)
{
    return coll_partial_esize((coll_dtype_t)op->desc.dtype, (coll_redop_t)op->desc.op);
}

/* @p mask with bits @p i and @p j exchanged. */
static uint64_t swap_bits(uint64_t mask, unsigned i, unsigned j)
{
    uint64_t bi = (mask >> i) & 1, bj = (mask >> j) & 1;
    return (mask & ~((1ull << i) | (1ull << j))) | (bi << j) | (bj << i);
}

void coll_combine_locals_args(const coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                              const void *partial, int finalize, const void **src,
                              coll_reduce_args_t *a_p)
{
    int f32 = partial_f32(op);
    coll_reduce_args_t a = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .finalize = finalize,
                            .dst = dst, .src = src, .count = len, .dst_f32 = f32 && !finalize};
    unsigned n = 0;

    if (partial != NULL) {
        a.f32_mask = (uint64_t)f32;
        src[n++] = partial;
    }
    for (uint32_t l = 0; l < op->nbufs; l++) {
        a.raw_mask |= 1ull << n;
        src[n++] = (const uint8_t *)op->in[l] + off * op->esize;
    }
    /* The kernel reduces in place only through its first source. */
    for (unsigned k = 1; k < n; k++) {
        if (src[k] == dst) {
            src[k] = src[0];
            src[0] = dst;
            a.raw_mask = swap_bits(a.raw_mask, 0, k);
            a.f32_mask = swap_bits(a.f32_mask, 0, k);
        }
    }
    a.nsrc = n;
    *a_p = a;
}

void coll_combine_locals(coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                         const void *partial, int finalize)
{
    const void *src[COLL_COMBINE_MAX_SRC];
    coll_reduce_args_t a;

    coll_combine_locals_args(op, off, len, dst, partial, finalize, src, &a);
    coll_op_exec(op)->reduce(&a);
}

void coll_combine_pair(coll_op_t *op, void *dst, const void *a, const void *b, uint64_t len)
{
    const void *src[2] = {a, b};
    int f32 = partial_f32(op);
    coll_reduce_args_t r = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .dst = dst, .src = src,
                            .nsrc = 2, .count = len, .f32_mask = f32 ? 3u : 0u, .dst_f32 = f32};
    coll_op_exec(op)->reduce(&r);
}

void coll_combine_finish(coll_op_t *op, void *dst, const void *partial, uint64_t len)
{
    coll_reduce_args_t a = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .finalize = 1, .dst = dst,
                            .src = &partial, .nsrc = 1, .count = len,
                            .f32_mask = (uint64_t)partial_f32(op)};
    coll_op_exec(op)->reduce(&a);
}

int coll_combine_transforms_raw(const coll_op_t *op)
{
    return op->desc.op == COLL_AVG &&
           (op->desc.dtype == COLL_FLOAT16 || op->desc.dtype == COLL_BFLOAT16);
}
