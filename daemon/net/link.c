#include "net/link.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/log.h"
#include "base/stream.h"
#include "net/accept.h"

/* Where the handshake stands: the accepting side sends a challenge and waits for the answer
 * (AWAIT_AUTH); the connecting side waits for the challenge, answers with its own and waits
 * for the accepting side's proof (AWAIT_OK). */
enum { LINK_AUTH_DONE = 0, LINK_AWAIT_AUTH, LINK_AWAIT_CHALLENGE, LINK_AWAIT_OK };

static void link_read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void try_next(coll_peer_link_t *l);

static void link_free(coll_peer_link_t *l)
{
    if (l->acceptor != NULL) {
        coll_acceptor_release(l->acceptor, &l->addr);
    }
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
    uv_close((uv_handle_t *)&l->timer, handle_closed);
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
    if (!l->down && l->hooks->on_down != NULL) {
        l->down = 1;
        l->hooks->on_down(l, st, why);
    }
    coll_link_close(l);
}

static coll_peer_link_t *link_new(coll_daemon_t *d, const coll_link_hooks_t *hooks, void *owner)
{
    coll_peer_link_t *l = calloc(1, sizeof(*l));
    if (l == NULL || coll_frame_reader_init(&l->reader, COLL_FRAME_MAX_PEER) != COLL_OK) {
        free(l);
        return NULL;
    }
    l->d = d;
    l->hooks = hooks;
    l->owner = owner;
    uv_tcp_init(d->loop, &l->tcp);
    uv_timer_init(d->loop, &l->timer);
    l->tcp.data = l->timer.data = l;
    l->handles = 2;
    coll_list_push(&d->peer_links, &l->link);
    return l;
}

/* Count and log a link this daemon refuses (accepted side), then close it. */
static void link_refuse(coll_peer_link_t *l, coll_refusal_t why, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void link_refuse(coll_peer_link_t *l, coll_refusal_t why, const char *fmt, ...)
{
    char text[320];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    coll_refusal_note(l->d, COLL_LISTENER_CONTROL, why, "rejected peer %s: %s", l->peer, text);
    link_fail(l, COLL_ERR_DENIED, "peer %s: %s", l->peer, text);
}

/* An accepted link that is no rendezvous' member, silent for peer_idle_ms: closed. A member
 * waits as long as its rendezvous does (the job's timeout, on the node's side). */
static void idle_cb(uv_timer_t *t)
{
    coll_peer_link_t *l = t->data;

    if (l->owner != NULL) {
        uv_timer_start(&l->timer, idle_cb, l->d->cfg.peer_idle_ms, 0);
        return;
    }
    link_refuse(l, COLL_REFUSED_IDLE, "no message for %llu ms outside a rendezvous "
                "(peer_idle_ms)", (unsigned long long)l->d->cfg.peer_idle_ms);
}

static void handshake_timeout_cb(uv_timer_t *t)
{
    coll_peer_link_t *l = t->data;

    if (l->accepted) {
        link_refuse(l, COLL_REFUSED_HANDSHAKE_TIME, "%s within %llu ms (peer_handshake_ms)",
                    l->d->auth.enabled ? "it did not authenticate" : "no message came",
                    (unsigned long long)l->d->cfg.peer_handshake_ms);
        return;
    }
    link_fail(l, COLL_ERR_RENDEZVOUS, "root %s did not authenticate within %llu ms (is "
              "peer_secret_file set there, to the same secret?)", l->peer,
              (unsigned long long)l->d->cfg.peer_handshake_ms);
}

/* What a link may send before it is trusted: the handshake's peer_handshake_bytes, or without
 * a secret its first message, a NodeJoin. */
static size_t untrusted_budget(const coll_peer_link_t *l)
{
    return l->d->auth.enabled ? l->d->cfg.peer_handshake_bytes : COLL_LINK_ACCEPTED_FRAME_MAX;
}

/* Until it is trusted a link may send untrusted_budget() bytes, in frames no larger, and has
 * peer_handshake_ms. */
static void link_untrusted(coll_peer_link_t *l)
{
    l->reader.max_frame = untrusted_budget(l);
    uv_timer_start(&l->timer, handshake_timeout_cb, l->d->cfg.peer_handshake_ms, 0);
}

/* Authenticated (or, without a secret, its first message came): the bounds of a trusted
 * link. */
static void link_trusted(coll_peer_link_t *l)
{
    l->auth_state = LINK_AUTH_DONE;
    l->trusted = 1;
    l->reader.max_frame = l->accepted ? COLL_LINK_ACCEPTED_FRAME_MAX : COLL_FRAME_MAX_PEER;
    uv_timer_stop(&l->timer);
    if (l->accepted) {
        uv_timer_start(&l->timer, idle_cb, l->d->cfg.peer_idle_ms, 0);
    }
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
        link_refuse(l, COLL_REFUSED_AUTH, "authentication failed (another secret?)");
        return;
    }
    coll_auth_mac(&l->d->auth, "root", a->nonce.data, mac);
    ok.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH_OK;
    out.auth_ok = &ok;
    link_trusted(l);
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
    link_trusted(l);
    l->hooks->on_up(l);
}

/* Handshake messages, and anything before the handshake ended; returns 1 when @p m was one. */
static int handshake(coll_peer_link_t *l, const coll_peer_msg_t *m)
{
    int body = m->body_case;
    int shake = body == COLL__WIRE__PEER_MSG__BODY_CHALLENGE ||
                body == COLL__WIRE__PEER_MSG__BODY_AUTH ||
                body == COLL__WIRE__PEER_MSG__BODY_AUTH_OK;

    if (body == COLL__WIRE__PEER_MSG__BODY_CHALLENGE && !l->accepted) {
        on_challenge(l, m->challenge);
    } else if (body == COLL__WIRE__PEER_MSG__BODY_AUTH && l->auth_state == LINK_AWAIT_AUTH) {
        on_auth(l, m->auth);
    } else if (body == COLL__WIRE__PEER_MSG__BODY_AUTH_OK && l->auth_state == LINK_AWAIT_OK) {
        on_auth_ok(l, m->auth_ok);
    } else if (l->accepted && l->auth_state == LINK_AWAIT_AUTH) {
        link_refuse(l, COLL_REFUSED_AUTH, "it sent another message before authenticating (is "
                    "peer_secret_file set on its daemon?)");
    } else if (l->accepted && shake) {
        link_refuse(l, COLL_REFUSED_PROTOCOL, "a handshake message out of turn");
    } else if (l->auth_state != LINK_AUTH_DONE || shake) {
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
        if (l->accepted) {
            link_refuse(l, COLL_REFUSED_PROTOCOL, "%s", err);
        } else {
            coll_warn(COLL_SUB_RDV, "control link %s: %s; closing", l->peer, err);
            link_fail(l, COLL_ERR_RENDEZVOUS, "bad message from %s: %s", l->peer, err);
        }
        return;
    }
    if (!handshake(l, m)) {
        if (!l->trusted) {
            link_trusted(l); /* no secret: the first message ends the handshake's bounds */
        } else if (l->accepted) {
            uv_timer_start(&l->timer, idle_cb, l->d->cfg.peer_idle_ms, 0);
        }
        l->hooks->on_msg(l, m);
    }
    coll__wire__peer_msg__free_unpacked(m, NULL);
}

static void link_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    coll_peer_link_t *l = h->data;
    uint8_t *p;
    size_t len;

    /* Before it is trusted: never more room than it may still send. */
    if (!l->trusted) {
        suggested = untrusted_budget(l) - l->unauth_bytes;
    }
    if (coll_frame_reader_space(&l->reader, suggested, &p, &len) != COLL_OK) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)p, (unsigned)(len < suggested ? len : suggested));
}

/* Bytes from a link not yet trusted count against its budget; returns 0 when over. */
static int within_budget(coll_peer_link_t *l, size_t n)
{
    if (l->trusted) {
        return 1;
    }
    l->unauth_bytes += n;
    if (l->unauth_bytes < untrusted_budget(l)) {
        return 1;
    }
    if (l->accepted) {
        link_refuse(l, COLL_REFUSED_HANDSHAKE_BYTES, "%zu bytes before it authenticated "
                    "(peer_handshake_bytes %llu)", l->unauth_bytes,
                    (unsigned long long)l->d->cfg.peer_handshake_bytes);
    } else {
        link_fail(l, COLL_ERR_RENDEZVOUS, "root %s sent %zu bytes without authenticating",
                  l->peer, l->unauth_bytes);
    }
    return 0;
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
        if (l->accepted) {
            link_refuse(l, COLL_REFUSED_PROTOCOL, "a frame above %zu bytes",
                        l->reader.max_frame);
        } else {
            coll_warn(COLL_SUB_RDV, "control link %s: frame above %zu bytes; closing", l->peer,
                      l->reader.max_frame);
            link_fail(l, COLL_ERR_PROTOCOL, "%s sent a frame above %zu bytes", l->peer,
                      l->reader.max_frame);
        }
        return;
    }
    if (!l->closing && nread > 0) {
        (void)within_budget(l, (size_t)nread);
    }
}

/* ---- accepting ------------------------------------------------------------------------------- */

/* A connection the control listener accepted (accept.h checked its limits). */
static void accept_cb(coll_acceptor_t *a, int fd, const struct sockaddr_storage *peer)
{
    coll_daemon_t *d = coll_acceptor_data(a);
    coll_peer_link_t *l = link_new(d, d->control_hooks, NULL);

    if (l == NULL) {
        coll_warn(COLL_SUB_RDV, "control accept: no memory");
        close(fd);
        coll_acceptor_release(a, peer);
        return;
    }
    l->accepted = 1;
    l->acceptor = a;
    l->addr = *peer;
    coll_acceptor_name(peer, l->peer, sizeof(l->peer));
    if (uv_tcp_open(&l->tcp, fd) != 0) {
        close(fd);
        coll_link_close(l);
        return;
    }
    uv_tcp_nodelay(&l->tcp, 1);
    coll_debug(COLL_SUB_RDV, "control link from %s", l->peer);
    link_untrusted(l);
    uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
    if (d->auth.enabled) {
        send_challenge(l);
    } else {
        l->auth_state = LINK_AUTH_DONE;
    }
}

static int resolve_numeric(const char *host, int port, struct sockaddr_storage *ss)
{
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)ss) == 0) {
        return 0;
    }
    return uv_ip6_addr(host, port, (struct sockaddr_in6 *)ss);
}

static void bound_address(coll_daemon_t *d, int fd, const char *host)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int port;

    getsockname(fd, (struct sockaddr *)&ss, &sl);
    port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                         : ((struct sockaddr_in6 *)&ss)->sin6_port);
    /* A wildcard address is no use to peers: advertise the host name instead. */
    if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0) {
        host = d->hostname;
    }
    snprintf(d->control_addr, sizeof(d->control_addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d",
             host, port);
}

coll_status_t coll_link_listen(coll_daemon_t *d, const coll_link_hooks_t *hooks)
{
    char host[64], err[128];
    int port, fd;
    struct sockaddr_storage ss;
    coll_acceptor_params_t p = {
        .listener = COLL_LISTENER_CONTROL, .what = "control listener",
        .max = (unsigned)d->cfg.peer_max_connections,
        .max_per_addr = (unsigned)d->cfg.peer_max_per_address,
        .reserve = (unsigned)d->cfg.fd_reserve, .cb = accept_cb, .data = d};

    if (coll_parse_hostport(d->cfg.listen, host, sizeof(host), &port) < 0 ||
        resolve_numeric(host, port, &ss) != 0) {
        coll_error(COLL_SUB_RDV, "listen address '%s' is not numeric host:port (e.g. "
                   "0.0.0.0:29510 or [::]:29510)", d->cfg.listen);
        return COLL_ERR_INVALID;
    }
    d->control_hooks = hooks;
    if (coll_acceptor_bind((struct sockaddr *)&ss, ss.ss_family == AF_INET
                               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
                           &fd, err, sizeof(err)) != COLL_OK) {
        coll_error(COLL_SUB_RDV, "control listener on %s: %s", d->cfg.listen, err);
        return COLL_ERR_IO;
    }
    bound_address(d, fd, host);
    if (coll_acceptor_open(d, fd, &p, &d->control) != COLL_OK) {
        d->control_addr[0] = '\0';
        return COLL_ERR_IO;
    }
    coll_info(COLL_SUB_RDV, "control listener on %s", d->control_addr);
    return COLL_OK;
}

/* ---- connecting: every address of the name, in order ---------------------------------------- */

static void connected(coll_peer_link_t *l)
{
    uv_tcp_nodelay(&l->tcp, 1);
    if (l->d->auth.enabled) {
        /* Nothing leaves before the other side proved it holds the secret. */
        l->auth_state = LINK_AWAIT_CHALLENGE;
        link_untrusted(l);
        uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
        return;
    }
    link_trusted(l);
    uv_read_start((uv_stream_t *)&l->tcp, link_alloc_cb, link_read_cb);
    l->hooks->on_up(l);
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

/* Errors that no retry cures for that address: this host cannot reach it at all (e.g. an
 * IPv6 address where IPv6 is off). Refused or timed out may pass: the root may not be up. */
static int permanent(int status)
{
    return status == UV_EADDRNOTAVAIL || status == UV_ENETUNREACH || status == UV_EAFNOSUPPORT;
}

static void attempt_failed(coll_peer_link_t *l, int status)
{
    uv_timer_stop(&l->timer);
    l->transient |= !permanent(status);
    if (l->next_addr == NULL) {
        link_fail(l, l->transient ? COLL_ERR_CONNREFUSED : COLL_ERR_RENDEZVOUS,
                  "connecting to %s (%s): %s%s", l->peer, l->tried, uv_strerror(status),
                  l->transient ? "" : " (this host cannot reach that address; no retry)");
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
    uv_timer_stop(&l->timer);
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
    coll_acceptor_name((const struct sockaddr_storage *)a->ai_addr, l->tried, sizeof(l->tried));
    l->connect.data = l;
    rc = uv_tcp_connect(&l->connect, &l->tcp, a->ai_addr, connect_cb);
    if (rc < 0) {
        attempt_failed(l, rc);
        return;
    }
    uv_timer_start(&l->timer, attempt_timeout_cb, COLL_LINK_ATTEMPT_MS, 0);
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

coll_status_t coll_link_connect(coll_daemon_t *d, const char *hostport,
                                const coll_link_hooks_t *hooks, void *owner,
                                coll_peer_link_t **l_p, char *err, size_t errlen)
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
    l = req != NULL ? link_new(d, hooks, owner) : NULL;
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
    coll_acceptor_close(d->control); /* freed once its last link is */
    d->control = NULL;
}
