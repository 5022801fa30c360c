#include "net/link.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/auth.h"
#include "base/log.h"
#include "base/stream.h"

/* Where the handshake stands: the accepting side sends a challenge and waits for the answer
 * (AWAIT_AUTH); the connecting side waits for the challenge, answers with its own and waits
 * for the accepting side's proof (AWAIT_OK). */
enum { LINK_AUTH_DONE = 0, LINK_AWAIT_AUTH, LINK_AWAIT_CHALLENGE, LINK_AWAIT_OK };

static void link_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void try_next(coll_peer_link_t *l);

static void link_free(coll_peer_link_t *l)
{
    coll_frame_reader_cleanup(&l->reader);
    if (l->addrs != NULL) {
        uv_freeaddrinfo(l->addrs);
    }
    free(l);
}

/* A pending name lookup still points at the link: its callback frees it then. */
static void handle_closed(uv_handle_t *h)
{
    coll_peer_link_t *l = h->data;
    if (--l->handles == 0 && !l->resolving) {
        link_free(l);
    }
}

void coll_link_close(coll_peer_link_t *l)
{
    if (l->closing) {
        return;
    }
    l->closing = 1;
    coll_list_remove(&l->link);
    if (!uv_is_closing((uv_handle_t *)&l->tcp)) {
        uv_close((uv_handle_t *)&l->tcp, handle_closed);
    }
    uv_close((uv_handle_t *)&l->attempt_timer, handle_closed);
}

/* The link failed: tell its owner once, then close it. */
static void link_fail(coll_peer_link_t *l, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void link_fail(coll_peer_link_t *l, coll_status_t st, const char *fmt, ...)
{
    char why[400];
    va_list ap;

    if (l->closing) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (!l->down && l->ops->on_down != NULL) {
        l->down = 1;
        l->ops->on_down(l, st, why);
    }
    coll_link_close(l);
}

static coll_peer_link_t *link_new(coll_daemon_t *d, const coll_link_ops_t *ops, void *owner)
{
    coll_peer_link_t *l = calloc(1, sizeof(*l));
    if (l == NULL || coll_frame_reader_init(&l->reader, COLL_FRAME_MAX_PEER) != COLL_OK) {
        free(l);
        return NULL;
    }
    l->d = d;
    l->ops = ops;
    l->owner = owner;
    uv_tcp_init(d->loop, &l->tcp);
    uv_timer_init(d->loop, &l->attempt_timer);
    l->tcp.data = l->attempt_timer.data = l;
    l->handles = 2;
    coll_list_push(&d->peer_links, &l->link);
    return l;
}

void coll_link_send(coll_peer_link_t *l, coll_peer_msg_t *msg)
{
    msg->version = COLL_WIRE_VERSION;
    if (coll_stream_send((uv_stream_t *)&l->tcp, &msg->base) != COLL_OK) {
        coll_warn(COLL_SUB_RDV, "control link %s: write failed; closing", l->peer);
        link_fail(l, COLL_ERR_IO, "writing to %s failed", l->peer);
    }
}

/* ---- the handshake (auth.h) ---------------------------------------------------------------- */

static void send_challenge(coll_peer_link_t *l)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Challenge c = COLL__WIRE__CHALLENGE__INIT;

    coll_auth_nonce(l->nonce);
    c.nonce = (ProtobufCBinaryData){sizeof(l->nonce), l->nonce};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_CHALLENGE;
    out.challenge = &c;
    l->auth_state = LINK_AWAIT_AUTH;
    coll_link_send(l, &out);
}

/* Accepting side: the connecting side proved the secret; prove it back. */
static void on_auth(coll_peer_link_t *l, const Coll__Wire__Auth *a)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__AuthOk ok = COLL__WIRE__AUTH_OK__INIT;
    uint8_t mac[COLL_AUTH_BYTES];

    if (!coll_auth_check(&l->d->auth, "node", l->nonce, a->mac.data, a->mac.len)) {
        coll_warn(COLL_SUB_RDV, "rejected peer %s: authentication failed (another secret?)",
                  l->peer);
        link_fail(l, COLL_ERR_DENIED, "peer %s failed authentication", l->peer);
        return;
    }
    coll_auth_mac(&l->d->auth, "root", a->nonce.data, mac);
    ok.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH_OK;
    out.auth_ok = &ok;
    l->auth_state = LINK_AUTH_DONE;
    coll_debug(COLL_SUB_RDV, "control link %s: peer authenticated", l->peer);
    coll_link_send(l, &out);
}

/* Connecting side: answer the challenge with our own. */
static void on_challenge(coll_peer_link_t *l, const Coll__Wire__Challenge *c)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Auth a = COLL__WIRE__AUTH__INIT;
    uint8_t mac[COLL_AUTH_BYTES];

    if (l->auth_state != LINK_AWAIT_CHALLENGE) {
        link_fail(l, COLL_ERR_RENDEZVOUS, "root %s requires peer authentication; set "
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
    coll_link_send(l, &out);
}

static void on_auth_ok(coll_peer_link_t *l, const Coll__Wire__AuthOk *ok)
{
    if (!coll_auth_check(&l->d->auth, "root", l->nonce, ok->mac.data, ok->mac.len)) {
        coll_warn(COLL_SUB_RDV, "rejected root %s: authentication failed", l->peer);
        link_fail(l, COLL_ERR_RENDEZVOUS, "root %s failed peer authentication (another "
                  "secret?)", l->peer);
        return;
    }
    l->auth_state = LINK_AUTH_DONE;
    l->ops->on_up(l);
}

/* Handshake messages, and anything before the handshake ended; returns 1 when @p m was one. */
static int handshake(coll_peer_link_t *l, const coll_peer_msg_t *m)
{
    int body = m->body_case;

    if (body == COLL__WIRE__PEER_MSG__BODY_CHALLENGE) {
        on_challenge(l, m->challenge);
    } else if (body == COLL__WIRE__PEER_MSG__BODY_AUTH && l->auth_state == LINK_AWAIT_AUTH) {
        on_auth(l, m->auth);
    } else if (body == COLL__WIRE__PEER_MSG__BODY_AUTH_OK && l->auth_state == LINK_AWAIT_OK) {
        on_auth_ok(l, m->auth_ok);
    } else if (l->auth_state == LINK_AWAIT_AUTH) {
        coll_warn(COLL_SUB_RDV, "rejected peer %s: it did not authenticate (set "
                  "peer_secret_file on its daemon)", l->peer);
        link_fail(l, COLL_ERR_DENIED, "peer %s did not authenticate", l->peer);
    } else if (l->auth_state != LINK_AUTH_DONE || body == COLL__WIRE__PEER_MSG__BODY_AUTH ||
               body == COLL__WIRE__PEER_MSG__BODY_AUTH_OK) {
        link_fail(l, COLL_ERR_RENDEZVOUS, "%s sent an unexpected message", l->peer);
    } else {
        return 0;
    }
    return 1;
}

/* ---- reading ---------------------------------------------------------------------------------- */

static void link_on_frame(coll_peer_link_t *l, const uint8_t *p, size_t n)
{
    char err[256];
    coll_peer_msg_t *m;
    coll_status_t st = coll_wire_unpack_peer(p, n, &m, err, sizeof(err));

    if (st != COLL_OK) {
        coll_warn(COLL_SUB_RDV, "control link %s: %s; closing", l->peer, err);
        link_fail(l, COLL_ERR_RENDEZVOUS, "bad message from %s: %s", l->peer, err);
        return;
    }
    if (!handshake(l, m)) {
        l->ops->on_msg(l, m);
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
    coll_status_t st = COLL_OK;

    if (nread < 0) {
        link_fail(l, COLL_ERR_CLOSED, "%s closed the control link (%s)", l->peer,
                  uv_strerror((int)nread));
        return;
    }
    coll_frame_reader_commit(&l->reader, (size_t)nread);
    while (!l->closing && (st = coll_frame_reader_next(&l->reader, &p, &n)) == COLL_OK) {
        link_on_frame(l, p, n);
    }
    if (!l->closing && st == COLL_ERR_PROTOCOL) {
        coll_warn(COLL_SUB_RDV, "control link %s: frame above %u bytes; closing", l->peer,
                  COLL_FRAME_MAX_PEER);
        link_fail(l, COLL_ERR_PROTOCOL, "%s sent a frame above %u bytes", l->peer,
                  COLL_FRAME_MAX_PEER);
    }
}

/* ---- accepting ------------------------------------------------------------------------------- */

static void format_sockaddr(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[64] = "?";
    int port = 0;

    if (sa->sa_family == AF_INET) {
        uv_ip4_name((const struct sockaddr_in *)sa, host, sizeof(host));
        port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
        snprintf(buf, len, "%s:%d", host, port);
    } else {
        uv_ip6_name((const struct sockaddr_in6 *)sa, host, sizeof(host));
        port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
        snprintf(buf, len, "[%s]:%d", host, port);
    }
}

static void accept_cb(uv_stream_t *server, int status)
{
    coll_daemon_t *d = server->data;
    coll_peer_link_t *l;
    struct sockaddr_storage ss;
    int sl = sizeof(ss);

    if (status < 0 || (l = link_new(d, d->control_ops, NULL)) == NULL) {
        coll_warn(COLL_SUB_RDV, "control accept: %s", status < 0 ? uv_strerror(status) : "no memory");
        return;
    }
    if (uv_accept(server, (uv_stream_t *)&l->tcp) != 0) {
        coll_link_close(l);
        return;
    }
    uv_tcp_nodelay(&l->tcp, 1);
    snprintf(l->peer, sizeof(l->peer), "?");
    if (uv_tcp_getpeername(&l->tcp, (struct sockaddr *)&ss, &sl) == 0) {
        format_sockaddr((struct sockaddr *)&ss, l->peer, sizeof(l->peer));
    }
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

coll_status_t coll_link_listen(coll_daemon_t *d, const coll_link_ops_t *ops)
{
    char host[64];
    int port, rc;
    struct sockaddr_storage ss;

    if (coll_parse_hostport(d->cfg.listen, host, sizeof(host), &port) < 0 ||
        resolve_numeric(host, port, &ss) != 0) {
        coll_error(COLL_SUB_RDV, "listen address '%s' is not numeric host:port (e.g. "
                   "0.0.0.0:29510 or [::]:29510)", d->cfg.listen);
        return COLL_ERR_INVALID;
    }
    uv_tcp_init(d->loop, &d->control);
    d->control.data = d;
    d->control_ops = ops;
    if ((rc = uv_tcp_bind(&d->control, (struct sockaddr *)&ss, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&d->control, 128, accept_cb)) != 0) {
        coll_error(COLL_SUB_RDV, "control listener on %s: %s", d->cfg.listen, uv_strerror(rc));
        return COLL_ERR_IO;
    }
    bound_address(d, host);
    coll_info(COLL_SUB_RDV, "control listener on %s", d->control_addr);
    return COLL_OK;
}

/* ---- connecting: every address of the name, in order ---------------------------------------- */

static void connected(coll_peer_link_t *l)
{
    uv_tcp_nodelay(&l->tcp, 1);
    uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
    if (l->d->auth.enabled) {
        /* Nothing leaves before the other side proved it holds the secret. */
        l->auth_state = LINK_AWAIT_CHALLENGE;
        return;
    }
    l->ops->on_up(l);
}

/* The socket of a failed attempt is closed before the next address gets a fresh one. */
static void reconnect_closed(uv_handle_t *h)
{
    coll_peer_link_t *l = h->data;

    if (l->closing) {
        handle_closed(h);
        return;
    }
    uv_tcp_init(l->d->loop, &l->tcp);
    l->tcp.data = l;
    try_next(l);
}

static void attempt_failed(coll_peer_link_t *l, int status)
{
    uv_timer_stop(&l->attempt_timer);
    if (l->next_addr == NULL) {
        link_fail(l, COLL_ERR_CONNREFUSED, "connecting to %s (%s): %s", l->peer, l->tried,
                  uv_strerror(status));
        return;
    }
    coll_debug(COLL_SUB_RDV, "connecting to %s: %s: %s; trying the next address", l->peer,
               l->tried, uv_strerror(status));
    uv_close((uv_handle_t *)&l->tcp, reconnect_closed);
}

static void connect_cb(uv_connect_t *req, int status)
{
    coll_peer_link_t *l = req->data;

    if (l->closing || status == UV_ECANCELED) {
        return; /* closed meanwhile, or cut short by the attempt timer */
    }
    uv_timer_stop(&l->attempt_timer);
    if (status < 0) {
        attempt_failed(l, status);
    } else {
        connected(l);
    }
}

static void attempt_timeout_cb(uv_timer_t *t)
{
    attempt_failed(t->data, UV_ETIMEDOUT);
}

static void try_next(coll_peer_link_t *l)
{
    struct addrinfo *a = l->next_addr;
    int rc;

    l->next_addr = a->ai_next;
    format_sockaddr(a->ai_addr, l->tried, sizeof(l->tried));
    l->connect.data = l;
    rc = uv_tcp_connect(&l->connect, &l->tcp, a->ai_addr, connect_cb);
    if (rc < 0) {
        attempt_failed(l, rc);
        return;
    }
    uv_timer_start(&l->attempt_timer, attempt_timeout_cb, COLL_LINK_ATTEMPT_MS, 0);
}

static void resolved_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    coll_peer_link_t *l = req->data;

    free(req);
    l->resolving = 0;
    if (l->closing) {
        uv_freeaddrinfo(res);
        if (l->handles == 0) {
            link_free(l);
        }
        return;
    }
    if (status < 0 || res == NULL) {
        uv_freeaddrinfo(res);
        link_fail(l, COLL_ERR_RENDEZVOUS, "cannot resolve %s: %s", l->peer, uv_strerror(status));
        return;
    }
    l->addrs = l->next_addr = res;
    try_next(l);
}

coll_status_t coll_link_connect(coll_daemon_t *d, const char *hostport, const coll_link_ops_t *ops,
                                void *owner, coll_peer_link_t **l_p, char *err, size_t errlen)
{
    char host[256], port_s[8];
    int port, rc = coll_parse_hostport(hostport, host, sizeof(host), &port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
    uv_getaddrinfo_t *req;
    coll_peer_link_t *l;

    if (rc == -2) {
        snprintf(err, errlen, "'%s' is ambiguous: write an IPv6 address with a port in brackets, "
                 "e.g. [%.*s]:%s", hostport, (int)(strrchr(hostport, ':') - hostport), hostport,
                 strrchr(hostport, ':') + 1);
        return COLL_ERR_INVALID;
    }
    if (rc < 0 || port == 0) {
        snprintf(err, errlen, "'%s' is not host:port", hostport);
        return COLL_ERR_INVALID;
    }
    req = malloc(sizeof(*req));
    l = req != NULL ? link_new(d, ops, owner) : NULL;
    if (l == NULL) {
        free(req);
        snprintf(err, errlen, "no memory for a control link");
        return COLL_ERR_NOMEM;
    }
    snprintf(l->peer, sizeof(l->peer), "%s", hostport);
    snprintf(port_s, sizeof(port_s), "%d", port);
    req->data = l;
    l->resolving = 1;
    if ((rc = uv_getaddrinfo(d->loop, req, resolved_cb, host, port_s, &hints)) != 0) {
        l->resolving = 0;
        free(req);
        coll_link_close(l);
        snprintf(err, errlen, "cannot resolve %s: %s", hostport, uv_strerror(rc));
        return COLL_ERR_RENDEZVOUS;
    }
    *l_p = l;
    return COLL_OK;
}

void coll_link_close_all(coll_daemon_t *d)
{
    coll_peer_link_t *l, *tmp;
    coll_list_for_each_safe(l, tmp, &d->peer_links, coll_peer_link_t, link) { coll_link_close(l); }
    if (d->control.loop != NULL && !uv_is_closing((uv_handle_t *)&d->control)) {
        uv_close((uv_handle_t *)&d->control, NULL);
    }
}
