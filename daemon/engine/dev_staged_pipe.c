/*
 * The staged path's pipelined collectives (dev_staged_state.h): a ring allreduce, or an
 * allreduce, reduce or broadcast of a group on one node (the local algorithm, which runs them
 * by the columns of a plan of one chunk, engine/algos/single_node.c), larger than one batch
 * (coll_dev_staged_batches(): whole columns of the algorithm's plan, about
 * COLL_DEV_STAGED_BATCH_BYTES of each buffer) does not wait for its whole input. Every batch's
 * copies in are queued at once, in the order the algorithm starts its columns, with an event on
 * each stream of each span after each batch; the operation starts at once, and the algorithm
 * starts a column only once the gate (op.h) let it in: the loop's poll counts the batches whose
 * events completed, in order, and wakes the algorithm (coll_op_gate_opened()). As it finishes
 * the last column of a batch, that batch's outputs are queued back; the feature's finish then
 * only records the events after them. So the copies in of later batches run while the
 * algorithm works on the first, and the copies back of the first while it works on the last
 * and while the last batches are still copied in (the copies back go on the pool's other pair
 * of streams, coll_dev_pool_streams()): for a large buffer the time nears the largest of the
 * copies in, the algorithm and the copies back, not their sum. The data on the wire, the plan
 * and the results are the algorithm's own, whatever the timing.
 */
#include <stdio.h>
#include <stdlib.h>

#include "engine/dev_staged.h"
#include "engine/dev_staged_state.h"

/* Event @p s of span @p k after batch @p b's copies in. */
static coll_dev_event_t *batch_event(staged_t *sg, uint64_t b, uint32_t k, int s)
{
    return &sg->bev[(b * sg->nspans + k) * 2 + (uint64_t)s];
}

/* Queue batch @p b's copies of every span: its inputs in (@p in) or its outputs back. */
static coll_status_t batch_queue(coll_op_t *op, staged_t *sg, uint64_t b, int in)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_status_t st = COLL_OK;

    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        span_t *p = &sg->span[k];
        uint64_t base = in ? p->in_off : p->nout > 0 ? p->out[0].off : 0;
        int has = in ? p->in_len > 0 : p->nout > 0;
        for (uint32_t c = 0; has && c < sg->plan.nnodes && st == COLL_OK; c++) {
            coll_range_t r = coll_dev_staged_batch_piece(&sg->plan, &sg->bt, b, c);
            st = r.len == 0 ? COLL_OK
                            : coll__staged_queue(ds, p, in, base + r.off * op->esize,
                                                 r.len * op->esize, &sg->turn[in]);
        }
    }
    return st;
}

/* Count the batches, in order, whose copies in completed. @return COLL_OK, or the device
 * layer's error; the timer stops once every batch is in. */
static coll_status_t batches_advance(const coll_op_t *op, staged_t *sg)
{
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    coll_status_t q = COLL_OK;

    while (sg->batches_in < sg->bt.nbatches && q == COLL_OK) {
        for (uint32_t k = 0; k < sg->nspans && q == COLL_OK; k++) {
            for (int s = 0; s < 2 && q == COLL_OK; s++) {
                q = ops->event_query(*batch_event(sg, sg->batches_in, k, s));
            }
            if (q != COLL_OK && q != COLL_INPROGRESS) {
                return coll__staged_fault(op, &sg->span[k], q);
            }
        }
        sg->batches_in += q == COLL_OK;
    }
    if (sg->batches_in == sg->bt.nbatches && sg->pipe_in) {
        sg->pipe_in = 0;
        uv_timer_stop(sg->timer);
    }
    return q == COLL_INPROGRESS ? COLL_OK : q;
}

coll_status_t coll__staged_pipe_in(coll_op_t *op, staged_t *sg)
{
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    coll_status_t st = COLL_OK;

    sg->inflight = 1;
    for (uint64_t b = 0; b < sg->bt.nbatches && st == COLL_OK; b++) {
        st = batch_queue(op, sg, b, 1);
        for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
            for (int s = 0; s < 2 && st == COLL_OK; s++) {
                st = ops->event_record(*batch_event(sg, b, k, s), span_pair(&sg->span[k], 1)[s]);
            }
        }
    }
    if (st == COLL_OK && (st = batches_advance(op, sg)) == COLL_OK &&
        sg->batches_in < sg->bt.nbatches) {
        sg->pipe_in = 1;
        if (coll__staged_poll_start(op, sg) != COLL_INPROGRESS) {
            return coll__staged_fail(op, COLL_ERR_NOMEM, "has no timer", "daemon out of memory");
        }
    }
    return st == COLL_OK ? st
                         : coll__staged_fail(op, st, "could not copy the device buffers in",
                                             coll_dev_error());
}

/* The algorithm starts the columns of the batches that came in; a failed copy fails the job. */
void coll__staged_pipe_tick(coll_op_t *op, staged_t *sg)
{
    uint64_t was = sg->batches_in;
    coll_status_t st;

    coll_op_hold(op); /* a failure frees the state otherwise */
    if (op->done) {   /* the job failed meanwhile */
        sg->pipe_in = 0;
        uv_timer_stop(sg->timer);
    } else if ((st = batches_advance(op, sg)) != COLL_OK) {
        sg->pipe_in = 0;
        uv_timer_stop(sg->timer);
        coll__staged_fail(op, st, "could not copy the device buffers in", coll_dev_error());
    } else if (sg->batches_in > was) {
        coll_op_gate_opened(op);
    }
    coll_op_release(op);
}

static staged_t *state_of(const coll_op_t *op)
{
    return coll_op_feature_state(op, &coll_dev_staged_feature);
}

/* The gate (op.h): the columns of the batches that came in. */
static uint64_t pipe_ready(const coll_op_t *op)
{
    const staged_t *sg = state_of(op);

    return sg->batches_in * sg->bt.cols;
}

/* The gate: once every column of a batch is final, its copies back are queued. */
static void pipe_final(coll_op_t *op, uint64_t j)
{
    staged_t *sg = state_of(op);
    uint64_t b = j / sg->bt.cols;
    uint64_t n = b + 1 < sg->bt.nbatches ? sg->bt.cols : sg->plan.nseg - b * sg->bt.cols;
    coll_status_t st;

    if (++sg->final_cols[b] == n && (st = batch_queue(op, sg, b, 0)) != COLL_OK) {
        coll__staged_fail(op, st, "could not copy the results back", coll_dev_error());
    }
}

static const coll_op_gate_t pipe_gate = {.ready = pipe_ready, .final = pipe_final};

/* An allreduce, a reduce or a broadcast: every buffer's element i is the collective's
 * element i, so a batch's pieces are the same bytes of every span. */
static int elementwise(uint32_t kind)
{
    return kind == COLL_KIND_ALLREDUCE || kind == COLL_KIND_REDUCE || kind == COLL_KIND_BROADCAST;
}

coll_status_t coll__staged_pipe_setup(coll_op_t *op, staged_t *sg, const coll_impl_t *inner)
{
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    uint64_t nev;
    coll_status_t st = COLL_OK;

    if (!elementwise(op->desc.coll) || inner->plan == NULL || inner->opened == NULL) {
        return COLL_OK;
    }
    inner->plan(op);
    sg->plan = op->plan;
    sg->bt = coll_dev_staged_batches(&sg->plan, op->esize, COLL_DEV_STAGED_BATCH_BYTES);
    if (sg->bt.nbatches < 2) {
        return COLL_OK;
    }
    nev = sg->bt.nbatches * sg->nspans * 2;
    sg->final_cols = calloc(sg->bt.nbatches, sizeof(*sg->final_cols));
    sg->bev = calloc(nev, sizeof(*sg->bev));
    if (sg->final_cols == NULL || sg->bev == NULL) {
        return coll__staged_fail(op, COLL_ERR_NOMEM, "has no state", "daemon out of memory");
    }
    for (uint64_t e = 0; e < nev && st == COLL_OK; e++) {
        st = ops->event_create(sg->span[e / 2 % sg->nspans].device, &sg->bev[e]);
    }
    if (st != COLL_OK) {
        return coll__staged_fail(op, st, "has no event", coll_dev_error());
    }
    sg->pipe = 1;
    op->gate = &pipe_gate;
    snprintf(sg->name, sizeof(sg->name), "staged+pipelined+%s", inner->name);
    return COLL_OK;
}

void coll__staged_pipe_free(const coll_dev_ops_t *ops, staged_t *sg)
{
    uint64_t nev = sg->bt.nbatches * sg->nspans * 2;

    for (uint64_t e = 0; sg->bev != NULL && e < nev && sg->bev[e] != NULL; e++) {
        ops->event_destroy(sg->bev[e]);
    }
    free(sg->bev);
    free(sg->final_cols);
}
