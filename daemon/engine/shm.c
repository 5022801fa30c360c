/*
 * The daemon's part in the local ranks' shared-memory area. The ranks write their posts; the
 * daemon reads them only to take a node submission, and writes only the header, the rank table
 * and the TAKEN state. Posts are client memory: every copy is consistent (coll_shm_read()) and
 * checked before use, like a Submit from the socket.
 */
#include "engine/shm.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/stats.h"
#include "proto/wire.h"

_Static_assert(COLL_SHM_BUCKETS == COLL_STATS_BUCKETS, "the ranks bin durations as we do");
_Static_assert(COLL_SHM_KINDS <= COLL_STATS_KINDS, "kinds counted in shared memory");

coll_shm_hdr_t *coll_shm_hdr(const coll_job_t *job)
{
    return coll_shm_hdr_of(coll_pool_base(job->pool), job->local_size);
}

coll_shm_rank_t *coll_shm_rank(const coll_job_t *job, uint32_t l)
{
    return coll_shm_rank_of(coll_pool_base(job->pool), job->local_size, l);
}

void coll_shm_init(coll_job_t *job, uint64_t max_bytes)
{
    coll_shm_hdr_t *h = coll_shm_hdr(job);

    h->nlocal = job->local_size;
    h->max_bytes = max_bytes;
    for (unsigned i = 0; i < COLL_SHM_BUCKETS; i++) {
        h->bounds[i] = coll_stats_bucket_bound(i);
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_shm_rank_t *r = coll_shm_rank(job, l);
        r->rank = job->ranks[l];
        r->pid = job->locals[l] != NULL ? (uint32_t)job->locals[l]->cred.pid : 0;
        atomic_store(&r->busy_key, COLL_SHM_IDLE);
    }
}

static void to_submit(const coll_shm_desc_t *d, Coll__Wire__Submit *sub)
{
    coll__wire__submit__init(sub);
    sub->req_id = d->req_id;
    sub->key = d->key;
    sub->coll = (Coll__Wire__Collective)d->coll;
    sub->dtype = d->dtype;
    sub->op = d->op;
    sub->count = d->count;
    sub->send_offset = d->send_off;
    sub->recv_offset = d->recv_off;
    sub->root = d->root;
    sub->algo = d->algo;
    sub->layout = d->layout;
}

/* Local rank @p l's post of @p key, copied and checked into @p sub; its slot and state. */
static coll_status_t read_post(coll_job_t *job, uint32_t l, uint64_t key, Coll__Wire__Submit *sub,
                               uint32_t *slot_p, uint64_t *state_p, char *err, size_t len)
{
    coll_shm_desc_t d;
    char why[256];

    if (!coll_shm_find(coll_shm_rank(job, l), key, COLL_SHM_POSTED, slot_p, state_p, &d)) {
        snprintf(err, len, "rank %u withdrew collective key %" PRIu64 " while the other local "
                 "ranks of job %s ran it (it ended its requests or left)", job->ranks[l], key,
                 job->id);
        return COLL_ERR_JOB;
    }
    to_submit(&d, sub);
    if (d.coll >= COLL_SHM_KINDS || coll_wire_check_submit(sub, why, sizeof(why)) != COLL_OK) {
        snprintf(err, len, "malformed post in the shared-memory area: %s",
                 d.coll >= COLL_SHM_KINDS ? "not a collective" : why);
        return COLL_ERR_PROTOCOL;
    }
    return COLL_OK;
}

coll_status_t coll_shm_take(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                            uint32_t *who_p, char *err, size_t len)
{
    uint32_t slot[COLL_MAX_LOCAL];
    uint64_t state[COLL_MAX_LOCAL];

    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_status_t st;
        coll__wire__submit__init(&subs[l]);
        if (job->locals[l] == NULL) {
            state[l] = 0;
            continue; /* it left: the engine refuses the operation with that reason */
        }
        if ((st = read_post(job, l, key, &subs[l], &slot[l], &state[l], err, len)) != COLL_OK) {
            *who_p = l;
            return st;
        }
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (state[l] != 0 &&
            !coll_shm_move(&coll_shm_rank(job, l)->post[slot[l]], state[l], COLL_SHM_TAKEN)) {
            /* Only the rank itself (misbehaving) changes a post that every rank agreed on. */
            snprintf(err, len, "its post of collective key %" PRIu64 " changed while the "
                     "daemon took it", key);
            *who_p = l;
            return COLL_ERR_PROTOCOL;
        }
    }
    return COLL_OK;
}

static void wake_all(coll_job_t *job)
{
    uint8_t *base = coll_pool_base(job->pool);

    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_ctl_notify(coll_ctl_of(base, l));
    }
}

void coll_shm_fail(coll_job_t *job)
{
    coll_shm_hdr_t *h;

    if (job->pool == NULL) {
        return;
    }
    h = coll_shm_hdr(job);
    h->status = job->error;
    snprintf(h->msg, sizeof(h->msg), "%s", job->errmsg);
    atomic_store_explicit(&h->failed, 1, memory_order_release);
    wake_all(job);
}

void coll_shm_left(coll_job_t *job, const char *who)
{
    coll_shm_hdr_t *h = coll_shm_hdr(job);

    if (atomic_load(&h->left)) {
        return; /* the first one is named */
    }
    snprintf(h->left_msg, sizeof(h->left_msg), "%s", who);
    atomic_store(&h->left, 1);
    wake_all(job);
}
