/*
 * The one-node device algorithm (coll_impl_dev_local, algos.h; COLL_ALGO_DEVICE, named
 * "device+local"): a group on one node whose ranks' buffers are in one device pool, combined
 * there without a host copy. Everything goes on the pool's first stream of the copies in (the
 * daemon's stream of that device, coll_dev_pool_streams()) through the executor of device
 * memory, in dev_combine.h's arithmetic (the NCCL path's local phase and delivery, without NCCL
 * between them):
 *
 * - allreduce: the members' inputs reduced in one pass into the first member's output (a 16-bit
 *   sum, average or product's into float32 scratch), delivered there (an average finished, a
 *   wide result rounded to 16 bits once), copied to the other outputs;
 * - reduce: the same into the root's output alone;
 * - reduce-scatter: the inputs reduced into scratch of the whole, each member's block delivered
 *   to its output;
 * - all-gather: each input copied to its rank's block of the first member's output, which is
 *   copied to the others;
 * - broadcast: the root's input copied to every output.
 *
 * An event recorded after the work is polled by a timer of the loop (every POLL_MS, as the NCCL
 * path's; the two taken from the pool's idle ones and given back to it after, so that an
 * operation makes no event: coll_dev_pool_poll_get()); the ranks are told when it completed
 * (their streams' done words then: docs/gpu.md, "Streams"), so nothing waits in the loop and
 * nothing is copied on the host. Where the ranks' ready words (docs/gpu.md, "Streams") are not
 * all there when it starts, the work goes on a stream of its own instead (one the pool keeps
 * idle for device waits, coll_dev_pool_wait_get()), queued at once behind device waits for the
 * words (coll_dev_sync_device_wait()), so it starts at the words, not at the loop's poll of
 * them, and holds no other operation's work (a rank's word may wait for one); the loop polls
 * the words first only where the device layer refuses the waits. Freed while that work still
 * waits for a word (its job failed), the operation is parked until the job ends on the node
 * (coll_dev_sync_park()), as the staged path's copies are (dev_wait.h, which device+peers split
 * across the devices shares, dev_peers.c). The choice (engine/submit.c, the
 * table's device_runs()) takes this algorithm only where the daemon has the executor.
 *
 * Members in pools of several devices (one GPU per rank) run the same, named "device+peers"
 * (coll_impl_dev_peers), where the first member's device was granted access to the others'
 * pools (peers, core/dev_pools.h; coll_devc_lane_pool()): everything goes on that device's
 * stream, its kernels reading the peers' inputs and its copies writing their outputs through
 * the daemon's mappings: reduce and broadcast, and an allreduce, reduce-scatter or all-gather
 * below device_peers_split_min elements (the configuration) or whose members' devices are not
 * all peers of each other; the others are split across the members' devices, each doing its
 * share on its own stream (coll_impl_dev_peers_split, dev_peers.c). Members whose pools it
 * cannot reach run the host's local algorithm on the staged path's copies (coll_algo_impl()).
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "core/dev_pools.h"
#include "engine/algos/algos.h"
#include "engine/algos/dev_combine.h"
#include "engine/algos/dev_wait.h"

/* How often the loop polls the event, ms. */
#define POLL_MS 1

/* An operation's state. */
typedef struct {
    coll_op_t *op;
    coll_devc_lane_t ln;
    coll_dev_pool_t *dp;        /* the lane's pool, whose polls it takes one of */
    coll_dev_poll_t *poll;      /* its event and timer; NULL until taken */
    coll_dev_stream_t own;      /* the lane's stream where the ranks' ready words were not all
                                   there at start (its device waits hold the work), else NULL */
    int pending;                /* work queued on the stream and not seen complete */
    coll_dev_scratch_t scratch; /* a wide reduction's or a reduce-scatter's; none: all zero */
    uint8_t *acc;               /* where the unfinished reduction is */
} dev_local_t;

/* Fail @p op's job: @p what went wrong on the device, @p why in the device layer's words.
 * @return COLL_OK: the job's failure completed the operation. */
static coll_status_t fail(coll_op_t *op, coll_status_t st, const char *what, const char *why)
{
    coll_job_fail(op->job, st, 1, "job %s: the %s on the device (%s), on node %u: %s: %s",
                  op->job->id, coll_kind_name((coll_kind_t)op->desc.coll), op->impl->name,
                  op->job->node_rank, what, why);
    return COLL_OK;
}

/* The members' inputs reduced into @p s->acc (the first output unless scratch holds it) and
 * delivered to @p out (NULL: every member's output from the first). */
static coll_status_t reduce_to(dev_local_t *s, uint64_t elems, void *out)
{
    coll_op_t *op = s->op;
    coll_status_t st;

    if (coll_devc_wide(op) || op->desc.coll == COLL_KIND_REDUCE_SCATTER) {
        if ((st = coll_devc_scratch(&s->ln, op, elems, &s->scratch, &s->acc)) != COLL_OK) {
            return st;
        }
    }
    if ((st = coll_devc_reduce_locals(&s->ln, op, elems, s->acc)) != COLL_OK) {
        return st;
    }
    if (op->desc.coll == COLL_KIND_REDUCE_SCATTER) {
        return coll_devc_deliver_blocks(&s->ln, op, s->acc);
    }
    return coll_devc_deliver(&s->ln, op, out, s->acc, elems);
}

/* Queue @p s's work on the stream. */
static coll_status_t queue(dev_local_t *s)
{
    coll_op_t *op = s->op;
    const coll_group_t *grp = op->grp;
    uint64_t cnt = op->desc.count;
    size_t len = cnt * op->esize;
    uint32_t root = grp->rank_local[op->desc.root];
    coll_status_t st = COLL_OK;

    switch (op->desc.coll) {
    case COLL_KIND_REDUCE:
        s->acc = op->out[root];
        return reduce_to(s, cnt, op->out[root]);
    case COLL_KIND_REDUCE_SCATTER: return reduce_to(s, cnt * grp->size, NULL);
    case COLL_KIND_BROADCAST:
        for (uint32_t l = 0; l < grp->nlocal && st == COLL_OK; l++) {
            st = coll_devc_copy(&s->ln, op->out[l], op->in[root], len);
        }
        return st;
    case COLL_KIND_ALLGATHER:
        for (uint32_t m = 0; m < grp->nlocal && st == COLL_OK; m++) {
            st = coll_devc_copy(&s->ln, (uint8_t *)op->out[0] +
                                            coll_group_rank_of_local(grp, m) * len,
                                op->in[m], len);
        }
        len *= grp->size;
        break;
    default:
        s->acc = op->out[0];
        st = reduce_to(s, cnt, op->out[0]);
        break;
    }
    for (uint32_t l = 1; l < grp->nlocal && st == COLL_OK; l++) {
        st = coll_devc_copy(&s->ln, op->out[l], op->out[0], len);
    }
    return st;
}

/* The loop's poll of the event: the ranks are told once the work completed. */
static void tick(uv_timer_t *t)
{
    dev_local_t *s = t->data;
    coll_status_t st = s->ln.dev->event_query(s->poll->event);

    if (st == COLL_INPROGRESS) {
        return;
    }
    uv_timer_stop(t);
    s->pending = 0;
    coll_dev_scratch_free(&s->scratch); /* the event covers the work on it */
    if (st != COLL_OK) {
        coll_device_fault(s->ln.device, s->ln.ctx.device, coll_dev_error());
        fail(s->op, st, "the work on the stream failed", coll_dev_error());
        return;
    }
    coll_op_algo_done(s->op);
}

/* The lane of @p op: the stream of its one device pool, or of its first member's where the
 * members are in pools of several devices that are peers (device+peers). */
static coll_status_t lane(coll_op_t *op, dev_local_t *s)
{
    uint32_t pool = coll_devc_lane_pool(op);
    coll_devices_t *ds = &op->job->d->devices;
    coll_dev_stream_t(*streams)[2];
    coll_dev_pool_t *dp;
    coll_status_t st;
    char err[200];

    COLL_ASSERT(pool != 0 && ds->exec != NULL); /* coll_algo_impl(), device_runs() */
    dp = s->dp = op->job->dev_pools[pool - 1];
    if (coll_dev_pool_streams(ds->ops, dp, &streams, err, sizeof(err)) != COLL_OK) {
        return fail(op, COLL_ERR_IO, "no stream", err);
    }
    s->ln = (coll_devc_lane_t){
        .dev = ds->ops, .ex = ds->exec,
        .ctx = {.device = dp->device, .stream = streams[COLL_DEV_POOL_IN][0]},
        .device = &ds->dev[dp->device]};
    if ((st = coll_dev_pool_poll_get(ds->ops, op->job->d->loop, dp, &s->poll)) != COLL_OK) {
        return fail(op, st, "no event", coll_dev_error());
    }
    s->poll->timer->data = s;
    return COLL_INPROGRESS;
}

/* Queue the work on the lane's stream and the event after it, which the loop polls. Failures
 * fail the job itself, saying why. */
static void run(dev_local_t *s)
{
    coll_status_t st;

    s->pending = 1;
    if ((st = queue(s)) != COLL_OK ||
        (st = s->ln.dev->event_record(s->poll->event, s->ln.ctx.stream)) != COLL_OK) {
        fail(s->op, st, "queueing the work", coll_dev_error());
        return;
    }
    uv_timer_start(s->poll->timer, tick, POLL_MS, POLL_MS);
}

/* The loop's poll of the ranks' ready words where the device layer refused to wait for them. */
static void words_tick(uv_timer_t *t)
{
    dev_local_t *s = t->data;

    if (coll_dev_sync_ready(s->op)) {
        uv_timer_stop(t);
        run(s);
    }
}

/* The ranks' ready words are not all there: the lane becomes a stream of the operation's own
 * that waits on the device for them. @return COLL_OK (the work may be queued now);
 * COLL_ERR_UNSUPPORTED where the device layer refuses the waits (poll the words first); another
 * status: the job failed. */
static coll_status_t gate(dev_local_t *s)
{
    char err[320] = "";
    const char *what = "";
    coll_status_t st = coll_devw_gate(s->op, s->dp, s->ln.ctx.device, &s->own, &what, err,
                                      sizeof(err));

    s->ln.ctx.stream = s->own != NULL ? s->own : s->ln.ctx.stream;
    if (st != COLL_OK && st != COLL_ERR_UNSUPPORTED) {
        fail(s->op, st, what, err);
    }
    return st;
}

/* Failures fail the job itself, saying why, and return COLL_OK. */
static coll_status_t dev_local_start(coll_op_t *op)
{
    dev_local_t *s = calloc(1, sizeof(*s));
    coll_status_t st = COLL_OK;

    if (s == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = s;
    s->op = op;
    if (lane(op, s) != COLL_INPROGRESS) {
        return COLL_OK;
    }
    if (op->desc.count == 0) {
        coll_op_algo_done(op);
        return COLL_OK;
    }
    if (!coll_dev_sync_ready(op) && (st = gate(s)) == COLL_ERR_UNSUPPORTED) {
        uv_timer_start(s->poll->timer, words_tick, POLL_MS, POLL_MS);
        return COLL_OK;
    }
    if (st == COLL_OK) {
        run(s);
    }
    return COLL_OK;
}

/* Wait for @p s's work (an operation of @p job) where it may still run, free its scratch, give
 * its stream of its own back to the pool (@p keep: every word its waits were for is there) or
 * destroy it, free it. */
static void release(coll_job_t *job, dev_local_t *s, int keep)
{
    coll_devw_release(job, s->dp, s->ln.ctx.stream, s->pending, &s->scratch, s->own, keep);
    free(s);
}

/* A parked operation's release (coll_dev_sync_park()): the words are stored. */
static void release_parked(coll_job_t *job, void *state)
{
    release(job, state, 0);
}

/* The stream's work is waited for first where it may still run (the job failed meanwhile),
 * unless it still waits on the device for a rank's ready word: then the operation is parked
 * until the job ends here. The poll goes back to the pool for the next operation. */
static void dev_local_cleanup(coll_op_t *op)
{
    dev_local_t *s = op->algo_state;
    int keep;

    if (s == NULL) {
        return;
    }
    op->algo_state = NULL;
    if (s->poll != NULL) {
        coll_dev_pool_poll_put(s->ln.dev, s->dp, s->poll);
    }
    if (!coll_devw_park(op, s->own != NULL, release_parked, s, &keep)) {
        release(op->job, s, keep);
    }
}

const coll_impl_t coll_impl_dev_local = {
    .name = "device+local",
    .start = dev_local_start,
    .cleanup = dev_local_cleanup,
};

const coll_impl_t coll_impl_dev_peers = {
    .name = "device+peers",
    .start = dev_local_start,
    .cleanup = dev_local_cleanup,
};
