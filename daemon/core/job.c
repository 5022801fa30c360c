/*
 * What every layer may do to a job: fail it, mark one of its nodes lost, count down its
 * handles; and the parameters a daemon's configuration gives a job.
 */
#include "core/job.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "base/log.h"

void coll_job_params_from_config(const coll_config_t *cfg, coll_job_params_t *p)
{
    *p = (coll_job_params_t){0};
    p->timeout_ms = cfg->timeout_ms;
    p->segment_bytes = cfg->segment_size;
    p->pipeline_depth = (uint32_t)cfg->pipeline_depth;
    /* Recursive doubling sends a descriptor and the whole buffer in one staging half. */
    p->rd_max_bytes = cfg->rd_max_bytes < cfg->segment_size - sizeof(coll_desc_t)
                          ? cfg->rd_max_bytes
                          : cfg->segment_size - sizeof(coll_desc_t);
    p->nccl = 0; /* the root decides it at the rendezvous; a job alone has no other daemon */
    p->direct_max_bytes = cfg->direct_max_bytes; /* the root keeps it only when every node's
                                                    leader has an address (net/rdv.c) */
}

void coll_job_params_to_wire(const coll_job_params_t *p, Coll__Wire__JobParams *w,
                             Coll__Wire__AlgoChoice *store, Coll__Wire__AlgoChoice **ptrs)
{
    coll__wire__job_params__init(w);
    w->timeout_ms = p->timeout_ms;
    w->segment_bytes = p->segment_bytes;
    w->pipeline_depth = p->pipeline_depth;
    w->rd_max_bytes = p->rd_max_bytes;
    w->nccl = p->nccl != 0;
    w->direct_max_bytes = p->direct_max_bytes;
    w->direct_token = p->direct_token;
    for (uint32_t i = 0; i < p->nchoices && i < COLL_JOB_CHOICES; i++) {
        coll__wire__algo_choice__init(&store[i]);
        store[i].kind = p->choices[i].kind;
        store[i].algo = p->choices[i].algo;
        store[i].max_bytes = p->choices[i].max_bytes;
        ptrs[i] = &store[i];
        w->n_choices = i + 1;
    }
    w->choices = ptrs;
}

coll_status_t coll_job_params_from_wire(const Coll__Wire__JobParams *w, coll_job_params_t *p)
{
    coll_job_params_t q;

    if (w == NULL || w->n_choices > COLL_JOB_CHOICES) {
        return COLL_ERR_PROTOCOL;
    }
    q = (coll_job_params_t){w->timeout_ms, w->segment_bytes, w->pipeline_depth,
                            w->rd_max_bytes, (uint32_t)w->n_choices, {{0}}, w->nccl,
                            w->direct_max_bytes, w->direct_token};
    for (size_t i = 0; i < w->n_choices; i++) {
        q.choices[i] = (coll_job_choice_t){w->choices[i]->kind, w->choices[i]->algo,
                                           w->choices[i]->max_bytes};
    }
    *p = q;
    return COLL_OK;
}

void coll_node_lost(coll_node_t *node, const char *fmt, ...)
{
    va_list ap;

    if (node->gone != COLL_OK || node->left) {
        return;
    }
    node->gone = COLL_ERR_PEER;
    va_start(ap, fmt);
    vsnprintf(node->gone_why, sizeof(node->gone_why), fmt, ap);
    va_end(ap);
}

/* coll_job_fail() with its arguments in @p ap. */
static void job_vfail(coll_job_t *job, coll_status_t status, int tell_peers, const char *fmt,
                      va_list ap)
{
    coll_job_state_t was = job->state;

    if (was == COLL_JOB_FAILED) {
        return;
    }
    vsnprintf(job->errmsg, sizeof(job->errmsg), fmt, ap);
    COLL_ASSERT(status < 0);
    job->state = COLL_JOB_FAILED;
    job->error = status;
    coll_stats_job_failed(&job->d->stats, status);
    coll_error(COLL_SUB_JOB, "job %s failed: %s", job->id, job->errmsg);
    if (job->d->job_hooks != NULL) {
        job->d->job_hooks->failed(job, (int)was, tell_peers);
    }
}

void coll_job_fail(coll_job_t *job, coll_status_t status, int tell_peers, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    job_vfail(job, status, tell_peers, fmt, ap);
    va_end(ap);
}

void coll_job_fail_by(coll_job_t *job, uint32_t rank, coll_status_t status, const char *fmt,
                      ...)
{
    va_list ap;

    if (job->state == COLL_JOB_FAILED) {
        return;
    }
    if (status != COLL_ERR_MISMATCH) {
        job->culprit = rank;
        job->culprit_error = status;
        status = COLL_ERR_JOB;
    }
    va_start(ap, fmt);
    job_vfail(job, status, 1, fmt, ap);
    va_end(ap);
}

coll_status_t coll_job_status_for(const coll_job_t *job, uint32_t rank, coll_status_t status)
{
    if (job->state == COLL_JOB_FAILED && job->culprit_error != COLL_OK &&
        status == job->error && rank == job->culprit) {
        return job->culprit_error;
    }
    return status;
}

void coll_job_handle_closed(uv_handle_t *h)
{
    coll_job_t *job = h->data;

    COLL_ASSERT(job->handles > 0);
    if (--job->handles == 0) {
        free(job);
    }
}
