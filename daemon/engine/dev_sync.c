/* The stream words of operations on device buffers (dev_sync.h). */
#include "engine/dev_sync.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/log.h"
#include "core/dev_pools.h"
#include "core/pool.h"
#include "proto/submission.h"

/* Bytes of a submission's two words: the ready word, then the done word. */
#define SYNC_BYTES 16

coll_status_t coll_dev_sync_check(const coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    if (sub->sync_flags == 0) {
        return COLL_OK;
    }
    if ((sub->sync_flags & ~(COLL_SYNC_READY | COLL_SYNC_DONE)) != 0 || sub->sync_value == 0 ||
        sub->pool == 0 || sub->sync_offset % 8 != 0) {
        snprintf(err, errlen, "rank %u: stream words with flags %#x, value %" PRIu64 " at offset "
                 "%" PRIu64 " of a submission in pool %u: they take flags ready (1) and done (2), "
                 "a value above 0, an offset aligned to 8, and buffers in a device pool",
                 s->rank, sub->sync_flags, sub->sync_value, sub->sync_offset, sub->pool);
        return COLL_ERR_INVALID;
    }
    if (!coll_pool_range_owned(coll_job_pool_by_id(job, 0), sub->sync_offset, SYNC_BYTES, s)) {
        snprintf(err, errlen, "rank %u: stream words [%" PRIu64 ", +%d) are not inside this "
                 "rank's allocations in the pool of job %s", s->rank, sub->sync_offset,
                 SYNC_BYTES, job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    return COLL_OK;
}

/* Word @p k (0 ready, 1 done) of member @p m, in the host pool. */
static _Atomic uint64_t *word(const coll_op_t *op, const coll_op_member_t *m, int k)
{
    uint8_t *base = coll_pool_base(coll_job_pool_by_id(op->job, 0));

    return (_Atomic uint64_t *)(void *)(base + m->sync_off + 8u * (unsigned)k);
}

int coll_dev_sync_ready(const coll_op_t *op)
{
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        const coll_op_member_t *m = &op->members[l];
        if ((m->sync_flags & COLL_SYNC_READY) &&
            atomic_load_explicit(word(op, m, 0), memory_order_acquire) < m->sync_value) {
            return 0;
        }
    }
    return 1;
}

uint32_t coll_dev_sync_describe(const coll_op_t *op, char *buf, size_t len)
{
    size_t n = strlen(buf);
    uint32_t named = 0;

    for (uint32_t l = 0; l < op->grp->nlocal && n < len; l++) {
        const coll_op_member_t *m = &op->members[l];
        uint64_t at;
        if (!(m->sync_flags & COLL_SYNC_READY) ||
            (at = atomic_load_explicit(word(op, m, 0), memory_order_acquire)) >= m->sync_value) {
            continue;
        }
        n += (size_t)snprintf(buf + n, len - n, "%srank %u's stream (its ready word at %" PRIu64
                              ", below %" PRIu64 ": the work queued before the call has not "
                              "ended)", n ? ", " : "", op->job->ranks[op->grp->locals[l]],
                              at, m->sync_value);
        named++;
    }
    return named;
}

void coll_dev_sync_done(const coll_op_t *op, const coll_op_member_t *m)
{
    if (m->sync_flags & COLL_SYNC_DONE) {
        coll_dev_sync_store(&(coll_dev_sync_due_t){word(op, m, 1), m->sync_value}, 1);
    }
}

/* The pages of a job's host pool this daemon registered with its device layer, for the device
 * waits on the ranks' ready words (a rank's words are an allocation of its own, so a few). */
struct coll_dev_sync_pages {
    uint32_t n, cap;
    struct {
        uint64_t off, dev; /* the page's offset in the pool, its device address */
    } *page;
};

/* The device address of member @p m's ready word, its page registered now if it was not.
 * @return COLL_OK; the device layer's error, or COLL_ERR_NOMEM; said in @p err. */
static coll_status_t word_dev(const coll_op_t *op, const coll_op_member_t *m, uint64_t *dev_p,
                              char *err, size_t errlen)
{
    coll_job_t *job = op->job;
    struct coll_dev_sync_pages *pg = job->sync_pages;
    uint64_t psize = (uint64_t)sysconf(_SC_PAGESIZE), off = m->sync_off / psize * psize;
    uint8_t *at = coll_pool_base(job->pool) + off;
    uint64_t dev = 0;
    coll_status_t st;

    for (uint32_t i = 0; pg != NULL && i < pg->n; i++) {
        if (pg->page[i].off == off) {
            *dev_p = pg->page[i].dev + (m->sync_off - off);
            return COLL_OK;
        }
    }
    if (pg == NULL && (pg = job->sync_pages = calloc(1, sizeof(*pg))) == NULL) {
        snprintf(err, errlen, "daemon out of memory");
        return COLL_ERR_NOMEM;
    }
    if (pg->n == pg->cap) {
        uint32_t cap = pg->cap > 0 ? 2 * pg->cap : 8;
        void *p = realloc(pg->page, cap * sizeof(pg->page[0]));
        if (p == NULL) {
            snprintf(err, errlen, "daemon out of memory");
            return COLL_ERR_NOMEM;
        }
        pg->page = p;
        pg->cap = cap;
    }
    if ((st = job->d->devices.ops->host_register(at, (size_t)psize, &dev)) != COLL_OK) {
        snprintf(err, errlen, "the page of its words at offset %" PRIu64 " of the job's host "
                 "pool could not be registered with the device layer: %s", off,
                 coll_dev_error());
        return st == COLL_ERR_NOMEM ? st : COLL_ERR_UNSUPPORTED;
    }
    pg->page[pg->n].off = off;
    pg->page[pg->n++].dev = dev;
    *dev_p = dev + (m->sync_off - off);
    return COLL_OK;
}

coll_status_t coll_dev_sync_device_wait(const coll_op_t *op, int device,
                                        coll_dev_stream_t *streams, uint32_t n, char *err,
                                        size_t errlen)
{
    static unsigned refused; /* loop thread */
    const coll_dev_ops_t *ops = op->job->d->devices.ops;
    coll_status_t st = COLL_OK;

    for (uint32_t l = 0; l < op->grp->nlocal && st == COLL_OK; l++) {
        const coll_op_member_t *m = &op->members[l];
        uint64_t dev = 0;
        if (!(m->sync_flags & COLL_SYNC_READY) ||
            atomic_load_explicit(word(op, m, 0), memory_order_acquire) >= m->sync_value) {
            continue;
        }
        if ((st = word_dev(op, m, &dev, err, errlen)) != COLL_OK) {
            break;
        }
        for (uint32_t k = 0; k < n && st == COLL_OK; k++) {
            st = ops->stream_wait_word(streams[k], dev, m->sync_value);
            op->job->d->devices.dev[device].stream_waits += st == COLL_OK;
        }
        if (st != COLL_OK) {
            snprintf(err, errlen, "a device wait for rank %u's ready word: %s",
                     op->job->ranks[op->grp->locals[l]], coll_dev_error());
        }
    }
    if (st == COLL_ERR_UNSUPPORTED && !refused++) {
        coll_info(COLL_SUB_ENGINE, "job %s: the device layer refuses waits on the ranks' ready "
                  "words (%s): the loop polls them (logged once)", op->job->id, err);
    }
    return st;
}

uint32_t coll_dev_sync_due(const coll_op_t *op, coll_dev_sync_due_t *due)
{
    uint32_t n = 0;

    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        const coll_op_member_t *m = &op->members[l];
        if ((m->sync_flags & COLL_SYNC_READY) &&
            atomic_load_explicit(word(op, m, 0), memory_order_acquire) < m->sync_value) {
            due[n++] = (coll_dev_sync_due_t){word(op, m, 0), m->sync_value};
        }
    }
    return n;
}

void coll_dev_sync_store(const coll_dev_sync_due_t *due, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        uint64_t cur = atomic_load_explicit(due[i].word, memory_order_relaxed);
        while (cur < due[i].value &&
               !atomic_compare_exchange_weak_explicit(due[i].word, &cur, due[i].value,
                                                      memory_order_release,
                                                      memory_order_relaxed)) {
        }
    }
}

void coll_dev_sync_store_ready(const coll_op_t *op)
{
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        const coll_op_member_t *m = &op->members[l];
        if (m->sync_flags & COLL_SYNC_READY) {
            coll_dev_sync_store(&(coll_dev_sync_due_t){word(op, m, 0), m->sync_value}, 1);
        }
    }
}

/* An operation's device work freed while it waits on the device for ranks' ready words
 * (coll_dev_sync_park()), kept until the job ends on this node. */
struct coll_dev_parked {
    struct coll_dev_parked *next;
    coll_dev_sync_release_fn release;
    void *state;
    uint32_t ndue;
    coll_dev_sync_due_t due[]; /* the words, and the values they wait for */
};

int coll_dev_sync_park(const coll_op_t *op, coll_dev_sync_release_fn release, void *state)
{
    struct coll_dev_parked *pk = malloc(sizeof(*pk) + op->grp->nlocal * sizeof(pk->due[0]));

    if (pk == NULL) { /* no memory to keep them: release the waits now */
        coll_dev_sync_store_ready(op);
        return 0;
    }
    *pk = (struct coll_dev_parked){op->job->dev_parked, release, state, 0};
    pk->ndue = coll_dev_sync_due(op, pk->due);
    op->job->dev_parked = pk;
    coll_debug(COLL_SUB_ENGINE, "job %s: an operation's device work waits for %u ranks' ready "
               "words: kept until the job ends here", op->job->id, pk->ndue);
    return 1;
}

void coll_dev_sync_job_end(coll_job_t *job)
{
    struct coll_dev_sync_pages *pg = job->sync_pages;
    struct coll_dev_parked *pk;

    while ((pk = job->dev_parked) != NULL) {
        job->dev_parked = pk->next;
        coll_dev_sync_store(pk->due, pk->ndue); /* no rank of the job is left to write them */
        pk->release(job, pk->state);
        free(pk);
    }
    for (uint32_t i = 0; pg != NULL && i < pg->n; i++) {
        job->d->devices.ops->host_unregister(coll_pool_base(job->pool) + pg->page[i].off);
    }
    if (pg != NULL) {
        free(pg->page);
        free(pg);
    }
    job->sync_pages = NULL;
}
