/*
 * Submissions matched by (group, key): a local member's submission joins the operation of its
 * group and key (created by the first one), and the operation starts when every local member
 * is in with the same descriptor.
 *
 * Submissions are matched by key, not by arrival order, so local ranks (and nodes) that submit
 * buckets in different orders do not deadlock: every operation whose local members are all in
 * starts at once and runs beside the others, those of other groups included.
 */
#include <stdio.h>
#include <stdlib.h>

#include "core/dev_pools.h"
#include "engine/algos/p2p.h"
#include "engine/op.h"
#include "engine/submit.h"
#include "net/clientlink.h"

static void fail_local_mismatch(coll_op_t *op, coll_session_t *s, const coll_desc_t *mine)
{
    char msg[600], who[32] = "an earlier rank";

    /* The operation's descriptor came from the first local member that submitted it. */
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        if (op->members[l].session != NULL && op->members[l].session != s) {
            snprintf(who, sizeof(who), "rank %u", op->members[l].session->rank);
            break;
        }
    }
    coll_desc_mismatch(&op->desc, who, mine, s->rank, msg, sizeof(msg));
    coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s", msg);
}

/* A submission this node refuses (bad buffers, root or peer, overlap, a repeated key, no
 * memory) can never complete on the other ranks either: it fails the job on every node, with
 * the reason, rather than leaving them to the timeout; they get COLL_ERR_JOB. The refused
 * request gets @p st and the reason. */
static void refuse_everywhere(coll_job_t *job, coll_session_t *s, uint32_t req_id,
                              coll_status_t st, const char *why)
{
    coll_job_fail_by(job, s->rank, st, "job %s: rank %u's submission was refused on node %u "
                     "with %s: %s", job->id, s->rank, job->node_rank, coll_err_name(st), why);
    coll_session_complete(s, req_id, coll_job_status_for(job, s->rank, job->error), job->errmsg,
                          "");
}

/* The group a submission names, when its rank registered it on this node (the world: always).
 * NULL otherwise, with the reason in @p err. */
static coll_group_t *member_group(coll_job_t *job, const coll_session_t *s,
                                  const Coll__Wire__Submit *sub, char *err, size_t len)
{
    coll_group_t *grp = coll_group_find(job, sub->group);
    uint32_t i = grp != NULL ? grp->local_of[s->local_rank] : COLL_GROUP_NONE;

    if (i == COLL_GROUP_NONE || (grp->id != 0 && !(grp->registered & (1ull << i)))) {
        snprintf(err, len, "rank %u is not a member of group %u of job %s (a %s on a "
                 "communicator it did not split or has destroyed)", s->rank, sub->group,
                 job->id, coll_kind_name((coll_kind_t)sub->coll));
        return NULL;
    }
    return grp;
}

/* A local member left between operations, so nothing failed yet; this collective can never
 * run without it. Returns 1 (and fails the job everywhere now, or the other nodes would wait
 * for it until the timeout) when one did. */
static int member_left(coll_job_t *job, const coll_group_t *grp, const coll_session_t *s)
{
    for (uint32_t i = 0; i < grp->nlocal; i++) {
        if (job->locals[grp->locals[i]] == NULL) {
            coll_job_fail(job, COLL_ERR_JOB, 1, "%s left job %s; the collectives of its "
                          "communicators cannot run without it (rank %u submitted the next one "
                          "of group %u)", job->left, job->id, s->rank, grp->id);
            return 1;
        }
    }
    return 0;
}

/* A submission after the job failed: the code and reason of its own refusal when this node
 * refuses it too (a rank that made the mistake that ended the job hears of its own, whichever
 * came first), else the job's error as this rank sees it. The parameter service's are not
 * checked again: a failure may have left its state incomplete. */
static coll_status_t failed_earlier(coll_job_t *job, coll_session_t *s,
                                    const Coll__Wire__Submit *sub, char *err, size_t len)
{
    coll_group_t *grp;
    coll_status_t st = COLL_OK;

    if (!coll_kind_is_ps(sub->coll)) {
        grp = member_group(job, s, sub, err, len);
        st = grp == NULL ? COLL_ERR_INVALID : coll_submit_check(job, grp, s, sub, NULL, err, len);
    }
    if (st != COLL_OK) {
        return st;
    }
    snprintf(err, len, "job %s failed earlier: %.400s", job->id, job->errmsg);
    return coll_job_status_for(job, s->rank, job->error);
}

/* Checks before a submission joins an operation; returns COLL_OK and its group in @p grp_p, or
 * an error with its text in @p err (the caller refuses the request, or the job with
 * refuse_everywhere()). */
static coll_status_t refuse(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub,
                            coll_group_t **grp_p, uint64_t **table_p, char *err, size_t len)
{
    if (job->state == COLL_JOB_FAILED) {
        return failed_earlier(job, s, sub, err, len);
    }
    if (job->state != COLL_JOB_READY) {
        snprintf(err, len, "submit before the job is ready");
        return COLL_ERR_PROTOCOL;
    }
    if ((*grp_p = member_group(job, s, sub, err, len)) == NULL) {
        return COLL_ERR_INVALID;
    }
    if (!coll_kind_is_p2p(sub->coll) && member_left(job, *grp_p, s)) {
        snprintf(err, len, "%.500s", job->errmsg);
        return job->error;
    }
    return coll_submit_check(job, *grp_p, s, sub, table_p, err, len);
}


/* Daemon addresses of member @p i's buffers (NULL where its role uses none; an all-to-all's
 * always, its count table says which bytes), in the pool its submission named: a device
 * pool's are device addresses, which the staged path gives host copies when the operation
 * starts (engine/dev_staged.h). */
static void map_member(coll_op_t *op, uint32_t i)
{
    const coll_group_t *grp = op->grp;
    uint8_t *base = coll_pool_base(coll_job_pool_by_id(op->job, op->members[i].pool));
    uint64_t se, re;

    coll_kind_extent((coll_kind_t)op->desc.coll, op->desc.count, grp->size,
                     coll_group_rank_of_local(grp, i), op->desc.root, &se, &re);
    if (op->desc.coll == COLL_KIND_ALLTOALLV) {
        se = re = 1;
    }
    op->in[i] = se > 0 ? base + op->members[i].send_off : NULL;
    op->out[i] = re > 0 ? base + op->members[i].recv_off : NULL;
}

/* Member @p s joins the operation of @p sub's key, with the count table @p table (an
 * all-to-all's, which the operation then owns; else NULL). */
static void add_member(coll_job_t *job, coll_group_t *grp, coll_session_t *s,
                       const Coll__Wire__Submit *sub, const coll_desc_t *desc, uint64_t *table)
{
    char err[256], nm[64];
    coll_op_t *op = coll_op_find(job, grp, sub->key);
    uint32_t i = grp->local_of[s->local_rank];

    if (op == NULL && (op = coll_op_create(job, grp, desc)) == NULL) {
        refuse_everywhere(job, s, sub->req_id, COLL_ERR_NOMEM, "daemon out of memory");
        free(table);
        return;
    }
    if (op->members[i].session != NULL) {
        coll_desc_name(desc, nm, sizeof(nm));
        snprintf(err, sizeof(err), "rank %u submitted %s twice", s->rank, nm);
        refuse_everywhere(job, s, sub->req_id, COLL_ERR_INVALID, err);
        free(table);
        return;
    }
    op->members[i] = coll_op_member_of(s, sub, table);
    op->nsubmitted++;
    if (!coll_desc_equal(&op->desc, desc)) {
        fail_local_mismatch(op, s, desc);
        return;
    }
    map_member(op, i);
    if (op->nsubmitted == grp->nlocal) {
        coll_op_start(op);
    }
}

void coll_op_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub)
{
    char err[640];
    coll_desc_t desc;
    coll_group_t *grp = NULL;
    uint64_t *table = NULL;
    coll_status_t st = refuse(job, s, sub, &grp, &table, err, sizeof(err));

    if (st != COLL_OK && job->state == COLL_JOB_READY) {
        refuse_everywhere(job, s, sub->req_id, st, err);
        return;
    }
    if (st != COLL_OK) {
        coll_session_complete(s, sub->req_id, st, err, "");
        return;
    }
    if ((coll_kind_t)sub->coll == COLL_KIND_SEND || (coll_kind_t)sub->coll == COLL_KIND_RECV) {
        coll_p2p_submit(job, grp, s, sub);
        return;
    }
    /* A forced algorithm that cannot run still gets an operation (its descriptor names the
     * refused algorithm): ranks that all forced it fail together with COLL_ERR_UNSUPPORTED
     * after agreeing; a rank that did not force it disagrees, and the job fails. */
    coll_submit_desc(job, grp, sub, &desc);
    add_member(job, grp, s, sub, &desc, table);
}
