/*
 * A job's first half: its local ranks join (JoinJob), the first one creates it (pool, doorbell,
 * transport) within the daemon's budget, the others must agree with it, and once all are in
 * the job is ready at once (every rank here) or registers at its root (net/rdv.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/stats.h"
#include "engine/op.h"
#include "job/doorbell.h"
#include "job/formation.h"
#include "job/lifecycle.h"
#include "net/rdv.h"
#include "net/transport.h"
#include "proto/ctl.h"
#include "proto/shm_area.h"

/* First at COLL_JOIN_NOTE_MS, to tell the ranks what they wait for (the timer repeats once,
 * at the job's timeout), then at the timeout. */
static void join_timeout_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;

    if (uv_timer_get_repeat(t) != 0) {
        uv_timer_set_repeat(t, 0); /* the next expiry, at the timeout, is the last */
        coll_job_join_note(job);
        return;
    }
    if (job->state == COLL_JOB_GATHERING) {
        coll_job_fail(job, COLL_ERR_TIMEDOUT, 0,
                      "job %s: only %u of %u local ranks joined on this node within %u ms",
                      job->id, job->njoined, job->local_size, job->timeout_ms);
    } else if (job->state == COLL_JOB_RENDEZVOUS) {
        coll_job_fail(job, COLL_ERR_TIMEDOUT, 0,
                      "job %s: rendezvous at root %s did not complete within %u ms (%s%s; are "
                      "all %u ranks started, with the same COLL_ROOT?)",
                      job->id, job->root, job->timeout_ms,
                      job->rdv.error[0] ? "last connection attempt: " : "registered at the root",
                      job->rdv.error, job->world_size);
    }
}

static coll_status_t job_alloc(coll_daemon_t *d, const Coll__Wire__JoinJob *j, coll_job_t **job_p)
{
    coll_job_t *job = calloc(1, sizeof(*job));
    uint32_t l = j->local_size;

    if (job == NULL || (job->locals = calloc(l, sizeof(*job->locals))) == NULL ||
        (job->ranks = calloc(l, sizeof(*job->ranks))) == NULL) {
        if (job != NULL) {
            free(job->locals);
        }
        free(job);
        return COLL_ERR_NOMEM;
    }
    job->d = d;
    snprintf(job->id, sizeof(job->id), "%s", j->job);
    snprintf(job->root, sizeof(job->root), "%s", j->root);
    job->world_size = j->world_size;
    job->local_size = l;
    job->requested_timeout_ms = j->timeout_ms;
    job->connect_timeout_ms = j->connect_timeout_ms;
    job->timeout_ms = j->timeout_ms ? j->timeout_ms : (uint32_t)d->cfg.timeout_ms;
    coll_list_init(&job->engine.ops);
    coll_list_init(&job->engine.staging);
    coll_list_init(&job->groups);
    job->group_next = 1;
    job->doorbell_fd = -1;
    *job_p = job;
    return COLL_OK;
}

/* A job's pool must fit the per-job limit and what is left of the daemon's budget: all of a
 * fixed pool, only the control blocks of one that grows on demand (@p bytes each time). */
static coll_status_t check_budget(coll_daemon_t *d, const char *id, uint64_t bytes, char *err,
                                  size_t errlen)
{
    const coll_pool_budget_t *b = &d->pool_budget;

    if (bytes > d->cfg.pool_max) {
        snprintf(err, errlen, "job %s asks for a pool of %llu bytes; this daemon allows at most "
                 "%llu per job (pool_max)", id, (unsigned long long)bytes,
                 (unsigned long long)d->cfg.pool_max);
        return COLL_ERR_POOL_FULL;
    }
    if (b->used > b->limit || bytes > b->limit - b->used) {
        snprintf(err, errlen, "job %s asks for a pool of %llu bytes; this daemon's budget is "
                 "%llu (pool_budget), of which jobs use %llu", id, (unsigned long long)bytes,
                 (unsigned long long)b->limit, (unsigned long long)b->used);
        return COLL_ERR_NOMEM;
    }
    return COLL_OK;
}

/* The job's pool: its control blocks and then @p bytes, charged to the daemon's budget. */
static coll_status_t create_pool(coll_job_t *job, uint64_t bytes, int on_demand)
{
    coll_status_t st = coll_pool_create(job->id, bytes + COLL_POOL_PREFIX(job->local_size),
                                        &job->pool);
    if (st == COLL_OK) {
        coll_pool_set_budget(job->pool, &job->d->pool_budget, on_demand);
    }
    return st;
}

/* Every rank on this node: the job never talks to another daemon, whatever root it names. */
static int job_alone(const coll_job_t *job)
{
    return job->local_size == job->world_size;
}

static coll_status_t job_create(coll_daemon_t *d, const coll_session_t *s,
                                const Coll__Wire__JoinJob *j, const uint8_t *digest, char *err,
                                size_t errlen, coll_job_t **job_p)
{
    /* A job that asks for no size, with the default pool_size 0, gets a pool of pool_max that
     * grows on demand: DDP's first bucket holds the whole model, which no fixed default fits. */
    uint64_t asked = j->pool_bytes ? j->pool_bytes : d->cfg.pool_size;
    int on_demand = asked == 0;
    uint64_t pool_bytes = on_demand ? d->cfg.pool_max : asked;
    coll_job_t *job;
    coll_status_t st = check_budget(d, j->job, (on_demand ? 0 : pool_bytes) +
                                    COLL_POOL_PREFIX(j->local_size), err, errlen);

    if (st != COLL_OK) {
        return st;
    }
    if ((st = job_alloc(d, j, &job)) != COLL_OK) {
        snprintf(err, errlen, "daemon out of memory");
        return st;
    }
    uv_timer_init(d->loop, &job->join_timer);
    uv_timer_init(d->loop, &job->health_timer);
    job->join_timer.data = job->health_timer.data = job;
    job->handles = 2;
    coll_rdv_job_init(job);
    coll_transport_job_init(job);
    coll_list_push(&d->jobs, &job->link);
    /* The control blocks and the local ranks' shared-memory area come first; the pool the job
     * asked for follows. A job with no other node needs no UCX worker, endpoints or
     * registration (job_alone()). */
    if ((st = create_pool(job, pool_bytes, on_demand)) != COLL_OK ||
        (st = coll_pool_reserve(job->pool, COLL_POOL_PREFIX(job->local_size))) != COLL_OK ||
        (st = coll_doorbell_open(job)) != COLL_OK ||
        (!job_alone(job) && (st = coll_engine_job_open(job)) != COLL_OK)) {
        snprintf(err, errlen, "job %s: cannot create its %s on this node (see daemon log)",
                 job->id, job->pool == NULL ? "memory pool" : "UCX worker");
        coll_job_free_now(job);
        return st;
    }
    if (job->timeout_ms > COLL_JOIN_NOTE_MS) {
        uv_timer_start(&job->join_timer, join_timeout_cb, COLL_JOIN_NOTE_MS,
                       job->timeout_ms - COLL_JOIN_NOTE_MS);
    } else {
        uv_timer_start(&job->join_timer, join_timeout_cb, job->timeout_ms, 0);
    }
    memcpy(job->token_digest, digest, sizeof(job->token_digest));
    job->owner_uid = s->cred.uid;
    coll_stats_job_created(&d->stats);
    coll_info(COLL_SUB_JOB, "job %s: created (world size %u, %u local ranks, pool %llu bytes%s)",
              job->id, job->world_size, job->local_size,
              (unsigned long long)pool_bytes, on_demand ? ", taken on demand" : "");
    *job_p = job;
    return COLL_OK;
}

/* This node cannot hold the job (its pool budget, no memory for the pool): the rank hears why,
 * and so does the job's root, which fails the rendezvous on every node at once. */
static void refuse_job(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *j,
                       const uint8_t *digest, coll_status_t st, const char *why)
{
    coll_error(COLL_SUB_JOB, "refused job %s for rank %u (pid %d): %s", j->job, j->rank,
               (int)s->cred.pid, why);
    coll_stats_job_refused(&d->stats, st);
    coll_job_reply_join(s, st, why, NULL);
    if (j->root[0] != '\0' && j->local_size != j->world_size) {
        coll_rdv_refuse(d, j, digest, st, why);
    }
}

/* What this daemon refuses whatever job the join names: a rank without a token where one is
 * required, too many local ranks, a job over several nodes without a node secret. */
static coll_status_t daemon_refusal(coll_daemon_t *d, const Coll__Wire__JoinJob *j, char *err,
                                    size_t errlen)
{
    if (d->cfg.require_job_token && j->token[0] == '\0') {
        snprintf(err, errlen, "this daemon requires a job token (set COLL_JOB_TOKEN)");
        return COLL_ERR_DENIED;
    }
    if (j->local_size > COLL_MAX_LOCAL) {
        snprintf(err, errlen, "local size %u above the limit of %u", j->local_size,
                 COLL_MAX_LOCAL);
        return COLL_ERR_INVALID;
    }
    if (j->local_size != j->world_size && d->auth.mode == COLL_PEERS_OFF) {
        snprintf(err, errlen, "job %s spans several nodes (world size %u, %u ranks here), but "
                 "this daemon talks to no peer: %s; create a node secret with collectived "
                 "--make-secret (the same file on every node) and restart it", j->job,
                 j->world_size, j->local_size, d->auth.why);
        return COLL_ERR_DENIED;
    }
    return COLL_OK;
}

static void join_refused(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *j,
                         coll_status_t st, const char *err)
{
    COLL_LOG(st == COLL_ERR_DENIED ? COLL_LOG_WARN : COLL_LOG_INFO, COLL_SUB_JOB,
             "refused rank %u (pid %d, uid %d) of job %s: %s", j->rank, (int)s->cred.pid,
             (int)s->cred.uid, j->job, err);
    if (st == COLL_ERR_DENIED) {
        coll_stats_job_refused(&d->stats, st);
    }
    coll_job_reply_join(s, st, err, NULL);
}

void coll_job_join(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *j)
{
    char err[768];
    uint8_t digest[COLL_AUTH_BYTES];
    coll_job_t *job = NULL;
    coll_status_t st = daemon_refusal(d, j, err, sizeof(err));

    coll_auth_job_digest(j->job, j->token, s->cred.uid, digest);
    if (st == COLL_OK) {
        st = coll_formation_find(d, s, j, digest, &job, err, sizeof(err));
    }
    if (st != COLL_OK) {
        join_refused(d, s, j, st, err);
        return;
    }
    if (job == NULL && (st = job_create(d, s, j, digest, err, sizeof(err), &job)) != COLL_OK) {
        refuse_job(d, s, j, digest, st, err);
        return;
    }
    if (j->local_rank == 0 && j->leader_address.len > 0 && job->leader_address == NULL &&
        (job->leader_address = malloc(j->leader_address.len)) != NULL) {
        /* without it (no memory) the job runs without the direct path */
        memcpy(job->leader_address, j->leader_address.data, j->leader_address.len);
        job->leader_address_len = j->leader_address.len;
    }
    job->locals[j->local_rank] = s;
    job->ranks[j->local_rank] = j->rank;
    job->njoined++;
    s->job = job;
    s->ctl = coll_ctl_of(coll_pool_base(job->pool), j->local_rank);
    s->local_rank = j->local_rank;
    s->rank = j->rank;
    if (job->njoined == job->local_size) {
        job->state = COLL_JOB_RENDEZVOUS;
        if (job_alone(job)) {
            coll_job_ready_alone(job);
        } else {
            coll_rdv_join(job);
        }
    }
}
