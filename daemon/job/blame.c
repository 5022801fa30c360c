#include "job/blame.h"

#include <stdio.h>

#include "engine/shm_watch.h"
#include "net/control.h"
#include "proto/jobmsg.h"

static uint64_t ident(uint32_t group, uint64_t key)
{
    return coll_jobmsg_op_ident(group, key);
}

static const coll_op_t *find_collective(const coll_job_t *job, uint32_t group, uint64_t key)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (op->grp->id == group && ident(group, op->desc.key) == ident(group, key) &&
            !coll_kind_is_p2p(op->desc.coll)) {
            return op;
        }
    }
    return NULL;
}

uint32_t coll_blame_local(const coll_job_t *job, uint32_t group, uint64_t key, char *buf,
                          size_t len)
{
    const coll_op_t *op = find_collective(job, group, key);
    const coll_group_t *grp = coll_group_find(job, group);
    coll_shm_wait_t w = {.posted = 0};
    uint32_t missing = 0;
    size_t n = 0;

    buf[0] = '\0';
    if (grp == NULL || (op != NULL && op->done)) {
        return 0; /* no member here, or every local member had submitted it */
    }
    if (op == NULL && group == 0) { /* the ranks that posted it in shared memory submitted it */
        coll_shm_waiting_key(job, key, &w);
    }
    for (uint32_t i = 0; i < grp->nlocal && n < len; i++) {
        uint32_t l = grp->locals[i];
        const coll_session_t *s = job->locals[l];
        if ((op != NULL && op->members[i].session != NULL) || (l < 64 && (w.posted >> l) & 1)) {
            continue;
        }
        missing++;
        if (s != NULL) {
            n += (size_t)snprintf(buf + n, len - n, "%srank %u (pid %d, node %u, not submitted)",
                                  n ? ", " : "", job->ranks[l], (int)s->cred.pid,
                                  job->node_rank);
        } else {
            n += (size_t)snprintf(buf + n, len - n, "%srank %u (node %u, left the job)",
                                  n ? ", " : "", job->ranks[l], job->node_rank);
        }
    }
    return missing;
}

void coll_blame_ask(coll_op_t *op)
{
    if (op->grp->nnodes > 1 && !coll_kind_is_p2p(op->desc.coll)) {
        coll_control_blame_query(op->job, ident(op->grp->id, op->desc.key));
    }
}

const char *coll_blame_heard(const coll_op_t *op)
{
    return coll_control_blamed(op->job, ident(op->grp->id, op->desc.key));
}

void coll_blame_answer(coll_job_t *job)
{
    char text[240];

    for (uint32_t i = 0; i < job->net.nblame_queries; i++) {
        const coll_blame_query_t *q = &job->net.blame_queries[i];
        uint32_t group = (uint32_t)(q->key >> COLL_JOBMSG_IDENT_KEY_BITS);
        if (coll_blame_local(job, group, q->key, text, sizeof(text)) > 0) {
            coll_control_blame(job, q->node, q->key, text);
        }
    }
    job->net.nblame_queries = 0;
}
