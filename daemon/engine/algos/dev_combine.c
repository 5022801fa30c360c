/*
 * The node's ranks' device buffers combined and served through the executor (dev_combine.h),
 * for the NCCL path (nccl_calls.c) and the one-node device algorithm (dev_local.c). Each call
 * the executor takes is counted on the device (kernel_reduces, kernel_copies: /metrics).
 */
#include "engine/algos/dev_combine.h"

#include "core/dev_pools.h"

int coll_devc_fits(unsigned coll, unsigned dtype, unsigned op)
{
    int ints = dtype == COLL_INT8 || dtype == COLL_UINT8 || dtype == COLL_INT32 ||
               dtype == COLL_INT64;
    int dt = ints || dtype == COLL_FLOAT32 || dtype == COLL_FLOAT64 || dtype == COLL_FLOAT16 ||
             dtype == COLL_BFLOAT16;
    int redop = op == COLL_SUM || op == COLL_AVG || op == COLL_PROD || op == COLL_MIN ||
                op == COLL_MAX || (ints && coll_devc_bitwise_op(op));

    switch (coll) {
    case COLL_KIND_ALLREDUCE:
    case COLL_KIND_REDUCE:
    case COLL_KIND_REDUCE_SCATTER: return dt && redop;
    case COLL_KIND_ALLGATHER:
    case COLL_KIND_BROADCAST: return dt;
    default: return 0;
    }
}

size_t coll_devc_acc_esize(const coll_op_t *op)
{
    return coll_devc_wide(op) ? sizeof(float) : op->esize;
}

uint32_t coll_devc_one_pool(const coll_op_t *op)
{
    uint32_t pool = op->members[0].pool;

    for (uint32_t l = 0; l < op->nbufs; l++) {
        if (op->members[l].pool != pool) {
            return 0;
        }
    }
    return pool;
}

uint32_t coll_devc_lane_pool(const coll_op_t *op)
{
    uint32_t lane = op->members[0].pool;
    const coll_dev_pool_t *dp;

    if (lane == 0) {
        return 0;
    }
    for (uint32_t l = 1; l < op->nbufs; l++) {
        uint32_t p = op->members[l].pool;
        if (p != lane && (p == 0 || p > COLL_DEV_MAX || (dp = op->job->dev_pools[p - 1]) == NULL ||
                          !(dp->peers & (1u << (lane - 1))))) {
            return 0;
        }
    }
    return lane;
}

coll_status_t coll_devc_scratch(const coll_devc_lane_t *ln, const coll_op_t *op, uint64_t elems,
                                coll_dev_scratch_t *s, uint8_t **acc_p)
{
    coll_status_t st = coll_dev_scratch_alloc(ln->dev, ln->ctx.device, &ln->device->budget,
                                              elems * coll_devc_acc_esize(op), s);

    *acc_p = (uint8_t *)(uintptr_t)s->va;
    return st;
}

coll_status_t coll_devc_copy(const coll_devc_lane_t *ln, void *dst, const void *src, size_t len)
{
    coll_status_t st;

    if (dst == src) {
        return COLL_OK;
    }
    if ((st = ln->ex->copy_async(&ln->ctx, dst, src, len)) == COLL_OK) {
        ln->device->kernel_copies++;
    }
    return st;
}

static coll_status_t reduce_async(const coll_devc_lane_t *ln, const coll_reduce_args_t *a)
{
    coll_status_t st = ln->ex->reduce_async(&ln->ctx, a);

    if (st == COLL_OK) {
        ln->device->kernel_reduces++;
    }
    return st;
}

coll_status_t coll_devc_reduce_locals(const coll_devc_lane_t *ln, coll_op_t *op, uint64_t len,
                                      void *dst)
{
    return coll_devc_reduce_span(ln, op, 0, len, dst);
}

coll_status_t coll_devc_reduce_span(const coll_devc_lane_t *ln, coll_op_t *op, uint64_t off,
                                    uint64_t len, void *dst)
{
    const void *src[COLL_COMBINE_MAX_SRC];
    coll_reduce_args_t a;

    coll_combine_locals_args(op, off, len, dst, NULL, 0, src, &a);
    return reduce_async(ln, &a);
}

coll_status_t coll_devc_reduce_blocks(const coll_devc_lane_t *ln, coll_op_t *op,
                                      const uint8_t *blocks, uint32_t nblocks, void *dst)
{
    const void *src[COLL_REDUCE_MAX_SRCS];
    size_t block = op->desc.count * op->esize;
    uint32_t b = 0;
    coll_status_t st = COLL_OK;

    while (b < nblocks && st == COLL_OK) {
        unsigned k = 0;
        if (b > 0) {
            src[k++] = dst; /* the passes before, reduced in place */
        }
        for (; k < COLL_REDUCE_MAX_SRCS && b < nblocks; k++, b++) {
            src[k] = blocks + b * block;
        }
        coll_reduce_args_t a = {.dtype = op->desc.dtype, .op = op->desc.op,
                                .world_size = op->desc.world_size, .finalize = 1, .dst = dst,
                                .src = src, .nsrc = k, .count = op->desc.count};
        st = reduce_async(ln, &a);
    }
    return st;
}

coll_status_t coll_devc_deliver(const coll_devc_lane_t *ln, coll_op_t *op, void *dst,
                                const void *src, uint64_t len)
{
    coll_reduce_args_t a = {.dtype = op->desc.dtype, .op = op->desc.op,
                            .world_size = op->desc.world_size, .finalize = 1, .dst = dst,
                            .src = &src, .nsrc = 1, .count = len,
                            .f32_mask = (uint64_t)coll_devc_wide(op)};

    return coll_devc_finishes(op) ? reduce_async(ln, &a)
                                  : coll_devc_copy(ln, dst, src, len * op->esize);
}

coll_status_t coll_devc_deliver_blocks(const coll_devc_lane_t *ln, coll_op_t *op,
                                       const uint8_t *acc)
{
    uint64_t cnt = op->desc.count;
    size_t esize = coll_devc_acc_esize(op);
    coll_status_t st = COLL_OK;

    for (uint32_t l = 0; l < op->grp->nlocal && st == COLL_OK; l++) {
        uint64_t block = coll_group_rank_of_local(op->grp, l) * cnt;
        st = coll_devc_deliver(ln, op, op->out[l], acc == NULL ? op->out[0] : acc + block * esize,
                               cnt);
    }
    return st;
}
