/*
 * A job on a single node: the result is the reduction of the local ranks' buffers, computed in
 * one multi-source pass into local rank 0's output and copied to the others.
 */
#include <string.h>

#include "kernels/cpu/reduce.h"
#include "op.h"

static coll_status_t local_start(coll_op_t *op)
{
    const void *srcs[COLL_MAX_LOCAL] = {NULL};
    uint32_t nlocal = op->job->local_size;
    size_t len = (size_t)(op->desc.count * op->esize);

    /* Only local rank 0's input can be the destination (in place); it is the first source. */
    for (uint32_t l = 0; l < nlocal; l++) {
        srcs[l] = op->in[l];
    }
    coll_reduce(op->desc.dtype, op->desc.op, 1, op->desc.world_size, op->out[0], srcs, nlocal,
                op->desc.count);
    for (uint32_t l = 1; l < nlocal; l++) {
        memcpy(op->out[l], op->out[0], len);
    }
    coll_op_algo_done(op);
    return COLL_OK;
}

const coll_algo_t coll_algo_local = {
    .name = "local",
    .start = local_start,
};
