/*
 * The status server's listeners and connections. Each connection reads one request, gets its
 * answer (built whole), writes it, shuts its side down and closes.
 */
#include "admin/status_server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin/admin.h"
#include "admin/metrics.h"
#include "admin/report.h"
#include "admin/status_json.h"
#include "base/list.h"
#include "base/log.h"
#include "base/stream.h"
#include "net/accept.h"

/** The listeners and their connections; freed when the last connection closed after close(). */
struct coll_status_server {
    coll_daemon_t *d;
    coll_acceptor_t *unix_listener; /**< net/accept.h; NULL when off */
    coll_acceptor_t *tcp_listener;
    int socket_bound;  /**< the socket file is ours to remove */
    char tcp_addr[80];
    coll_list_t conns; /**< conn_t */
    int handles;       /**< connections not yet closed */
    int closing;
};

/* One connection: its stream, an idle timer, the request being read and the answer written. */
typedef struct {
    union {
        uv_handle_t handle;
        uv_stream_t stream;
        uv_pipe_t pipe;
        uv_tcp_t tcp;
    } u;
    uv_timer_t timer;
    coll_list_t link;
    coll_status_server_t *srv;
    coll_acceptor_t *acceptor; /**< whose place it holds */
    struct sockaddr_storage peer;
    coll_http_request_t req;
    char buf[2048];
    char *resp;
    uv_write_t write;
    uv_shutdown_t shutdown;
    int handles; /**< 2 until the stream and the timer closed */
    int closing;
} conn_t;

static void server_unref(coll_status_server_t *srv)
{
    if (--srv->handles == 0 && srv->closing) {
        free(srv);
    }
}

static void conn_closed_cb(uv_handle_t *h)
{
    conn_t *c = h->data;

    if (--c->handles > 0) {
        return;
    }
    coll_acceptor_release(c->acceptor, &c->peer);
    free(c->resp);
    server_unref(c->srv);
    free(c);
}

static void conn_close(conn_t *c)
{
    if (c->closing) {
        return;
    }
    c->closing = 1;
    coll_list_remove(&c->link);
    uv_close(&c->u.handle, conn_closed_cb);
    uv_close((uv_handle_t *)&c->timer, conn_closed_cb);
}

/* ---- answers ---- */

static char *text_response(int code, const char *text, const char *extra, int head, size_t *len)
{
    return coll_http_response(code, "text/plain; charset=utf-8", extra, text, strlen(text), head,
                              len);
}

static char *built_response(char *body, size_t body_len, const char *type, int head, size_t *len)
{
    char *resp;

    if (body == NULL) {
        return text_response(500, "out of memory\n", NULL, head, len);
    }
    resp = coll_http_response(200, type, NULL, body, body_len, head, len);
    free(body);
    return resp;
}

static const char index_text[] =
    "collectived status server\n"
    "  GET /status   the daemon's state as JSON (jobs, ranks, operations waiting, peers, pools)\n"
    "  GET /metrics  Prometheus text exposition\n"
    "  GET /healthz  200 while serving, 503 while shutting down\n";

char *coll_status_answer(coll_daemon_t *d, const coll_http_request_t *r, size_t *len_p)
{
    char path[COLL_HTTP_URL_MAX + 1];
    size_t blen = 0;
    int head = r->complete && r->parser.method == HTTP_HEAD;

    if (!r->complete) {
        return text_response(r->error ? r->error : 400, "bad request\n", NULL, 0, len_p);
    } else if (r->parser.method != HTTP_GET && !head) {
        return text_response(405, "only GET and HEAD\n", "Allow: GET, HEAD\r\n", 0, len_p);
    } else if (coll_http_request_path(r, path, sizeof(path)) < 0) {
        return text_response(400, "bad request target\n", NULL, head, len_p);
    }
    if (strcmp(path, "/status") == 0) {
        char *body = coll_report_status(d, &blen);
        return built_response(body, blen, "application/json", head, len_p);
    } else if (strcmp(path, "/metrics") == 0) {
        char *body = coll_report_metrics(d, &blen);
        return built_response(body, blen, "text/plain; version=0.0.4; charset=utf-8", head,
                              len_p);
    } else if (strcmp(path, "/healthz") == 0) {
        return d->stopping ? text_response(503, "stopping\n", NULL, head, len_p)
                           : text_response(200, "ok\n", NULL, head, len_p);
    } else if (strcmp(path, "/") == 0) {
        return text_response(200, index_text, NULL, head, len_p);
    }
    return text_response(404, "not found; see GET /\n", NULL, head, len_p);
}

/* ---- connections ---- */

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    conn_close(req->data);
}

static void write_cb(uv_write_t *req, int status)
{
    conn_t *c = req->data;

    if (status < 0 || c->closing ||
        uv_shutdown(&c->shutdown, &c->u.stream, shutdown_cb) != 0) {
        conn_close(c);
    }
}

static void conn_answer(conn_t *c)
{
    size_t len = 0;
    uv_buf_t buf;

    uv_read_stop(&c->u.stream);
    c->resp = coll_status_answer(c->srv->d, &c->req, &len);
    if (c->resp == NULL) {
        conn_close(c);
        return;
    }
    buf = uv_buf_init(c->resp, (unsigned)len);
    c->write.data = c->shutdown.data = c;
    if (uv_write(&c->write, &c->u.stream, &buf, 1, write_cb) != 0) {
        conn_close(c);
    }
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    conn_t *c = h->data;
    *buf = uv_buf_init(c->buf, sizeof(c->buf));
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    conn_t *c = stream->data;

    if (nread < 0) {
        conn_close(c);
    } else if (nread > 0 && coll_http_request_feed(&c->req, buf->base, (size_t)nread) != 0) {
        coll_debug(COLL_SUB_STATUS, "status request %s %s", coll_http_request_method(&c->req),
                   c->req.url);
        conn_answer(c);
    }
}

static void idle_cb(uv_timer_t *t)
{
    conn_close(t->data);
}

/* A connection one of the listeners accepted (net/accept.h checked the limits). */
static void accept_cb(coll_acceptor_t *a, int fd, const struct sockaddr_storage *peer)
{
    coll_status_server_t *srv = coll_acceptor_data(a);
    conn_t *c = calloc(1, sizeof(*c));
    int rc;

    if (c == NULL) {
        coll_warn(COLL_SUB_STATUS, "status accept: out of memory");
        close(fd);
        coll_acceptor_release(a, peer);
        return;
    }
    c->srv = srv;
    c->acceptor = a;
    c->peer = *peer;
    c->handles = 2;
    srv->handles++;
    coll_http_request_init(&c->req);
    if (peer->ss_family == AF_UNIX) {
        uv_pipe_init(srv->d->loop, &c->u.pipe, 0);
        rc = uv_pipe_open(&c->u.pipe, fd);
    } else {
        uv_tcp_init(srv->d->loop, &c->u.tcp);
        rc = uv_tcp_open(&c->u.tcp, fd);
    }
    uv_timer_init(srv->d->loop, &c->timer);
    c->u.handle.data = c->timer.data = c;
    coll_list_push(&srv->conns, &c->link);
    if (rc != 0) {
        close(fd);
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, idle_cb, COLL_STATUS_IDLE_MS, 0);
    uv_read_start(&c->u.stream, alloc_cb, read_cb);
}

/* Both listeners: the status_max_connections served at once, and half the descriptor
 * reserve: /status still answers when peers took what the control listener may take. */
static coll_status_t open_acceptor(coll_status_server_t *srv, int fd, const char *what,
                                   coll_acceptor_t **a_p)
{
    coll_acceptor_params_t p = {
        .listener = COLL_LISTENER_STATUS, .what = what,
        .max = (unsigned)srv->d->cfg.status_max_connections,
        .reserve = (unsigned)srv->d->cfg.fd_reserve / 2, .cb = accept_cb, .data = srv};

    return coll_acceptor_open(srv->d, fd, &p, a_p);
}

/* ---- listeners ---- */

/* Its directory is created when missing; a file left by a dead daemon is removed, one that a
 * live daemon answers on is not. */
static coll_status_t prepare_socket_path(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char dir[108];
    char *slash;
    int fd, live;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
            coll_error(COLL_SUB_STATUS, "cannot create the status socket directory %s: %m", dir);
            return COLL_ERR_IO;
        }
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0) {
        close(fd);
    }
    if (live) {
        coll_error(COLL_SUB_STATUS, "another collectived is listening on %s (the status socket "
                   "sits beside the client socket: give each daemon its own directory, or set "
                   "status_socket / --status-socket)", path);
        return COLL_ERR_INVALID;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        coll_error(COLL_SUB_STATUS, "removing stale socket %s: %m", path);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

static coll_status_t listen_unix(coll_status_server_t *srv)
{
    const char *path = srv->d->cfg.status_socket;
    coll_status_t st = prepare_socket_path(path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char err[128];
    int fd;

    if (st != COLL_OK) {
        return st;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (coll_acceptor_bind((struct sockaddr *)&sa, sizeof(sa), &fd, err, sizeof(err)) !=
        COLL_OK) {
        coll_error(COLL_SUB_STATUS, "status socket %s: %s", path, err);
        return COLL_ERR_IO;
    }
    srv->socket_bound = 1;
    if ((st = open_acceptor(srv, fd, "status socket", &srv->unix_listener)) != COLL_OK ||
        (st = coll_admin_own_socket(srv->d, path)) != COLL_OK) {
        return st;
    }
    coll_info(COLL_SUB_STATUS, "status server on %s", path);
    return COLL_OK;
}

static coll_status_t listen_tcp(coll_status_server_t *srv)
{
    const char *addr = srv->d->cfg.status_listen;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char host[64], err[128];
    int port, fd;
    coll_status_t st;

    /* The configuration checked the form already. */
    if (coll_parse_hostport(addr, host, sizeof(host), &port) < 0 ||
        (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
         uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0)) {
        coll_error(COLL_SUB_STATUS, "status_listen=%s: not a numeric host:port", addr);
        return COLL_ERR_INVALID;
    }
    if (coll_acceptor_bind((struct sockaddr *)&ss, ss.ss_family == AF_INET
                               ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6),
                           &fd, err, sizeof(err)) != COLL_OK) {
        coll_error(COLL_SUB_STATUS, "status listener on %s: %s", addr, err);
        return COLL_ERR_IO;
    }
    getsockname(fd, (struct sockaddr *)&ss, &sl);
    coll_acceptor_name(&ss, srv->tcp_addr, sizeof(srv->tcp_addr));
    if ((st = open_acceptor(srv, fd, "status listener", &srv->tcp_listener)) != COLL_OK) {
        return st;
    }
    coll_info(COLL_SUB_STATUS, "status server on tcp %s", srv->tcp_addr);
    return COLL_OK;
}

coll_status_t coll_status_server_open(coll_daemon_t *d, coll_status_server_t **srv_p)
{
    coll_status_server_t *srv;
    coll_status_t st = COLL_OK;

    *srv_p = NULL;
    if (d->cfg.status_socket[0] == '\0' && d->cfg.status_listen[0] == '\0') {
        return COLL_OK;
    }
    if ((srv = calloc(1, sizeof(*srv))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    srv->d = d;
    coll_list_init(&srv->conns);
    if (d->cfg.status_socket[0] != '\0') {
        st = listen_unix(srv);
    }
    if (st == COLL_OK && d->cfg.status_listen[0] != '\0') {
        st = listen_tcp(srv);
    }
    /* Set even on failure: the caller closes it like an open one. */
    *srv_p = srv;
    return st;
}

void coll_status_server_close(coll_status_server_t *srv)
{
    conn_t *c, *tmp;

    if (srv == NULL || srv->closing) {
        return;
    }
    srv->closing = 1;
    coll_list_for_each_safe(c, tmp, &srv->conns, conn_t, link)
    {
        conn_close(c);
    }
    coll_acceptor_close(srv->unix_listener); /* each freed once its last connection is */
    coll_acceptor_close(srv->tcp_listener);
    if (srv->socket_bound) {
        unlink(srv->d->cfg.status_socket);
    }
    if (srv->handles == 0) {
        free(srv);
    }
}

const char *coll_status_server_tcp_addr(const coll_status_server_t *srv)
{
    return srv != NULL ? srv->tcp_addr : "";
}
