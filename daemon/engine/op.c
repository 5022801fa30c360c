/*
 * An operation's life on this node: created by its first submission (match.c), started once
 * every local member is in, completed or failed, freed once nothing holds it. The features an
 * operation carries (feature.h) are attached when it starts and called at each step of that
 * life through their hooks; this file names none of them. Its transfers and the descriptor
 * check with the previous node are xfer.c's.
 */
#include "engine/op.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "base/log.h"
#include "core/stats.h"
#include "engine/algo.h"
#include "engine/dev_sync.h"
#include "engine/feature.h"
#include "net/clientlink.h"
#include "net/transport.h"
#include "proto/a2a.h"

const char *coll__op_name(const coll_op_t *op, char *buf, size_t len)
{
    coll_desc_name(&op->desc, buf, len);
    return buf;
}

coll_op_t *coll_op_find(coll_job_t *job, const coll_group_t *grp, uint64_t key)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        if (!op->done && op->grp == grp && op->desc.key == key &&
            !coll_kind_is_p2p(op->desc.coll)) {
            return op;
        }
    }
    return NULL;
}

coll_op_t *coll_op_create(coll_job_t *job, coll_group_t *grp, const coll_desc_t *desc)
{
    uint32_t l = grp->nlocal;
    coll_op_t *op = calloc(1, sizeof(*op) + l * (sizeof(coll_op_member_t) + 2 * sizeof(void *)));

    if (op == NULL) {
        return NULL;
    }
    op->job = job;
    op->grp = grp;
    grp->ops++;
    op->desc = *desc;
    op->esize = coll_dtype_size((coll_dtype_t)desc->dtype);
    op->nbufs = l;
    op->members = (coll_op_member_t *)(op + 1);
    op->in = (const void **)(op->members + l);
    op->out = (void **)(op->in + l);
    coll_list_init(&op->posted);
    coll_list_init(&op->parked);
    op->t_submit_ns = coll_stats_now_ns();
    coll_list_push(&job->engine.ops, &op->link);
    return op;
}

void coll_op_hold(coll_op_t *op)
{
    op->holds++;
}

void coll_op_release(coll_op_t *op)
{
    COLL_ASSERT(op->holds > 0);
    op->holds--;
    coll_op_maybe_free(op);
}

/* Every registered feature from the @p from-th on looks at the operation and attaches or not
 * (feature.h). @return 1 to go on; 0 when one failed the job (@p op may be freed then) or holds
 * the start back (it calls coll_op_attached() later). */
static int attach_features(coll_op_t *op, uint32_t from)
{
    uint32_t n, i;
    const coll_op_feature_t *const *f = coll_op_features(&n);
    coll_status_t st = COLL_OK;
    int ok;

    coll_op_hold(op);
    for (i = from; i < n && st == COLL_OK && !op->done; i++) {
        if (op->feature[i] == NULL && f[i]->attach != NULL) {
            st = f[i]->attach(op, &op->feature[i]);
        }
    }
    op->attach_next = (uint8_t)i;
    ok = st == COLL_OK && !op->done;
    coll_op_release(op);
    return ok;
}

/* The attached features post their own transfers, after the descriptor went out. */
static coll_status_t start_features(coll_op_t *op)
{
    uint32_t n;
    const coll_op_feature_t *const *f = coll_op_features(&n);
    coll_status_t st = COLL_OK;

    for (uint32_t i = 0; i < n && st == COLL_OK; i++) {
        if (op->feature[i] != NULL && f[i]->start != NULL) {
            st = f[i]->start(op, op->feature[i]);
        }
    }
    return st;
}

static void impl_start(coll_op_t *op)
{
    coll_status_t st = op->impl->start(op);
    char nm[64];

    if (st != COLL_OK) {
        coll_job_fail(op->job, st, 1, "starting %s: %s", coll__op_name(op, nm, sizeof(nm)),
                      coll_strerror(st));
    }
}

/* Every feature attached: choose the implementation, post the descriptor, start. */
static void start_attached(coll_op_t *op)
{
    coll_job_t *job = op->job;
    int remote = op->grp->nnodes > 1; /* op may be freed by the time it is looked at again */
    coll_status_t st;
    char nm[64];

    if (op->impl == NULL) {
        op->impl = coll_algo_impl(op);
    }
    coll_debug(COLL_SUB_JOB, "job %s: %s of %" PRIu64 " elements starts (%s)", job->id,
               coll__op_name(op, nm, sizeof(nm)), op->desc.count, op->impl->name);
    st = coll__op_post_desc(op);
    if (st == COLL_OK) {
        st = start_features(op);
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "%s: posting the descriptor failed",
                      coll__op_name(op, nm, sizeof(nm)));
    } else {
        impl_start(op);
    }
    if (remote) {
        coll_transport_drive(job);
    }
}

coll_op_member_t coll_op_member_of(coll_session_t *s, const Coll__Wire__Submit *sub,
                                   uint64_t *table)
{
    return (coll_op_member_t){.session = s, .req_id = sub->req_id,
                              .send_off = sub->send_offset, .recv_off = sub->recv_offset,
                              .pool = sub->pool, .table = table, .sync_off = sub->sync_offset,
                              .sync_value = sub->sync_value, .sync_flags = sub->sync_flags};
}

void coll_op_start(coll_op_t *op)
{
    op->t_start_ns = coll_stats_now_ns();
    coll_stats_op_waited(&op->job->d->stats, op->desc.coll,
                         (double)(op->t_start_ns - op->t_submit_ns) / 1e9);
    if (attach_features(op, 0)) {
        start_attached(op);
    }
}

void coll_op_attached(coll_op_t *op)
{
    COLL_ASSERT(!op->done);
    if (attach_features(op, op->attach_next)) {
        start_attached(op);
    }
}

void coll_op_gate_opened(coll_op_t *op)
{
    COLL_ASSERT(!op->done && op->impl != NULL && op->impl->opened != NULL);
    op->impl->opened(op);
    if (op->grp->nnodes > 1) {
        coll_transport_drive(op->job);
    }
}

uint64_t coll_op_bytes(const coll_op_t *op)
{
    uint64_t sum = 0;

    if (op->desc.coll != COLL_KIND_ALLTOALLV) {
        return coll_stats_op_bytes(op->desc.coll, op->desc.count, op->esize, op->grp->size);
    }
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        if (op->members[l].table != NULL) {
            for (uint32_t j = 0; j < op->grp->size; j++) {
                sum += coll_a2a_at(op->members[l].table, op->grp->size, COLL_A2A_SCOUNTS, j);
            }
            return sum * op->esize;
        }
    }
    return 0;
}

static void count_done(const coll_op_t *op, coll_status_t status)
{
    uint64_t start = op->t_start_ns ? op->t_start_ns : op->t_submit_ns;
    coll_stats_op_t s = {op->desc.coll, op->desc.dtype, op->grp->size, coll_op_bytes(op),
                         (unsigned)(op->desc.run & 0xffu)}; /* its method (proto/cspec.h) */

    coll_stats_op_done(&op->job->d->stats, &s, (double)(coll_stats_now_ns() - start) / 1e9,
                       status);
}

/* The completion record every local rank gets: the phase times and the steps. */
static void times(const coll_op_t *op, coll_status_t status, coll_ctl_times_t *t)
{
    t->ready_ns = op->t_start_ns;
    t->peers_ns = op->t_peers_ns;
    t->reduced_ns = op->t_reduced_ns;
    t->done_ns = uv_hrtime();
    t->nsteps = status == COLL_OK ? op->nsteps : 0;
    memcpy(t->steps, op->steps, t->nsteps * sizeof(t->steps[0]));
    t->wire_bytes = t->dense_bytes = 0;
}

/* The attached features' last work on a successful operation's results (feature.h), from the
 * @p from-th on; the first that fails the job decides the status, and one that answers
 * COLL_INPROGRESS holds the completion back until it calls coll_op_finished(). */
static coll_status_t finish_features(coll_op_t *op, uint32_t from)
{
    uint32_t n, i;
    const coll_op_feature_t *const *f = coll_op_features(&n);
    coll_status_t st = COLL_OK;

    for (i = from; i < n && st == COLL_OK; i++) {
        if (op->feature[i] != NULL && f[i]->finish != NULL) {
            st = f[i]->finish(op, op->feature[i]);
        }
    }
    op->finish_next = (uint8_t)i;
    op->finishing = st == COLL_INPROGRESS;
    return st;
}

/* Tell the features and every local rank how @p op ended; free it unless something holds it. */
static void tell(coll_op_t *op, coll_status_t status, const char *error)
{
    uint32_t n;
    const coll_op_feature_t *const *f = coll_op_features(&n);
    coll_ctl_times_t t;

    times(op, status, &t);
    for (uint32_t i = 0; i < n; i++) {
        if (op->feature[i] != NULL && f[i]->done != NULL) {
            f[i]->done(op, op->feature[i], status, &t);
        }
    }
    count_done(op, status);
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        coll_op_member_t *m = &op->members[l];
        coll_dev_sync_done(op, m); /* before the rank hears of it: its stream may go on */
        if (m->session != NULL) {
            coll_session_complete_op(m->session, m->req_id,
                                     coll_job_status_for(op->job, m->session->rank, status),
                                     error, op->impl != NULL ? op->impl->name : "", &t);
            m->session = NULL;
        }
    }
    coll_op_maybe_free(op);
}

void coll_op_complete(coll_op_t *op, coll_status_t status, const char *error)
{
    if (op->done) {
        return;
    }
    /* Done before the features finish: a job failure they cause does not complete it twice. */
    op->done = 1;
    if (status == COLL_OK && (status = finish_features(op, 0)) != COLL_OK) {
        if (status == COLL_INPROGRESS) {
            return;
        }
        error = op->job->errmsg;
    }
    tell(op, status, error);
}

void coll_op_finished(coll_op_t *op, coll_status_t status)
{
    COLL_ASSERT(op->done && op->finishing);
    op->finishing = 0;
    if (status == COLL_OK && (status = finish_features(op, op->finish_next)) == COLL_INPROGRESS) {
        return;
    }
    tell(op, status, status == COLL_OK ? op->algo_error : op->job->errmsg);
}

void coll_op_mark_step(coll_op_t *op, uint32_t phase, uint32_t step, uint32_t nsteps,
                       uint32_t budget)
{
    uint64_t now = uv_hrtime();

    if (op->nsteps == COLL_CTL_MAX_STEPS || !coll_ctl_step_ends_record(step, nsteps, budget)) {
        return;
    }
    op->steps[op->nsteps++] = coll_ctl_step_pack(
        phase, step, now > op->t_start_ns ? (now - op->t_start_ns) / 1000 : 0);
}

void coll_op_mark_reduced(coll_op_t *op)
{
    if (op->t_reduced_ns == 0) {
        op->t_reduced_ns = uv_hrtime();
    }
}

/* Whether an attached feature holds the completion back. */
static int features_waiting(const coll_op_t *op)
{
    uint32_t n;
    const coll_op_feature_t *const *f = coll_op_features(&n);

    for (uint32_t i = 0; i < n; i++) {
        if (op->feature[i] != NULL && f[i]->waiting != NULL &&
            f[i]->waiting(op, op->feature[i])) {
            return 1;
        }
    }
    return 0;
}

void coll__op_maybe_complete(coll_op_t *op)
{
    if (!op->done && op->algo_done && op->desc_ok && !features_waiting(op)) {
        coll_op_complete(op, op->algo_status, op->algo_error);
    }
}

void coll_op_algo_done(coll_op_t *op)
{
    coll_op_mark_reduced(op);
    op->algo_done = 1;
    coll__op_maybe_complete(op);
}

void coll_op_algo_failed(coll_op_t *op, coll_status_t status, const char *error)
{
    op->algo_status = status;
    snprintf(op->algo_error, sizeof(op->algo_error), "%s", error);
    coll_op_algo_done(op);
}

void coll_op_free_algo_state(coll_op_t *op)
{
    free(op->algo_state);
    op->algo_state = NULL;
}

void coll_op_fail_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        coll_xfer_t *x, *xtmp;
        coll_list_for_each_safe(x, xtmp, &op->posted, coll_xfer_t, posted)
        {
            if (!x->is_send) {
                coll_transport_cancel(job, x);
            }
        }
        coll_op_complete(op, job->error, job->errmsg);
    }
}

void coll_op_maybe_free(coll_op_t *op)
{
    uint32_t n;
    const coll_op_feature_t *const *f = coll_op_features(&n);

    if (!op->done || op->finishing || op->inflight > 0 || op->holds > 0) {
        return;
    }
    COLL_ASSERT(coll_list_empty(&op->posted));
    coll_list_remove(&op->link);
    if (op->impl != NULL && op->impl->cleanup != NULL) {
        op->impl->cleanup(op);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (op->feature[i] != NULL && f[i]->free != NULL) {
            f[i]->free(op, op->feature[i]);
        }
        op->feature[i] = NULL;
    }
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        free(op->members[l].table);
    }
    COLL_ASSERT(op->grp->ops > 0);
    op->grp->ops--;
    coll_group_unref(op->grp);
    free(op);
}

void coll_op_free_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        COLL_ASSERT(op->holds == 0);
        op->done = 1;
        op->inflight = 0; /* the worker is gone: nothing will complete any more */
        op->finishing = 0;
        coll_list_init(&op->posted);
        coll_op_maybe_free(op);
    }
}
