/*
 * A group (or job) on a single node: every collective is done from the local members' buffers
 * in the daemon. Allreduce walks the buffer in cache-sized blocks, adding every input at once and then
 * copying the block, still in cache, to the other outputs: each input is read once and each
 * output written once. A large allreduce is split over the kernel threads (workers.h), because
 * one core reaches only part of the memory bandwidth.
 *
 * A staged operation (the parameter service's step, engine/stage.h) reduces each segment of the
 * whole buffer (this node's chunk) into local rank 0's input, hands it to the stage, and copies
 * the stage's output to the other local ranks: right away, or once a barrier stage resumed the
 * operation.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/algos/algos.h"
#include "engine/combine.h"
#include "engine/op.h"
#include "engine/stage.h"
#include "engine/workers.h"

/* Elements' bytes per cache block, and the size from which the kernel threads take over. */
#define LOCAL_BLOCK_BYTES (64u * 1024u)
#define LOCAL_PARALLEL_BYTES (4u << 20)

typedef struct {
    coll_task_t task;
    coll_op_t *op;
} local_task_t;

static size_t bytes(const coll_op_t *op, uint64_t elems)
{
    return (size_t)(elems * op->esize);
}

static void copy_unless_same(void *dst, const void *src, size_t len)
{
    if (dst != src) {
        memcpy(dst, src, len);
    }
}

/* Allreduce of elements [from, to) in cache-sized blocks. */
static void allreduce_range(coll_op_t *op, uint64_t from, uint64_t to)
{
    uint64_t block = LOCAL_BLOCK_BYTES / op->esize;

    for (uint64_t off = from; off < to; off += block) {
        uint64_t len = to - off < block ? to - off : block;
        uint8_t *out0 = (uint8_t *)op->out[0] + bytes(op, off);
        coll_combine_locals(op, off, len, out0, NULL, 1);
        for (uint32_t l = 1; l < op->grp->nlocal; l++) {
            memcpy((uint8_t *)op->out[l] + bytes(op, off), out0, bytes(op, len));
        }
    }
}

static void task_run(coll_task_t *t, uint32_t part)
{
    coll_op_t *op = ((local_task_t *)t)->op;
    uint64_t line = 64 / op->esize, count = op->desc.count;
    uint64_t per = ((count + t->nparts - 1) / t->nparts + line - 1) / line * line;
    uint64_t from = per * part < count ? per * part : count;
    uint64_t to = from + per < count ? from + per : count;

    allreduce_range(op, from, to);
}

static void task_done(coll_task_t *t)
{
    coll_op_t *op = ((local_task_t *)t)->op;

    free(t);
    op->job->holds--;
    if (!op->done) {
        coll_op_algo_done(op);
    }
    coll_op_release(op);
}

/* A large allreduce goes to the kernel threads; the operation stays alive until they finish. */
static void allreduce(coll_op_t *op)
{
    unsigned nworkers = coll_workers_count(op->job->d);
    local_task_t *t;

    if (nworkers < 2 || bytes(op, op->desc.count) < LOCAL_PARALLEL_BYTES ||
        (t = calloc(1, sizeof(*t))) == NULL) {
        allreduce_range(op, 0, op->desc.count);
        coll_op_algo_done(op);
        return;
    }
    t->op = op;
    t->task.nparts = nworkers;
    t->task.run = task_run;
    t->task.done = task_done;
    coll_op_hold(op);
    op->job->holds++;
    coll_workers_submit(op->job->d, &t->task);
}

/* Reduce-scatter: each rank's output is the reduction of its block over all inputs. */
static void reduce_scatter(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    for (uint32_t l = 0; l < grp->nlocal; l++) {
        coll_combine_locals(op, (uint64_t)coll_group_rank_of_local(grp, l) * op->desc.count,
                            op->desc.count, op->out[l], NULL, 1);
    }
}

/* All-gather: every output gets every rank's input at that rank's block. */
static void allgather(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    size_t len = bytes(op, op->desc.count);
    for (uint32_t l = 0; l < grp->nlocal; l++) {
        for (uint32_t m = 0; m < grp->nlocal; m++) {
            copy_unless_same((uint8_t *)op->out[l] + coll_group_rank_of_local(grp, m) * len,
                             op->in[m], len);
        }
    }
}

static void broadcast(coll_op_t *op)
{
    const void *src = op->in[op->grp->rank_local[op->desc.root]];
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        copy_unless_same(op->out[l], src, bytes(op, op->desc.count));
    }
}

/* The stage's output of one segment, to every local rank. */
static void staged_out(coll_op_t *op, coll_range_t seg)
{
    coll_op_stage(op)->calls->distribute(op, seg.off, seg.len);
    for (uint32_t l = 1; l < op->job->local_size && !op->done; l++) {
        memcpy((uint8_t *)op->out[l] + bytes(op, seg.off),
               (const uint8_t *)op->out[0] + bytes(op, seg.off), bytes(op, seg.len));
    }
}

/* A barrier stage resumed the operation (stage.h). */
static void staged_resume(coll_op_t *op)
{
    for (uint64_t j = 0; j < op->plan.nseg && !op->done; j++) {
        staged_out(op, coll_plan_segment(&op->plan, 0, j));
    }
    if (!op->done) {
        coll_op_algo_done(op);
    }
}

static void staged_run(coll_op_t *op)
{
    const coll_stage_t *stage = coll_op_stage(op);

    for (uint64_t j = 0; j < op->plan.nseg && !op->done; j++) {
        coll_range_t seg = coll_plan_segment(&op->plan, 0, j);
        coll_combine_locals(op, seg.off, seg.len, (uint8_t *)op->in[0] + bytes(op, seg.off),
                            NULL, 1);
        stage->calls->reduced(op, seg.off, seg.len);
        if (!stage->barrier && !op->done) {
            staged_out(op, seg);
        }
    }
    if (op->done) {
        return;
    } else if (stage->barrier) {
        stage->calls->all_reduced(op);
    } else {
        coll_op_algo_done(op);
    }
}

/* Held while it runs: a stage that fails the job completes the operation on the way. */
static void staged(coll_op_t *op)
{
    coll_plan_init(&op->plan, op->desc.count, 1, op->esize, op->job->params.segment_bytes);
    coll_op_hold(op);
    staged_run(op);
    coll_op_release(op);
}

static coll_status_t local_start(coll_op_t *op)
{
    switch ((coll_kind_t)op->desc.coll) {
    case COLL_KIND_ALLREDUCE:
        allreduce(op);
        return COLL_OK; /* it completes the operation itself */
    case COLL_KIND_PS_STEP:
        staged(op);
        return COLL_OK; /* likewise, or the stage does when it resumes it */
    case COLL_KIND_REDUCE_SCATTER: reduce_scatter(op); break;
    case COLL_KIND_ALLGATHER: allgather(op); break;
    case COLL_KIND_BROADCAST: broadcast(op); break;
    case COLL_KIND_REDUCE:
        coll_combine_locals(op, 0, op->desc.count, op->out[op->grp->rank_local[op->desc.root]],
                            NULL, 1);
        break;
    default: break; /* barrier: every local rank has entered */
    }
    coll_op_algo_done(op);
    return COLL_OK;
}

const coll_impl_t coll_impl_local = {
    .name = "local",
    .start = local_start,
    .resume = staged_resume,
};
