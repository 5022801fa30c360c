#include "job/submission.h"

#include <stdio.h>

#include "engine/node_op.h"
#include "engine/op.h"
#include "engine/shm.h"
#include "job/session.h"

/* Whether the local ranks' posts were read (@p st COLL_OK); else rejects the session of local
 * rank @p who that posted a malformed one, or fails the job with the reason @p err. */
static int posts_taken(coll_job_t *job, coll_status_t st, uint32_t who, const char *err)
{
    if (st == COLL_ERR_PROTOCOL) {
        coll_session_reject(job->locals[who], err);
        return 0;
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "%s", err);
        return 0;
    }
    return 1;
}

/* Every local rank's post of the collective, as that rank's own submission. */
static void submit_node(coll_job_t *job, const Coll__Wire__Submit *sub)
{
    Coll__Wire__Submit subs[COLL_MAX_LOCAL];
    char err[400];
    uint32_t who = 0;
    coll_status_t st;

    if (job->state != COLL_JOB_READY) {
        return; /* after a failure the ranks end what they posted with its error */
    }
    st = coll_shm_take(job, sub->key, subs, &who, err, sizeof(err));
    if (!posts_taken(job, st, who, err)) {
        return;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (job->locals[l] != NULL) {
            coll_op_submit(job, job->locals[l], &subs[l]);
        }
    }
}

/* Every local rank's post of an allreduce they reduced in shared memory: its inter-node phase. */
static void submit_reduced(coll_job_t *job, const Coll__Wire__Submit *sub)
{
    Coll__Wire__Submit subs[COLL_MAX_LOCAL];
    coll_shm_home_t home;
    char err[400];
    uint32_t who = 0;
    coll_status_t st;

    if (job->state != COLL_JOB_READY) {
        return; /* after a failure the ranks end what they posted with its error */
    }
    st = coll_shm_read_reduced(job, sub->key, subs, &home, &who, err, sizeof(err));
    if (!posts_taken(job, st, who, err)) {
        return;
    }
    coll_op_submit_reduced(job, subs, &home);
}

void coll_job_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub)
{
    if (sub->flags & COLL_SUBMISSION_REDUCED) {
        submit_reduced(job, sub);
    } else if (sub->flags & COLL_SUBMISSION_NODE) {
        submit_node(job, sub);
    } else {
        coll_op_submit(job, s, sub);
    }
}
