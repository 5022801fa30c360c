/*
 * A rank's allocations in the job's device pools (devalloc.h).
 */
#include "job/devalloc.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "core/dev_pools.h"
#include "core/job.h"
#include "kernels/mem_kind.h"

/* The device @p a means on this daemon, or why none serves it. */
static coll_status_t find_device(const coll_session_t *s, const Coll__Wire__MemAlloc *a,
                                 int *dev_p, char *err, size_t errlen)
{
    const coll_devices_t *ds = &s->d->devices;
    int dev;

    /* The library refuses first (the join reply names this layer); a client that does not
     * compare still gets the mismatch named, whether or not this daemon's layer opened. */
    if (strcmp(a->layer, coll_devices_layer(ds)) != 0) {
        snprintf(err, errlen, "rank %u: its device layer is %s, the daemon's on %s is %s "
                 "(COLL_DEVICE_FAKE must be the same for both; the daemon's: %s)", s->rank,
                 a->layer, s->d->hostname, coll_devices_layer(ds), ds->status);
        return COLL_ERR_UNSUPPORTED;
    }
    if (ds->ops == NULL) {
        snprintf(err, errlen, "rank %u: no device memory on %s: %s", s->rank, s->d->hostname,
                 ds->status);
        return COLL_ERR_UNSUPPORTED;
    }
    if ((dev = coll_devices_find(ds, a->device_uuid.data, a->device_uuid.len, a->device)) < 0) {
        snprintf(err, errlen, "rank %u: no such device on %s: its device %u is not among the "
                 "daemon's %d (%s)", s->rank, s->d->hostname, a->device, ds->n, ds->status);
        return COLL_ERR_UNSUPPORTED;
    }
    if (!ds->dev[dev].info.shareable) {
        snprintf(err, errlen, "rank %u: device %d (%s) cannot share memory between processes "
                 "(no virtual memory management with file-descriptor handles)", s->rank, dev,
                 ds->dev[dev].info.name);
        return COLL_ERR_UNSUPPORTED;
    }
    *dev_p = dev;
    return COLL_OK;
}

/* Why an allocation of @p bytes did not fit: the device's budget, the pool's range, or the
 * device itself (its words). */
static void refusal(const coll_session_t *s, const coll_dev_pool_t *dp, coll_status_t st,
                    uint64_t bytes, char *err, size_t errlen)
{
    const coll_device_t *dv = &s->d->devices.dev[dp->device];
    const coll_pool_budget_t *b = &dv->budget;

    if (st != COLL_ERR_POOL_FULL) {
        snprintf(err, errlen, "device pool of job %s on device %d could not take %" PRIu64
                 " bytes: %s", s->job->id, dp->device, bytes, coll_dev_error());
    } else if (b->used >= b->limit || bytes > b->limit - b->used) {
        snprintf(err, errlen, "device pool of job %s on device %d (%s) cannot grow: %" PRIu64
                 " bytes asked, the jobs' device pools hold %" PRIu64 " of its %" PRIu64
                 " (device_pool_budget)", s->job->id, dp->device, dv->info.name, bytes, b->used,
                 b->limit);
    } else {
        snprintf(err, errlen, "device pool of job %s on device %d has no room: %" PRIu64
                 " bytes asked, %zu of %zu free", s->job->id, dp->device, bytes,
                 coll_pool_free_bytes(dp->pool), coll_pool_size(dp->pool));
    }
}

/* The chunks the rank has not mapped, into the reply and its fds. */
static void attach_chunks(coll_session_t *s, coll_dev_pool_t *dp, Coll__Wire__MemAllocReply *r,
                          coll_devalloc_out_t *out)
{
    coll_pool_chunk_t chunks[COLL_FRAME_MAX_FDS];
    size_t n = coll_dev_pool_unsent(dp, s->local_rank, chunks);

    for (size_t i = 0; i < n; i++) {
        coll__wire__pool_chunk__init(&out->chunk[i]);
        out->chunk[i].offset = chunks[i].offset;
        out->chunk[i].bytes = chunks[i].bytes;
        out->chunk_p[i] = &out->chunk[i];
        out->fds[i] = chunks[i].fd;
    }
    out->nfds = (unsigned)n;
    r->n_chunks = n;
    r->chunks = out->chunk_p;
}

coll_status_t coll_devalloc(coll_session_t *s, const Coll__Wire__MemAlloc *a,
                            Coll__Wire__MemAllocReply *r, coll_devalloc_out_t *out, char *err,
                            size_t errlen)
{
    coll_dev_pool_t *dp;
    size_t off = 0;
    int dev = -1;
    coll_status_t st = find_device(s, a, &dev, err, errlen);

    if (st != COLL_OK) {
        return st;
    }
    if (a->bytes == 0) {
        snprintf(err, errlen, "rank %u: a device allocation of 0 bytes", s->rank);
        return COLL_ERR_INVALID;
    }
    if (s->job->d->devices.dev[dev].fault[0] != '\0') {
        snprintf(err, errlen, "device %d (%s) is out of service in this daemon: work on it "
                 "failed earlier (%s), an error sticky for the daemon's context; its device "
                 "allocations are refused until the daemon restarts", dev,
                 s->job->d->devices.dev[dev].info.name, s->job->d->devices.dev[dev].fault);
        return COLL_ERR_UNSUPPORTED;
    }
    if ((st = coll_dev_pool_get(s->job, dev, &dp, err, errlen)) != COLL_OK) {
        return st;
    }
    if ((st = coll_pool_alloc(dp->pool, a->bytes, s, &off)) != COLL_OK) {
        refusal(s, dp, st, a->bytes, err, errlen);
        return st;
    }
    r->offset = off;
    r->pool = (uint32_t)dev + 1;
    r->pool_bytes = coll_pool_size(dp->pool);
    attach_chunks(s, dp, r, out);
    return COLL_OK;
}

void coll_devalloc_free(coll_session_t *s, uint32_t pool, uint64_t offset)
{
    coll_pool_t *p = coll_job_pool_by_id(s->job, pool);

    if (p == NULL || coll_pool_free(p, offset, s) != COLL_OK) {
        coll_warn(COLL_SUB_SESSION, "session %llu: free of offset %" PRIu64 " of pool %u it "
                  "does not own", (unsigned long long)s->id, offset, pool);
    }
}
