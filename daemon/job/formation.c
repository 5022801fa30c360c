/*
 * Which job a join belongs to (id and digest), and one formation per name: formation.h has the
 * rule and why.
 */
#include "job/formation.h"

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"

/* A name refused until @c expires (loop time, ms), with the reason the joins hear. */
typedef struct {
    coll_list_t link; /* in d->barred_jobs */
    char id[COLL_JOB_ID_MAX + 1];
    uint8_t digest[COLL_AUTH_BYTES];
    uint64_t expires;
    char why[512];
} barred_t;

static int same_name(const coll_job_t *job, const char *id, const uint8_t *digest)
{
    return strcmp(job->id, id) == 0 &&
           sodium_memcmp(job->token_digest, digest, COLL_AUTH_BYTES) == 0;
}

/* A barred name: its reason; NULL when none (expired ones are dropped on the way). */
static const char *barred(coll_daemon_t *d, const char *id, const uint8_t *digest)
{
    barred_t *b, *tmp;
    uint64_t now = uv_now(d->loop);

    coll_list_for_each_safe(b, tmp, &d->barred_jobs, barred_t, link)
    {
        if (now >= b->expires) {
            coll_list_remove(&b->link);
            free(b);
        } else if (strcmp(b->id, id) == 0 &&
                   sodium_memcmp(b->digest, digest, COLL_AUTH_BYTES) == 0) {
            return b->why;
        }
    }
    return NULL;
}

/* Two launches met in @p job: it fails on every rank, and its name is refused for its timeout
 * so that the later ranks of both are refused too rather than form a job of their own. */
static void second_formation(coll_job_t *job, const coll_session_t *s,
                             const Coll__Wire__JoinJob *j, const coll_session_t *holder,
                             char *err, size_t errlen)
{
    barred_t *b = calloc(1, sizeof(*b));
    char held[64];

    if (holder != NULL) {
        snprintf(held, sizeof(held), "held by pid %d", (int)holder->cred.pid);
    } else {
        snprintf(held, sizeof(held), "the job had formed");
    }
    snprintf(err, errlen, "job %s: a second formation with the same job id and token joined "
             "this node (rank %u, local rank %u, pid %d; %s): the ranks of two launches cannot "
             "be told apart, so neither forms; give each launch its own job id or "
             "COLL_JOB_TOKEN", job->id, j->rank, j->local_rank, (int)s->cred.pid, held);
    if (b != NULL) {
        snprintf(b->id, sizeof(b->id), "%s", job->id);
        memcpy(b->digest, job->token_digest, COLL_AUTH_BYTES);
        b->expires = uv_now(job->d->loop) + job->timeout_ms;
        snprintf(b->why, sizeof(b->why), "%s", err);
        coll_list_push(&job->d->barred_jobs, &b->link);
    }
    if (job->state != COLL_JOB_FAILED) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 1, "%s", err);
    }
}

/* The local rank or rank @p j claims, when a session of @p job holds it already. */
static const coll_session_t *claimed(const coll_job_t *job, const Coll__Wire__JoinJob *j)
{
    if (j->local_rank < job->local_size && job->locals[j->local_rank] != NULL) {
        return job->locals[j->local_rank];
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (job->locals[l] != NULL && job->ranks[l] == j->rank) {
            return job->locals[l];
        }
    }
    return NULL;
}

/* A join of @p job's name that disagrees with it: COLL_OK when it does not. */
static coll_status_t conflict(coll_job_t *job, const coll_session_t *s,
                              const Coll__Wire__JoinJob *j, char *err, size_t errlen)
{
    const coll_session_t *holder = job->state == COLL_JOB_FAILED ? NULL : claimed(job, j);

    if (job->state == COLL_JOB_FAILED) {
        snprintf(err, errlen, "job %s failed on this node (%s); use a new job id", job->id,
                 job->errmsg);
    } else if (j->world_size != job->world_size || j->local_size != job->local_size) {
        snprintf(err, errlen, "rank %u says world size %u, local size %u; earlier ranks of job "
                 "%s said %u, %u", j->rank, j->world_size, j->local_size, job->id,
                 job->world_size, job->local_size);
    } else if (strcmp(j->root, job->root) != 0) {
        snprintf(err, errlen, "rank %u says root %s; earlier ranks said %s", j->rank, j->root,
                 job->root);
    } else if (holder != NULL || job->state != COLL_JOB_GATHERING) {
        second_formation(job, s, j, holder, err, errlen);
    } else {
        return COLL_OK;
    }
    return COLL_ERR_RENDEZVOUS;
}

coll_status_t coll_formation_find(coll_daemon_t *d, const coll_session_t *s,
                                  const Coll__Wire__JoinJob *j, const uint8_t *digest,
                                  coll_job_t **job_p, char *err, size_t errlen)
{
    coll_job_t *job, *tmp, *mine = NULL;
    const char *why = barred(d, j->job, digest);

    *job_p = NULL;
    if (why != NULL) {
        snprintf(err, errlen, "%s", why);
        return COLL_ERR_RENDEZVOUS;
    }
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (job->closing || strcmp(job->id, j->job) != 0) {
            continue;
        }
        if (same_name(job, j->job, digest)) {
            *job_p = job;
            return conflict(job, s, j, err, errlen);
        }
        mine = job->owner_uid == s->cred.uid ? job : mine;
    }
    if (mine != NULL) {
        snprintf(err, errlen, "wrong job token for job %s (its ranks here run as uid %d too, "
                 "with %s)", j->job, (int)mine->owner_uid,
                 j->token[0] != '\0' ? "another token or none" : "a token");
        return COLL_ERR_DENIED;
    }
    return COLL_OK;
}

void coll_formation_clear(coll_daemon_t *d)
{
    barred_t *b, *tmp;

    coll_list_for_each_safe(b, tmp, &d->barred_jobs, barred_t, link)
    {
        coll_list_remove(&b->link);
        free(b);
    }
}
