#include "job/blame.h"

#include <stdio.h>

#include "engine/shm_watch.h"
#include "net/control.h"

static const coll_op_t *find_collective(const coll_job_t *job, uint64_t key)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (op->desc.key == key && op->desc.coll < COLL_KIND_SEND) {
            return op;
        }
    }
    return NULL;
}

uint32_t coll_blame_local(const coll_job_t *job, uint64_t key, char *buf, size_t len)
{
    const coll_op_t *op = find_collective(job, key);
    coll_shm_wait_t w = {.posted = 0};
    uint32_t missing = 0;
    size_t n = 0;

    buf[0] = '\0';
    if (op != NULL && op->done) {
        return 0; /* every local rank had submitted it */
    }
    if (op == NULL) { /* the ranks that posted it in shared memory have submitted it */
        coll_shm_waiting_key(job, key, &w);
    }
    for (uint32_t l = 0; l < job->local_size && n < len; l++) {
        const coll_session_t *s = job->locals[l];
        if ((op != NULL && op->members[l].session != NULL) || (l < 64 && (w.posted >> l) & 1)) {
            continue;
        }
        missing++;
        n += (size_t)snprintf(buf + n, len - n, "%srank %u (pid %d, node %u, not submitted)",
                              n ? ", " : "", job->ranks[l], s ? (int)s->cred.pid : -1,
                              job->node_rank);
    }
    return missing;
}

void coll_blame_ask(coll_op_t *op)
{
    if (op->job->nnodes > 1 && op->desc.coll < COLL_KIND_SEND) {
        coll_control_blame_query(op->job, op->desc.key);
    }
}

void coll_blame_answer(coll_job_t *job)
{
    char text[240];

    for (uint32_t i = 0; i < job->net.nblame_queries; i++) {
        const coll_blame_query_t *q = &job->net.blame_queries[i];
        if (coll_blame_local(job, q->key, text, sizeof(text)) > 0) {
            coll_control_blame(job, q->node, q->key, text);
        }
    }
    job->net.nblame_queries = 0;
}
