/*
 * A job's device pools on this node (dev_pools.h).
 */
#include "core/dev_pools.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "proto/frame.h"

static coll_status_t make(coll_job_t *job, int device, coll_dev_pool_t **dp_p, char *err,
                          size_t errlen)
{
    coll_device_t *dv = &job->d->devices.dev[device];
    coll_dev_pool_t *dp = calloc(1, sizeof(*dp));
    char name[COLL_JOB_ID_MAX + 16];
    coll_status_t st = COLL_ERR_NOMEM;

    if (dp == NULL || (dp->sent = calloc(job->local_size, sizeof(uint32_t))) == NULL) {
        snprintf(err, errlen, "device pool of job %s on device %d: out of memory", job->id,
                 device);
        goto err_free;
    }
    snprintf(name, sizeof(name), "%s.dev%d", job->id, device);
    st = coll_pool_create_on(&coll_pool_device, device, name, dv->budget.limit, &dp->pool);
    if (st != COLL_OK) {
        snprintf(err, errlen, "device pool of job %s on device %d (%s) could not be made: %s",
                 job->id, device, dv->info.name, coll_dev_error());
        goto err_free;
    }
    coll_pool_set_budget(dp->pool, &dv->budget, 1);
    dp->device = device;
    dv->pools++;
    coll_info(COLL_SUB_POOL, "job %s: device pool on device %d (%s), up to %llu bytes", job->id,
              device, dv->info.name, (unsigned long long)coll_pool_size(dp->pool));
    *dp_p = dp;
    return COLL_OK;

err_free:
    if (dp != NULL) {
        free(dp->sent);
    }
    free(dp);
    return st;
}

/* Whether devices @p a and @p b can access each other's memory. */
static int mutual(const coll_dev_ops_t *ops, int a, int b)
{
    int ab = 0, ba = 0;

    return ops->peer_access(a, b, &ab) == COLL_OK && ops->peer_access(b, a, &ba) == COLL_OK &&
           ab && ba;
}

/* Grant @p to's device access to @p from's pool. */
static int grant(coll_dev_pool_t *from, const coll_dev_pool_t *to)
{
    if (coll_pool_grant(from->pool, to->device) != COLL_OK) {
        coll_warn(COLL_SUB_POOL, "device %d cannot reach the pool on device %d: %s; operations "
                  "with members on both stay staged", to->device, from->device, coll_dev_error());
        return 0;
    }
    from->peers |= 1u << to->device;
    return 1;
}

void coll_dev_pool_join_peers(const coll_dev_ops_t *ops, coll_dev_pool_t *const *pools,
                              coll_dev_pool_t *dp)
{
    for (int i = 0; i < COLL_DEV_MAX; i++) {
        coll_dev_pool_t *o = pools[i];
        if (o != NULL && o != dp && mutual(ops, dp->device, o->device) && grant(dp, o) &&
            grant(o, dp)) {
            coll_info(COLL_SUB_POOL, "device pools on devices %d and %d are peers: each device "
                      "reads and writes the other's", dp->device, o->device);
        }
    }
}

coll_status_t coll_dev_pool_get(coll_job_t *job, int device, coll_dev_pool_t **dp_p, char *err,
                                size_t errlen)
{
    coll_status_t st = COLL_OK;

    if (job->dev_pools[device] == NULL &&
        (st = make(job, device, &job->dev_pools[device], err, errlen)) == COLL_OK &&
        job->d->devices.ops != NULL) {
        coll_dev_pool_join_peers(job->d->devices.ops, job->dev_pools, job->dev_pools[device]);
    }
    if (st == COLL_OK) {
        *dp_p = job->dev_pools[device];
    }
    return st;
}

size_t coll_dev_pool_unsent(coll_dev_pool_t *dp, uint32_t local, coll_pool_chunk_t *chunks)
{
    size_t n = 0;

    while (n < COLL_FRAME_MAX_FDS && coll_pool_chunk(dp->pool, dp->sent[local], &chunks[n])) {
        dp->sent[local]++;
        n++;
    }
    return n;
}

void coll_dev_pools_leave(coll_job_t *job, const void *owner, uint32_t local)
{
    for (int i = 0; i < COLL_DEV_MAX; i++) {
        coll_dev_pool_t *dp = job->dev_pools[i];
        if (dp != NULL) {
            coll_pool_free_owner(dp->pool, owner);
            dp->sent[local] = 0;
        }
    }
}

coll_status_t coll_dev_pool_streams(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                                    coll_dev_stream_t (**streams_p)[2], char *err, size_t errlen)
{
    coll_status_t st = COLL_OK;

    for (int i = 0; i < 4 && st == COLL_OK; i++) {
        coll_dev_stream_t *s = &dp->streams[i / 2][i % 2];
        if (*s == NULL) {
            st = ops->stream_create(dp->device, s);
        }
    }
    if (st != COLL_OK) {
        snprintf(err, errlen, "device %d: no stream for the staged copies: %s", dp->device,
                 coll_dev_error());
        return st;
    }
    *streams_p = dp->streams;
    return COLL_OK;
}

void coll_dev_pool_streams_destroy(const coll_dev_ops_t *ops, coll_dev_pool_t *dp)
{
    for (int i = 0; i < 4; i++) {
        coll_dev_stream_t *s = &dp->streams[i / 2][i % 2];
        if (*s != NULL) {
            ops->stream_destroy(*s);
            *s = NULL;
        }
    }
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

static void poll_free(const coll_dev_ops_t *ops, coll_dev_poll_t *p)
{
    ops->event_destroy(p->event);
    uv_close((uv_handle_t *)p->timer, timer_closed);
    free(p);
}

coll_status_t coll_dev_pool_poll_get(const coll_dev_ops_t *ops, uv_loop_t *loop,
                                     coll_dev_pool_t *dp, coll_dev_poll_t **poll_p)
{
    coll_dev_poll_t *p = dp->idle;
    coll_status_t st;

    if (p != NULL) {
        dp->idle = p->next;
        dp->nidle--;
        p->next = NULL;
        *poll_p = p;
        return COLL_OK;
    }
    if ((p = calloc(1, sizeof(*p))) == NULL || (p->timer = calloc(1, sizeof(*p->timer))) == NULL) {
        free(p);
        return coll__dev_fail(COLL_ERR_NOMEM, "a poll of device %d: out of memory", dp->device);
    }
    if ((st = ops->event_create(dp->device, &p->event)) != COLL_OK) {
        free(p->timer);
        free(p);
        return st;
    }
    uv_timer_init(loop, p->timer);
    *poll_p = p;
    return COLL_OK;
}

void coll_dev_pool_poll_put(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                            coll_dev_poll_t *poll)
{
    if (poll == NULL) {
        return;
    }
    uv_timer_stop(poll->timer);
    if (dp->nidle >= COLL_DEV_POOL_POLLS_KEPT) {
        poll_free(ops, poll);
        return;
    }
    poll->timer->data = NULL;
    poll->next = dp->idle;
    dp->idle = poll;
    dp->nidle++;
}

void coll_dev_pool_polls_free(const coll_dev_ops_t *ops, coll_dev_pool_t *dp)
{
    while (dp->idle != NULL) { /* none without a device layer (@p ops NULL) */
        coll_dev_poll_t *p = dp->idle;
        dp->idle = p->next;
        poll_free(ops, p);
    }
    dp->nidle = 0;
}

coll_status_t coll_dev_pool_wait_get(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                                     coll_dev_stream_t *s_p)
{
    if (dp->nwaits > 0) {
        *s_p = dp->waits[--dp->nwaits];
        dp->waits[dp->nwaits] = NULL;
        return COLL_OK;
    }
    return ops->stream_create(dp->device, s_p);
}

void coll_dev_pool_wait_put(const coll_devices_t *ds, coll_dev_pool_t *dp, coll_dev_stream_t s)
{
    if (s == NULL) {
        return;
    }
    if (ds->dev[dp->device].fault[0] != '\0') {
        ds->ops->stream_destroy(s);
        coll_dev_pool_waits_free(ds->ops, dp);
        return;
    }
    if (dp->nwaits >= COLL_DEV_POOL_WAITS_KEPT) {
        ds->ops->stream_destroy(s);
        return;
    }
    dp->waits[dp->nwaits++] = s;
}

void coll_dev_pool_waits_free(const coll_dev_ops_t *ops, coll_dev_pool_t *dp)
{
    while (dp->nwaits > 0) { /* none without a device layer (@p ops NULL) */
        ops->stream_destroy(dp->waits[--dp->nwaits]);
        dp->waits[dp->nwaits] = NULL;
    }
}

void coll_dev_pools_destroy(coll_job_t *job)
{
    for (int i = 0; i < COLL_DEV_MAX; i++) {
        coll_dev_pool_t *dp = job->dev_pools[i];
        if (dp != NULL) {
            if (job->d->devices.ops != NULL) {
                coll_dev_pool_streams_destroy(job->d->devices.ops, dp);
            }
            coll_dev_pool_polls_free(job->d->devices.ops, dp);
            coll_dev_pool_waits_free(job->d->devices.ops, dp);
            coll_pool_destroy(dp->pool);
            job->d->devices.dev[i].pools--;
            free(dp->sent);
            free(dp);
            job->dev_pools[i] = NULL;
        }
    }
}

coll_pool_t *coll_job_pool_by_id(const coll_job_t *job, uint32_t id)
{
    if (id == 0) {
        return job->pool;
    }
    return id <= COLL_DEV_MAX && job->dev_pools[id - 1] != NULL ? job->dev_pools[id - 1]->pool
                                                                : NULL;
}
