#include "job/groups.h"

#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "net/clientlink.h"

static void reply(coll_session_t *s, uint32_t req_id, coll_status_t st, const char *error,
                  const coll_group_t *g, uint32_t next)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__GroupReply r = COLL__WIRE__GROUP_REPLY__INIT;

    r.req_id = req_id;
    r.status = st;
    r.error = (char *)error;
    r.next_group = next;
    if (st == COLL_OK && g != NULL) {
        r.local_rank = g->local_of[s->local_rank];
        r.local_size = g->nlocal;
        r.node_count = g->nnodes;
    }
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_GROUP;
    msg.group = &r;
    coll_session_send(s, &msg);
}

/* Why @p s's job takes no group messages now, or NULL when it does. */
static const char *not_ready(const coll_session_t *s, coll_status_t *st, char *err, size_t len)
{
    const coll_job_t *job = s->job;

    if (job == NULL) {
        *st = COLL_ERR_PROTOCOL;
        return "a group message before joining a job";
    }
    if (job->state == COLL_JOB_FAILED) {
        *st = coll_job_status_for(job, s->rank, job->error);
        snprintf(err, len, "job %s failed earlier: %.300s", job->id, job->errmsg);
        return err;
    }
    if (job->state != COLL_JOB_READY) {
        *st = COLL_ERR_PROTOCOL;
        return "a group message before the job is ready";
    }
    return NULL;
}

void coll_groups_query(coll_session_t *s, const Coll__Wire__GroupQuery *q)
{
    char err[512];
    coll_status_t st = COLL_OK;
    const char *why = not_ready(s, &st, err, sizeof(err));

    reply(s, q->req_id, st, why != NULL ? why : "", NULL, why ? 0 : s->job->group_next);
}

/* The group of @p c on this node: the one registered under its id if it has the same ranks,
 * else a new one (linked into the job); NULL with the reason. */
static coll_group_t *find_or_build(coll_job_t *job, const Coll__Wire__GroupCreate *c,
                                   const uint32_t *ranks, coll_status_t *st, char *err,
                                   size_t len)
{
    coll_group_t *g = coll_group_find(job, c->group);

    if (g != NULL && coll_group_same_ranks(g, ranks, c->size)) {
        return g;
    }
    if (g != NULL) {
        *st = COLL_ERR_INVALID;
        snprintf(err, len, "group id %u is already used on this node by another group (%u ranks "
                 "from rank %u), made by a split that ran at the same time as this one (%u "
                 "ranks from rank %u): split communicators that share a node one after the "
                 "other", c->group, g->size, g->ranks[0], c->size, ranks[0]);
        return NULL;
    }
    if ((*st = coll_group_build(job, c->group, ranks, c->size, &g, err, len)) != COLL_OK) {
        return NULL;
    }
    coll_list_push(&job->groups, &g->link);
    return g;
}

/* The group's ranks, read from the sender's pool allocation; NULL with the reason. */
static const uint32_t *read_ranks(const coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__GroupCreate *c, char *err, size_t len)
{
    uint64_t bytes = (uint64_t)c->size * sizeof(uint32_t);

    if (c->ranks_offset % sizeof(uint32_t) != 0 ||
        !coll_pool_range_owned(job->pool, c->ranks_offset, bytes, s)) {
        snprintf(err, len, "rank %u: the group's rank list [%llu, +%llu) is not inside this "
                 "rank's allocations in the pool", s->rank, (unsigned long long)c->ranks_offset,
                 (unsigned long long)bytes);
        return NULL;
    }
    return (const uint32_t *)(const void *)(coll_pool_base(job->pool) + c->ranks_offset);
}

void coll_groups_create(coll_session_t *s, const Coll__Wire__GroupCreate *c)
{
    coll_job_t *job = s->job;
    char err[512];
    coll_status_t st = COLL_ERR_INVALID;
    const char *why = not_ready(s, &st, err, sizeof(err));
    const uint32_t *ranks = why == NULL ? read_ranks(job, s, c, err, sizeof(err)) : NULL;
    coll_group_t *g = ranks != NULL ? find_or_build(job, c, ranks, &st, err, sizeof(err)) : NULL;
    uint32_t i = g != NULL ? g->local_of[s->local_rank] : COLL_GROUP_NONE;

    if (g != NULL && (i == COLL_GROUP_NONE || (g->registered & (1ull << i)))) {
        snprintf(err, sizeof(err), "rank %u %s group %u", s->rank,
                 i == COLL_GROUP_NONE ? "is not a rank of" : "registered twice in", c->group);
        coll_group_unref(g);
        g = NULL;
        st = COLL_ERR_INVALID;
    }
    if (g == NULL) {
        coll_warn(COLL_SUB_JOB, "job %s: group %u refused: %s", job ? job->id : "-", c->group,
                  why != NULL ? why : err);
        reply(s, c->req_id, st, why != NULL ? why : err, NULL, 0);
        return;
    }
    g->registered |= 1ull << i;
    if (c->last_group + 1 > job->group_next) {
        job->group_next = c->last_group + 1;
    }
    coll_debug(COLL_SUB_JOB, "job %s: rank %u in group %u (%u ranks, %u here, %u nodes)",
               job->id, s->rank, g->id, g->size, g->nlocal, g->nnodes);
    reply(s, c->req_id, COLL_OK, "", g, job->group_next);
}

/* Local rank @p s leaves @p g if it is registered there. */
static void leave_group(coll_group_t *g, const coll_session_t *s)
{
    uint32_t i = g->local_of[s->local_rank];

    if (i != COLL_GROUP_NONE && (g->registered & (1ull << i))) {
        g->registered &= ~(1ull << i);
        coll_group_unref(g);
    }
}

void coll_groups_free(coll_session_t *s, uint32_t id)
{
    coll_group_t *g = s->job != NULL ? coll_group_find(s->job, id) : NULL;

    if (g == NULL || g->local_of[s->local_rank] == COLL_GROUP_NONE) {
        coll_warn(COLL_SUB_SESSION, "session %llu: free of group %u it is not in",
                  (unsigned long long)s->id, id);
        return;
    }
    leave_group(g, s);
}
