/*
 * The staged path (staged.h): device buffers get host copies when the operation starts, the
 * host algorithm runs on them, and the results go back before the ranks are told. A member's
 * input and output that overlap (the in-place layouts) share one host copy of their union, so
 * the algorithm sees the same layout as on host memory. The host copies are page-locked, so the
 * device copies them without a bounce through the driver's own buffers; they come from the
 * daemon's cache of such buffers (core/dev_pinned.h), as locking memory takes the driver
 * milliseconds, and go back to it when the operation is freed, whatever its end. Where the
 * driver refuses to lock more, ordinary memory serves, counted per device and logged the first
 * time.
 */
#include "engine/dev_staged.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/dev_pools.h"
#include "engine/algo.h"
#include "engine/dev_staged_copy.h"

/* Host copies are aligned as the kernels' vectors want them. */
#define HOST_ALIGN 64
/* How often the loop polls the copies' events while they are in flight, ms (as the NCCL
 * path's poll: one query per event, far inside the loop watch's bounds). */
#define POLL_MS 1

/* One device span and its host copy. */
typedef struct {
    int device;                 /* the daemon's index of the span's device */
    coll_dev_stream_t *streams; /* its device pool's pair (coll_dev_pool_streams()) */
    uint64_t dev;               /* device address of the span's first byte */
    uint8_t *host;              /* its host copy */
    size_t pinned;              /* > 0: host is a buffer of this size of the daemon's cache
                                   (coll_pinned_take()); 0: ordinary memory */
    uint64_t in_off, in_len;    /* what is copied in before the algorithm (in_len 0: nothing) */
    uint64_t out_off, out_len;  /* what is copied back after it (out_len 0: nothing) */
    coll_dev_event_t ev[2];     /* recorded on each stream after the copies */
} span_t;

typedef struct {
    coll_impl_t impl;  /* the host algorithm's, named "staged+<its name>" */
    char name[24];
    coll_op_t *op;
    uv_timer_t *timer; /* the poll of the events while copies are in flight, NULL before the
                          first; freed by its close callback */
    int in;            /* the copies in flight: 1 in, 0 back */
    int inflight;      /* 1 from the first copy queued until its events completed */
    uint32_t nspans;
    span_t span[];     /* at most two per local member */
} staged_t;

int coll_dev_staged_runs(unsigned kind, unsigned compression)
{
    return kind == COLL_KIND_ALLREDUCE ||
           (compression == 0 && (kind == COLL_KIND_REDUCE_SCATTER || kind == COLL_KIND_ALLGATHER ||
                                 kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE ||
                                 kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER));
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

static coll_status_t fail(coll_op_t *op, coll_status_t st, const char *what, const char *why)
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

/* A new span of member @p i covering device bytes [@p lo, @p hi), its host copy allocated. */
static coll_status_t add_span(coll_op_t *op, staged_t *sg, uint32_t i, uint64_t lo, uint64_t hi,
                              span_t **p_p)
{
    coll_dev_pool_t *dp = op->job->dev_pools[op->members[i].pool - 1];
    span_t *p = &sg->span[sg->nspans];
    size_t bytes = (size_t)((hi - lo + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN);
    char err[200];
    coll_status_t st = coll_dev_pool_streams(dp, &p->streams, err, sizeof(err));

    if (st != COLL_OK) {
        return fail(op, st, "has no stream", err);
    }
    p->device = dp->device;
    if (host_copy(op, p, bytes) != COLL_OK) {
        return fail(op, COLL_ERR_NOMEM, "has no host copy", "daemon out of memory");
    }
    sg->nspans++;
    p->dev = lo;
    for (int k = 0; k < 2 && st == COLL_OK; k++) {
        st = op->job->d->devices.ops->event_create(p->device, &p->ev[k]);
    }
    if (st != COLL_OK) {
        return fail(op, st, "has no event", coll_dev_error());
    }
    *p_p = p;
    return COLL_OK;
}

/* Member @p i's spans: one for input and output when they overlap (the in-place layouts), else
 * one for each; its buffers become their host copies. */
static coll_status_t member_spans(coll_op_t *op, staged_t *sg, uint32_t i)
{
    uint64_t se, re, in = (uint64_t)(uintptr_t)op->in[i], out = (uint64_t)(uintptr_t)op->out[i];
    span_t *p = NULL, *q = NULL;
    coll_status_t st = COLL_OK;

    coll_kind_extent((coll_kind_t)op->desc.coll, op->desc.count, op->grp->size,
                     coll_group_rank_of_local(op->grp, i), op->desc.root, &se, &re);
    se = in != 0 ? se * op->esize : 0;
    re = out != 0 ? re * op->esize : 0;
    if (se > 0 && re > 0 && in < out + re && out < in + se) {
        st = add_span(op, sg, i, in < out ? in : out, in + se > out + re ? in + se : out + re, &p);
        q = p;
    } else {
        st = se > 0 ? add_span(op, sg, i, in, in + se, &p) : COLL_OK;
        st = st == COLL_OK && re > 0 ? add_span(op, sg, i, out, out + re, &q) : st;
    }
    if (st == COLL_OK && se > 0) {
        p->in_off = in - p->dev;
        p->in_len = se;
        op->in[i] = p->host + p->in_off;
    }
    if (st == COLL_OK && re > 0) {
        q->out_off = out - q->dev;
        q->out_len = re;
        op->out[i] = q->host + q->out_off;
    }
    return st;
}

/* Queue the copy of every span's input to its host copy (@p in) or of its host copy's output
 * back, then record each span's events after them. */
static coll_status_t copy(coll_op_t *op, staged_t *sg, int in)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_status_t st = COLL_OK;

    sg->in = in;
    sg->inflight = 1;
    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        span_t *p = &sg->span[k];
        uint64_t off = in ? p->in_off : p->out_off, len = in ? p->in_len : p->out_len;
        uint64_t host = (uint64_t)(uintptr_t)(p->host + off), dev = p->dev + off;
        st = coll_dev_staged_queue(ds->ops, p->streams, in ? host : dev, in ? dev : host, len,
                                   COLL_DEV_STAGED_CHUNK_BYTES);
        ds->dev[p->device].staged_bytes += st == COLL_OK ? len : 0;
    }
    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        for (int s = 0; s < 2 && st == COLL_OK; s++) {
            st = ds->ops->event_record(sg->span[k].ev[s], sg->span[k].streams[s]);
        }
    }
    return st;
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
                return q;
            }
            st = q != COLL_OK ? q : st;
        }
    }
    sg->inflight = st == COLL_INPROGRESS;
    return st;
}

static void tick(uv_timer_t *t);

/* The copies just queued: COLL_OK when they are done already (a device as fast as the fake's),
 * else COLL_INPROGRESS with the loop polling them (tick()), or the error. */
static coll_status_t settle(coll_op_t *op, staged_t *sg)
{
    coll_status_t st = query(op, sg);

    if (st != COLL_INPROGRESS) {
        return st;
    }
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

/* The loop's poll of the copies in flight: once their events completed, the operation starts
 * (copies in) or its ranks are told (copies back); a failed copy fails the job. */
static void tick(uv_timer_t *t)
{
    staged_t *sg = t->data;
    coll_op_t *op = sg->op;
    coll_status_t st = query(op, sg);

    if (st == COLL_INPROGRESS) {
        return;
    }
    uv_timer_stop(t);
    coll_op_hold(op); /* a failure frees the state otherwise */
    if (sg->in) {
        if (st != COLL_OK) {
            fail(op, st, "could not copy the device buffers in", coll_dev_error());
        } else if (!op->done) { /* the job may have failed meanwhile */
            coll_op_attached(op);
        }
    } else {
        if (st != COLL_OK) {
            fail(op, st, "could not copy the results back", coll_dev_error());
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

/* The implementation the table or compression chose, renamed "staged+<its name>". */
static void wrap(coll_op_t *op, staged_t *sg)
{
    const coll_impl_t *inner = op->impl != NULL ? op->impl : coll_algo_impl(op);

    sg->impl = *inner;
    snprintf(sg->name, sizeof(sg->name), "staged+%s", inner->name);
    sg->impl.name = sg->name;
    op->impl = &sg->impl;
}

static coll_status_t staged_attach(coll_op_t *op, void **state)
{
    uint32_t n = device_members(op);
    staged_t *sg;
    coll_status_t st = COLL_OK;

    if (n == 0 || op->desc.algo == COLL_ALGO_NCCL) { /* NCCL works on the device buffers */
        return COLL_OK;
    }
    if ((sg = calloc(1, sizeof(*sg) + 2 * n * sizeof(span_t))) == NULL) {
        return fail(op, COLL_ERR_NOMEM, "has no state", "daemon out of memory");
    }
    *state = sg;
    sg->op = op;
    for (uint32_t i = 0; i < op->nbufs && st == COLL_OK; i++) {
        st = op->members[i].pool != 0 ? member_spans(op, sg, i) : COLL_OK;
    }
    if (st != COLL_OK) {
        return st;
    }
    count(op, sg);
    wrap(op, sg);
    if ((st = copy(op, sg, 1)) == COLL_OK) {
        st = settle(op, sg);
    }
    return st == COLL_OK || st == COLL_INPROGRESS
               ? st
               : fail(op, st, "could not copy the device buffers in", coll_dev_error());
}

static coll_status_t staged_finish(coll_op_t *op, void *state)
{
    coll_status_t st = copy(op, state, 0);

    if (st == COLL_OK) {
        st = settle(op, state);
    }
    return st == COLL_OK || st == COLL_INPROGRESS
               ? st
               : fail(op, st, "could not copy the results back", coll_dev_error());
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

/* The host copies outlive the device's copies into and out of them: an operation freed while
 * they are in flight (its job failed) waits for its streams, off the normal path, before its
 * page-locked buffers go back to the cache. */
static void staged_free(coll_op_t *op, void *state)
{
    staged_t *sg = state;
    const coll_dev_ops_t *ops = op->job->d->devices.ops;

    if (sg->timer != NULL) {
        uv_timer_stop(sg->timer);
        uv_close((uv_handle_t *)sg->timer, timer_closed);
    }
    for (uint32_t k = 0; k < sg->nspans; k++) {
        span_t *p = &sg->span[k];
        if (sg->inflight) {
            coll_dev_staged_wait(ops, p->streams);
        }
        ops->event_destroy(p->ev[0]);
        ops->event_destroy(p->ev[1]);
        if (p->pinned > 0) {
            coll_pinned_give(&op->job->d->devices.pinned, p->device, p->host, p->pinned);
        } else {
            free(p->host);
        }
    }
    free(sg);
}

const coll_op_feature_t coll_dev_staged_feature = {
    .name = "device staging",
    .attach = staged_attach,
    .finish = staged_finish,
    .free = staged_free,
};
