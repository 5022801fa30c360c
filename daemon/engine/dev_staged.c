/*
 * The staged path (staged.h): device buffers get host copies when the operation starts, the
 * host algorithm runs on them, and the results go back before the ranks are told. A member's
 * input and output that overlap (the in-place layouts) share one host copy of their union, so
 * the algorithm sees the same layout as on host memory. The host copies are page-locked, so the
 * device copies them without a bounce through the driver's own buffers; they come from the
 * daemon's cache of such buffers (core/dev_pinned.h), as locking memory takes the driver
 * milliseconds, and go back to it when the operation is freed, whatever its end. Where the
 * driver refuses to lock more, ordinary memory serves, counted per device and logged the first
 * time. A large ring allreduce, and a large allreduce, reduce or broadcast on one node, copy
 * batch by batch while the algorithm runs (dev_staged_pipe.c).
 */
#include "engine/dev_staged.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "common/assert.h"
#include "core/dev_pools.h"
#include "engine/algo.h"
#include "engine/algos/algos.h"
#include "engine/algos/dev_combine.h"
#include "engine/dev_staged_state.h"
#include "engine/dev_sync.h"

/* Host copies are aligned as the kernels' vectors want them. */
#define HOST_ALIGN 64
/* How often the loop polls the copies' events while they are in flight, ms (as the NCCL
 * path's poll: one query per event, far inside the loop watch's bounds). */
#define POLL_MS 1

int coll_dev_staged_runs(unsigned kind, unsigned compression)
{
    return kind == COLL_KIND_ALLREDUCE || kind == COLL_KIND_PS_STEP ||
           (compression == 0 && (kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALLGATHER ||
                                 kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE ||
                                 kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER ||
                                 kind == COLL_KIND_SEND || kind == COLL_KIND_RECV ||
                                 kind == COLL_KIND_ALLTOALLV));
}

/* Local members whose buffers are in a device pool (every pool but the host's, 0). */
static uint32_t device_members(const coll_op_t *op)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < op->nbufs; i++) {
        n += op->members[i].pool != 0;
    }
    return n;
}

coll_status_t coll__staged_fail(coll_op_t *op, coll_status_t st, const char *what,
                                const char *why)
{
    char nm[64];

    coll_job_fail(op->job, st, 1, "job %s: %s on node %u: the staged path %s: %s", op->job->id,
                  coll__op_name(op, nm, sizeof(nm)), op->job->node_rank, what, why);
    return st;
}

/* @p p's host copy of @p bytes: page-locked, else ordinary memory (counted, and logged the
 * first time on its device). @return COLL_OK or COLL_ERR_NOMEM. */
static coll_status_t host_copy(coll_op_t *op, span_t *p, size_t bytes)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_device_t *dv = &ds->dev[p->device];
    void *host = NULL;

    if (coll_pinned_take(&ds->pinned, p->device, bytes, &host, &p->pinned) == COLL_OK) {
        p->host = host;
        return COLL_OK;
    }
    if (dv->staged_unpinned++ == 0) {
        coll_warn(COLL_SUB_ENGINE, "device %d: the staged path's host copies are not page-locked "
                  "(slower copies): %s", p->device, coll_dev_error());
    }
    p->host = aligned_alloc(HOST_ALIGN, bytes);
    return p->host != NULL ? COLL_OK : COLL_ERR_NOMEM;
}

/* A new span of device pool @p pool (its id) covering device bytes [@p lo, @p hi), its host copy
 * allocated. */
static coll_status_t add_span(coll_op_t *op, staged_t *sg, uint32_t pool, uint64_t lo,
                              uint64_t hi, span_t **p_p)
{
    coll_dev_pool_t *dp = op->job->dev_pools[pool - 1];
    span_t *p = &sg->span[sg->nspans];
    size_t bytes = (size_t)((hi - lo + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN);
    char err[200];
    coll_status_t st = coll_dev_pool_streams(op->job->d->devices.ops, dp, &p->streams, err,
                                             sizeof(err));

    if (st != COLL_OK) {
        return coll__staged_fail(op, st, "has no stream", err);
    }
    p->device = dp->device;
    if (host_copy(op, p, bytes) != COLL_OK) {
        return coll__staged_fail(op, COLL_ERR_NOMEM, "has no host copy", "daemon out of memory");
    }
    sg->nspans++;
    p->dev = lo;
    for (int k = 0; k < 2 && st == COLL_OK; k++) {
        st = op->job->d->devices.ops->event_create(p->device, &p->ev[k]);
    }
    if (st != COLL_OK) {
        return coll__staged_fail(op, st, "has no event", coll_dev_error());
    }
    *p_p = p;
    return COLL_OK;
}

/* The ranges of @p who's output copied back into span @p q, whose byte @p at is the output's
 * first. @return COLL_OK or COLL_ERR_NOMEM (an all-to-all's blocks). */
static coll_status_t out_ranges(span_t *q, const coll_dev_staged_member_t *who, uint64_t at)
{
    q->out = who->kind == COLL_KIND_ALLTOALLV ? malloc(who->world * sizeof(*q->out)) : &q->one;
    if (q->out == NULL) {
        return COLL_ERR_NOMEM;
    }
    q->nout = coll_dev_staged_out_ranges(who, q->out);
    for (uint32_t k = 0; k < q->nout; k++) {
        q->out[k].off += at;
    }
    return COLL_OK;
}

/* The spans of buffer @p b (op->in[b], op->out[b]) of member @p m, of rank @p rank: one for
 * input and output when they overlap (the in-place layouts), else one for each; the buffers
 * become their host copies. */
static coll_status_t member_spans(coll_op_t *op, staged_t *sg, uint32_t b,
                                  const coll_op_member_t *m, uint32_t rank)
{
    coll_dev_staged_member_t who = {(coll_kind_t)op->desc.coll, op->desc.count, op->esize,
                                    op->grp->size, rank, op->desc.root, m->table};
    uint64_t se, re, in = (uint64_t)(uintptr_t)op->in[b], out = (uint64_t)(uintptr_t)op->out[b];
    span_t *p = NULL, *q = NULL;
    coll_status_t st = COLL_OK;

    coll_dev_staged_extent(&who, &se, &re);
    se = in != 0 ? se : 0;
    re = out != 0 ? re : 0;
    if (se > 0 && re > 0 && in < out + re && out < in + se) {
        st = add_span(op, sg, m->pool, in < out ? in : out,
                      in + se > out + re ? in + se : out + re, &p);
        q = p;
    } else {
        st = se > 0 ? add_span(op, sg, m->pool, in, in + se, &p) : COLL_OK;
        st = st == COLL_OK && re > 0 ? add_span(op, sg, m->pool, out, out + re, &q) : st;
    }
    if (st == COLL_OK && se > 0) {
        p->in_off = in - p->dev;
        p->in_len = se;
        op->in[b] = p->host + p->in_off;
    }
    if (st == COLL_OK && re > 0) {
        if (out_ranges(q, &who, out - q->dev) != COLL_OK) {
            return coll__staged_fail(op, COLL_ERR_NOMEM, "has no state", "daemon out of memory");
        }
        op->out[b] = q->host + (out - q->dev);
        if (b == 0 && op->desc.coll == COLL_KIND_PS_STEP) {
            /* The service reads the master weights from the first local member's output
             * (ps/update.c) before it writes every member's: copied in as well. */
            q->in_off = out - q->dev;
            q->in_len = re;
        }
    }
    return st;
}

/* Bytes the copies in (@p in) or back move. */
static uint64_t to_copy(const staged_t *sg, int in)
{
    uint64_t n = 0;

    for (uint32_t k = 0; k < sg->nspans; k++) {
        const span_t *p = &sg->span[k];
        n += in ? p->in_len : 0;
        for (uint32_t r = 0; !in && r < p->nout; r++) {
            n += p->out[r].len;
        }
    }
    return n;
}

coll_status_t coll__staged_queue(coll_devices_t *ds, span_t *p, int in, uint64_t off,
                                 uint64_t len, unsigned *turn)
{
    uint64_t host = (uint64_t)(uintptr_t)(p->host + off), dev = p->dev + off;
    coll_status_t st = coll_dev_staged_queue(ds->ops, span_pair(p, in), in ? host : dev,
                                             in ? dev : host, len, COLL_DEV_STAGED_CHUNK_BYTES,
                                             turn);

    ds->dev[p->device].staged_bytes += st == COLL_OK ? len : 0;
    return st;
}

/* Record each span's events after the copies in (@p in) or back queued so far, on the pair of
 * streams they went on. */
static coll_status_t record(coll_op_t *op, staged_t *sg, int in)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_status_t st = COLL_OK;

    sg->in = in;
    sg->inflight = 1;
    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        for (int s = 0; s < 2 && st == COLL_OK; s++) {
            st = ds->ops->event_record(sg->span[k].ev[s], span_pair(&sg->span[k], in)[s]);
        }
    }
    return st;
}

/* Queue the copy of every span's input to its host copy (@p in) or of its host copy's output
 * back, then record each span's events after them. */
static coll_status_t copy(coll_op_t *op, staged_t *sg, int in)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_status_t st = COLL_OK;

    sg->inflight = 1;
    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        span_t *p = &sg->span[k];
        unsigned turn = 0;
        if (in && p->in_len > 0) {
            st = coll__staged_queue(ds, p, 1, p->in_off, p->in_len, &turn);
        }
        for (uint32_t r = 0; !in && r < p->nout && st == COLL_OK; r++) {
            turn = 0;
            st = coll__staged_queue(ds, p, 0, p->out[r].off, p->out[r].len, &turn);
        }
    }
    return st == COLL_OK ? record(op, sg, in) : st;
}

/* @return COLL_OK when every event of the copies completed, COLL_INPROGRESS while one has not,
 *         or the device layer's error. */
static coll_status_t query(const coll_op_t *op, staged_t *sg)
{
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    coll_status_t st = COLL_OK, q;

    for (uint32_t k = 0; k < sg->nspans; k++) {
        for (int s = 0; s < 2; s++) {
            if ((q = ops->event_query(sg->span[k].ev[s])) != COLL_OK && q != COLL_INPROGRESS) {
                return coll__staged_fault(op, &sg->span[k], q);
            }
            st = q != COLL_OK ? q : st;
        }
    }
    sg->inflight = st == COLL_INPROGRESS;
    return st;
}

coll_status_t coll__staged_fault(const coll_op_t *op, const span_t *p, coll_status_t q)
{
    coll_devices_t *ds = &op->job->d->devices;

    coll_device_fault(&ds->dev[p->device], p->device, coll_dev_error());
    return q;
}

static void tick(uv_timer_t *t);

/* The loop polls (tick()) every POLL_MS. @return COLL_INPROGRESS, or COLL_ERR_NOMEM. */
coll_status_t coll__staged_poll_start(coll_op_t *op, staged_t *sg)
{
    if (sg->timer == NULL) {
        if ((sg->timer = calloc(1, sizeof(*sg->timer))) == NULL) {
            return COLL_ERR_NOMEM;
        }
        uv_timer_init(op->job->d->loop, sg->timer);
        sg->timer->data = sg;
    }
    uv_timer_start(sg->timer, tick, POLL_MS, POLL_MS);
    return COLL_INPROGRESS;
}

/* The copies just queued: COLL_OK when they are done already (a device as fast as the fake's),
 * else COLL_INPROGRESS with the loop polling them, or the error. */
static coll_status_t settle(coll_op_t *op, staged_t *sg)
{
    coll_status_t st = query(op, sg);

    return st == COLL_INPROGRESS ? coll__staged_poll_start(op, sg) : st;
}

/* Queue the copies in. @return COLL_OK when there is nothing to copy in (a receive), the
 * copies are done already or the operation is pipelined (it starts at once), COLL_INPROGRESS
 * while they are in flight (sg->ready() follows), or the error with which the job failed. */
static coll_status_t copy_in(coll_op_t *op, staged_t *sg)
{
    coll_status_t st;

    if (sg->pipe) {
        return coll__staged_pipe_in(op, sg);
    }
    if (to_copy(sg, 1) == 0) {
        return COLL_OK;
    }
    if ((st = copy(op, sg, 1)) == COLL_OK) {
        st = settle(op, sg);
    }
    return st == COLL_OK || st == COLL_INPROGRESS ? st
                                                  : coll__staged_fail(op, st, "could not copy "
                                                                      "the device buffers in",
                                                                      coll_dev_error());
}

/* The ranks' streams wrote their ready words: the copies in, then sg->ready(). */
static void streams_ready(coll_op_t *op, staged_t *sg)
{
    sg->streams = 0;
    uv_timer_stop(sg->timer);
    coll_op_hold(op);
    if (copy_in(op, sg) == COLL_OK && !op->done) {
        sg->ready(op);
    }
    coll_op_release(op);
}

/* The loop's poll of the copies in flight: once their events completed, the operation starts
 * (copies in) or its ranks are told (copies back); a failed copy fails the job. */
static void tick(uv_timer_t *t)
{
    staged_t *sg = t->data;
    coll_op_t *op = sg->op;
    coll_status_t st;

    if (sg->streams) {
        if (op->done) { /* the job failed meanwhile */
            uv_timer_stop(t);
        } else if (coll_dev_sync_ready(op)) {
            streams_ready(op, sg);
        }
        return;
    }
    if (sg->pipe_in) {
        coll__staged_pipe_tick(op, sg);
        return;
    }
    if ((st = query(op, sg)) == COLL_INPROGRESS) {
        return;
    }
    uv_timer_stop(t);
    coll_op_hold(op); /* a failure frees the state otherwise */
    if (sg->in) {
        if (st != COLL_OK) {
            coll__staged_fail(op, st, "could not copy the device buffers in", coll_dev_error());
        } else if (!op->done) { /* the job may have failed meanwhile */
            sg->ready(op);
        }
    } else {
        if (st != COLL_OK) {
            coll__staged_fail(op, st, "could not copy the results back", coll_dev_error());
        }
        coll_op_finished(op, st);
    }
    coll_op_release(op);
}

/* One more staged operation on each device it copied from. */
static void count(coll_op_t *op, const staged_t *sg)
{
    uint32_t seen = 0;

    for (uint32_t k = 0; k < sg->nspans; k++) {
        if (!(seen & (1u << sg->span[k].device))) {
            seen |= 1u << sg->span[k].device;
            op->job->d->devices.dev[sg->span[k].device].staged_ops++;
        }
    }
}

/* The implementation the table or compression chose, renamed "staged+<its name>", or
 * "staged+pipelined+<its name>" where the copies overlap it (coll__staged_pipe_setup()).
 * @return COLL_OK, or the error with which the job failed. */
static coll_status_t wrap(coll_op_t *op, staged_t *sg)
{
    const coll_impl_t *inner = op->impl != NULL ? op->impl : coll_algo_impl(op);

    sg->impl = *inner;
    snprintf(sg->name, sizeof(sg->name), "staged+%s", inner->name);
    sg->impl.name = sg->name;
    op->impl = &sg->impl;
    return coll__staged_pipe_setup(op, sg, inner);
}

/* The ranks' streams have not all written their ready words: give each span a pair of streams
 * of its own for its copies in (idle ones its pool kept, else new ones) and make them wait on
 * the device for the words, so the copies can be queued now and start the moment the words are
 * there, holding no other operation's copies meanwhile (a rank's word may wait for another
 * operation of the job). @return COLL_OK; COLL_ERR_UNSUPPORTED where the device layer refuses
 * the waits (the caller polls the words); the error with which the job failed. */
static coll_status_t gate(coll_op_t *op, staged_t *sg)
{
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    coll_status_t st = COLL_OK;
    char err[320] = "";

    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        span_t *p = &sg->span[k];
        for (int s = 0; s < 2 && st == COLL_OK; s++) {
            p->own[COLL_DEV_POOL_BACK][s] = p->streams[COLL_DEV_POOL_BACK][s];
            st = coll_dev_pool_wait_get(ops, op->job->dev_pools[p->device],
                                        &p->own[COLL_DEV_POOL_IN][s]);
        }
        p->streams = p->own;
        if (st != COLL_OK) {
            return coll__staged_fail(op, st, "has no stream to wait for the ranks' streams on",
                                     coll_dev_error());
        }
    }
    sg->waited = 1; /* (some waits may be queued, even where the layer refuses one) */
    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        st = coll_dev_sync_device_wait(op, sg->span[k].device, sg->span[k].own[COLL_DEV_POOL_IN],
                                       2, err, sizeof(err));
    }
    return st == COLL_OK || st == COLL_ERR_UNSUPPORTED
               ? st
               : coll__staged_fail(op, st, "could not wait for the ranks' streams", err);
}

/* The spans of @p sg are set: count the operation, name it, and queue the copies in: at once
 * where the ranks' streams wrote their ready words (or none asked) or the copies wait for them
 * on the device (gate()), else once the loop's poll sees the words. @return COLL_OK when
 * nothing is to be copied in or the copies are done already, COLL_INPROGRESS while the loop
 * waits for the streams or the copies (sg->ready() follows), or the error with which the job
 * failed. */
static coll_status_t stage(coll_op_t *op, staged_t *sg)
{
    coll_status_t st;

    count(op, sg);
    if ((st = wrap(op, sg)) != COLL_OK) {
        return st;
    }
    if (coll_dev_sync_ready(op)) {
        return copy_in(op, sg);
    }
    /* Only copies in are held on the device here: an operation with none (a receive) polls
     * the words, as one where the device layer has no waits does. */
    st = to_copy(sg, 1) > 0 ? gate(op, sg) : COLL_ERR_UNSUPPORTED;
    if (st != COLL_OK) {
        if (st != COLL_ERR_UNSUPPORTED) {
            return st;
        }
        sg->streams = 1;
        return coll__staged_poll_start(op, sg);
    }
    return copy_in(op, sg);
}

/* The state of @p op's staging, room for @p nspans spans; NULL after failing the job. */
static staged_t *state_new(coll_op_t *op, uint32_t nspans, void (*ready)(coll_op_t *op))
{
    staged_t *sg = calloc(1, sizeof(*sg) + nspans * sizeof(span_t));

    if (sg == NULL) {
        coll__staged_fail(op, COLL_ERR_NOMEM, "has no state", "daemon out of memory");
        return NULL;
    }
    sg->op = op;
    sg->ready = ready;
    return sg;
}

/* @p op runs on the device buffers themselves (NCCL, or the executor on one node where every
 * member is in one device pool or in pools its first member's device reaches,
 * coll_algo_impl()): nothing is copied, its ranks' streams are only waited for. */
static int on_device(const coll_op_t *op)
{
    return op->desc.algo == COLL_ALGO_NCCL ||
           (op->desc.algo == COLL_ALGO_DEVICE && coll_devc_lane_pool(op) != 0);
}

static coll_status_t staged_attach(coll_op_t *op, void **state)
{
    uint32_t n = device_members(op);
    staged_t *sg;
    coll_status_t st = COLL_OK;

    if (n == 0 || on_device(op)) {
        return COLL_OK; /* NCCL or the executor works on the device buffers, waiting on the
                           device for the ranks' ready words itself (algos/nccl.c,
                           algos/dev_wait.h) */
    }
    if ((sg = state_new(op, 2 * n, coll_op_attached)) == NULL) {
        return COLL_ERR_NOMEM;
    }
    *state = sg;
    for (uint32_t i = 0; i < op->nbufs && st == COLL_OK; i++) {
        st = op->members[i].pool != 0
                 ? member_spans(op, sg, i, &op->members[i], coll_group_rank_of_local(op->grp, i))
                 : COLL_OK;
    }
    return st == COLL_OK ? stage(op, sg) : st;
}

coll_status_t coll_dev_staged_p2p(coll_op_t *op, const coll_op_member_t *m,
                                  void (*ready)(coll_op_t *op))
{
    staged_t *sg = state_new(op, 1, ready);
    coll_status_t st;

    if (sg == NULL) {
        return COLL_ERR_NOMEM;
    }
    coll_op_feature_attach(op, &coll_dev_staged_feature, sg);
    st = member_spans(op, sg, 0, m, op->desc.first_rank);
    return st == COLL_OK ? stage(op, sg) : st;
}

static coll_status_t staged_finish(coll_op_t *op, void *state)
{
    coll_status_t st;

    if (to_copy(state, 0) == 0) { /* a send, a reduce's or a gather's other ranks */
        return COLL_OK;
    }
    /* Pipelined, every batch's copies back are queued already (pipe_final()): the algorithm
     * finished the last batch's columns, which it started only once every batch was in. */
    COLL_ASSERT(!((staged_t *)state)->pipe_in);
    st = ((staged_t *)state)->pipe ? record(op, state, 0) : copy(op, state, 0);

    if (st == COLL_OK) {
        st = settle(op, state);
    }
    return st == COLL_OK || st == COLL_INPROGRESS
               ? st
               : coll__staged_fail(op, st, "could not copy the results back", coll_dev_error());
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

/* Give @p p's streams of its own back to its pool where @p keep (every word they waited for is
 * stored and their copies are done), else destroy them. */
static void own_streams_end(coll_job_t *job, span_t *p, int keep)
{
    const coll_dev_ops_t *ops = job->d->devices.ops;

    for (int s = 0; s < 2; s++) {
        if (keep) {
            coll_dev_pool_wait_put(&job->d->devices, job->dev_pools[p->device],
                                   p->own[COLL_DEV_POOL_IN][s]);
        } else if (p->own[COLL_DEV_POOL_IN][s] != NULL) {
            ops->stream_destroy(p->own[COLL_DEV_POOL_IN][s]);
        }
    }
}

/* Wait for the spans' streams where copies are in flight, give the streams of their own back
 * to their pools (@p keep, see own_streams_end()) or destroy them, give the host copies back,
 * free @p sg, an operation of @p job. */
static void release(coll_job_t *job, staged_t *sg, int keep)
{
    coll_devices_t *ds = &job->d->devices;
    const coll_dev_ops_t *ops = ds->ops;

    for (uint32_t k = 0; k < sg->nspans; k++) {
        span_t *p = &sg->span[k];
        if (sg->inflight) {
            coll_dev_staged_wait(ops, p->streams[COLL_DEV_POOL_IN]);
            coll_dev_staged_wait(ops, p->streams[COLL_DEV_POOL_BACK]);
        }
        if (p->streams == p->own) {
            own_streams_end(job, p, keep);
        }
        if (p->out != &p->one) {
            free(p->out);
        }
        ops->event_destroy(p->ev[0]);
        ops->event_destroy(p->ev[1]);
        if (p->pinned > 0) {
            coll_pinned_give(&ds->pinned, p->device, p->host, p->pinned);
        } else {
            free(p->host);
        }
    }
    coll__staged_pipe_free(ops, sg);
    free(sg);
}

/* A parked operation's release (coll_dev_sync_park()): its streams destroyed, the pools go
 * next. */
static void release_parked(coll_job_t *job, void *state)
{
    release(job, state, 0);
}

/* The host copies outlive the device's copies into and out of them: an operation freed while
 * they are in flight (its job failed) waits for its streams, off the normal path, before its
 * page-locked buffers go back to the cache. Where its streams still wait on the device for a
 * ready word (with copies behind or not), that sync would block the loop until the rank's
 * stream wrote it, maybe never: the operation is parked until the job ends on this node
 * (coll_dev_sync_park()). Its streams of their own go back to the pool's idle ones only where
 * every word they waited for was there: a stream that waited for one not there (parked, or
 * released at once without memory to park it) is destroyed, never given to a later operation,
 * whose work would queue behind a wait that may never pass. */
static void staged_free(coll_op_t *op, void *state)
{
    staged_t *sg = state;
    int due = sg->waited && !coll_dev_sync_ready(op);

    if (sg->timer != NULL) {
        uv_timer_stop(sg->timer);
        uv_close((uv_handle_t *)sg->timer, timer_closed);
        sg->timer = NULL;
    }
    if (!due || !coll_dev_sync_park(op, release_parked, sg)) {
        release(op->job, sg, !due);
    }
}

const coll_op_feature_t coll_dev_staged_feature = {
    .name = "device staging",
    .attach = staged_attach,
    .finish = staged_finish,
    .free = staged_free,
};
