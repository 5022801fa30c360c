#include "transport.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tag.h"

/* Active-message id of job control messages (abort, goodbye). */
#define COLL_AM_CONTROL 1u

/* Period of the check for receives stranded by a node that left or was lost. */
#define COLL_GONE_CHECK_MS 200

coll_status_t coll_transport_init(coll_daemon_t *d)
{
    ucp_config_t *config;
    ucp_params_t params = {0};
    ucs_status_t st;

    st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "reading UCX configuration: %s", ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_AM | UCP_FEATURE_WAKEUP;
    params.name = "collectived";
    st = ucp_init(&params, config, &d->ucp);
    ucp_config_release(config);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "ucp_init: %s", ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

void coll_transport_cleanup(coll_daemon_t *d)
{
    if (d->ucp != NULL) {
        ucp_cleanup(d->ucp);
        d->ucp = NULL;
    }
}

/* Payload of the job-control active messages. */
typedef struct {
    int32_t status; /* abort: the failure; bye: COLL_OK */
    uint32_t node;  /* sender's node rank */
    char text[];    /* abort: the failure message */
} am_msg_t;

/* Abort or goodbye from a peer: recorded here, acted on by coll_transport_drive() outside
 * UCX's call stack. */
static ucs_status_t am_cb(void *arg, const void *header, size_t header_length, void *data,
                          size_t length, const ucp_am_recv_param_t *param)
{
    coll_job_t *job = arg;
    am_msg_t m;
    size_t n;

    if ((param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) || length < sizeof(m)) {
        coll_warn(COLL_SUB_UCX, "job %s: ignoring malformed control message (%zu bytes)", job->id,
                  length);
        return UCS_OK;
    }
    memcpy(&m, data, sizeof(m));
    if (m.status == COLL_OK && m.node < job->nnodes) {
        coll_node_t *node = &job->nodes[m.node];
        node->left = 1;
        if (node->gone == COLL_OK) {
            node->gone = COLL_ERR_JOB;
            snprintf(node->gone_why, sizeof(node->gone_why), "it left the job");
        }
    } else if (m.status != COLL_OK && job->pending_status == COLL_OK) {
        n = length - sizeof(m) < sizeof(job->pending_msg) - 1 ? length - sizeof(m)
                                                               : sizeof(job->pending_msg) - 1;
        job->pending_status = m.status < 0 && m.status > -2000 ? (coll_status_t)m.status
                                                                : COLL_ERR_JOB;
        memcpy(job->pending_msg, (const char *)data + sizeof(m), n);
        job->pending_msg[n] = '\0';
    }
    return UCS_OK;
}

static void poll_cb(uv_poll_t *handle, int status, int events)
{
    coll_transport_drive(handle->data);
}

coll_status_t coll_transport_job_open(coll_job_t *job)
{
    ucp_worker_params_t wp = {0};
    ucp_am_handler_param_t am = {0};
    ucp_address_t *addr;
    size_t len;
    int fd;
    ucs_status_t st;

    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    st = ucp_worker_create(job->d->ucp, &wp, &job->worker);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: ucp_worker_create: %s", job->id, ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    am.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    am.id = COLL_AM_CONTROL;
    am.cb = am_cb;
    am.arg = job;
    if ((st = ucp_worker_set_am_recv_handler(job->worker, &am)) != UCS_OK ||
        (st = ucp_worker_get_address(job->worker, &addr, &len)) != UCS_OK ||
        (st = ucp_worker_get_efd(job->worker, &fd)) != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: worker set-up: %s", job->id, ucs_status_string(st));
        goto err_worker;
    }
    job->worker_address = malloc(len);
    if (job->worker_address == NULL) {
        ucp_worker_release_address(job->worker, addr);
        goto err_worker;
    }
    memcpy(job->worker_address, addr, len);
    job->worker_address_len = len;
    ucp_worker_release_address(job->worker, addr);
    uv_poll_init(job->d->loop, &job->poll, fd);
    job->poll.data = job;
    job->handles++;
    uv_poll_start(&job->poll, UV_READABLE, poll_cb);
    return COLL_OK;

err_worker:
    ucp_worker_destroy(job->worker);
    job->worker = NULL;
    return COLL_ERR_TRANSPORT;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    coll_node_t *node = arg;
    if (node->gone == COLL_OK) {
        node->gone = COLL_ERR_PEER;
        snprintf(node->gone_why, sizeof(node->gone_why), "lost connection (%s)",
                 ucs_status_string(status));
    }
}

coll_status_t coll_transport_connect(coll_job_t *job, uint32_t node, ucp_ep_h *ep_p)
{
    ucp_ep_params_t ep = {0};
    coll_node_t *n = &job->nodes[node];
    ucs_status_t st;

    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = n->worker_address;
    /* UCX 1.13 offers no shared-memory transport in peer error mode: "none" keeps the fast
     * intra-host paths (posix/sysv + cma); failures are then found by our own checks. */
    ep.err_mode = strcmp(job->d->cfg.ucx_error_mode, "peer") == 0 ? UCP_ERR_HANDLING_MODE_PEER
                                                                  : UCP_ERR_HANDLING_MODE_NONE;
    ep.err_handler.cb = ep_err_cb;
    ep.err_handler.arg = n;
    st = ucp_ep_create(job->worker, &ep, ep_p);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: connecting to node %u (%s): %s", job->id, node, n->host,
                   ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

static void xfer_done(coll_xfer_t *x, ucs_status_t status)
{
    x->status = status;
    x->completed = 1;
    coll_list_push(&x->op->job->events, &x->link);
}

static void send_cb(void *request, ucs_status_t status, void *user_data)
{
    xfer_done(user_data, status);
}

static void recv_cb(void *request, ucs_status_t status, const ucp_tag_recv_info_t *info,
                    void *user_data)
{
    coll_xfer_t *x = user_data;
    x->length = status == UCS_OK ? info->length : 0;
    xfer_done(x, status);
}

/* Buffers in the pool travel with its registration, so protocols that need registered memory
 * skip the per-message registration (pinning) step. */
static void set_memh(coll_job_t *job, ucp_request_param_t *p, const void *buf, size_t len)
{
    const uint8_t *base = coll_pool_base(job->pool), *b = buf;
    if (job->pool_memh != NULL && b >= base && (size_t)(b - base) + len <= coll_pool_size(job->pool)) {
        p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p->memh = job->pool_memh;
    }
}

coll_status_t coll_transport_register_pool(coll_job_t *job)
{
    ucp_mem_map_params_t mp = {0};
    ucs_status_t st;

    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = coll_pool_base(job->pool);
    mp.length = coll_pool_size(job->pool);
    st = ucp_mem_map(job->d->ucp, &mp, &job->pool_memh);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: registering its pool of %zu bytes: %s", job->id,
                   coll_pool_size(job->pool), ucs_status_string(st));
        job->pool_memh = NULL;
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

void coll_transport_unregister_pool(coll_job_t *job)
{
    if (job->pool_memh != NULL) {
        ucp_mem_unmap(job->d->ucp, job->pool_memh);
        job->pool_memh = NULL;
    }
}

static coll_status_t posted(coll_job_t *job, coll_xfer_t *x, ucs_status_ptr_t r, const char *what)
{
    if (UCS_PTR_IS_ERR(r)) {
        coll_error(COLL_SUB_UCX, "job %s: posting %s: %s", job->id, what,
                   ucs_status_string(UCS_PTR_STATUS(r)));
        return COLL_ERR_TRANSPORT;
    }
    x->req = r;
    coll_list_push(&x->op->posted, &x->posted);
    job->inflight++;
    x->op->inflight++;
    return COLL_OK;
}

coll_status_t coll_transport_send(coll_job_t *job, uint32_t node, uint64_t tag, const void *buf,
                                  size_t len, coll_xfer_t *x)
{
    ucp_request_param_t p = {0};
    ucp_ep_h ep = coll_job_ep(job, node);

    if (ep == NULL) {
        return COLL_ERR_TRANSPORT;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.send = send_cb;
    p.user_data = x;
    set_memh(job, &p, buf, len);
    x->completed = 0;
    x->peer = node;
    return posted(job, x, ucp_tag_send_nbx(ep, buf, len, tag, &p), "send");
}

coll_status_t coll_transport_recv(coll_job_t *job, uint32_t from, uint64_t tag, void *buf,
                                  size_t len, coll_xfer_t *x)
{
    ucp_request_param_t p = {0};

    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.recv = recv_cb;
    p.user_data = x;
    set_memh(job, &p, buf, len);
    x->completed = 0;
    x->suspect = 0;
    x->expect = len;
    x->peer = from;
    return posted(job, x,
                  ucp_tag_recv_nbx(job->worker, buf, len, tag, COLL_TAG_MASK_ALL, &p), "receive");
}

void coll_transport_cancel(coll_job_t *job, coll_xfer_t *x)
{
    if (x->req != NULL && !x->completed) {
        ucp_request_cancel(job->worker, x->req);
    }
}

/* Send one control message to every other node (@p connect: also those this node never talked
 * to). Fire and forget: each request is released at once and completes on its own; the
 * endpoint close that follows a goodbye flushes it. */
static void control_all(coll_job_t *job, coll_status_t status, const char *text, int connect)
{
    /* UCX may send after this returns (an endpoint still connecting), so the payload lives in
     * the job. A job sends one control message at most: an abort, or a goodbye when clean. */
    char *buf = job->control_msg;
    am_msg_t m = {.status = (int32_t)status, .node = job->node_rank};
    size_t n = strlen(text) < sizeof(job->control_msg) - sizeof(m)
                   ? strlen(text)
                   : sizeof(job->control_msg) - sizeof(m);
    ucp_request_param_t p = {0};

    memcpy(buf, &m, sizeof(m));
    memcpy(buf + sizeof(m), text, n);
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_AM_SEND_FLAG_EAGER;
    for (uint32_t i = 0; i < job->nnodes; i++) {
        ucp_ep_h ep;
        ucs_status_ptr_t r;
        if (i == job->node_rank || job->nodes[i].gone != COLL_OK ||
            (!connect && job->nodes[i].ep == NULL) || (ep = coll_job_ep(job, i)) == NULL) {
            continue;
        }
        r = ucp_am_send_nbx(ep, COLL_AM_CONTROL, NULL, 0, buf, sizeof(m) + n, &p);
        if (UCS_PTR_IS_PTR(r)) {
            ucp_request_free(r);
        }
    }
}

void coll_transport_abort_peers(coll_job_t *job, coll_status_t status, const char *msg)
{
    control_all(job, status, msg, 1);
}

/* The loss of a node only fails the job when this node still waits on it. A node that left
 * cleanly finished every operation it took part in, and everything it sent was flushed to us
 * first: a receive from it still pending one check period later (messages already delivered
 * match within a progress round) waits for data that will never come. */
static void gone_check_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        coll_xfer_t *x, *xtmp;
        coll_list_for_each_safe(x, xtmp, &op->posted, coll_xfer_t, posted)
        {
            coll_node_t *n = &job->nodes[x->peer];
            if (op->done || x->completed || x->is_send || n->gone == COLL_OK) {
                continue;
            }
            if (x->suspect) {
                char nm[48];
                coll_desc_name(&op->desc, nm, sizeof(nm));
                coll_job_fail(job, n->gone, 1,
                              "node %u (%s, ranks from %u): %s while %s still waited for its data",
                              x->peer, n->host, n->ranks[0], n->gone_why, nm);
                coll_transport_drive(job);
                return;
            }
            x->suspect = 1;
        }
    }
}

static void handle_gone_nodes(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes && job->state == COLL_JOB_READY; i++) {
        coll_node_t *n = &job->nodes[i];
        if (n->gone != COLL_OK && !n->gone_seen) {
            n->gone_seen = 1;
            coll_info(COLL_SUB_UCX, "job %s: node %u (%s): %s", job->id, i, n->host, n->gone_why);
            if (!uv_is_active((uv_handle_t *)&job->gone_timer)) {
                uv_timer_start(&job->gone_timer, gone_check_cb, COLL_GONE_CHECK_MS,
                               COLL_GONE_CHECK_MS);
            }
        }
    }
}

/* Hand every completed transfer to the engine. */
static void run_events(coll_job_t *job)
{
    coll_list_t *e;
    while ((e = coll_list_pop(&job->events)) != NULL) {
        coll_xfer_t *x = coll_container_of(e, coll_xfer_t, link);
        ucp_request_free(x->req);
        x->req = NULL;
        coll_list_remove(&x->posted);
        job->inflight--;
        coll_op_on_xfer(x);
    }
}

static void handle_pending_failure(coll_job_t *job)
{
    if (job->pending_status != COLL_OK) {
        coll_status_t st = job->pending_status;
        job->pending_status = COLL_OK;
        coll_job_fail(job, st, 0, "%s", job->pending_msg);
    }
}

void coll_transport_drive(coll_job_t *job)
{
    if (job->worker == NULL || job->driving) {
        return;
    }
    job->driving = 1;
    for (;;) {
        ucs_status_t st;
        while (ucp_worker_progress(job->worker) != 0) {
        }
        handle_pending_failure(job);
        run_events(job);
        handle_gone_nodes(job);
        st = ucp_worker_arm(job->worker);
        if (st == UCS_OK) {
            break;
        }
        if (st != UCS_ERR_BUSY) {
            coll_job_fail(job, COLL_ERR_TRANSPORT, 1, "ucp_worker_arm: %s",
                          ucs_status_string(st));
            break;
        }
    }
    job->driving = 0;
    if (!job->closing) {
        coll_job_maybe_free(job);
    }
}

/* Closing a job's transport is asynchronous so a dead peer never stalls the loop: endpoints are
 * closed in flush mode (a neighbour may still be receiving our last segments, or our abort
 * message), the loop keeps progressing the worker, and the worker is destroyed once every close
 * and transfer finished or the deadline passed. */
#define COLL_CLOSE_DEADLINE_MS 2000
#define COLL_CLOSE_POLL_MS 20

static int close_finished(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        void *r = job->nodes[i].close_req;
        if (r != NULL && ucp_request_check_status(r) == UCS_INPROGRESS) {
            return 0;
        }
    }
    return job->inflight == 0;
}

static void close_worker(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        if (job->nodes[i].close_req != NULL) {
            ucp_request_free(job->nodes[i].close_req);
            job->nodes[i].close_req = NULL;
        }
    }
    if (job->inflight > 0) {
        coll_warn(COLL_SUB_UCX, "job %s: %llu transfers did not finish within %d ms of closing",
                  job->id, (unsigned long long)job->inflight, COLL_CLOSE_DEADLINE_MS);
    }
    uv_timer_stop(&job->gone_timer);
    /* libuv must stop polling the fd before UCX closes it. */
    uv_close((uv_handle_t *)&job->poll, coll_job_handle_closed);
    ucp_worker_destroy(job->worker);
    job->worker = NULL;
    coll_job_release(job);
}

static void close_check_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;
    ucp_worker_progress(job->worker);
    run_events(job);
    /* Kernel threads writing into the pool are always waited for: they end on their own. */
    if (job->tasks == 0 &&
        (close_finished(job) || uv_now(job->d->loop) >= job->close_deadline)) {
        close_worker(job);
    }
}

void coll_transport_job_close(coll_job_t *job)
{
    ucp_request_param_t p = {0};

    if (job->worker == NULL) {
        coll_job_release(job);
        return;
    }
    if (job->state == COLL_JOB_READY) {
        control_all(job, COLL_OK, "", 0); /* goodbye to the nodes we talked to */
    }
    coll_op_fail_all(job); /* cancels receives */
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = 0; /* flush */
    for (uint32_t i = 0; i < job->nnodes; i++) {
        if (job->nodes[i].ep != NULL) {
            ucs_status_ptr_t r = ucp_ep_close_nbx(job->nodes[i].ep, &p);
            job->nodes[i].ep = NULL;
            job->nodes[i].close_req = UCS_PTR_IS_PTR(r) ? r : NULL;
        }
    }
    job->close_deadline = uv_now(job->d->loop) + COLL_CLOSE_DEADLINE_MS;
    uv_timer_stop(&job->gone_timer);
    uv_timer_start(&job->gone_timer, close_check_cb, 0, COLL_CLOSE_POLL_MS);
}
