/*
 * The staged path (staged.h): device buffers get host copies when the operation starts, the
 * host algorithm runs on them, and the results go back before the ranks are told. A member's
 * input and output that overlap (the in-place layouts) share one host copy of their union, so
 * the algorithm sees the same layout as on host memory.
 */
#include "engine/dev_staged.h"

#include <stdlib.h>
#include <string.h>

#include "core/dev_pools.h"
#include "engine/algo.h"
#include "engine/dev_staged_copy.h"

/* Host copies are aligned as the kernels' vectors want them. */
#define HOST_ALIGN 64

/* One device span and its host copy. */
typedef struct {
    int device;                 /* the daemon's index of the span's device */
    coll_dev_stream_t *streams; /* its device pool's pair (coll_dev_pool_streams()) */
    uint64_t dev;               /* device address of the span's first byte */
    uint8_t *host;              /* its host copy */
    uint64_t in_off, in_len;    /* what is copied in before the algorithm (in_len 0: nothing) */
    uint64_t out_off, out_len;  /* what is copied back after it (out_len 0: nothing) */
} span_t;

typedef struct {
    coll_impl_t impl;  /* the host algorithm's, named "staged+<its name>" */
    char name[24];
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
    if ((p->host = aligned_alloc(HOST_ALIGN, bytes)) == NULL) {
        return fail(op, COLL_ERR_NOMEM, "has no host copy", "daemon out of memory");
    }
    sg->nspans++;
    p->device = dp->device;
    p->dev = lo;
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

/* Copy every span's input to its host copy (@p in) or its host copy's output back, then wait
 * for the streams of every span (those queued before a failure included). */
static coll_status_t copy(coll_op_t *op, staged_t *sg, int in)
{
    coll_devices_t *ds = &op->job->d->devices;
    coll_status_t st = COLL_OK;

    for (uint32_t k = 0; k < sg->nspans && st == COLL_OK; k++) {
        span_t *p = &sg->span[k];
        uint64_t off = in ? p->in_off : p->out_off, len = in ? p->in_len : p->out_len;
        uint64_t host = (uint64_t)(uintptr_t)(p->host + off), dev = p->dev + off;
        st = coll_dev_staged_queue(ds->ops, p->streams, in ? host : dev, in ? dev : host, len,
                                   COLL_DEV_STAGED_CHUNK_BYTES);
        ds->dev[p->device].staged_bytes += st == COLL_OK ? len : 0;
    }
    for (uint32_t k = 0; k < sg->nspans; k++) {
        coll_status_t w = coll_dev_staged_wait(ds->ops, sg->span[k].streams);
        st = st != COLL_OK ? st : w;
    }
    return st;
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

static coll_status_t staged_attach(coll_op_t *op, void **state)
{
    uint32_t n = device_members(op);
    const coll_impl_t *inner;
    staged_t *sg;
    coll_status_t st = COLL_OK;

    if (n == 0 || op->desc.algo == COLL_ALGO_NCCL) { /* NCCL works on the device buffers */
        return COLL_OK;
    }
    if ((sg = calloc(1, sizeof(*sg) + 2 * n * sizeof(span_t))) == NULL) {
        return fail(op, COLL_ERR_NOMEM, "has no state", "daemon out of memory");
    }
    *state = sg;
    for (uint32_t i = 0; i < op->nbufs && st == COLL_OK; i++) {
        st = op->members[i].pool != 0 ? member_spans(op, sg, i) : COLL_OK;
    }
    if (st == COLL_OK && (st = copy(op, sg, 1)) != COLL_OK) {
        return fail(op, st, "could not copy the device buffers in", coll_dev_error());
    }
    if (st == COLL_OK) {
        count(op, sg);
        inner = op->impl != NULL ? op->impl : coll_algo_impl(op);
        sg->impl = *inner;
        snprintf(sg->name, sizeof(sg->name), "staged+%s", inner->name);
        sg->impl.name = sg->name;
        op->impl = &sg->impl;
    }
    return st;
}

static coll_status_t staged_finish(coll_op_t *op, void *state)
{
    coll_status_t st = copy(op, state, 0);

    return st == COLL_OK ? st : fail(op, st, "could not copy the results back", coll_dev_error());
}

static void staged_free(coll_op_t *op, void *state)
{
    staged_t *sg = state;

    (void)op;
    for (uint32_t k = 0; k < sg->nspans; k++) {
        free(sg->span[k].host);
    }
    free(sg);
}

const coll_op_feature_t coll_dev_staged_feature = {
    .name = "device staging",
    .attach = staged_attach,
    .finish = staged_finish,
    .free = staged_free,
};
