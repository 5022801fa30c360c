/*
 * The leader's own UCX context and worker (direct.h), its address for the join, the other
 * leaders' addresses after it, the endpoints to them and the worker's event fd.
 *
 * Only local rank 0 of a job over several nodes has one; UCX's configuration comes from the
 * trainer's UCX_* environment, as the daemon's from its own. Endpoints are made in peer error
 * mode: a leader that died fails its endpoint instead of the process, and UCX then picks no
 * shared-memory transport (it offers none in that mode), so leaders on one host talk as
 * leaders on two hosts do. A failure of the job reaches the leader through the area's header
 * (client/shm/), written by its daemon, not through UCX.
 */
#include <stdlib.h>
#include <string.h>

#include <ucp/api/ucp.h>

#include "client/direct/direct_impl.h"

static void say_no_worker(coll_comm_t *c, const char *what, ucs_status_t st)
{
    coll__debug(COLL__DEBUG_WARN, "rank %d of job %s: %s: %s; the job runs without the direct "
                "path between the nodes' leaders", c->rank, c->job, what,
                ucs_status_string(st));
}

/* The context and the worker, or nothing (said on stderr). */
static coll_status_t create_worker(coll_comm_t *c, coll_direct_t *d)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME,
                           .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP,
                           .name = "libcollective-leader"};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_config_t *config;
    ucs_status_t st;

    if ((st = ucp_config_read(NULL, NULL, &config)) != UCS_OK) {
        say_no_worker(c, "reading the UCX configuration", st);
        return COLL_OK;
    }
    /* Eager sends at every size the path takes (at most 1 MiB and a header): a rendezvous
     * costs a round trip, and its get or put waits for the sender's next progress. */
    if (getenv("UCX_RNDV_THRESH") == NULL) {
        (void)ucp_config_modify(config, "RNDV_THRESH", "inf");
    }
    st = ucp_init(&params, config, &d->ucp);
    ucp_config_release(config);
    if (st != UCS_OK) {
        d->ucp = NULL;
        say_no_worker(c, "ucp_init", st);
        return COLL_OK;
    }
    if ((st = ucp_worker_create(d->ucp, &wp, &d->worker)) != UCS_OK ||
        (st = ucp_worker_get_efd(d->worker, &d->efd)) != UCS_OK ||
        (st = ucp_worker_get_address(d->worker, &d->addr, &d->addr_len)) != UCS_OK) {
        say_no_worker(c, "creating the leader's UCX worker", st);
        coll__direct_close(c); /* c->direct is NULL now */
        return COLL_OK;
    }
    return COLL_OK;
}

coll_status_t coll__direct_open(coll_comm_t *c, const void **addr_p, size_t *len_p)
{
    coll_direct_t *d;

    *addr_p = NULL;
    *len_p = 0;
    if (c->local_rank != 0 || c->local_size >= c->world_size) {
        return COLL_OK;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    d->efd = -1;
    c->direct = d;
    create_worker(c, d);
    if (c->direct != NULL) {
        *addr_p = d->addr;
        *len_p = d->addr_len;
    }
    return COLL_OK;
}

coll_status_t coll__direct_peers(coll_comm_t *c, const void *const *addrs, const size_t *lens,
                                 size_t n)
{
    coll_direct_t *d = c->direct;

    if (d == NULL || d->worker == NULL || n != c->node_count || d->peers != NULL) {
        coll__set_error(c, "rank %d: the daemon handed %zu leader addresses to a rank %s", c->rank,
                        n, d == NULL || d->worker == NULL ? "without a UCX worker"
                                                         : "of another node count");
        return COLL_ERR_PROTOCOL;
    }
    if ((d->peers = calloc(n, sizeof(*d->peers))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    d->npeers = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        if ((d->peers[i].addr = malloc(lens[i])) == NULL) {
            return COLL_ERR_NOMEM; /* coll__direct_close() frees what was copied */
        }
        memcpy(d->peers[i].addr, addrs[i], lens[i]);
    }
    return COLL_OK;
}

int coll__direct_ready(const coll_comm_t *c)
{
    const coll_direct_t *d = c->direct;

    return d != NULL && d->worker != NULL && d->peers != NULL && d->npeers == c->node_count;
}

static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    coll_direct_peer_t *p = arg;

    (void)ep;
    p->failed = status;
}

ucp_ep_h coll__direct_ep(coll_comm_t *c, uint32_t node, ucs_status_t *st_p)
{
    coll_direct_peer_t *p = &c->direct->peers[node];
    ucp_ep_params_t ep = {.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                                        UCP_EP_PARAM_FIELD_ERR_HANDLER,
                          .address = p->addr, .err_mode = UCP_ERR_HANDLING_MODE_PEER,
                          .err_handler = {.cb = ep_failed, .arg = p}};

    *st_p = p->failed;
    if (p->ep == NULL && p->failed == UCS_OK &&
        (*st_p = ucp_ep_create(c->direct->worker, &ep, &p->ep)) != UCS_OK) {
        p->ep = NULL;
        p->failed = *st_p;
    }
    return p->failed == UCS_OK ? p->ep : NULL;
}

/* Close every endpoint, forcibly (the job is over or failed: nothing is flushed). */
static void close_eps(coll_direct_t *d)
{
    for (uint32_t i = 0; i < d->npeers; i++) {
        if (d->peers[i].ep != NULL) {
            ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                                       .flags = UCP_EP_CLOSE_FLAG_FORCE};
            void *req = ucp_ep_close_nbx(d->peers[i].ep, &prm);
            for (int k = 0; UCS_PTR_IS_PTR(req) && k < 1000 &&
                            ucp_request_check_status(req) == UCS_INPROGRESS; k++) {
                ucp_worker_progress(d->worker);
            }
            if (UCS_PTR_IS_PTR(req)) {
                ucp_request_free(req);
            }
        }
        free(d->peers[i].addr);
    }
    free(d->peers);
}

void coll__direct_keep(coll_direct_t *d, void *buf)
{
    void **k = realloc(d->kept, (d->nkept + 1) * sizeof(*k));

    if (k != NULL) {
        d->kept = k;
        d->kept[d->nkept++] = buf;
    }
}

void coll__direct_close(coll_comm_t *c)
{
    coll_direct_t *d = c->direct;

    if (d == NULL) {
        return;
    }
    close_eps(d);
    if (d->addr != NULL) {
        ucp_worker_release_address(d->worker, d->addr);
    }
    if (d->worker != NULL) {
        ucp_worker_destroy(d->worker);
    }
    if (d->ucp != NULL) {
        ucp_cleanup(d->ucp);
    }
    for (uint32_t i = 0; i < d->nkept; i++) {
        free(d->kept[i]);
    }
    free(d->kept);
    free(d);
    c->direct = NULL;
}

int coll__direct_arm(coll_comm_t *c)
{
    coll_direct_t *d = c->direct;
    ucs_status_t st;

    if (d == NULL || d->worker == NULL) {
        return -1;
    }
    /* What this progress completes, only the rounds' next test takes: a message it brought
     * must not wait for the fd, which it leaves quiet. */
    if (ucp_worker_progress(d->worker) != 0) {
        return COLL_DIRECT_BUSY;
    }
    st = ucp_worker_arm(d->worker);
    return st == UCS_OK ? d->efd : st == UCS_ERR_BUSY ? COLL_DIRECT_BUSY : -1;
}
