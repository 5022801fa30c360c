#include "net/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/assert.h"
#include "base/log.h"
#include "base/loopwatch.h"
#include "net/control.h"
#include "net/teardown.h"
#include "net/ucx_address.h"
#include "proto/tag.h"

/* Worker addresses from peers are checked in UCX 1.13's packed format before UCX reads them
 * (net/ucx_address.h). Unified mode packs none of the lengths that check needs: refuse it; and
 * say so when another UCX release runs, whose format may differ. */
static coll_status_t check_address_format(const ucp_config_t *config)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    unsigned major, minor, release;
    int unified;

    if (f == NULL) {
        return COLL_ERR_NOMEM;
    }
    ucp_config_print(config, f, NULL, UCS_CONFIG_PRINT_CONFIG);
    fclose(f);
    unified = text != NULL && strstr(text, "UCX_UNIFIED_MODE=y") != NULL;
    free(text);
    if (unified) {
        coll_error(COLL_SUB_UCX, "UCX_UNIFIED_MODE=y: its worker addresses cannot be checked "
                   "before UCX reads them (net/ucx_address.h); unset it");
        return COLL_ERR_TRANSPORT;
    }
    ucp_get_version(&major, &minor, &release);
    if (major != COLL_UCX_ADDRESS_MAJOR || minor != COLL_UCX_ADDRESS_MINOR) {
        coll_warn(COLL_SUB_UCX, "peers' worker addresses are checked in the format of UCX %d.%d; "
                  "this is UCX %u.%u.%u: a job whose addresses do not pass fails at its "
                  "rendezvous with the reason", COLL_UCX_ADDRESS_MAJOR, COLL_UCX_ADDRESS_MINOR,
                  major, minor, release);
    }
    return COLL_OK;
}

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
    if (check_address_format(config) != COLL_OK) {
        ucp_config_release(config);
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

static void poll_cb(uv_poll_t *handle, int status, int events)
{
    coll_transport_drive(handle->data);
}

static coll_status_t register_pool(coll_job_t *job);
static void redrive_cb(uv_timer_t *t);

void coll_transport_job_init(coll_job_t *job)
{
    coll_list_init(&job->net.posted);
    coll_list_init(&job->net.events);
    coll_list_init(&job->net.owned);
    uv_timer_init(job->d->loop, &job->net.timer);
    job->net.timer.data = job;
    job->handles++;
}

coll_status_t coll_transport_job_open(coll_job_t *job, const coll_transport_hooks_t *hooks)
{
    ucp_worker_params_t wp = {0};
    ucp_address_t *addr;
    size_t len;
    int fd;
    ucs_status_t st;

    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE | UCP_WORKER_PARAM_FIELD_FLAGS;
    wp.thread_mode = UCS_THREAD_MODE_SINGLE;
    wp.flags = coll_teardown_worker_flags(job->d);
    st = ucp_worker_create(job->d->ucp, &wp, &job->net.worker);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: ucp_worker_create: %s", job->id, ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    if (coll_control_init(job) != COLL_OK) {
        goto err_worker;
    }
    if ((st = ucp_worker_get_address(job->net.worker, &addr, &len)) != UCS_OK ||
        (st = ucp_worker_get_efd(job->net.worker, &fd)) != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: worker set-up: %s", job->id, ucs_status_string(st));
        goto err_worker;
    }
    job->net.worker_address = malloc(len);
    if (job->net.worker_address == NULL) {
        ucp_worker_release_address(job->net.worker, addr);
        goto err_worker;
    }
    memcpy(job->net.worker_address, addr, len);
    job->net.worker_address_len = len;
    ucp_worker_release_address(job->net.worker, addr);
    if (register_pool(job) != COLL_OK) {
        goto err_worker;
    }
    job->net.hooks = hooks;
    uv_poll_init(job->d->loop, &job->net.poll, fd);
    job->net.poll.data = job;
    job->handles++;
    uv_poll_start(&job->net.poll, UV_READABLE, poll_cb);
    return COLL_OK;

err_worker:
    ucp_worker_destroy(job->net.worker);
    job->net.worker = NULL;
    free(job->net.worker_address);
    job->net.worker_address = NULL;
    return COLL_ERR_TRANSPORT;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    coll_node_lost(arg, "lost connection (%s)", ucs_status_string(status));
}

/* UCX 1.13 offers no shared-memory transport in peer error mode: "none" keeps the fast
 * intra-host paths (posix/sysv + cma) to a daemon on this kernel, whose death the peer watch
 * and the heartbeats find. To another host there is no shared memory to lose, and peer mode
 * lets UCX report a broken connection at once ("auto", the default). */
static ucp_err_handling_mode_t error_mode(const coll_daemon_t *d, const coll_node_t *n)
{
    const char *mode = d->cfg.ucx_error_mode;

    if (strcmp(mode, "peer") == 0 || (strcmp(mode, "auto") == 0 && !n->same_kernel)) {
        return UCP_ERR_HANDLING_MODE_PEER;
    }
    return UCP_ERR_HANDLING_MODE_NONE;
}

static coll_status_t connect_node(coll_job_t *job, uint32_t node, ucp_ep_h *ep_p)
{
    ucp_ep_params_t ep = {0};
    coll_node_t *n = &job->nodes[node];
    ucs_status_t st;

    ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                    UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = n->worker_address;
    ep.err_mode = error_mode(job->d, n);
    ep.err_handler.cb = ep_err_cb;
    ep.err_handler.arg = n;
    st = ucp_ep_create(job->net.worker, &ep, ep_p);
    n->ep_forceable = ep.err_mode == UCP_ERR_HANDLING_MODE_PEER;
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: connecting to node %u (%s): %s", job->id, node, n->host,
                   ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

ucp_ep_h coll_transport_ep(coll_job_t *job, uint32_t node)
{
    coll_node_t *n = &job->nodes[node];

    if (n->ep == NULL && connect_node(job, node, &n->ep) != COLL_OK) {
        coll_job_fail(job, COLL_ERR_TRANSPORT, 1, "cannot connect to node %u (%s)", node, n->host);
        return NULL;
    }
    return n->ep;
}

coll_status_t coll_transport_connect_all(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        if (i != job->node_rank && coll_transport_ep(job, i) == NULL) {
            return COLL_ERR_TRANSPORT;
        }
    }
    return COLL_OK;
}

static void xfer_done(coll_xfer_t *x, ucs_status_t status)
{
    x->status = status;
    x->completed = 1;
    coll_list_remove(&x->link); /* from job->net.posted */
    coll_list_push(&x->job->net.events, &x->link);
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
    if (job->net.pool_memh != NULL && b >= base && (size_t)(b - base) + len <= coll_pool_size(job->pool)) {
        p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        p->memh = job->net.pool_memh;
    }
}

/* A fixed pool is registered with UCX once (ucp_mem_map); transfers from and to it pass the
 * handle. A pool that grows on demand is not: registering it whole would pin (RDMA) every page
 * of pool_max; its transfers go through UCX's registration cache instead. */
static coll_status_t register_pool(coll_job_t *job)
{
    ucp_mem_map_params_t mp = {0};
    ucs_status_t st;

    if (coll_pool_on_demand(job->pool)) {
        return COLL_OK;
    }
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = coll_pool_base(job->pool);
    mp.length = coll_pool_size(job->pool);
    st = ucp_mem_map(job->d->ucp, &mp, &job->net.pool_memh);
    if (st != UCS_OK) {
        coll_error(COLL_SUB_UCX, "job %s: registering its pool of %zu bytes: %s", job->id,
                   coll_pool_size(job->pool), ucs_status_string(st));
        job->net.pool_memh = NULL;
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

void coll__transport_unregister_pool(coll_job_t *job)
{
    if (job->net.pool_memh != NULL) {
        ucp_mem_unmap(job->d->ucp, job->net.pool_memh);
        job->net.pool_memh = NULL;
    }
}

/* @p x is in job->net.posted from before its post: UCX may run its callback (xfer_done())
 * inside the post, when the message is there already. */
static void posting(coll_job_t *job, coll_xfer_t *x)
{
    x->job = job;
    x->completed = 0;
    coll_list_push(&job->net.posted, &x->link);
}

static coll_status_t posted(coll_job_t *job, coll_xfer_t *x, ucs_status_ptr_t r, const char *what)
{
    if (UCS_PTR_IS_ERR(r)) {
        coll_error(COLL_SUB_UCX, "job %s: posting %s: %s", job->id, what,
                   ucs_status_string(UCS_PTR_STATUS(r)));
        coll_list_remove(&x->link);
        return COLL_ERR_TRANSPORT;
    }
    x->req = r;
    job->net.inflight++;
    return COLL_OK;
}

coll_status_t coll_transport_send(coll_job_t *job, uint32_t node, uint64_t tag, const void *buf,
                                  size_t len, coll_xfer_t *x)
{
    ucp_request_param_t p = {0};
    ucp_ep_h ep = coll_transport_ep(job, node);

    if (ep == NULL) {
        return COLL_ERR_TRANSPORT;
    }
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                     UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    p.cb.send = send_cb;
    p.user_data = x;
    set_memh(job, &p, buf, len);
    x->peer = node;
    job->net.bytes_sent += len;
    posting(job, x);
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
    x->suspect = 0;
    x->expect = len;
    x->peer = from;
    posting(job, x);
    return posted(job, x,
                  ucp_tag_recv_nbx(job->net.worker, buf, len, tag, COLL_TAG_MASK_ALL, &p), "receive");
}

void coll_transport_cancel(coll_job_t *job, coll_xfer_t *x)
{
    if (x->req != NULL && !x->completed) {
        ucp_request_cancel(job->net.worker, x->req);
    }
}

int coll_transport_unexpected(coll_job_t *job, uint64_t tag)
{
    ucp_tag_recv_info_t info;

    return job->net.worker != NULL &&
           ucp_tag_probe_nb(job->net.worker, tag, COLL_TAG_MASK_ALL, 0, &info) != NULL;
}

size_t coll_transport_take(coll_job_t *job, uint64_t tag, void *buf, size_t len)
{
    ucp_request_param_t p = {0};
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m;
    ucs_status_ptr_t r;

    if (job->net.worker == NULL ||
        (m = ucp_tag_probe_nb(job->net.worker, tag, COLL_TAG_MASK_ALL, 1, &info)) == NULL) {
        return 0;
    }
    /* A whole eager message completes here (UCS_OK); a request would complete later, into
     * @p buf, which the caller keeps as long as the worker. */
    r = ucp_tag_msg_recv_nbx(job->net.worker, buf, len, m, &p);
    if (r == NULL) {
        return info.length <= len ? info.length : 0;
    }
    if (!UCS_PTR_IS_ERR(r)) {
        ucp_request_free(r);
    }
    return 0;
}

void coll__transport_run_events(coll_job_t *job)
{
    coll_list_t *e;
    while ((e = coll_list_pop(&job->net.events)) != NULL) {
        coll_xfer_t *x = coll_container_of(e, coll_xfer_t, link);
        ucp_request_free(x->req);
        x->req = NULL;
        COLL_ASSERT(job->net.inflight > 0);
        job->net.inflight--;
        job->net.hooks->on_xfer(x);
    }
}

static void handle_pending_failure(coll_job_t *job)
{
    if (job->net.pending_status != COLL_OK) {
        coll_status_t st = job->net.pending_status;
        job->net.pending_status = COLL_OK;
        coll_job_fail(job, st, 0, "%s", job->net.pending_msg);
    }
}

/* Bounds of one drive, so that no callback holds the loop: a worker that keeps reporting work
 * (or whose arm keeps answering BUSY, as after a peer's sudden death with error mode "none")
 * is driven again from the next turn of the loop, where timers, sockets and signals run
 * first. A round is up to COLL_DRIVE_PROGRESS calls of ucp_worker_progress, the engine on
 * what completed, then ucp_worker_arm. */
#define COLL_DRIVE_ROUNDS 8
#define COLL_DRIVE_PROGRESS 256
/* Re-drives in a row that found nothing to do before they back off, doubling from 1 ms up to
 * COLL_REDRIVE_BACKOFF_MS: a worker stuck in BUSY (a peer killed while writing into our
 * shared-memory FIFO leaves it so for good) then costs little CPU while the health timer or
 * the peer watch finds out what happened to the peer. */
#define COLL_REDRIVE_EAGER 16
#define COLL_REDRIVE_BACKOFF_MS 16

/* One round; returns 1 when the worker is armed (the loop may sleep on its fd), 0 when it is
 * busy, and sets *worked when progress or the engine did anything. */
static int drive_round(coll_job_t *job, int *worked)
{
    ucs_status_t st;
    unsigned n = 0;

    while (n < COLL_DRIVE_PROGRESS && ucp_worker_progress(job->net.worker) != 0) {
        n++;
    }
    /* Transfers that arrived with a peer's abort first: an operation they complete succeeded
     * on every node, and must not be failed by the abort that followed. */
    *worked |= n > 0 || !coll_list_empty(&job->net.events);
    coll__transport_run_events(job);
    handle_pending_failure(job);
    if (job->net.worker == NULL || n == COLL_DRIVE_PROGRESS) {
        return job->net.worker == NULL;
    }
    st = ucp_worker_arm(job->net.worker);
    if (st == UCS_OK) {
        return 1;
    }
    if (st != UCS_ERR_BUSY) {
        coll_job_fail(job, COLL_ERR_TRANSPORT, 1, "ucp_worker_arm: %s", ucs_status_string(st));
        return 1;
    }
    return 0;
}

static void redrive_cb(uv_timer_t *t)
{
    coll_transport_drive(t->data);
}

/* The worker is not armed: drive it again from the loop, soon, and less eagerly while it
 * keeps having nothing to do. */
static void schedule_redrive(coll_job_t *job, int worked)
{
    uint64_t delay = 0;

    job->net.busy_streak = worked ? 0 : job->net.busy_streak + 1;
    if (job->net.busy_streak > COLL_REDRIVE_EAGER) {
        uint32_t doublings = job->net.busy_streak - COLL_REDRIVE_EAGER - 1;
        delay = doublings >= 4 ? COLL_REDRIVE_BACKOFF_MS : 1u << doublings;
    }
    if (!uv_is_active((uv_handle_t *)&job->net.timer)) {
        uv_timer_start(&job->net.timer, redrive_cb, delay, 0);
    }
}

void coll_transport_drive(coll_job_t *job)
{
    int armed = 0, worked = 0;

    if (job->net.worker == NULL || job->net.driving) {
        return;
    }
    job->net.driving = 1;
    coll_loopwatch_enter("driving UCX of job", job->id);
    for (int round = 0; round < COLL_DRIVE_ROUNDS && !armed; round++) {
        armed = drive_round(job, &worked);
    }
    coll_loopwatch_leave();
    job->net.driving = 0;
    if (!armed && job->net.worker != NULL) {
        schedule_redrive(job, worked);
    } else {
        job->net.busy_streak = 0;
    }
    if (!job->closing) {
        job->d->job_hooks->idle(job);
    }
}
