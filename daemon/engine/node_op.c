/*
 * A node-reduced allreduce in the daemon: one operation for every local rank, as if the node had
 * a single rank whose buffer is the node buffer (input and output, in place). The engine's
 * algorithms read and write only op->nbufs local buffers, so they move nothing else; the local
 * ranks' own buffers are never touched here, only checked as for their own submissions.
 */
#include "engine/node_op.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "engine/op.h"
#include "engine/submit.h"

/* The ranks distribute the result from their node buffer, or end with the error: the home post
 * hears it, not their sessions. */
static void node_done(coll_op_t *op, void *state, coll_status_t status, coll_ctl_times_t *t)
{
    coll_shm_node_done(op->job, state, status,
                       op->desc.algo < COLL_ALGO_REFUSED ? op->desc.algo : COLL_ALGO_AUTO, t);
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        op->members[l].session = NULL;
    }
}

static void node_free(coll_op_t *op, void *state)
{
    (void)op;
    free(state);
}

const coll_op_feature_t coll_node_feature = {
    .name = "node",
    .done = node_done,
    .free = node_free,
};

int coll_op_is_node_reduced(const coll_op_t *op)
{
    return coll_op_feature_state(op, &coll_node_feature) != NULL;
}

/* The checks of every local rank's own submission; COLL_OK or an error with the reason. */
static coll_status_t check_ranks(coll_job_t *job, coll_group_t *grp, const Coll__Wire__Submit *subs,
                                 char *err, size_t len)
{
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_status_t st;
        if (job->locals[l] == NULL) {
            snprintf(err, len, "%s left job %s; the collectives of its communicators cannot "
                     "run without it", job->left, job->id);
            return COLL_ERR_JOB;
        }
        if ((st = coll_submit_check(job, grp, job->locals[l], &subs[l], NULL, err, len)) != COLL_OK) {
            return st;
        }
    }
    if (coll_op_find(job, grp, subs[0].key) != NULL) {
        snprintf(err, len, "allreduce key %" PRIu64 " was handed to the daemon twice",
                 subs[0].key);
        return COLL_ERR_PROTOCOL;
    }
    return COLL_OK;
}

/* Every local rank's descriptor equals local rank 0's (@p desc); COLL_ERR_MISMATCH with both
 * in @p err otherwise. */
static coll_status_t check_agree(coll_job_t *job, coll_group_t *grp, const Coll__Wire__Submit *subs,
                                 const coll_desc_t *desc, char *err, size_t len)
{
    char who[32];
    coll_desc_t d;

    for (uint32_t l = 1; l < job->local_size; l++) {
        coll_submit_desc(job, grp, &subs[l], &d);
        if (!coll_desc_equal(desc, &d)) {
            snprintf(who, sizeof(who), "rank %u", job->locals[0]->rank);
            coll_desc_mismatch(desc, who, &d, job->locals[l]->rank, err, len);
            return COLL_ERR_MISMATCH;
        }
    }
    return COLL_OK;
}

/* The operation, its one buffer the node buffer (in place), the home post attached. */
static coll_op_t *node_op_create(coll_job_t *job, coll_group_t *grp, const coll_desc_t *desc,
                                 const coll_shm_home_t *home)
{
    coll_shm_home_t *h = malloc(sizeof(*h));
    coll_op_t *op = h != NULL ? coll_op_create(job, grp, desc) : NULL;

    if (op == NULL) {
        free(h);
        return NULL;
    }
    *h = *home;
    coll_op_feature_attach(op, &coll_node_feature, h);
    op->nbufs = 1;
    op->in[0] = op->out[0] = desc->count > 0 ? coll_pool_base(job->pool) + home->off : NULL;
    return op;
}

void coll_op_submit_reduced(coll_job_t *job, const Coll__Wire__Submit *subs,
                            const coll_shm_home_t *home)
{
    coll_group_t *grp = job->world;
    char err[640];
    coll_desc_t desc;
    coll_op_t *op;
    coll_status_t st = check_ranks(job, grp, subs, err, sizeof(err));

    if (st == COLL_OK) {
        coll_submit_desc(job, grp, &subs[0], &desc);
        st = check_agree(job, grp, subs, &desc, err, sizeof(err));
    }
    if (st == COLL_OK &&
        !coll_pool_range_owned(job->pool, home->off,
                               subs[0].count * coll_dtype_size((coll_dtype_t)subs[0].dtype),
                               job->locals[0])) {
        snprintf(err, sizeof(err), "rank %u: its node buffer [%" PRIu64 ", +%" PRIu64 ") is "
                 "not inside its allocations in the pool of job %s", job->locals[0]->rank,
                 home->off, subs[0].count * coll_dtype_size((coll_dtype_t)subs[0].dtype),
                 job->id);
        st = COLL_ERR_PROTOCOL;
    }
    if (st == COLL_OK && (op = node_op_create(job, grp, &desc, home)) == NULL) {
        snprintf(err, sizeof(err), "daemon out of memory");
        st = COLL_ERR_NOMEM;
    }
    if (st == COLL_ERR_MISMATCH) {
        coll_job_fail(job, st, 1, "%s", err);
        return;
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "job %s: the allreduce the ranks of node %u reduced in shared "
                      "memory was refused: %s", job->id, job->node_rank, err);
        return;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_session_t *s = job->locals[l];
        op->members[grp->local_of[l]] = coll_op_member_of(s, &subs[l], NULL);
    }
    op->nsubmitted = grp->nlocal;
    coll_op_start(op);
}
