#include "combine.h"

#include "kernels/cpu/reduce.h"

void coll_combine_locals(coll_op_t *op, uint64_t off, uint64_t len, void *dst,
                         const void *partial, int finalize)
{
    const void *src[1 + COLL_MAX_LOCAL];
    coll_reduce_args_t a = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .finalize = finalize,
                            .dst = dst, .src = src, .count = len};
    unsigned n = 0;

    if (partial != NULL) {
        src[n++] = partial;
    }
    for (uint32_t l = 0; l < op->job->local_size; l++) {
        a.raw_mask |= 1ull << n;
        src[n++] = (const uint8_t *)op->in[l] + off * op->esize;
    }
    /* The kernel reduces in place only through its first source. */
    for (unsigned k = 1; k < n; k++) {
        if (src[k] == dst) {
            uint64_t bk = (a.raw_mask >> k) & 1, b0 = a.raw_mask & 1;
            src[k] = src[0];
            src[0] = dst;
            a.raw_mask = (a.raw_mask & ~((1ull << k) | 1ull)) | (b0 << k) | bk;
        }
    }
    a.nsrc = n;
    coll_reduce(&a);
}

void coll_combine_pair(coll_op_t *op, void *dst, const void *a, const void *b, uint64_t len)
{
    const void *src[2] = {a, b};
    coll_reduce_args_t r = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .dst = dst, .src = src,
                            .nsrc = 2, .count = len};
    coll_reduce(&r);
}

int coll_combine_transforms_raw(const coll_op_t *op)
{
    return op->desc.op == COLL_AVG &&
           (op->desc.dtype == COLL_FLOAT16 || op->desc.dtype == COLL_BFLOAT16);
}
