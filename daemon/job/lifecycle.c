/*
 * A job's second half: it becomes ready (alone, or with the root's node table), fails (the
 * failed hook's fan-out), loses ranks, and is freed once no rank, transfer or handle holds it.
 * The hooks the layers below call (core/hooks.h) are installed here.
 */
#include "job/lifecycle.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "base/log.h"
#include "core/dev_pools.h"
#include "core/staging.h"
#include "engine/algos/nccl.h"
#include "engine/codec/codec.h"
#include "engine/crossover.h"
#include "engine/dev_sync.h"
#include "engine/op.h"
#include "engine/shm.h"
#include "engine/shm_watch.h"
#include "job/doorbell.h"
#include "job/health.h"
#include "net/accept.h"
#include "net/clientlink.h"
#include "net/control.h"
#include "net/peerwatch.h"
#include "net/rdv.h"
#include "net/transport.h"
#include "net/ucx_address.h"
#include "proto/ctl.h"
#include "proto/tag.h"
#include "ps/ps.h"

/* The direct path's leader addresses, by node, for local rank 0's join reply @p r (in an array
 * the caller frees); NULL for the other ranks, without the direct path, or without memory (the
 * leader then fails its first direct operation's wait, by the job's timeout). */
static ProtobufCBinaryData *leader_addresses(const coll_session_t *s, const coll_job_t *job,
                                             Coll__Wire__JoinReply *r)
{
    ProtobufCBinaryData *a;

    if (s->local_rank != 0 || job->params.direct_max_bytes == 0 || job->nnodes < 2 ||
        (a = calloc(job->nnodes, sizeof(*a))) == NULL) {
        return NULL;
    }
    for (uint32_t i = 0; i < job->nnodes; i++) {
        a[i] = (ProtobufCBinaryData){job->nodes[i].leader_address_len,
                                     job->nodes[i].leader_address};
    }
    r->n_leader_addresses = job->nnodes;
    r->leader_addresses = a;
    return a;
}

void coll_job_reply_join(coll_session_t *s, coll_status_t status, const char *error,
                       const coll_job_t *job)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__JoinReply r = COLL__WIRE__JOIN_REPLY__INIT;
    int fds[2];
    unsigned nfds = 0;
    ProtobufCBinaryData *leaders = NULL;

    r.status = status;
    r.error = (char *)error;
    if (status == COLL_OK) {
        r.pool_bytes = coll_pool_size(job->pool);
        r.node_rank = job->node_rank;
        r.node_count = job->nnodes;
        r.ctl_bytes = COLL_CTL_BYTES;
        r.timeout_ms = job->params.timeout_ms;
        r.epoch = job->epoch;
        r.shm_bytes = COLL_SHM_TOTAL(job->local_size);
        r.shm_max_bytes = job->d->cfg.shm_max_bytes;
        r.device_layer = (char *)coll_devices_layer(&job->d->devices);
        if (job->d->devices.status != NULL) {
            r.device_status = (char *)job->d->devices.status;
        }
        leaders = leader_addresses(s, job, &r);
        fds[nfds++] = coll_pool_fd(job->pool);
        fds[nfds++] = job->doorbell_fd;
    }
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_JOIN;
    msg.join = &r;
    coll_session_send_fds(s, &msg, fds, nfds);
    free(leaders);
}

/* The rendezvous guarantees every rank appears on exactly one node. The world group (every
 * rank) is laid out from these tables. */
static coll_status_t index_ranks(coll_job_t *job)
{
    job->rank_node = calloc(job->world_size, sizeof(uint32_t));
    job->rank_local = calloc(job->world_size, sizeof(uint32_t));
    if (job->rank_node == NULL || job->rank_local == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (uint32_t n = 0; n < job->nnodes; n++) {
        for (uint32_t l = 0; l < job->nodes[n].nranks; l++) {
            job->rank_node[job->nodes[n].ranks[l]] = n;
            job->rank_local[job->nodes[n].ranks[l]] = l;
        }
    }
    return coll_group_world(job);
}

static void job_ready(coll_job_t *job, const coll_job_params_t *params)
{
    if (index_ranks(job) != COLL_OK) {
        coll_job_fail(job, COLL_ERR_NOMEM, 0, "no memory for the rank table");
        return;
    }
    job->params = *params;
    job->engine.staging_bytes = 2 * params->segment_bytes;
    if (job->nnodes > 1 && coll_transport_connect_all(job) != COLL_OK) {
        return; /* failed while joining: the joins hear */
    }
    job->state = COLL_JOB_READY;
    coll_shm_init(job, job->d->cfg.shm_max_bytes, job->d->cfg.shm_node_max_bytes);
    uv_timer_stop(&job->join_timer);
    coll_health_start(job);
    coll_peerwatch_start(job);
    coll_info(COLL_SUB_JOB, "job %s: ready, node %u of %u", job->id, job->node_rank, job->nnodes);
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_job_reply_join(job->locals[l], COLL_OK, "", job);
    }
}

/* Every rank on this node: no rendezvous, this node is the whole job. */
void coll_job_ready_alone(coll_job_t *job)
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
    coll_crossover_fill(job->d, 1, job->local_size, &p);
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
        if (info->leader_address.len > 0) {
            if ((n->leader_address = malloc(info->leader_address.len)) == NULL) {
                return COLL_ERR_NOMEM;
            }
            memcpy(n->leader_address, info->leader_address.data, info->leader_address.len);
            n->leader_address_len = info->leader_address.len;
        }
        snprintf(n->host, sizeof(n->host), "%s", info->host);
        n->pid = info->pid;
        n->same_kernel = info->kernel_id.len == sizeof(job->d->kernel_id) &&
                         memcmp(info->kernel_id.data, job->d->kernel_id,
                                sizeof(job->d->kernel_id)) == 0;
    }
    return COLL_OK;
}

/* Node @p i's address of @p what (the daemon's worker, or its leader's for the direct path,
 * @p direct) passes the check before UCX reads it (net/ucx_address.h): COLL_OK, or the job
 * fails naming the node. */
static coll_status_t check_address(coll_job_t *job, uint32_t i, int direct)
{
    const coll_node_t *n = &job->nodes[i];
    const void *a = direct ? n->leader_address : n->worker_address;
    size_t len = direct ? n->leader_address_len : n->worker_address_len;
    const char *what = direct ? "leader" : "worker";
    char why[160];

    if (coll_ucx_address_check(a, len, why, sizeof(why)) == COLL_OK) {
        return COLL_OK;
    }
    coll_refusal_note(job->d, COLL_LISTENER_CONTROL, COLL_REFUSED_WORKER_ADDRESS,
                      "job %s: the UCX %s address of node %u (%s) cannot be used (%zu bytes: "
                      "%s)", job->id, what, i, n->host, len, why);
    coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "job %s: root %s sent a UCX %s address of node "
                  "%u (%s) that cannot be used: %s", job->id, job->root, what, i, n->host, why);
    return COLL_ERR_RENDEZVOUS;
}

/* Every other node's UCX worker address, and with the direct path (@p direct) every node's
 * leader address, must pass the check; returns COLL_OK, or fails the job naming the node. */
static coll_status_t check_addresses(coll_job_t *job, int direct)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        if ((i != job->node_rank && check_address(job, i, 0) != COLL_OK) ||
            (direct && check_address(job, i, 1) != COLL_OK)) {
            return COLL_ERR_RENDEZVOUS;
        }
    }
    return COLL_OK;
}

static void rendezvous_done(coll_job_t *job, const Coll__Wire__NodeJoinReply *r)
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
    if (coll_job_params_from_wire(r->params, &params) != COLL_OK) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "job %s: root %s sent no job parameters "
                      "or more than %d algorithm choices", job->id, job->root, COLL_JOB_CHOICES);
        return;
    }
    if (check_addresses(job, params.direct_max_bytes > 0) != COLL_OK) {
        return;
    }
    job->epoch = r->epoch;
    job_ready(job, &params);
}

/* The failed hook (core/hooks.h): coll_job_fail() recorded, logged and counted the failure;
 * end what waits, in this order, synchronously: the rendezvous, the other nodes (the abort
 * goes out before any local rank hears), the operations, the joins still unanswered. */
static void job_failed(coll_job_t *job, int was, int tell_peers)
{
    uv_timer_stop(&job->join_timer);
    uv_timer_stop(&job->health_timer);
    coll_rdv_cancel(job);
    if (was == COLL_JOB_READY) {
        if (tell_peers && job->nnodes > 1) {
            coll_control_abort(job, job->error, job->errmsg);
        }
        coll_nccl_job_end(job); /* aborted: ends the other daemons' waits in NCCL */
        coll_op_fail_all(job);
        coll_shm_fail(job); /* the ranks waiting in shared memory */
        return;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (job->locals[l] != NULL) {
            coll_job_reply_join(job->locals[l], job->error, job->errmsg, NULL);
        }
    }
}

void coll_job_abort(coll_job_t *job, coll_session_t *s, coll_status_t status, const char *reason)
{
    if (status == COLL_ERR_MISMATCH) { /* its library found local ranks that disagree */
        coll_job_fail(job, status, 1, "%s", reason);
        return;
    }
    if (status == COLL_ERR_JOB) { /* coll_comm_abort(): the reason is the caller's own */
        coll_job_fail_by(job, s->rank, status, "rank %u (pid %d) ended job %s: %s", s->rank,
                         (int)s->cred.pid, job->id, reason);
        return;
    }
    coll_job_fail_by(job, s->rank, status, "rank %u (pid %d) ended job %s with %s: %s", s->rank,
                     (int)s->cred.pid, job->id, coll_err_name(status), reason);
}

static void job_maybe_free(coll_job_t *job);

/* The place of @p s among the local members of @p op's group, or COLL_GROUP_NONE. */
static uint32_t member_index(const coll_op_t *op, const coll_session_t *s)
{
    return op->grp->local_of[s->local_rank];
}

/* Operations that the rank of @p s is part of and whose ranks were not told yet (not done, or
 * done with a feature's finish in flight): every collective of its communicators (submitted or
 * not), and its own point-to-point transfers. */
static uint32_t pending_ops(const coll_job_t *job, const coll_session_t *s)
{
    uint32_t n = 0;
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        uint32_t i = member_index(op, s);
        n += (!op->done || op->finishing) && i != COLL_GROUP_NONE &&
             (!coll_kind_is_p2p(op->desc.coll) || op->members[i].session == s);
    }
    return n;
}

/* Collectives waiting in the shared-memory area that local rank @p l had posted. */
static uint32_t shm_pending(const coll_job_t *job, uint32_t l)
{
    coll_shm_wait_t w[COLL_SHM_WATCH_MAX];
    size_t n = coll_shm_waiting(job, w, COLL_SHM_WATCH_MAX);
    uint32_t own = 0;

    for (size_t i = 0; i < n; i++) {
        own += l < 64 && (w[i].posted >> l & 1);
    }
    return own;
}

void coll_job_leave(coll_job_t *job, coll_session_t *s)
{
    /* Its operations, its submissions still queued in its control block (a rank killed right
     * after submitting: the others wait for them), and its posts waiting in shared memory.
     * Posts of the others alone are judged by the health ticks (job/health.c): a rank that
     * saw its last collective DONE may leave while the rank that completed it still marks
     * the others' posts. */
    uint32_t pending = pending_ops(job, s) + (s->ctl != NULL ? coll_ctl_queued(s->ctl) : 0) +
                       shm_pending(job, s->local_rank);
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        uint32_t i = member_index(op, s);
        if (i != COLL_GROUP_NONE && op->members[i].session == s) {
            op->members[i].session = NULL;
        }
    }
    if (job->pool != NULL) {
        coll_pool_free_owner(job->pool, s);
    }
    coll_dev_pools_leave(job, s, s->local_rank);
    job->locals[s->local_rank] = NULL;
    job->njoined--;
    if (job->left[0] == '\0') {
        snprintf(job->left, sizeof(job->left), "rank %u (pid %d)", s->rank, (int)s->cred.pid);
    }
    if (job->state == COLL_JOB_READY) {
        coll_shm_left(job, job->left); /* its collectives posted later cannot run */
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
    job_maybe_free(job);
}

/* Leave the daemon's job table at once (a new job may take the id), then close the engine and
 * its transport; the transport_closed hook (job_release()) frees the rest when that is done. */
void coll_job_free_now(coll_job_t *job)
{
    COLL_ASSERT(!job->closing);
    job->closing = 1;
    coll_list_remove(&job->link);
    coll_rdv_cancel(job);
    uv_timer_stop(&job->join_timer);
    coll_doorbell_close(job);
    coll_nccl_job_end(job);
    coll_engine_job_close(job);
}

static void job_release(coll_job_t *job)
{
    coll_shm_harvest(job); /* what its ranks counted since the last health tick */
    coll_peerwatch_stop(job);
    coll_op_free_all(job);
    coll_nccl_job_free(job);
    coll_ps_job_free(job);
    coll_staging_release_all(job);
    coll_codec_job_free(job);
    coll_dev_sync_job_end(job); /* before the words' pool and the streams go */
    coll_pool_destroy(job->pool);
    coll_dev_pools_destroy(job);
    if (job->doorbell_fd >= 0) {
        close(job->doorbell_fd);
    }
    for (uint32_t i = 0; i < job->nnodes; i++) {
        free(job->nodes[i].ranks);
        free(job->nodes[i].worker_address);
        free(job->nodes[i].leader_address);
    }
    free(job->leader_address);
    free(job->nodes);
    coll_group_free_all(job);
    free(job->rank_node);
    free(job->rank_local);
    free(job->locals);
    free(job->ranks);
    coll_info(COLL_SUB_JOB, "job %s: closed on this node", job->id);
    /* Give the freed worker pools and op state back to the system: without this glibc keeps
     * them, and an idle daemon's RSS stays at the peak of its busiest job. */
    malloc_trim(0);
    /* The job struct goes with its last handle. */
    uv_close((uv_handle_t *)&job->join_timer, coll_job_handle_closed);
    uv_close((uv_handle_t *)&job->health_timer, coll_job_handle_closed);
    coll_rdv_job_close(job);
}

static void job_maybe_free(coll_job_t *job)
{
    if (job->njoined == 0 && !job->net.driving && !job->closing) {
        coll_job_free_now(job);
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



static const coll_job_hooks_t hooks = {
    .failed = job_failed,
    .rendezvous_done = rendezvous_done,
    .closed = job_release,
    .idle = job_maybe_free,
    .params = coll_crossover_fill,
};

void coll_job_layer_init(coll_daemon_t *d)
{
    d->job_hooks = &hooks;
}
