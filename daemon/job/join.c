/*
 * A job's first half: its local ranks join (JoinJob), the first one creates it (pool, doorbell,
 * transport) within the daemon's budget, the others must agree with it, and once all are in
 * the job is ready at once (every rank here) or registers at its root (net/rdv.h).
 */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/stats.h"
#include "engine/op.h"
#include "job/doorbell.h"
#include "job/job.h"
#include "net/rdv.h"
#include "net/transport.h"
#include "proto/ctl.h"
#include "proto/shm_area.h"

static coll_job_t *job_find(coll_daemon_t *d, const char *id)
{
    coll_job_t *job, *tmp;
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (!job->closing && strcmp(job->id, id) == 0) {
            return job;
        }
    }
    return NULL;
}

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

static coll_status_t job_create(coll_daemon_t *d, const Coll__Wire__JoinJob *j, char *err,
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
    coll_auth_token_digest(job->id, j->token, job->token_digest);
    coll_stats_job_created(&d->stats);
    coll_info(COLL_SUB_JOB, "job %s: created (world size %u, %u local ranks, pool %llu bytes%s)",
              job->id, job->world_size, job->local_size,
              (unsigned long long)pool_bytes, on_demand ? ", taken on demand" : "");
    *job_p = job;
    return COLL_OK;
}

/* A join for an existing job must agree with it; returns a message when it does not. */
static const char *join_conflict(const coll_job_t *job, const coll_session_t *s,
                                 const Coll__Wire__JoinJob *j, char *buf, size_t len)
{
    if (job->state != COLL_JOB_GATHERING) {
        snprintf(buf, len, "job %s is already %s on this node; use a new job id", job->id,
                 job->state == COLL_JOB_FAILED ? "failed" : "formed");
    } else if (j->world_size != job->world_size || j->local_size != job->local_size) {
        snprintf(buf, len, "rank %u says world size %u, local size %u; earlier ranks of job %s "
                 "said %u, %u", j->rank, j->world_size, j->local_size, job->id,
                 job->world_size, job->local_size);
    } else if (strcmp(j->root, job->root) != 0) {
        snprintf(buf, len, "rank %u says root %s; earlier ranks said %s", j->rank, j->root,
                 job->root);
    } else if (job->locals[j->local_rank] != NULL) {
        snprintf(buf, len, "local rank %u of job %s is already taken by rank %u (pid %d)",
                 j->local_rank, job->id, job->locals[j->local_rank]->rank,
                 (int)job->locals[j->local_rank]->cred.pid);
    } else {
        for (uint32_t l = 0; l < job->local_size; l++) {
            if (job->locals[l] != NULL && job->ranks[l] == j->rank) {
                snprintf(buf, len, "rank %u of job %s joined twice on this node", j->rank,
                         job->id);
                return buf;
            }
        }
        return NULL;
    }
    return buf;
}

/* Only ranks with the job's token may join it (and see its pool). Returns a message when this
 * one may not. */
static const char *token_refusal(coll_daemon_t *d, const coll_job_t *job,
                                 const Coll__Wire__JoinJob *j, char *buf, size_t len)
{
    uint8_t digest[COLL_AUTH_BYTES];

    if (d->cfg.require_job_token && j->token[0] == '\0') {
        snprintf(buf, len, "this daemon requires a job token (set COLL_JOB_TOKEN)");
        return buf;
    }
    if (job == NULL) {
        return NULL;
    }
    coll_auth_token_digest(job->id, j->token, digest);
    if (sodium_memcmp(digest, job->token_digest, sizeof(digest)) != 0) {
        snprintf(buf, len, "wrong job token for job %s", job->id);
        return buf;
    }
    return NULL;
}

/* This node cannot hold the job (its pool budget, no memory for the pool): the rank hears why,
 * and so does the job's root, which fails the rendezvous on every node at once. */
static void refuse_job(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *j,
                       coll_status_t st, const char *why)
{
    coll_error(COLL_SUB_JOB, "refused job %s for rank %u (pid %d): %s", j->job, j->rank,
               (int)s->cred.pid, why);
    coll_stats_job_refused(&d->stats, st);
    coll_job_reply_join(s, st, why, NULL);
    if (j->root[0] != '\0') {
        coll_rdv_refuse(d, j, st, why);
    }
}

void coll_job_join(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *j)
{
    char err[512];
    coll_job_t *job = job_find(d, j->job);
    coll_status_t st;

    if (token_refusal(d, job, j, err, sizeof(err)) != NULL) {
        coll_warn(COLL_SUB_JOB, "refused rank %u (pid %d, uid %d) of job %s: %s", j->rank,
                  (int)s->cred.pid, (int)s->cred.uid, j->job, err);
        coll_job_reply_join(s, COLL_ERR_DENIED, err, NULL);
        return;
    }
    if (j->local_size > COLL_MAX_LOCAL) {
        snprintf(err, sizeof(err), "local size %u above the limit of %u", j->local_size,
                 COLL_MAX_LOCAL);
        coll_job_reply_join(s, COLL_ERR_INVALID, err, NULL);
        return;
    }
    if (job != NULL && join_conflict(job, s, j, err, sizeof(err)) != NULL) {
        coll_job_reply_join(s, COLL_ERR_RENDEZVOUS, err, NULL);
        return;
    }
    if (job == NULL && (st = job_create(d, j, err, sizeof(err), &job)) != COLL_OK) {
        refuse_job(d, s, j, st, err);
        return;
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
