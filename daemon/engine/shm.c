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

void coll_shm_init(coll_job_t *job, uint64_t max_bytes, uint64_t node_max_bytes)
{
    coll_shm_hdr_t *h = coll_shm_hdr(job);

    h->nlocal = job->local_size;
    h->max_bytes = max_bytes;
    h->node_max_bytes = job->nnodes > 1 ? node_max_bytes : 0;
    h->direct_max_bytes = job->nnodes > 1 ? job->params.direct_max_bytes : 0;
    h->direct_token = job->params.direct_token;
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

/* A post is a collective of the world, uncompressed, on host buffers, the rank's own (the
 * library posts no other): NULL, or what it is not. */
static const char *not_postable(const coll_submission_t *sub)
{
    return sub->coll >= COLL_SHM_KINDS ? "not a collective"
           : sub->group != 0           ? "not of the world communicator"
           : sub->compression != 0     ? "compressed"
           : sub->pool != 0            ? "in a device pool"
           : sub->flags != 0           ? "flagged as a node submission"
                                       : NULL;
}

/* Local rank @p l's post of @p key, copied and checked into @p sub; its slot and state, and
 * (when @p rec is not NULL) the post's record itself. */
static coll_status_t read_post(coll_job_t *job, uint32_t l, uint64_t key, Coll__Wire__Submit *sub,
                               uint32_t *slot_p, uint64_t *state_p, coll_shm_rec_t *rec,
                               char *err, size_t len)
{
    coll_shm_rec_t d;
    const char *bad;
    char why[256];

    if (!coll_shm_find(coll_shm_rank(job, l), key, COLL_SHM_POSTED, slot_p, state_p, &d)) {
        snprintf(err, len, "rank %u withdrew collective key %" PRIu64 " while the other local "
                 "ranks of job %s ran it (it ended its requests or left)", job->ranks[l], key,
                 job->id);
        return COLL_ERR_JOB;
    }
    bad = not_postable(&d.sub);
    if (bad != NULL || coll_wire_check_submission(&d.sub, why, sizeof(why)) != COLL_OK) {
        snprintf(err, len, "malformed post in the shared-memory area: %s",
                 bad != NULL ? bad : why);
        return COLL_ERR_PROTOCOL;
    }
    coll_submission_to_wire(&d.sub, sub);
    if (rec != NULL) {
        *rec = d;
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

/* Every local rank's post of @p key, copied and checked into @p subs, with its slot and state
 * (state 0 for a rank that has left); local rank 0's record in @p home. */
static coll_status_t read_posts(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                                uint32_t *slot, uint64_t *state, coll_shm_rec_t *home,
                                uint32_t *who_p, char *err, size_t len)
{
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_status_t st;
        coll__wire__submit__init(&subs[l]);
        state[l] = 0;
        if (job->locals[l] == NULL) {
            continue; /* it left: the engine refuses the operation with that reason */
        }
        if ((st = read_post(job, l, key, &subs[l], &slot[l], &state[l], l == 0 ? home : NULL,
                            err, len)) != COLL_OK) {
            *who_p = l;
            return st;
        }
    }
    return COLL_OK;
}

coll_status_t coll_shm_take(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                            uint32_t *who_p, char *err, size_t len)
{
    uint32_t slot[COLL_MAX_LOCAL];
    uint64_t state[COLL_MAX_LOCAL];
    coll_status_t st = read_posts(job, key, subs, slot, state, NULL, who_p, err, len);

    for (uint32_t l = 0; l < job->local_size && st == COLL_OK; l++) {
        if (state[l] != 0 &&
            !coll_shm_move(&coll_shm_rank(job, l)->post[slot[l]], state[l], COLL_SHM_TAKEN)) {
            /* Only the rank itself (misbehaving) changes a post that every rank agreed on. */
            snprintf(err, len, "its post of collective key %" PRIu64 " changed while the "
                     "daemon took it", key);
            *who_p = l;
            return COLL_ERR_PROTOCOL;
        }
    }
    return st;
}

coll_status_t coll_shm_read_reduced(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                                    coll_shm_home_t *home, uint32_t *who_p, char *err,
                                    size_t len)
{
    uint32_t slot[COLL_MAX_LOCAL];
    uint64_t state[COLL_MAX_LOCAL];
    coll_shm_rec_t d = {0};
    coll_status_t st;

    if (job->locals[0] == NULL) {
        snprintf(err, len, "%s left job %s; its collectives cannot run without it", job->left,
                 job->id);
        *who_p = 0;
        return COLL_ERR_JOB;
    }
    if ((st = read_posts(job, key, subs, slot, state, &d, who_p, err, len)) != COLL_OK) {
        return st;
    }
    if (d.sub.coll != COLL_KIND_ALLREDUCE || d.node_off == 0 ||
        !coll_shm_node_reducible(d.sub.dtype, d.sub.redop)) {
        snprintf(err, len, "collective key %" PRIu64 " handed over as reduced in shared "
                 "memory, but its home post names no node buffer for it", key);
        *who_p = 0;
        return COLL_ERR_PROTOCOL;
    }
    *home = (coll_shm_home_t){.off = d.node_off, .slot = slot[0], .state = state[0]};
    return COLL_OK;
}

void coll_shm_node_done(coll_job_t *job, const coll_shm_home_t *home, coll_status_t status,
                        uint32_t algo, const coll_ctl_times_t *t)
{
    coll_shm_rank_t *r;
    coll_shm_post_t *p;
    coll_shm_steps_t *st;

    if (job->pool == NULL || (status != COLL_OK && job->state == COLL_JOB_FAILED)) {
        return; /* a failed job: the header tells the ranks, with its message */
    }
    r = coll_shm_rank(job, 0);
    p = &r->post[home->slot % COLL_SHM_SLOTS];
    st = &r->steps[home->slot % COLL_SHM_SLOTS];
    p->peers_ns = t->peers_ns;
    p->reduced_ns = t->reduced_ns;
    st->base_ns = t->ready_ns;
    st->n = t->nsteps;
    memcpy(st->steps, t->steps, t->nsteps * sizeof(t->steps[0]));
    /* Release: the ranks that see the word see the node buffer as the algorithm left it. */
    atomic_store_explicit(&p->node, coll_shm_node_word(coll_shm_gen(home->state),
                                                       status < -0xffff ? COLL_ERR_JOB : status,
                                                       algo),
                          memory_order_release);
    wake_all(job);
}

void coll_shm_fail(coll_job_t *job)
{
    coll_shm_hdr_t *h;

    if (job->pool == NULL) {
        return;
    }
    h = coll_shm_hdr(job);
    h->status = job->error;
    h->culprit_status = job->culprit_error;
    h->culprit = job->culprit;
    snprintf(h->msg, sizeof(h->msg), "%s", job->errmsg);
    atomic_store_explicit(&h->failed, 1, memory_order_release);
    wake_all(job);
}

/* The first rank named in @p msg (COLL_SHM_LEFT_BYTES) with @p flag set after it; every local
 * rank woken. */
static void note_left(coll_job_t *job, _Atomic uint32_t *flag, char *msg, const char *who)
{
    if (atomic_load(flag)) {
        return; /* the first one is named */
    }
    snprintf(msg, COLL_SHM_LEFT_BYTES, "%s", who);
    atomic_store(flag, 1);
    wake_all(job);
}

void coll_shm_peer_left(coll_job_t *job, const char *who)
{
    coll_shm_hdr_t *h = coll_shm_hdr(job);

    note_left(job, &h->peer_left, h->peer_left_msg, who);
}

void coll_shm_left(coll_job_t *job, const char *who)
{
    coll_shm_hdr_t *h = coll_shm_hdr(job);

    note_left(job, &h->left, h->left_msg, who);
}
