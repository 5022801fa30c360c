#include "job.h"

#include "ctl.h"
#include "control.h"
#include "doorbell.h"
#include "health.h"

#include <malloc.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "op.h"
#include "peerwatch.h"
#include "rdv.h"
#include "staging.h"
#include "stats.h"
#include "tag.h"
#include "transport.h"

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

static void reply_join(coll_session_t *s, coll_status_t status, const char *error,
                       const coll_job_t *job)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__JoinReply r = COLL__WIRE__JOIN_REPLY__INIT;
    int fds[2];
    unsigned nfds = 0;

    r.status = status;
    r.error = (char *)error;
    if (status == COLL_OK) {
        r.pool_bytes = coll_pool_size(job->pool);
        r.node_rank = job->node_rank;
        r.node_count = job->nnodes;
        r.ctl_bytes = COLL_CTL_BYTES;
        r.timeout_ms = job->params.timeout_ms;
        r.epoch = job->epoch;
        fds[nfds++] = coll_pool_fd(job->pool);
        fds[nfds++] = job->doorbell_fd;
    }
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_JOIN;
    msg.join = &r;
    coll_session_send_fds(s, &msg, fds, nfds);
}

static void join_timeout_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;
    if (job->state == COLL_JOB_GATHERING) {
        coll_job_fail(job, COLL_ERR_TIMEDOUT, 0,
                      "job %s: only %u of %u local ranks joined on this node within %u ms",
                      job->id, job->njoined, job->local_size, job->timeout_ms);
    } else if (job->state == COLL_JOB_RENDEZVOUS) {
        coll_job_fail(job, COLL_ERR_TIMEDOUT, 0,
                      "job %s: rendezvous at root %s did not complete within %u ms (%s%s; are "
                      "all %u ranks started, with the same COLL_ROOT?)",
                      job->id, job->root, job->timeout_ms,
                      job->rdv_error[0] ? "last connection attempt: " : "registered at the root",
                      job->rdv_error, job->world_size);
    }
}

void coll_job_handle_closed(uv_handle_t *h)
{
    coll_job_t *job = h->data;
    if (--job->handles == 0) {
        free(job);
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
    job->timeout_ms = j->timeout_ms ? j->timeout_ms : (uint32_t)d->cfg.timeout_ms;
    coll_list_init(&job->events);
    coll_list_init(&job->ops);
    coll_list_init(&job->staging);
    job->doorbell_fd = -1;
    *job_p = job;
    return COLL_OK;
}

static void job_free_now(coll_job_t *job);

/* A job's pool must fit the per-job limit and what is left of the daemon's budget. */
static coll_status_t check_budget(coll_daemon_t *d, const char *id, uint64_t bytes, char *err,
                                  size_t errlen)
{
    if (bytes > d->cfg.pool_max) {
        snprintf(err, errlen, "job %s asks for a pool of %llu bytes; this daemon allows at most "
                 "%llu per job (pool_max)", id, (unsigned long long)bytes,
                 (unsigned long long)d->cfg.pool_max);
        return COLL_ERR_POOL_FULL;
    }
    if (bytes > d->pool_budget - d->pool_bytes) {
        snprintf(err, errlen, "job %s asks for a pool of %llu bytes; this daemon's budget is "
                 "%llu (pool_budget), of which jobs use %llu", id, (unsigned long long)bytes,
                 (unsigned long long)d->pool_budget, (unsigned long long)d->pool_bytes);
        return COLL_ERR_NOMEM;
    }
    return COLL_OK;
}

/* Every rank on this node: the job never talks to another daemon, whatever root it names. */
static int job_alone(const coll_job_t *job)
{
    return job->local_size == job->world_size;
}

static coll_status_t job_create(coll_daemon_t *d, const Coll__Wire__JoinJob *j, char *err,
                                size_t errlen, coll_job_t **job_p)
{
    uint64_t pool_bytes = (j->pool_bytes ? j->pool_bytes : d->cfg.pool_size);
    coll_job_t *job;
    coll_status_t st = check_budget(d, j->job, pool_bytes + COLL_CTL_TOTAL(j->local_size), err,
                                    errlen);

    if (st != COLL_OK) {
        return st;
    }
    if ((st = job_alloc(d, j, &job)) != COLL_OK) {
        snprintf(err, errlen, "daemon out of memory");
        return st;
    }
    uv_timer_init(d->loop, &job->join_timer);
    uv_timer_init(d->loop, &job->retry_timer);
    uv_timer_init(d->loop, &job->health_timer);
    job->join_timer.data = job->retry_timer.data = job->health_timer.data = job;
    job->handles = 3;
    coll_list_push(&d->jobs, &job->link);
    /* The control blocks come first; the pool the job asked for follows. A job with no other
     * node needs no UCX worker, endpoints or registration (job_alone()). */
    if ((st = coll_pool_create(job->id, pool_bytes + COLL_CTL_TOTAL(job->local_size),
                               &job->pool)) != COLL_OK ||
        (st = coll_pool_reserve(job->pool, COLL_CTL_TOTAL(job->local_size))) != COLL_OK ||
        (st = coll_doorbell_open(job)) != COLL_OK ||
        (!job_alone(job) && (st = coll_transport_job_open(job)) != COLL_OK) ||
        (!job_alone(job) && (st = coll_transport_register_pool(job)) != COLL_OK)) {
        snprintf(err, errlen, "job %s: cannot create its %s on this node (see daemon log)",
                 job->id, job->pool == NULL ? "memory pool" : "UCX worker");
        job_free_now(job);
        return st;
    }
    uv_timer_start(&job->join_timer, join_timeout_cb, job->timeout_ms, 0);
    d->pool_bytes += coll_pool_size(job->pool);
    job->pool_accounted = 1;
    coll_auth_token_digest(job->id, j->token, job->token_digest);
    coll_stats_job_created(job);
    coll_info(COLL_SUB_JOB, "job %s: created (world size %u, %u local ranks, pool %llu bytes)",
              job->id, job->world_size, job->local_size, (unsigned long long)pool_bytes);
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

static void job_ready_alone(coll_job_t *job);

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
    coll_stats_job_refused(d, st);
    reply_join(s, st, why, NULL);
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
        reply_join(s, COLL_ERR_DENIED, err, NULL);
        return;
    }
    if (j->local_size > COLL_MAX_LOCAL) {
        snprintf(err, sizeof(err), "local size %u above the limit of %u", j->local_size,
                 COLL_MAX_LOCAL);
        reply_join(s, COLL_ERR_INVALID, err, NULL);
        return;
    }
    if (job != NULL && join_conflict(job, s, j, err, sizeof(err)) != NULL) {
        reply_join(s, COLL_ERR_RENDEZVOUS, err, NULL);
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
            job_ready_alone(job);
        } else {
            coll_rdv_join(job);
        }
    }
}

void coll_job_params_from_config(const coll_config_t *cfg, coll_job_params_t *p)
{
    p->timeout_ms = cfg->timeout_ms;
    p->segment_bytes = cfg->segment_size;
    p->pipeline_depth = (uint32_t)cfg->pipeline_depth;
    /* Recursive doubling sends a descriptor and the whole buffer in one staging half. */
    p->rd_max_bytes = cfg->rd_max_bytes < cfg->segment_size - sizeof(coll_desc_t)
                          ? cfg->rd_max_bytes
                          : cfg->segment_size - sizeof(coll_desc_t);
}

/* The rendezvous guarantees every rank appears on exactly one node. */
static coll_status_t index_ranks(coll_job_t *job)
{
    job->rank_node = calloc(job->world_size, sizeof(uint32_t));
    job->rank_local = calloc(job->world_size, sizeof(uint32_t));
    job->node_ranks = calloc(job->nnodes, sizeof(*job->node_ranks));
    job->node_nranks = calloc(job->nnodes, sizeof(uint32_t));
    if (job->rank_node == NULL || job->rank_local == NULL || job->node_ranks == NULL ||
        job->node_nranks == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (uint32_t n = 0; n < job->nnodes; n++) {
        job->node_ranks[n] = job->nodes[n].ranks;
        job->node_nranks[n] = job->nodes[n].nranks;
        for (uint32_t l = 0; l < job->nodes[n].nranks; l++) {
            job->rank_node[job->nodes[n].ranks[l]] = n;
            job->rank_local[job->nodes[n].ranks[l]] = l;
        }
    }
    return COLL_OK;
}

static void job_ready(coll_job_t *job, const coll_job_params_t *params)
{
    if (index_ranks(job) != COLL_OK) {
        coll_job_fail(job, COLL_ERR_NOMEM, 0, "no memory for the rank table");
        return;
    }
    job->params = *params;
    job->staging_bytes = 2 * params->segment_bytes;
    job->state = COLL_JOB_READY;
    uv_timer_stop(&job->join_timer);
    coll_health_start(job);
    coll_peerwatch_start(job);
    coll_info(COLL_SUB_JOB, "job %s: ready, node %u of %u", job->id, job->node_rank, job->nnodes);
    for (uint32_t l = 0; l < job->local_size; l++) {
        reply_join(job->locals[l], COLL_OK, "", job);
    }
}

/* Every rank on this node: no rendezvous, this node is the whole job. */
static void job_ready_alone(coll_job_t *job)
{
    coll_job_params_t p;

    job->nodes = calloc(1, sizeof(*job->nodes));
    if (job->nodes == NULL ||
        (job->nodes[0].ranks = malloc(job->local_size * sizeof(uint32_t))) == NULL) {
        coll_job_fail(job, COLL_ERR_NOMEM, 0, "no memory for the node table");
        return;
    }
    job->nnodes = 1;
    job->nodes[0] = (coll_node_t){.job = job, .nranks = job->local_size,
                                  .ranks = job->nodes[0].ranks};
    memcpy(job->nodes[0].ranks, job->ranks, job->local_size * sizeof(uint32_t));
    snprintf(job->nodes[0].host, sizeof(job->nodes[0].host), "%s", job->d->hostname);
    coll_job_params_from_config(&job->d->cfg, &p);
    p.timeout_ms = job->timeout_ms;
    job->epoch = uv_hrtime();
    job_ready(job, &p);
}

static coll_status_t copy_nodes(coll_job_t *job, const Coll__Wire__NodeJoinReply *r)
{
    job->nodes = calloc(r->n_nodes, sizeof(*job->nodes));
    if (job->nodes == NULL) {
        return COLL_ERR_NOMEM;
    }
    job->nnodes = (uint32_t)r->n_nodes;
    for (size_t i = 0; i < r->n_nodes; i++) {
        coll_node_t *n = &job->nodes[i];
        const Coll__Wire__NodeInfo *info = r->nodes[i];
        n->job = job;
        n->index = (uint32_t)i;
        n->nranks = (uint32_t)info->n_ranks;
        n->ranks = malloc(info->n_ranks * sizeof(uint32_t));
        n->worker_address = malloc(info->worker_address.len);
        if (n->ranks == NULL || n->worker_address == NULL) {
            return COLL_ERR_NOMEM;
        }
        memcpy(n->ranks, info->ranks, info->n_ranks * sizeof(uint32_t));
        memcpy(n->worker_address, info->worker_address.data, info->worker_address.len);
        n->worker_address_len = info->worker_address.len;
        snprintf(n->host, sizeof(n->host), "%s", info->host);
        n->pid = info->pid;
        n->same_kernel = info->kernel_id.len == sizeof(job->d->kernel_id) &&
                         memcmp(info->kernel_id.data, job->d->kernel_id,
                                sizeof(job->d->kernel_id)) == 0;
    }
    return COLL_OK;
}

void coll_job_rendezvous_done(coll_job_t *job, const Coll__Wire__NodeJoinReply *r)
{
    coll_job_params_t params;

    if (job->state != COLL_JOB_RENDEZVOUS) {
        return;
    }
    if (r->status != COLL_OK) {
        /* A node's refusal keeps its status (e.g. COLL_ERR_NOMEM for a budget); anything not
         * one of ours is a rendezvous error. */
        coll_job_fail(job, r->status < 0 && r->status > -2000 ? (coll_status_t)r->status
                                                              : COLL_ERR_RENDEZVOUS,
                      0, "job %s: %s", job->id, r->error);
        return;
    }
    if (r->n_nodes > COLL_TAG_MAX_NODES || copy_nodes(job, r) != COLL_OK ||
        job->nodes[r->node_rank].nranks != job->local_size) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "job %s: unusable node table from root %s",
                      job->id, job->root);
        return;
    }
    job->node_rank = r->node_rank;
    job->epoch = r->epoch;
    params = (coll_job_params_t){r->params->timeout_ms, r->params->segment_bytes,
                                 r->params->pipeline_depth, r->params->rd_max_bytes};
    job_ready(job, &params);
}

ucp_ep_h coll_job_ep(coll_job_t *job, uint32_t node)
{
    coll_node_t *n = &job->nodes[node];
    if (n->ep == NULL && coll_transport_connect(job, node, &n->ep) != COLL_OK) {
        coll_job_fail(job, COLL_ERR_TRANSPORT, 1, "cannot connect to node %u (%s)", node, n->host);
        return NULL;
    }
    return n->ep;
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

void coll_job_fail(coll_job_t *job, coll_status_t status, int tell_peers, const char *fmt, ...)
{
    coll_job_state_t was = job->state;
    va_list ap;

    if (was == COLL_JOB_FAILED) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(job->errmsg, sizeof(job->errmsg), fmt, ap);
    va_end(ap);
    job->state = COLL_JOB_FAILED;
    job->error = status;
    coll_stats_job_failed(job, status);
    coll_error(COLL_SUB_JOB, "job %s failed: %s", job->id, job->errmsg);
    uv_timer_stop(&job->join_timer);
    uv_timer_stop(&job->retry_timer);
    uv_timer_stop(&job->health_timer);
    coll_rdv_cancel(job);
    if (was == COLL_JOB_READY) {
        if (tell_peers && job->nnodes > 1) {
            coll_control_abort(job, status, job->errmsg);
        }
        coll_op_fail_all(job);
        return;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (job->locals[l] != NULL) {
            reply_join(job->locals[l], status, job->errmsg, NULL);
        }
    }
}

void coll_job_abort(coll_job_t *job, coll_session_t *s, coll_status_t status, const char *reason)
{
    coll_job_fail(job, status, 1, "rank %u (pid %d) ended job %s: %s", s->rank, (int)s->cred.pid,
                  job->id, reason);
}

/* Operations that the rank of @p s is part of and that are not done: every collective, and
 * its own point-to-point transfers. */
static uint32_t pending_ops(const coll_job_t *job, const coll_session_t *s)
{
    uint32_t n = 0;
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        n += !op->done && (op->desc.coll < COLL_KIND_SEND ||
                           op->members[s->local_rank].session == s);
    }
    return n;
}

void coll_job_leave(coll_job_t *job, coll_session_t *s)
{
    /* Its operations, and its submissions still queued in its control block (a rank killed
     * right after submitting: the others wait for them). */
    uint32_t pending = pending_ops(job, s) + (s->ctl != NULL ? coll_ctl_queued(s->ctl) : 0);
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        if (op->members[s->local_rank].session == s) {
            op->members[s->local_rank].session = NULL;
        }
    }
    if (job->pool != NULL) {
        coll_pool_free_owner(job->pool, s);
    }
    job->locals[s->local_rank] = NULL;
    job->njoined--;
    if (job->left[0] == '\0') {
        snprintf(job->left, sizeof(job->left), "rank %u (pid %d)", s->rank, (int)s->cred.pid);
    }
    s->job = NULL;
    s->ctl = NULL;
    /* A rank that leaves between operations ends its part cleanly; one that leaves with work
     * pending (or before the job met) strands the others, who must hear about it now. */
    if (job->state == COLL_JOB_READY && pending > 0) {
        coll_job_fail(job, COLL_ERR_JOB, 1,
                      "rank %u (pid %d) left job %s with %u operations pending", s->rank,
                      (int)s->cred.pid, job->id, pending);
    } else if (job->state == COLL_JOB_GATHERING || job->state == COLL_JOB_RENDEZVOUS) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "rank %u (pid %d) left job %s before it met",
                      s->rank, (int)s->cred.pid, job->id);
    }
    coll_job_maybe_free(job);
}

/* Leave the daemon's job table at once (a new job may take the id), then close the transport;
 * coll_job_release() frees the rest when it is done. */
static void job_free_now(coll_job_t *job)
{
    job->closing = 1;
    coll_list_remove(&job->link);
    coll_rdv_cancel(job);
    uv_timer_stop(&job->join_timer);
    uv_timer_stop(&job->retry_timer);
    coll_doorbell_close(job);
    coll_transport_job_close(job);
}

void coll_job_release(coll_job_t *job)
{
    coll_peerwatch_stop(job);
    coll_op_free_all(job);
    coll_staging_release_all(job);
    coll_transport_unregister_pool(job);
    if (job->pool_accounted) {
        job->d->pool_bytes -= coll_pool_size(job->pool);
    }
    coll_pool_destroy(job->pool);
    if (job->doorbell_fd >= 0) {
        close(job->doorbell_fd);
    }
    for (uint32_t i = 0; i < job->nnodes; i++) {
        free(job->nodes[i].ranks);
        free(job->nodes[i].worker_address);
    }
    free(job->nodes);
    free(job->rank_node);
    free(job->rank_local);
    free(job->node_ranks);
    free(job->node_nranks);
    free(job->worker_address);
    free(job->locals);
    free(job->ranks);
    coll_info(COLL_SUB_JOB, "job %s: closed on this node", job->id);
    /* Give the freed worker pools and op state back to the system: without this glibc keeps
     * them, and an idle daemon's RSS stays at the peak of its busiest job. */
    malloc_trim(0);
    /* The job struct goes with its last handle. */
    uv_close((uv_handle_t *)&job->join_timer, coll_job_handle_closed);
    uv_close((uv_handle_t *)&job->retry_timer, coll_job_handle_closed);
    uv_close((uv_handle_t *)&job->health_timer, coll_job_handle_closed);
}

void coll_job_maybe_free(coll_job_t *job)
{
    if (job->njoined == 0 && !job->driving && !job->closing) {
        job_free_now(job);
    }
}

void coll_job_close_all(coll_daemon_t *d)
{
    coll_job_t *job, *tmp;
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        coll_job_fail(job, COLL_ERR_JOB, 1, "the daemon on node %s is shutting down", d->hostname);
    }
}

