#include "net/teardown.h"

#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "net/control.h"
#include "net/transport.h"

/* Closing a job's transport is asynchronous so a dead peer never stalls the loop: the loop keeps
 * progressing the worker while the endpoints close, and the worker is destroyed once every
 * close and transfer finished or the deadline passed. A failed job first flushes its endpoints
 * to the nodes still up, for at most COLL_ABORT_FLUSH_MS: the abort it just sent them may still
 * wait for the endpoint's wire-up, and a forced close would drop it, leaving those nodes to
 * find a vaguer error (a refused connection) instead of the real one. Before the worker goes,
 * what is still in flight is cancelled, UCX runs what that completes (at most
 * COLL_DRAIN_PROGRESS calls), and every request left is released (net/teardown.h). */
#define COLL_CLOSE_DEADLINE_MS 2000
#define COLL_ABORT_FLUSH_MS 300
#define COLL_CLOSE_POLL_MS 20
#define COLL_DRAIN_PROGRESS 64

uint64_t coll_teardown_worker_flags(const coll_daemon_t *d)
{
    return strcmp(d->cfg.ucx_error_mode, "peer") == 0 ? 0 : UCP_WORKER_FLAG_IGNORE_REQUEST_LEAK;
}

static int req_ended(void *r)
{
    return r == NULL || ucp_request_check_status(r) != UCS_INPROGRESS;
}

/* Whether every endpoint's flush and close ended. */
static int requests_ended(const coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        if (!req_ended(job->nodes[i].flush_req) || !req_ended(job->nodes[i].close_req)) {
            return 0;
        }
    }
    return 1;
}

/* Release the request at @p r when it ended, or, with @p all, in any case (UCX then runs no
 * callback for it). Returns 1 when it had not ended. */
static int release(void **r, int all)
{
    int open = !req_ended(*r);

    if (*r != NULL && (all || !open)) {
        ucp_request_free(*r);
        *r = NULL;
    }
    return open && all;
}

/* Release the flushes' and closes' requests that ended (with @p all, every one); returns how
 * many of those released had not ended. */
static uint64_t release_requests(coll_job_t *job, int all)
{
    uint64_t open = 0;

    for (uint32_t i = 0; i < job->nnodes; i++) {
        open += release(&job->nodes[i].flush_req, all);
        open += release(&job->nodes[i].close_req, all);
    }
    return open;
}

/* The transport is done with the job: its timer goes with the job's handles. */
static void closed(coll_job_t *job)
{
    uv_close((uv_handle_t *)&job->net.timer, coll_job_handle_closed);
    job->d->job_hooks->closed(job);
}

/* The control messages sent from buffers of their own (net/control.c): their requests were
 * released at once, and the worker that could still read them is gone. */
static void free_owned(coll_job_t *job)
{
    coll_list_t *e;

    while ((e = coll_list_pop(&job->net.owned)) != NULL) {
        free(e);
    }
}

/* Cancel the receives still posted, let UCX complete what that ends (bounded), and hand every
 * transfer to the engine: those UCX did not end (sends it cannot cancel, net/teardown.h) as
 * cancelled, their requests released. Returns how many transfers and requests were left. */
static uint64_t drain(coll_job_t *job)
{
    coll_xfer_t *x, *tmp;
    coll_list_t *e;
    uint64_t left = 0;

    coll_list_for_each_safe(x, tmp, &job->net.posted, coll_xfer_t, link)
    {
        if (!x->is_send) {
            ucp_request_cancel(job->net.worker, x->req);
        }
    }
    for (int i = 0; i < COLL_DRAIN_PROGRESS && ucp_worker_progress(job->net.worker) != 0; i++) {
    }
    while ((e = coll_list_pop(&job->net.posted)) != NULL) {
        x = coll_container_of(e, coll_xfer_t, link);
        x->status = UCS_ERR_CANCELED;
        x->completed = 1;
        coll_list_push(&job->net.events, &x->link);
        left++;
    }
    coll__transport_run_events(job); /* releases each transfer's request */
    return left + release_requests(job, 1);
}

static void close_worker(coll_job_t *job)
{
    uint64_t left = drain(job);

    if (left > 0) {
        /* Expected after a failure (sends to a dead peer); surprising after a clean end. */
        COLL_LOG(job->state == COLL_JOB_FAILED ? COLL_LOG_INFO : COLL_LOG_WARN, COLL_SUB_UCX,
                 "job %s: %llu UCX requests had not ended by the close's deadline (%d ms, or "
                 "the daemon's stop): sends to a lost peer that UCX cannot cancel; released, "
                 "and their transfers failed", job->id, (unsigned long long)left,
                 COLL_CLOSE_DEADLINE_MS);
    }
    /* libuv must stop polling the fd before UCX closes it. */
    uv_close((uv_handle_t *)&job->net.poll, coll_job_handle_closed);
    coll__transport_unregister_pool(job);
    ucp_worker_destroy(job->net.worker);
    job->net.worker = NULL;
    free_owned(job);
    free(job->net.worker_address);
    job->net.worker_address = NULL;
    closed(job);
}

/* Close every endpoint: a clean end flushes (our last segments and the goodbye reach their
 * nodes); a failed job forces where UCX allows it (its sends to a dead or stopped peer would
 * never finish, and a forced close completes them, cancelled). An endpoint without peer error
 * handling is closed with a flush even then, bounded by the deadline. */
static void close_endpoints(coll_job_t *job)
{
    int force = job->state == COLL_JOB_FAILED || job->d->stopping;

    for (uint32_t i = 0; i < job->nnodes; i++) {
        coll_node_t *n = &job->nodes[i];
        ucp_request_param_t p = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS};
        ucs_status_ptr_t r;

        if (n->ep == NULL) {
            continue;
        }
        p.flags = force && n->ep_forceable ? UCP_EP_CLOSE_FLAG_FORCE : 0;
        r = ucp_ep_close_nbx(n->ep, &p);
        if (UCS_PTR_IS_ERR(r)) {
            coll_debug(COLL_SUB_UCX, "job %s: closing the endpoint to node %u: %s", job->id, i,
                       ucs_status_string(UCS_PTR_STATUS(r)));
        }
        n->ep = NULL;
        n->close_req = UCS_PTR_IS_PTR(r) ? r : NULL;
    }
    job->net.close_deadline = uv_now(job->d->loop) + COLL_CLOSE_DEADLINE_MS;
}

/* A failed job's first step: flush the endpoints to nodes still up (the abort). */
static void flush_endpoints(coll_job_t *job)
{
    ucp_request_param_t p = {0};

    for (uint32_t i = 0; i < job->nnodes; i++) {
        if (job->nodes[i].ep != NULL && job->nodes[i].gone == COLL_OK) {
            ucs_status_ptr_t r = ucp_ep_flush_nbx(job->nodes[i].ep, &p);
            job->nodes[i].flush_req = UCS_PTR_IS_PTR(r) ? r : NULL;
        }
    }
    job->net.close_flushing = 1;
    job->net.close_deadline = uv_now(job->d->loop) + COLL_ABORT_FLUSH_MS;
}

/* Without a worker only the job's memory is waited for. */
static void close_alone_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;

    if (job->holds == 0) {
        uv_timer_stop(t);
        closed(job);
    }
}

static void close_check_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;
    int ended, expired;

    ucp_worker_progress(job->net.worker);
    coll__transport_run_events(job);
    release_requests(job, 0);
    ended = requests_ended(job);
    /* A daemon that is stopping does not wait for flushes: SIGTERM ends it within a tick. */
    expired = uv_now(job->d->loop) >= job->net.close_deadline || job->d->stopping;
    if (job->net.close_flushing) {
        if (ended || expired) {
            job->net.close_flushing = 0;
            close_endpoints(job); /* a flush still going ends with the close, or is drained */
        }
        return;
    }
    /* Kernel threads writing into the pool are always waited for: they end on their own. */
    if (job->holds == 0 && ((ended && job->net.inflight == 0) || expired)) {
        uv_timer_stop(t);
        close_worker(job);
    }
}

void coll_transport_job_close(coll_job_t *job)
{
    uv_timer_stop(&job->net.timer);
    if (job->net.worker == NULL) {
        uv_timer_start(&job->net.timer, close_alone_cb, 0, COLL_CLOSE_POLL_MS);
        return;
    }
    if (job->state == COLL_JOB_READY) {
        coll_control_goodbye(job);
    }
    if (job->state == COLL_JOB_FAILED) {
        flush_endpoints(job);
    } else {
        close_endpoints(job);
    }
    uv_timer_start(&job->net.timer, close_check_cb, 0, COLL_CLOSE_POLL_MS);
}
