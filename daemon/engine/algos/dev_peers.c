/*
 * device+peers split across the devices (coll_impl_dev_peers_split, algos.h): a one-node
 * group's members in pools of several devices that are all peers of each other, each device
 * doing its own members' share on its own stream (coll_dev_pool_streams() of its pool: the
 * first of the copies in, as device+local's), so that every device's links carry a part of the
 * traffic (as NCCL inside a node), where device+peers on one device (dev_local.c) pulls every
 * input over that device's links:
 *
 * - allreduce: the count cut in one block per member (member l's the l-th, the first
 *   count % members blocks one element longer; a block may be empty); member l's device
 *   reduces block l of every input (read from the peers' pools through the daemon's mappings)
 *   into member l's output, through float32 scratch of its own where dev_combine.h does (a
 *   16-bit sum, average or product, rounded once) and finished as there (an average divided
 *   once); an event recorded after its device's reductions. Then each device's stream waits for
 *   every other device's event (stream_wait(): cuStreamWaitEvent, a device wait, nothing on the
 *   host) and copies the other members' blocks from their outputs into its own members'
 *   (the all-gather of the blocks);
 * - reduce-scatter: member l's device reduces its group rank's block of every input into its
 *   output (finished there); nothing crosses after;
 * - all-gather: member l's device copies its input into its group rank's block of every
 *   output; nothing is combined.
 *
 * Each device's last work is followed by an event of its pool's polls
 * (coll_dev_pool_poll_get()); one timer of the loop (every POLL_MS) queries those not yet
 * seen complete, and the operation completes once all were; any device's error (a fault) fails
 * the job, that device marked faulted (coll_device_fault()), as device+local's. Where the
 * ranks' ready words (docs/gpu.md, "Streams") are not all there when it starts, each lane's
 * work goes on a stream of its own of its device's pool instead, queued at once behind device
 * waits for every rank's word (dev_wait.h, as device+local's): each lane reads every rank's
 * input (allreduce, reduce-scatter) or writes every rank's output (all-gather), and a word
 * covers both, so each waits for all the words on its own device rather than behind one gate
 * stream's event (one more cross-device hop before any work); the cross-device waits before the
 * gather then hold behind the other lanes' word waits on the devices (the fake holds them as
 * CUDA does, device/dev_fake_events.c). The loop polls the words first only where the device
 * layer refuses the waits. Freed while a lane's work still waits for a word (its job failed),
 * the operation is parked until the job ends on the node (coll_dev_sync_park()); its streams
 * are then destroyed, or given back where every word came.
 *
 * The choice (coll_dev_peers_splits(), engine/algo.c): these three collectives, every pair of
 * the members' devices peers both ways, a whole vector (an allreduce's count, a
 * reduce-scatter's input or an all-gather's output) of at least device_peers_split_min
 * elements (the
 * configuration: below it one device's single launch and copies, dev_local.c, cost less than a
 * launch and the cross-device waits on each device; the default, 262144, is an estimate: the
 * fake device layer that the tests run on cannot measure the crossover of a real machine).
 * Reduce and broadcast stay on one device (dev_local.c): one output or one input, nothing to
 * split.
 */
#include <stdlib.h>

#include "common/assert.h"
#include "core/dev_pools.h"
#include "engine/algos/algos.h"
#include "engine/algos/dev_combine.h"
#include "engine/algos/dev_wait.h"

/* How often the loop polls the events, ms. */
#define POLL_MS 1

/* One device's share: its lane, its pool's polls, its scratch. */
typedef struct {
    coll_devc_lane_t ln;
    coll_dev_pool_t *dp;
    coll_dev_poll_t *reduced;   /* its event recorded after its reductions (allreduce) */
    coll_dev_poll_t *done;      /* its event recorded after all its work; NULL until taken */
    coll_dev_scratch_t scratch; /* a wide reduction's, its members' blocks end to end */
    coll_dev_stream_t own;      /* its stream where the ranks' ready words were not all there
                                   at start (its device waits hold the work), else NULL */
    int pending;                /* work queued and not seen complete */
} peer_lane_t;

/* An operation's state. */
typedef struct {
    coll_op_t *op;
    uint32_t nlanes;
    peer_lane_t lanes[COLL_DEV_MAX];
    uint8_t lane_of[COLL_COMBINE_MAX_SRC]; /* by local member: its device's lane */
    int polling; /* the loop polls the ready words first (the device layer refused the waits) */
    int waits;   /* a lane took a stream of its own (coll_devw_gate()) */
} dev_peers_t;

int coll_dev_peers_splits(const coll_op_t *op)
{
    const coll_dev_pool_t *const *pools = (const coll_dev_pool_t *const *)op->job->dev_pools;
    int ar = op->desc.coll == COLL_KIND_ALLREDUCE;
    uint64_t whole = ar ? op->desc.count : op->desc.count * op->grp->size;

    if ((!ar && op->desc.coll != COLL_KIND_REDUCE_SCATTER &&
         op->desc.coll != COLL_KIND_ALLGATHER) ||
        op->nbufs != op->grp->nlocal || op->nbufs > COLL_COMBINE_MAX_SRC ||
        whole < op->job->d->cfg.device_peers_split_min) {
        return 0;
    }
    for (uint32_t a = 0; a < op->nbufs; a++) {
        for (uint32_t b = 0; b < op->nbufs; b++) {
            uint32_t p = op->members[a].pool, q = op->members[b].pool;
            if (p == 0 || q == 0 || p > COLL_DEV_MAX || q > COLL_DEV_MAX ||
                pools[q - 1] == NULL ||
                (p != q && !(pools[q - 1]->peers & (1u << (p - 1))))) {
                return 0;
            }
        }
    }
    return 1;
}

/* Fail @p op's job: @p what went wrong on a device, @p why in the device layer's words.
 * @return COLL_OK: the job's failure completed the operation. */
static coll_status_t fail(coll_op_t *op, coll_status_t st, const char *what, const char *why)
{
    coll_job_fail(op->job, st, 1, "job %s: the %s on the devices (%s), on node %u: %s: %s",
                  op->job->id, coll_kind_name((coll_kind_t)op->desc.coll), op->impl->name,
                  op->job->node_rank, what, why);
    return COLL_OK;
}

/* Member @p l's block of an allreduce of @p cnt elements among @p n: its first element into
 * *@p off_p, its length returned. */
static uint64_t block_of(uint64_t cnt, uint32_t n, uint32_t l, uint64_t *off_p)
{
    uint64_t base = cnt / n, rem = cnt % n;

    *off_p = l * base + (l < rem ? l : rem);
    return base + (l < rem ? 1 : 0);
}

/* Find or make @p s's lane for device pool @p pool (a lane per device, in the members' order). */
static coll_status_t lane_for(dev_peers_t *s, uint32_t pool, uint8_t *lane_p)
{
    coll_op_t *op = s->op;
    coll_devices_t *ds = &op->job->d->devices;
    coll_dev_stream_t(*streams)[2];
    coll_dev_pool_t *dp = op->job->dev_pools[pool - 1];
    peer_lane_t *pl;
    coll_status_t st;
    char err[200];

    for (uint32_t k = 0; k < s->nlanes; k++) {
        if (s->lanes[k].dp == dp) {
            *lane_p = (uint8_t)k;
            return COLL_OK;
        }
    }
    pl = &s->lanes[s->nlanes];
    if (coll_dev_pool_streams(ds->ops, dp, &streams, err, sizeof(err)) != COLL_OK) {
        fail(op, COLL_ERR_IO, "no stream", err);
        return COLL_ERR_IO;
    }
    pl->dp = dp;
    pl->ln = (coll_devc_lane_t){
        .dev = ds->ops, .ex = ds->exec,
        .ctx = {.device = dp->device, .stream = streams[COLL_DEV_POOL_IN][0]},
        .device = &ds->dev[dp->device]};
    *lane_p = (uint8_t)s->nlanes++;
    if ((st = coll_dev_pool_poll_get(ds->ops, op->job->d->loop, dp, &pl->done)) != COLL_OK ||
        (op->desc.coll == COLL_KIND_ALLREDUCE &&
         (st = coll_dev_pool_poll_get(ds->ops, op->job->d->loop, dp, &pl->reduced)) != COLL_OK)) {
        fail(op, st, "no event", coll_dev_error());
        return st;
    }
    return COLL_OK;
}

/* Member @p l's reduction of its block [@p off, @p off + @p len) into its output, through
 * @p acc (its part of the lane's scratch, or the output itself). */
static coll_status_t reduce_block(dev_peers_t *s, uint32_t l, uint64_t off, uint64_t len,
                                  uint64_t in_off, uint8_t *acc)
{
    coll_op_t *op = s->op;
    const coll_devc_lane_t *ln = &s->lanes[s->lane_of[l]].ln;
    uint8_t *dst = (uint8_t *)op->out[l] + off * op->esize;
    coll_status_t st;

    if (len == 0) {
        return COLL_OK;
    }
    if ((st = coll_devc_reduce_span(ln, op, in_off, len, acc != NULL ? acc : dst)) != COLL_OK) {
        return st;
    }
    return coll_devc_deliver(ln, op, dst, acc != NULL ? acc : dst, len);
}

/* Each member's block (its group rank's for a reduce-scatter) reduced on its device; an
 * allreduce's event recorded on each device after. */
static coll_status_t reduce_all(dev_peers_t *s)
{
    coll_op_t *op = s->op;
    uint32_t n = op->nbufs;
    uint64_t cnt = op->desc.count, used[COLL_DEV_MAX] = {0};
    int rs = op->desc.coll == COLL_KIND_REDUCE_SCATTER;
    coll_status_t st;

    for (uint32_t l = 0; l < n; l++) { /* each lane's scratch: its members' blocks */
        uint64_t off;
        used[s->lane_of[l]] += rs ? cnt : block_of(cnt, n, l, &off);
    }
    for (uint32_t k = 0; k < s->nlanes && coll_devc_wide(op); k++) {
        uint8_t *acc;
        if (used[k] > 0 && (st = coll_devc_scratch(&s->lanes[k].ln, op, used[k],
                                                   &s->lanes[k].scratch, &acc)) != COLL_OK) {
            return st;
        }
        used[k] = 0;
    }
    for (uint32_t l = 0; l < n; l++) {
        peer_lane_t *pl = &s->lanes[s->lane_of[l]];
        uint64_t off = 0, len = rs ? cnt : block_of(cnt, n, l, &off);
        uint64_t in_off = rs ? coll_group_rank_of_local(op->grp, l) * cnt : off;
        uint8_t *acc = coll_devc_wide(op) ? (uint8_t *)(uintptr_t)pl->scratch.va +
                                                used[s->lane_of[l]] * sizeof(float)
                                          : NULL;
        used[s->lane_of[l]] += len;
        if ((st = reduce_block(s, l, rs ? 0 : off, len, in_off, acc)) != COLL_OK) {
            return st;
        }
    }
    for (uint32_t k = 0; k < s->nlanes && !rs; k++) {
        peer_lane_t *pl = &s->lanes[k];
        if ((st = pl->ln.dev->event_record(pl->reduced->event, pl->ln.ctx.stream)) != COLL_OK) {
            return st;
        }
    }
    return COLL_OK;
}

/* An allreduce's all-gather of the blocks: each device, once every other device's reductions
 * are done, copies the other members' blocks into its own members' outputs. */
static coll_status_t gather_blocks(dev_peers_t *s)
{
    coll_op_t *op = s->op;
    uint32_t n = op->nbufs;
    coll_status_t st;

    for (uint32_t k = 0; k < s->nlanes; k++) {
        peer_lane_t *pl = &s->lanes[k];
        for (uint32_t o = 0; o < s->nlanes; o++) {
            if (o != k && (st = pl->ln.dev->stream_wait(pl->ln.ctx.stream,
                                                        s->lanes[o].reduced->event)) != COLL_OK) {
                return st;
            }
        }
        for (uint32_t l = 0; l < n; l++) {
            for (uint32_t m = 0; m < n && s->lane_of[l] == k; m++) {
                uint64_t off, len = block_of(op->desc.count, n, m, &off);
                if (m != l && len > 0 &&
                    (st = coll_devc_copy(&pl->ln, (uint8_t *)op->out[l] + off * op->esize,
                                         (const uint8_t *)op->out[m] + off * op->esize,
                                         len * op->esize)) != COLL_OK) {
                    return st;
                }
            }
        }
    }
    return COLL_OK;
}

/* An all-gather: each member's input copied by its device into every output. */
static coll_status_t copy_inputs(dev_peers_t *s)
{
    coll_op_t *op = s->op;
    size_t len = op->desc.count * op->esize;
    coll_status_t st;

    for (uint32_t m = 0; m < op->nbufs; m++) {
        const coll_devc_lane_t *ln = &s->lanes[s->lane_of[m]].ln;
        uint64_t at = coll_group_rank_of_local(op->grp, m) * len;
        for (uint32_t l = 0; l < op->nbufs; l++) {
            if ((st = coll_devc_copy(ln, (uint8_t *)op->out[l] + at, op->in[m], len)) != COLL_OK) {
                return st;
            }
        }
    }
    return COLL_OK;
}

static coll_status_t queue(dev_peers_t *s);

/* The loop's poll of the devices' events: the ranks are told once all completed. First, where
 * the device layer refused the device waits, its poll of the ranks' ready words: the work is
 * queued once they are all there. */
static void tick(uv_timer_t *t)
{
    dev_peers_t *s = t->data;
    coll_status_t st;
    int left = 0;

    if (s->polling && coll_dev_sync_ready(s->op)) {
        s->polling = 0;
        if ((st = queue(s)) != COLL_OK) {
            uv_timer_stop(t);
            fail(s->op, st, "queueing the work", coll_dev_error());
        }
        return;
    }
    if (s->polling) {
        return;
    }
    for (uint32_t k = 0; k < s->nlanes; k++) {
        peer_lane_t *pl = &s->lanes[k];
        st = pl->pending ? pl->ln.dev->event_query(pl->done->event) : COLL_OK;
        if (st == COLL_INPROGRESS) {
            left++;
            continue;
        }
        pl->pending = 0;
        if (st != COLL_OK) {
            uv_timer_stop(t);
            coll_device_fault(pl->ln.device, pl->ln.ctx.device, coll_dev_error());
            fail(s->op, st, "the work on a device's stream failed", coll_dev_error());
            return;
        }
    }
    if (left == 0) {
        uv_timer_stop(t);
        for (uint32_t k = 0; k < s->nlanes; k++) {
            coll_dev_scratch_free(&s->lanes[k].scratch); /* the events cover the work on it */
        }
        coll_op_algo_done(s->op);
    }
}

/* Queue every device's work, each device's done event after it. */
static coll_status_t queue(dev_peers_t *s)
{
    coll_op_t *op = s->op;
    coll_status_t st;

    for (uint32_t k = 0; k < s->nlanes; k++) {
        s->lanes[k].pending = 1;
    }
    if (op->desc.coll == COLL_KIND_ALLGATHER) {
        st = copy_inputs(s);
    } else if ((st = reduce_all(s)) == COLL_OK && op->desc.coll == COLL_KIND_ALLREDUCE) {
        st = gather_blocks(s);
    }
    for (uint32_t k = 0; k < s->nlanes && st == COLL_OK; k++) {
        peer_lane_t *pl = &s->lanes[k];
        st = pl->ln.dev->event_record(pl->done->event, pl->ln.ctx.stream);
    }
    return st;
}

/* The ranks' ready words are not all there: each lane's stream becomes one of its own on its
 * device, waiting on the device for every rank's word (each lane reads every rank's input, or
 * for an all-gather writes every rank's output, and a rank's word covers both). @return COLL_OK
 * (the work may be queued now); COLL_ERR_UNSUPPORTED where the device layer refuses the waits
 * (poll the words first; the lanes after have the pools' streams); another status: the job
 * failed. */
static coll_status_t gate(dev_peers_t *s)
{
    coll_status_t st = COLL_OK;
    char err[320] = "";
    const char *what = "";

    for (uint32_t k = 0; k < s->nlanes && st == COLL_OK; k++) {
        peer_lane_t *pl = &s->lanes[k];
        st = coll_devw_gate(s->op, pl->dp, pl->ln.ctx.device, &pl->own, &what, err, sizeof(err));
        pl->ln.ctx.stream = pl->own != NULL ? pl->own : pl->ln.ctx.stream;
        s->waits |= pl->own != NULL;
    }
    if (st != COLL_OK && st != COLL_ERR_UNSUPPORTED) {
        fail(s->op, st, what, err);
    }
    return st;
}

/* Failures fail the job itself, saying why, and return COLL_OK. */
static coll_status_t dev_peers_start(coll_op_t *op)
{
    dev_peers_t *s = calloc(1, sizeof(*s));
    coll_status_t st;

    if (s == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = s;
    s->op = op;
    COLL_ASSERT(op->job->d->devices.exec != NULL); /* coll_algo_impl(), device_runs() */
    for (uint32_t l = 0; l < op->nbufs; l++) {
        if (lane_for(s, op->members[l].pool, &s->lane_of[l]) != COLL_OK) {
            return COLL_OK;
        }
    }
    if (op->desc.count == 0) {
        coll_op_algo_done(op);
        return COLL_OK;
    }
    if (!coll_dev_sync_ready(op) && (st = gate(s)) != COLL_OK) {
        if (st != COLL_ERR_UNSUPPORTED) {
            return COLL_OK;
        }
        s->polling = 1;
    } else if ((st = queue(s)) != COLL_OK) {
        return fail(op, st, "queueing the work", coll_dev_error());
    }
    s->lanes[0].done->timer->data = s;
    uv_timer_start(s->lanes[0].done->timer, tick, POLL_MS, POLL_MS);
    return COLL_OK;
}

/* Wait for each device's work (of an operation of @p job) where it may still run, free its
 * scratch, give its stream of its own back to its pool (@p keep: every word its waits were
 * for is there) or destroy it, free @p s. */
static void release(coll_job_t *job, dev_peers_t *s, int keep)
{
    for (uint32_t k = 0; k < s->nlanes; k++) {
        peer_lane_t *pl = &s->lanes[k];
        coll_devw_release(job, pl->dp, pl->ln.ctx.stream, pl->pending, &pl->scratch, pl->own,
                          keep);
    }
    free(s);
}

/* A parked operation's release (coll_dev_sync_park()): the words are stored. */
static void release_parked(coll_job_t *job, void *state)
{
    release(job, state, 0);
}

/* Each device's work is waited for first where it may still run (the job failed meanwhile),
 * unless a lane's still waits on the device for a rank's ready word: then the operation is
 * parked until the job ends here (dev_wait.h). The polls go back to their pools. */
static void dev_peers_cleanup(coll_op_t *op)
{
    dev_peers_t *s = op->algo_state;
    int keep;

    if (s == NULL) {
        return;
    }
    op->algo_state = NULL;
    for (uint32_t k = 0; k < s->nlanes; k++) {
        peer_lane_t *pl = &s->lanes[k];
        coll_dev_pool_poll_put(pl->ln.dev, pl->dp, pl->done); /* its timer stopped */
        coll_dev_pool_poll_put(pl->ln.dev, pl->dp, pl->reduced);
    }
    if (!coll_devw_park(op, s->waits, release_parked, s, &keep)) {
        release(op->job, s, keep);
    }
}

const coll_impl_t coll_impl_dev_peers_split = {
    .name = "device+peers",
    .start = dev_peers_start,
    .cleanup = dev_peers_cleanup,
};
