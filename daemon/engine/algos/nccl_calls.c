/*
 * Each collective's work on the NCCL path (nccl_internal.h), queued on the communicator's stream
 * in order, hierarchical as the host's algorithms are: the node's members' buffers combined on
 * the device through the executor of device memory (an allreduce's, a reduce's inputs reduced
 * into one buffer, a reduce-scatter's into a scratch buffer of the whole, an all-gather's inputs
 * put at their blocks of the first member's output), one NCCL call among the daemons of the
 * operation's group (one NCCL rank per group node, in the group's node order: grp->node_rank and
 * grp->rank_node[] are NCCL's ranks), the result delivered to the members' outputs.
 *
 * Reductions keep the host's arithmetic (dev_combine.h, whose local pass and delivery these
 * are): the members' inputs in one multi-source pass, NCCL combining the nodes' results with the
 * same reduction (an average's: the sum), the delivery finishing the result (an average divided
 * once by the world size: the ranks', not NCCL's nodes' as ncclAvg would). A sum, average or
 * product of float16 and bfloat16 (coll_devc_wide()) goes through float32: the local pass into a
 * float32 scratch buffer, NCCL sums or multiplies float32 between the nodes (twice the 16-bit
 * bytes, as the host's partials travel), and the delivery rounds to 16 bits once. So a reduction
 * is the host's bit for bit wherever it does not depend on its order (the integers always);
 * otherwise it differs only as two host algorithms do, by the order of a float32 (float64) sum
 * or product before its one rounding. The bitwise reductions, which NCCL has not, are an
 * allreduce's only: the nodes' results gathered (ncclAllGather), then reduced on the device.
 */
#include "engine/algos/nccl_internal.h"

#include "core/daemon.h"
#include "engine/algos/nccl.h"
#include "engine/combine.h"

/* Every node holds the same number of consecutive ranks, in node order. */
static int blocks_by_node(const coll_group_t *grp)
{
    uint32_t per = grp->size / grp->nnodes;

    for (uint32_t r = 0; r < grp->size; r++) {
        if (grp->rank_node[r] != r / per || grp->rank_local[r] != r % per) {
            return 0;
        }
    }
    return per * grp->nnodes == grp->size;
}

int coll_nccl_fits(const coll_group_t *grp, unsigned coll, unsigned dtype, unsigned op)
{
    /* A group on one node has nothing between nodes; NCCL's blocks are the group's nodes'. */
    int blocks = coll == COLL_KIND_REDUCE_SCATTER || coll == COLL_KIND_ALLGATHER;

    /* NCCL has no bitwise reduction: only an allreduce's, as allreduce_bitwise() runs it. */
    return grp->nnodes > 1 && coll_devc_fits(coll, dtype, op) &&
           (!coll_devc_bitwise_op(op) || coll == COLL_KIND_ALLREDUCE) &&
           (!blocks || blocks_by_node(grp));
}

/* What NCCL's elements are: a wide reduction's float32. */
static coll_dtype_t nccl_dtype(const coll_op_t *op)
{
    return coll_devc_wide(op) ? COLL_FLOAT32 : (coll_dtype_t)op->desc.dtype;
}

/* What NCCL runs between the nodes: an average's sum. */
static coll_redop_t nccl_redop(const coll_op_t *op)
{
    return op->desc.op == COLL_AVG ? COLL_SUM : (coll_redop_t)op->desc.op;
}

static uint8_t *at(void *buf, uint64_t elems, size_t esize)
{
    return (uint8_t *)buf + elems * esize;
}

static uint64_t addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* The communicator's stream and device, for the executor. */
static coll_devc_lane_t lane(const coll_nccl_group_t *ng)
{
    return (coll_devc_lane_t){.dev = ng->dev, .ex = ng->ex, .ctx = ng->ctx,
                              .device = &ng->job->d->devices.dev[ng->device]};
}

/* @p n's node reduction, @p elems elements, in device memory of its own (freed with it). */
static coll_status_t scratch(coll_nccl_group_t *ng, coll__nccl_op_t *n, uint64_t elems)
{
    coll_devc_lane_t ln = lane(ng);

    return coll_devc_scratch(&ln, n->op, elems, &n->scratch, &n->acc);
}

/* Queue a copy between two device buffers on the stream, unless they are one. */
static coll_status_t copy_unless_same(coll_nccl_group_t *ng, void *dst, const void *src, size_t len)
{
    coll_devc_lane_t ln = lane(ng);

    return coll_devc_copy(&ln, dst, src, len);
}

/* Queue the reduction of every member's input (elements [0, @p len)) into @p dst, never
 * finished. */
static coll_status_t reduce_locals(coll_nccl_group_t *ng, coll_op_t *op, uint64_t len, void *dst)
{
    coll_devc_lane_t ln = lane(ng);

    return coll_devc_reduce_locals(&ln, op, len, dst);
}

/* Queue the delivery of @p len elements of the result from @p src (the node's reduction after
 * NCCL) to the output @p dst, finished where it must be. */
static coll_status_t deliver(coll_nccl_group_t *ng, coll_op_t *op, void *dst, const void *src,
                             uint64_t len)
{
    coll_devc_lane_t ln = lane(ng);

    return coll_devc_deliver(&ln, op, dst, src, len);
}

/* An allreduce's NCCL call: several members' inputs (a wide reduction's, even one) reduced into
 * the first member's output (a wide one's scratch) first, reduced there in place. */
static coll_status_t allreduce(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t cnt = op->desc.count;
    const void *send = op->in[0];
    coll_status_t st;

    n->acc = op->out[0];
    if (coll_devc_wide(op) && (st = scratch(ng, n, cnt)) != COLL_OK) {
        return st;
    }
    if (op->grp->nlocal > 1 || coll_devc_wide(op)) {
        if ((st = reduce_locals(ng, op, cnt, n->acc)) != COLL_OK) {
            return st;
        }
        send = n->acc;
    }
    return ng->nccl->allreduce(addr(send), addr(n->acc), cnt, nccl_dtype(op), nccl_redop(op),
                               ng->comm, ng->stream);
}

/* A bitwise allreduce's NCCL call (NCCL has no band, bor or bxor): the node's reduction (one
 * member's input as it is) gathered from every node into a scratch buffer of one block per node
 * (ncclAllGather, this node's block in place), which the delivery reduces into the first
 * member's output (coll__nccl_deliver()). Exact in any order: the host's bits. */
static coll_status_t allreduce_bitwise(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t cnt = op->desc.count;
    const void *send = op->in[0];
    coll_status_t st;

    if ((st = scratch(ng, n, cnt * op->grp->nnodes)) != COLL_OK) {
        return st;
    }
    if (op->grp->nlocal > 1) {
        uint8_t *mine = at(n->acc, op->grp->node_rank * cnt, op->esize);
        if ((st = reduce_locals(ng, op, cnt, mine)) != COLL_OK) {
            return st;
        }
        send = mine;
    }
    return ng->nccl->allgather(addr(send), addr(n->acc), cnt, (coll_dtype_t)op->desc.dtype,
                               ng->comm, ng->stream);
}

/* A reduce-scatter's NCCL call. Several members (or a wide reduction): their inputs reduced into
 * a scratch buffer of the whole, reduced in place between the nodes, each node's ranks' blocks
 * contiguous (coll_nccl_fits()). */
static coll_status_t reduce_scatter(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t cnt = op->desc.count, l = op->grp->nlocal, all = cnt * op->grp->size;
    uint64_t mine = op->grp->node_rank * l * cnt; /* this node's blocks, elements in */
    coll_status_t st;

    if (l == 1 && !coll_devc_wide(op)) {
        n->acc = op->out[0];
        return ng->nccl->reduce_scatter(addr(op->in[0]), addr(op->out[0]), cnt, nccl_dtype(op),
                                        nccl_redop(op), ng->comm, ng->stream);
    }
    if ((st = scratch(ng, n, all)) != COLL_OK ||
        (st = reduce_locals(ng, op, all, n->acc)) != COLL_OK) {
        return st;
    }
    return ng->nccl->reduce_scatter(addr(n->acc), addr(at(n->acc, mine, coll_devc_acc_esize(op))),
                                    l * cnt, nccl_dtype(op), nccl_redop(op), ng->comm, ng->stream);
}

/* A reduce's NCCL call to the root's node: the node's reduction into the root rank's output
 * there, elsewhere into scratch (one member's input is sent as it is); a wide reduction's into
 * scratch everywhere. */
static coll_status_t reduce(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint32_t root = grp->rank_node[op->desc.root];
    int here = root == grp->node_rank;
    const void *send = op->in[0];
    coll_status_t st;

    n->acc = here ? op->out[grp->rank_local[op->desc.root]] : NULL;
    if (coll_devc_wide(op) || (!here && grp->nlocal > 1)) {
        if ((st = scratch(ng, n, op->desc.count)) != COLL_OK) {
            return st;
        }
    }
    if (grp->nlocal > 1 || coll_devc_wide(op)) {
        if ((st = reduce_locals(ng, op, op->desc.count, n->acc)) != COLL_OK) {
            return st;
        }
        send = n->acc;
    }
    /* NCCL writes no recv off the root: one member's input alone is sent and "received". */
    return ng->nccl->reduce(addr(send), addr(n->acc != NULL ? n->acc : send), op->desc.count,
                            nccl_dtype(op), nccl_redop(op), (int)root, ng->comm, ng->stream);
}

/* An all-gather's NCCL call: the members' inputs put at their ranks' blocks of the first
 * member's output, which NCCL completes in place (each node's blocks contiguous). */
static coll_status_t allgather(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint64_t cnt = op->desc.count, l = grp->nlocal;
    const void *send = op->in[0];
    coll_status_t st;

    if (l > 1) {
        for (uint32_t m = 0; m < l; m++) {
            st = copy_unless_same(ng, at(op->out[0], coll_group_rank_of_local(grp, m) * cnt,
                                         op->esize),
                                  op->in[m], cnt * op->esize);
            if (st != COLL_OK) {
                return st;
            }
        }
        send = at(op->out[0], grp->node_rank * l * cnt, op->esize);
    }
    return ng->nccl->allgather(addr(send), addr(op->out[0]), l * cnt,
                               (coll_dtype_t)op->desc.dtype, ng->comm, ng->stream);
}

coll_status_t coll__nccl_call(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint32_t root = grp->rank_node[op->desc.root];
    const void *send;

    switch (op->desc.coll) {
    case COLL_KIND_REDUCE_SCATTER: return reduce_scatter(ng, n);
    case COLL_KIND_REDUCE: return reduce(ng, n);
    case COLL_KIND_ALLGATHER: return allgather(ng, n);
    case COLL_KIND_BROADCAST:
        send = root == grp->node_rank ? op->in[grp->rank_local[op->desc.root]] : op->out[0];
        return ng->nccl->broadcast(addr(send), addr(op->out[0]), op->desc.count,
                                   (coll_dtype_t)op->desc.dtype, (int)root, ng->comm, ng->stream);
    default: return coll__nccl_bitwise(op) ? allreduce_bitwise(ng, n) : allreduce(ng, n);
    }
}

coll_status_t coll__nccl_deliver(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint64_t cnt = op->desc.count;
    size_t len = (op->desc.coll == COLL_KIND_ALLGATHER ? cnt * grp->size : cnt) * op->esize;
    coll_devc_lane_t ln;
    coll_status_t st = COLL_OK;

    switch (op->desc.coll) {
    case COLL_KIND_REDUCE_SCATTER:
        /* Each member's block of the scratch, or NCCL's output with one member and none. */
        ln = lane(ng);
        return coll_devc_deliver_blocks(&ln, op, n->scratch.va == 0 ? NULL : n->acc);
    case COLL_KIND_REDUCE:
        if (grp->rank_node[op->desc.root] != grp->node_rank) {
            return COLL_OK; /* the result is the root's only */
        }
        return deliver(ng, op, op->out[grp->rank_local[op->desc.root]], n->acc, cnt);
    case COLL_KIND_ALLREDUCE:
        ln = lane(ng);
        st = coll__nccl_bitwise(op)
                 ? coll_devc_reduce_blocks(&ln, op, n->acc, grp->nnodes, op->out[0])
                 : deliver(ng, op, op->out[0], n->acc, cnt);
        break;
    default: break; /* NCCL wrote the first member's output */
    }
    for (uint32_t l = 1; l < grp->nlocal && st == COLL_OK; l++) {
        st = copy_unless_same(ng, op->out[l], op->out[0], len);
    }
    return st;
}
