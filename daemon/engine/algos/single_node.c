/*
 * A group (or job) on a single node: every collective is done from the local members' buffers
 * in the daemon. Allreduce walks the buffer in cache-sized blocks, adding every input at once and then
 * copying the block, still in cache, to the other outputs: each input is read once and each
 * output written once. A large allreduce is split over the kernel threads (workers.h), because
 * one core reaches only part of the memory bandwidth.
 *
 * Behind a gate (op->gate: the staged path's copies of device buffers coming in batch by batch,
 * engine/dev_staged.h) an allreduce, a reduce or a broadcast runs by the columns of its plan (one
 * chunk, segments of the job's segment_bytes): the columns that came in, as one piece, on the
 * kernel threads where it is large (a batch of the copies is 4 MiB a buffer, where they take
 * over), then each reported final, so that its copies back start while later columns are still
 * copied in, and the columns that came in meanwhile next.
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
    uint64_t from, to; /* the elements its parts share */
} local_task_t;

/* Behind a gate (local_opened()): the next column to run, and whether the kernel threads run
 * some (those up to @c to). */
typedef struct {
    uint64_t next;
    uint64_t to;
    int busy;
} gated_t;

static void elementwise_range(coll_op_t *op, uint64_t from, uint64_t to);

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
    const local_task_t *lt = (const local_task_t *)t;
    coll_op_t *op = lt->op;
    uint64_t line = 64 / op->esize, count = lt->to - lt->from;
    uint64_t per = ((count + t->nparts - 1) / t->nparts + line - 1) / line * line;
    uint64_t from = per * part < count ? per * part : count;
    uint64_t to = from + per < count ? from + per : count;

    elementwise_range(op, lt->from + from, lt->from + to);
}

/* Elements [@p from, @p to) of @p op go to the kernel threads, @p done on the loop thread once
 * they ran (it frees the task, drops the job's hold and releases @p op, which stays alive until
 * then). @return 1, or 0 when they do not take it (fewer than two threads, fewer bytes than
 * LOCAL_PARALLEL_BYTES a buffer, no memory): the caller runs it itself. */
static int to_workers(coll_op_t *op, uint64_t from, uint64_t to, void (*done)(coll_task_t *t))
{
    unsigned nworkers = coll_workers_count(op->job->d);
    local_task_t *t;

    if (nworkers < 2 || bytes(op, to - from) < LOCAL_PARALLEL_BYTES ||
        (t = calloc(1, sizeof(*t))) == NULL) {
        return 0;
    }
    t->op = op;
    t->from = from;
    t->to = to;
    t->task.nparts = nworkers;
    t->task.run = task_run;
    t->task.done = done;
    coll_op_hold(op);
    op->job->holds++;
    coll_workers_submit(op->job->d, &t->task);
    return 1;
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
    if (!to_workers(op, 0, op->desc.count, task_done)) {
        allreduce_range(op, 0, op->desc.count);
        coll_op_algo_done(op);
    }
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

/* Elements [from, to) of an allreduce, a reduce or a broadcast: each output element depends
 * on the inputs' elements of its index alone. */
static void elementwise_range(coll_op_t *op, uint64_t from, uint64_t to)
{
    uint32_t root = op->grp->rank_local[op->desc.root];
    const uint8_t *src;

    switch ((coll_kind_t)op->desc.coll) {
    case COLL_KIND_ALLREDUCE: allreduce_range(op, from, to); break;
    case COLL_KIND_REDUCE:
        coll_combine_locals(op, from, to - from, (uint8_t *)op->out[root] + bytes(op, from),
                            NULL, 1);
        break;
    default: /* broadcast */
        src = (const uint8_t *)op->in[root] + bytes(op, from);
        for (uint32_t l = 0; l < op->grp->nlocal; l++) {
            copy_unless_same((uint8_t *)op->out[l] + bytes(op, from), src, bytes(op, to - from));
        }
        break;
    }
}

/* The plan the gate counts columns of (coll_impl_t.plan): one chunk of the whole buffer. */
static void local_plan(coll_op_t *op)
{
    coll_plan_init(&op->plan, op->desc.count, 1, op->esize, op->job->params.segment_bytes);
}

static void gated_run(coll_op_t *op);

/* Columns up to @p in ran: each reported final (which may fail the job); the operation's
 * algorithm is done with the last, else those that came in meanwhile run. */
static void columns_final(coll_op_t *op, uint64_t in)
{
    gated_t *g = op->algo_state;

    while (g->next < in && !op->done) {
        op->gate->final(op, g->next++);
    }
    if (op->done) {
        return;
    } else if (g->next == op->plan.nseg) {
        coll_op_algo_done(op);
    } else {
        gated_run(op);
    }
}

static void gated_task_done(coll_task_t *t)
{
    coll_op_t *op = ((local_task_t *)t)->op;
    gated_t *g = op->algo_state;

    free(t);
    op->job->holds--;
    g->busy = 0;
    if (!op->done) {
        columns_final(op, g->to);
    }
    coll_op_release(op);
}

/* Run the columns the gate let in that did not run yet, on the kernel threads where they are
 * large (a batch of the staged copies is), unless those still run some. Hold @p op across the
 * call. */
static void gated_run(coll_op_t *op)
{
    gated_t *g = op->algo_state;
    uint64_t in = op->gate->ready(op);
    coll_range_t first, last;

    in = in < op->plan.nseg ? in : op->plan.nseg;
    if (g->busy || g->next >= in || op->done) {
        return;
    }
    first = coll_plan_segment(&op->plan, 0, g->next);
    last = coll_plan_segment(&op->plan, 0, in - 1);
    g->to = in;
    if (to_workers(op, first.off, last.off + last.len, gated_task_done)) {
        g->busy = 1;
        return;
    }
    elementwise_range(op, first.off, last.off + last.len);
    columns_final(op, in);
}

/* An elementwise collective behind a gate: the columns in now, the others as they come
 * (local_opened()). @return COLL_OK, or COLL_ERR_NOMEM. */
static coll_status_t gated(coll_op_t *op)
{
    if ((op->algo_state = calloc(1, sizeof(gated_t))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    local_plan(op);
    coll_op_hold(op);
    gated_run(op);
    coll_op_release(op);
    return COLL_OK;
}

/* The gate let more columns in (coll_op_gate_opened()). */
static void local_opened(coll_op_t *op)
{
    if (op->algo_state != NULL) {
        gated_run(op);
    }
}

static void local_cleanup(coll_op_t *op)
{
    free(op->algo_state);
    op->algo_state = NULL;
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
    if (op->gate != NULL) { /* an allreduce, a reduce or a broadcast, coll_impl_t.plan */
        return gated(op);   /* it completes the operation itself */
    }
    switch ((coll_kind_t)op->desc.coll) {
    case COLL_KIND_ALLREDUCE:
        allreduce(op);
        return COLL_OK; /* it completes the operation itself */
    case COLL_KIND_PS_STEP:
        staged(op);
        return COLL_OK; /* likewise, or the stage does when it resumes it */
    case COLL_KIND_REDUCE_SCATTER: reduce_scatter(op); break;
    case COLL_KIND_ALLGATHER: allgather(op); break;
    case COLL_KIND_BROADCAST:
    case COLL_KIND_REDUCE: elementwise_range(op, 0, op->desc.count); break;
    default: break; /* barrier: every local rank has entered */
    }
    coll_op_algo_done(op);
    return COLL_OK;
}

const coll_impl_t coll_impl_local = {
    .name = "local",
    .start = local_start,
    .cleanup = local_cleanup,
    .resume = staged_resume,
    .plan = local_plan,
    .opened = local_opened,
};
