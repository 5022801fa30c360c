#include "rdv.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth.h"
#include "log.h"
#include "stream.h"
#include "wire.h"

/* A rendezvous this daemon serves as root: the nodes of one job that registered so far. */
typedef struct coll_rdv {
    coll_list_t link; /* in d->rdvs */
    coll_daemon_t *d;
    char job[COLL_JOB_ID_MAX + 1];
    uint32_t world_size;
    uint32_t nranks;
    coll_list_t members; /* coll_peer_link_t via rdv_link */
} coll_rdv_t;

#define RDV_RETRY_MS 100

static void link_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);

static void link_free(coll_peer_link_t *l)
{
    coll_frame_reader_cleanup(&l->reader);
    if (l->join != NULL) {
        coll__wire__node_join__free_unpacked(l->join, NULL);
    }
    free(l);
}

static void link_close_cb(uv_handle_t *h)
{
    coll_peer_link_t *l = h->data;
    /* A pending name lookup still points here; its callback frees the link. */
    l->closed = 1;
    if (!l->resolving) {
        link_free(l);
    }
}

static void rdv_free(coll_rdv_t *rdv)
{
    coll_peer_link_t *m, *tmp;
    coll_list_for_each_safe(m, tmp, &rdv->members, coll_peer_link_t, rdv_link)
    {
        coll_list_remove(&m->rdv_link);
        m->rdv = NULL;
    }
    coll_list_remove(&rdv->link);
    free(rdv);
}

void coll_rdv_link_close(coll_peer_link_t *l)
{
    if (l->closing) {
        return;
    }
    l->closing = 1;
    coll_list_remove(&l->link);
    if (l->rdv != NULL) {
        coll_rdv_t *rdv = l->rdv;
        coll_list_remove(&l->rdv_link);
        rdv->nranks -= (uint32_t)l->join->n_ranks;
        l->rdv = NULL;
        if (coll_list_empty(&rdv->members)) {
            rdv_free(rdv);
        }
    }
    if (l->job != NULL && l->job->rdv_link == l) {
        l->job->rdv_link = NULL;
    }
    uv_close((uv_handle_t *)&l->tcp, link_close_cb);
}

static coll_peer_link_t *link_new(coll_daemon_t *d)
{
    coll_peer_link_t *l = calloc(1, sizeof(*l));
    if (l == NULL || coll_frame_reader_init(&l->reader, COLL_FRAME_MAX_PEER) != COLL_OK) {
        free(l);
        return NULL;
    }
    l->d = d;
    uv_tcp_init(d->loop, &l->tcp);
    l->tcp.data = l;
    coll_list_init(&l->rdv_link);
    coll_list_push(&d->peer_links, &l->link);
    return l;
}

static void send_peer(coll_peer_link_t *l, Coll__Wire__PeerMsg *msg)
{
    msg->version = COLL_WIRE_VERSION;
    if (coll_stream_send((uv_stream_t *)&l->tcp, &msg->base) != COLL_OK) {
        coll_warn(COLL_SUB_RDV, "control link %s: write failed; closing", l->peer);
        coll_rdv_link_close(l);
    }
}

/* ---- root side ---------------------------------------------------------------------------- */

static void rdv_reply_error(coll_rdv_t *rdv, const char *msg)
{
    coll_peer_link_t *m, *tmp;
    coll_warn(COLL_SUB_RDV, "rendezvous of job %s failed: %s", rdv->job, msg);
    coll_list_for_each_safe(m, tmp, &rdv->members, coll_peer_link_t, rdv_link)
    {
        Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
        Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;
        reply.status = COLL_ERR_RENDEZVOUS;
        reply.error = (char *)msg;
        out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
        out.node_join_reply = &reply;
        send_peer(m, &out);
    }
    rdv_free(rdv);
}

static uint32_t min_rank(const coll_peer_link_t *m)
{
    uint32_t r = UINT32_MAX;
    for (size_t i = 0; i < m->join->n_ranks; i++) {
        r = m->join->ranks[i] < r ? m->join->ranks[i] : r;
    }
    return r;
}

static int by_min_rank(const void *a, const void *b)
{
    uint32_t x = min_rank(*(coll_peer_link_t *const *)a);
    uint32_t y = min_rank(*(coll_peer_link_t *const *)b);
    return x < y ? -1 : x > y;
}

/* The epoch of a new incarnation of a job: the root's wall clock, which a restarted root does
 * not repeat either. */
static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Every rank is present: answer each node with the table in ring order. */
static void rdv_complete(coll_rdv_t *rdv)
{
    size_t n = 0, k = 0;
    uint64_t timeout_ms = 0, epoch = realtime_ns();
    coll_peer_link_t *m, *tmp, **sorted;
    Coll__Wire__NodeInfo *infos, **ptrs;

    coll_list_for_each_safe(m, tmp, &rdv->members, coll_peer_link_t, rdv_link) { n++; }
    sorted = calloc(n, sizeof(*sorted));
    infos = calloc(n, sizeof(*infos));
    ptrs = calloc(n, sizeof(*ptrs));
    if (sorted == NULL || infos == NULL || ptrs == NULL) {
        rdv_reply_error(rdv, "root daemon out of memory");
        goto out;
    }
    coll_list_for_each_safe(m, tmp, &rdv->members, coll_peer_link_t, rdv_link)
    {
        sorted[k++] = m;
        /* The most patient node's ranks set the job's timeout. */
        timeout_ms = m->join->timeout_ms > timeout_ms ? m->join->timeout_ms : timeout_ms;
    }
    qsort(sorted, n, sizeof(*sorted), by_min_rank);
    for (k = 0; k < n; k++) {
        coll__wire__node_info__init(&infos[k]);
        infos[k].n_ranks = sorted[k]->join->n_ranks;
        infos[k].ranks = sorted[k]->join->ranks;
        infos[k].worker_address = sorted[k]->join->worker_address;
        infos[k].host = sorted[k]->join->host;
        ptrs[k] = &infos[k];
    }
    for (k = 0; k < n; k++) {
        Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
        Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;
        Coll__Wire__JobParams params = COLL__WIRE__JOB_PARAMS__INIT;
        coll_job_params_t p;
        coll_job_params_from_config(&rdv->d->cfg, &p);
        params.timeout_ms = timeout_ms ? timeout_ms : p.timeout_ms;
        params.segment_bytes = p.segment_bytes;
        params.pipeline_depth = p.pipeline_depth;
        params.rd_max_bytes = p.rd_max_bytes;
        reply.params = &params;
        reply.epoch = epoch;
        reply.node_rank = (uint32_t)k;
        reply.n_nodes = n;
        reply.nodes = ptrs;
        out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
        out.node_join_reply = &reply;
        send_peer(sorted[k], &out);
    }
    coll_info(COLL_SUB_RDV, "job %s: rendezvous complete, %zu nodes, world size %u", rdv->job, n,
              rdv->world_size);
    rdv_free(rdv);
out:
    free(sorted);
    free(infos);
    free(ptrs);
}

static coll_rdv_t *rdv_get(coll_daemon_t *d, const Coll__Wire__NodeJoin *j)
{
    coll_rdv_t *rdv, *tmp;
    coll_list_for_each_safe(rdv, tmp, &d->rdvs, coll_rdv_t, link)
    {
        if (strcmp(rdv->job, j->job) == 0) {
            return rdv;
        }
    }
    rdv = calloc(1, sizeof(*rdv));
    if (rdv != NULL) {
        snprintf(rdv->job, sizeof(rdv->job), "%s", j->job);
        rdv->d = d;
        rdv->world_size = j->world_size;
        coll_list_init(&rdv->members);
        coll_list_push(&d->rdvs, &rdv->link);
    }
    return rdv;
}

/* Returns a message when @p j conflicts with the nodes already registered, else NULL. */
static const char *rdv_conflict(coll_rdv_t *rdv, const Coll__Wire__NodeJoin *j,
                                const char *from, char *buf, size_t len)
{
    coll_peer_link_t *m, *tmp;
    if (j->world_size != rdv->world_size) {
        snprintf(buf, len, "node %s (%s) says world size %u, earlier nodes say %u", j->host,
                 from, j->world_size, rdv->world_size);
        return buf;
    }
    coll_list_for_each_safe(m, tmp, &rdv->members, coll_peer_link_t, rdv_link)
    {
        if (m->join->token_digest.len != j->token_digest.len ||
            memcmp(m->join->token_digest.data, j->token_digest.data, j->token_digest.len) != 0) {
            snprintf(buf, len, "nodes %s (%s) and %s (%s) disagree on the job token",
                     m->join->host, m->peer, j->host, from);
            return buf;
        }
        for (size_t a = 0; a < j->n_ranks; a++) {
            for (size_t b = 0; b < m->join->n_ranks; b++) {
                if (j->ranks[a] == m->join->ranks[b]) {
                    snprintf(buf, len, "rank %u is claimed by node %s (%s) and by node %s (%s)",
                             j->ranks[a], m->join->host, m->peer, j->host, from);
                    return buf;
                }
            }
        }
    }
    return NULL;
}

static void root_on_node_join(coll_peer_link_t *l, Coll__Wire__NodeJoin *j)
{
    char msg[1024];
    const char *conflict;
    coll_rdv_t *rdv;

    if (l->join != NULL) {
        coll_warn(COLL_SUB_RDV, "control link %s: second NodeJoin; closing", l->peer);
        coll__wire__node_join__free_unpacked(j, NULL);
        coll_rdv_link_close(l);
        return;
    }
    l->join = j;
    rdv = rdv_get(l->d, j);
    if (rdv == NULL) {
        coll_rdv_link_close(l);
        return;
    }
    conflict = rdv_conflict(rdv, j, l->peer, msg, sizeof(msg));
    l->rdv = rdv;
    coll_list_push(&rdv->members, &l->rdv_link);
    if (conflict != NULL) {
        rdv_reply_error(rdv, conflict);
        return;
    }
    rdv->nranks += (uint32_t)j->n_ranks;
    coll_debug(COLL_SUB_RDV, "job %s: node %s registered %zu ranks (%u of %u)", rdv->job, j->host,
               j->n_ranks, rdv->nranks, rdv->world_size);
    if (rdv->nranks == rdv->world_size) {
        rdv_complete(rdv);
    }
}

/* ---- peer authentication (auth.h) ------------------------------------------------------- */

enum { LINK_AUTH_DONE = 0, LINK_AWAIT_AUTH, LINK_AWAIT_CHALLENGE, LINK_AWAIT_OK };

/* Refuse a peer that failed or skipped authentication, saying why in the log. */
static void reject_peer(coll_peer_link_t *l, const char *why)
{
    coll_warn(COLL_SUB_RDV, "rejected peer %s: %s", l->peer, why);
    coll_rdv_link_close(l);
}


static void send_challenge(coll_peer_link_t *l)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Challenge c = COLL__WIRE__CHALLENGE__INIT;

    coll_auth_nonce(l->nonce);
    c.nonce = (ProtobufCBinaryData){sizeof(l->nonce), l->nonce};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_CHALLENGE;
    out.challenge = &c;
    l->auth_state = LINK_AWAIT_AUTH;
    send_peer(l, &out);
}

static void root_on_auth(coll_peer_link_t *l, const Coll__Wire__Auth *a)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__AuthOk ok = COLL__WIRE__AUTH_OK__INIT;
    uint8_t mac[COLL_AUTH_BYTES];

    if (!coll_auth_check(&l->d->auth, "node", l->nonce, a->mac.data, a->mac.len)) {
        reject_peer(l, "authentication failed (another secret?)");
        return;
    }
    coll_auth_mac(&l->d->auth, "root", a->nonce.data, mac);
    ok.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH_OK;
    out.auth_ok = &ok;
    l->auth_state = LINK_AUTH_DONE;
    coll_debug(COLL_SUB_RDV, "control link %s: peer authenticated", l->peer);
    send_peer(l, &out);
}

static void node_send_join(coll_peer_link_t *l);

static void node_on_challenge(coll_peer_link_t *l, const Coll__Wire__Challenge *c)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Auth a = COLL__WIRE__AUTH__INIT;
    uint8_t mac[COLL_AUTH_BYTES];
    coll_job_t *job = l->job;

    if (l->auth_state != LINK_AWAIT_CHALLENGE) {
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "root %s requires peer authentication; set "
                      "peer_secret_file on this daemon too", l->peer);
        return;
    }
    coll_auth_mac(&l->d->auth, "node", c->nonce.data, mac);
    coll_auth_nonce(l->nonce);
    a.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    a.nonce = (ProtobufCBinaryData){sizeof(l->nonce), l->nonce};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH;
    out.auth = &a;
    l->auth_state = LINK_AWAIT_OK;
    send_peer(l, &out);
}

static void node_on_auth_ok(coll_peer_link_t *l, const Coll__Wire__AuthOk *ok)
{
    coll_job_t *job = l->job;

    if (!coll_auth_check(&l->d->auth, "root", l->nonce, ok->mac.data, ok->mac.len)) {
        coll_warn(COLL_SUB_RDV, "rejected root %s: authentication failed", l->peer);
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "root %s failed peer authentication "
                      "(another secret?)", l->peer);
        return;
    }
    l->auth_state = LINK_AUTH_DONE;
    l->job->rdv_error[0] = '\0';
    node_send_join(l);
}

/* ---- both sides: frames ------------------------------------------------------------------- */

/* Root side. */
static void root_dispatch(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH && l->auth_state == LINK_AWAIT_AUTH) {
        root_on_auth(l, m->auth);
    } else if (m->body_case != COLL__WIRE__PEER_MSG__BODY_NODE_JOIN) {
        reject_peer(l, "unexpected message");
    } else if (l->auth_state == LINK_AWAIT_AUTH) {
        reject_peer(l, "it did not authenticate (set peer_secret_file on its daemon)");
    } else {
        Coll__Wire__NodeJoin *j = m->node_join;
        m->node_join = NULL; /* kept by the link */
        m->body_case = COLL__WIRE__PEER_MSG__BODY__NOT_SET;
        root_on_node_join(l, j);
    }
}

/* Node side. */
static void node_dispatch(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    coll_job_t *job = l->job;

    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE) {
        node_on_challenge(l, m->challenge);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH_OK &&
               l->auth_state == LINK_AWAIT_OK) {
        node_on_auth_ok(l, m->auth_ok);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY &&
               l->auth_state == LINK_AUTH_DONE) {
        coll_rdv_link_close(l);
        coll_job_rendezvous_done(job, m->node_join_reply);
    } else {
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "root %s sent an unexpected message",
                      l->peer);
    }
}

static void link_on_frame(coll_peer_link_t *l, const uint8_t *p, size_t n)
{
    char err[256];
    coll_peer_msg_t *m;
    coll_status_t st = coll_wire_unpack_peer(p, n, &m, err, sizeof(err));

    if (st != COLL_OK) {
        coll_warn(COLL_SUB_RDV, "control link %s: %s; closing", l->peer, err);
        if (l->job != NULL) {
            coll_job_fail(l->job, COLL_ERR_RENDEZVOUS, 0, "bad answer from root %s: %s", l->peer,
                          err);
        }
        coll_rdv_link_close(l);
        return;
    }
    if (l->job == NULL) {
        root_dispatch(l, m);
    } else {
        node_dispatch(l, m);
    }
    coll__wire__peer_msg__free_unpacked(m, NULL);
}

static void link_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    coll_peer_link_t *l = h->data;
    uint8_t *p;
    size_t len;

    if (coll_frame_reader_space(&l->reader, suggested, &p, &len) != COLL_OK) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)p, (unsigned)len);
}

static void link_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    coll_peer_link_t *l = stream->data;
    const uint8_t *p;
    size_t n;
    coll_status_t st;

    if (nread < 0) {
        if (l->job != NULL) {
            coll_job_fail(l->job, COLL_ERR_RENDEZVOUS, 0,
                          "root %s closed the control link before answering (%s)", l->peer,
                          uv_strerror((int)nread));
        }
        coll_rdv_link_close(l);
        return;
    }
    coll_frame_reader_commit(&l->reader, (size_t)nread);
    while (!l->closing && (st = coll_frame_reader_next(&l->reader, &p, &n)) == COLL_OK) {
        link_on_frame(l, p, n);
    }
    if (!l->closing && st == COLL_ERR_PROTOCOL) {
        coll_warn(COLL_SUB_RDV, "control link %s: frame above %u bytes; closing", l->peer,
                  COLL_FRAME_MAX_PEER);
        coll_rdv_link_close(l);
    }
}

static void format_peer(uv_tcp_t *tcp, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    int sl = sizeof(ss);
    char host[64] = "?";
    int port = 0;

    if (uv_tcp_getpeername(tcp, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET) {
            uv_ip4_name((struct sockaddr_in *)&ss, host, sizeof(host));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else {
            uv_ip6_name((struct sockaddr_in6 *)&ss, host, sizeof(host));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
    }
    snprintf(buf, len, "%s:%d", host, port);
}

static void control_accept_cb(uv_stream_t *server, int status)
{
    coll_daemon_t *d = server->data;
    coll_peer_link_t *l;

    if (status < 0 || (l = link_new(d)) == NULL) {
        coll_warn(COLL_SUB_RDV, "control accept: %s", status < 0 ? uv_strerror(status) : "no memory");
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0) {
        coll_rdv_link_close(l);
        return;
    }
    uv_tcp_nodelay(&l->tcp, 1);
    format_peer(&l->tcp, l->peer, sizeof(l->peer));
    coll_debug(COLL_SUB_RDV, "control link from %s", l->peer);
    uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
    if (d->auth.enabled) {
        send_challenge(l);
    }
}

static int resolve_numeric(const char *host, int port, struct sockaddr_storage *ss)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0) {
        return 0;
    }
    return uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss);
}

static void bound_address(coll_daemon_t *d, const char *host)
{
    struct sockaddr_storage ss;
    int sl = sizeof(ss), port;

    uv_tcp_getsockname(&d->control, (struct sockaddr *)&ss, &sl);
    port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
    /* A wildcard address is no use to peers: advertise the host name instead. */
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        host = d->hostname;
    }
    snprintf(d->control_addr, sizeof(d->control_addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d",
             host, port);
}

coll_status_t coll_rdv_listen(coll_daemon_t *d)
{
    char host[64];
    int port, rc;
    struct sockaddr_storage ss;

    if (coll_parse_hostport(d->cfg.listen, host, sizeof(host), &port) < 0 ||
        resolve_numeric(host, port, &ss) != 0) {
        coll_error(COLL_SUB_RDV, "listen address '%s' is not numeric host:port (e.g. 0.0.0.0:29510)",
                   d->cfg.listen);
        return COLL_ERR_INVALID;
    }
    uv_tcp_init(d->loop, &d->control);
    d->control.data = d;
    if ((rc = uv_tcp_bind(&d->control, (struct sockaddr *)&ss, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&d->control, 128, control_accept_cb)) != 0) {
        coll_error(COLL_SUB_RDV, "control listener on %s: %s", d->cfg.listen, uv_strerror(rc));
        return COLL_ERR_IO;
    }
    bound_address(d, host);
    coll_info(COLL_SUB_RDV, "control listener on %s", d->control_addr);
    return COLL_OK;
}

/* ---- node side ---------------------------------------------------------------------------- */

static void node_send_join(coll_peer_link_t *l)
{
    uint8_t digest[COLL_AUTH_BYTES];
    coll_job_t *job = l->job;
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;

    j.job = job->id;
    j.world_size = job->world_size;
    j.n_ranks = job->local_size;
    j.ranks = job->ranks;
    j.worker_address.data = job->worker_address;
    j.worker_address.len = job->worker_address_len;
    j.host = l->d->hostname;
    j.timeout_ms = job->requested_timeout_ms;
    memcpy(digest, job->token_digest, sizeof(digest));
    j.token_digest = (ProtobufCBinaryData){sizeof(digest), digest};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    out.node_join = &j;
    send_peer(l, &out);
}

static void retry_cb(uv_timer_t *t)
{
    coll_rdv_join(t->data);
}

static void connect_cb(uv_connect_t *req, int status)
{
    coll_peer_link_t *l = req->data;
    coll_job_t *job = l->job;

    if (l->closing) {
        return;
    }
    if (status < 0) {
        coll_rdv_link_close(l);
        if (job != NULL && job->state == COLL_JOB_RENDEZVOUS) {
            /* The root may not be up yet (launch order): retry until the join timeout. */
            snprintf(job->rdv_error, sizeof(job->rdv_error), "%s", uv_strerror(status));
            coll_debug(COLL_SUB_RDV, "job %s: root %s: %s; retrying", job->id, job->root,
                       uv_strerror(status));
            uv_timer_start(&job->retry_timer, retry_cb, RDV_RETRY_MS, 0);
        }
        return;
    }
    uv_tcp_nodelay(&l->tcp, 1);
    uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
    if (l->d->auth.enabled) {
        /* Nothing about the job leaves before the root proved it holds the secret. */
        l->auth_state = LINK_AWAIT_CHALLENGE;
        snprintf(job->rdv_error, sizeof(job->rdv_error),
                 "waiting for root %.200s to authenticate (is peer_secret_file set there?)", l->peer);
        return;
    }
    node_send_join(l);
}

static void resolved_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    coll_peer_link_t *l = req->data;
    coll_job_t *job = l->job;

    free(req);
    l->resolving = 0;
    if (l->closing) {
        uv_freeaddrinfo(res);
        if (l->closed) {
            link_free(l);
        }
        return;
    }
    if (status < 0 || res == NULL) {
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "cannot resolve root address %s: %s",
                      job->root, uv_strerror(status));
        uv_freeaddrinfo(res);
        return;
    }
    l->connect.data = l;
    status = uv_tcp_connect(&l->connect, &l->tcp, res->ai_addr, connect_cb);
    uv_freeaddrinfo(res);
    if (status < 0) {
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "connecting to root %s: %s", job->root,
                      uv_strerror(status));
    }
}

void coll_rdv_join(coll_job_t *job)
{
    char host[256], port_s[8];
    int port;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    uv_getaddrinfo_t *req;
    coll_peer_link_t *l;

    if (job->state != COLL_JOB_RENDEZVOUS) {
        return;
    }
    if (coll_parse_hostport(job->root, host, sizeof(host), &port) < 0 || port == 0) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0,
                      "root address '%s' is not host:port (set COLL_ROOT)", job->root);
        return;
    }
    req = malloc(sizeof(*req));
    l = req != NULL ? link_new(job->d) : NULL;
    if (l == NULL) {
        free(req);
        coll_job_fail(job, COLL_ERR_NOMEM, 0, "no memory for the rendezvous");
        return;
    }
    snprintf(l->peer, sizeof(l->peer), "%s", job->root);
    snprintf(port_s, sizeof(port_s), "%d", port);
    l->job = job;
    job->rdv_link = l;
    req->data = l;
    l->resolving = 1;
    if (uv_getaddrinfo(job->d->loop, req, resolved_cb, host, port_s, &hints) != 0) {
        l->resolving = 0;
        free(req);
        coll_rdv_link_close(l);
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "cannot resolve root address %s", job->root);
    }
}

void coll_rdv_close_all(coll_daemon_t *d)
{
    coll_peer_link_t *l, *tmp;
    coll_list_for_each_safe(l, tmp, &d->peer_links, coll_peer_link_t, link) { coll_rdv_link_close(l); }
    if (d->control.loop != NULL && !uv_is_closing((uv_handle_t *)&d->control)) {
        uv_close((uv_handle_t *)&d->control, NULL);
    }
}
