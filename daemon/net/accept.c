/*
 * Accepting connections within limits (accept.h): a uv_poll on the listening socket,
 * accept4() by hand, the limits applied before the owner sees a connection.
 */
#include "net/accept.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/log.h"

/* Open connections from one remote address. */
typedef struct {
    uint8_t ip[16];
    unsigned count;
} addr_count_t;

struct coll_acceptor {
    uv_poll_t poll;
    uv_timer_t pause_timer;
    coll_daemon_t *d;
    coll_acceptor_params_t p;
    int fd;
    int spare_fd;          /* given up to accept at EMFILE (accept.h) */
    unsigned open;         /* connections given out and not released */
    int polling;
    int emfile;            /* in a descriptor-limit episode (logged once) */
    int closing;
    int handles;           /* uv handles not yet closed */
    addr_count_t *addrs;   /* by remote address, those with open connections */
    size_t naddrs, addrs_cap;
};

static void poll_cb(uv_poll_t *h, int status, int events);

static void maybe_free(coll_acceptor_t *a)
{
    if (a->closing && a->handles == 0 && a->open == 0) {
        free(a->addrs);
        free(a);
    }
}

static void handle_closed(uv_handle_t *h)
{
    coll_acceptor_t *a = h->data;
    a->handles--;
    maybe_free(a);
}

static void set_polling(coll_acceptor_t *a, int on)
{
    if (a->closing || a->polling == on) {
        return;
    }
    a->polling = on;
    if (on) {
        uv_poll_start(&a->poll, UV_READABLE, poll_cb);
    } else {
        uv_poll_stop(&a->poll);
    }
}

void coll_acceptor_name(const struct sockaddr_storage *sa, char *buf, size_t len)
{
    char host[64] = "?";

    if (sa->ss_family == AF_INET) {
        uv_ip4_name((const struct sockaddr_in *)sa, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(((const struct sockaddr_in *)sa)->sin_port));
    } else if (sa->ss_family == AF_INET6) {
        uv_ip6_name((const struct sockaddr_in6 *)sa, host, sizeof(host));
        snprintf(buf, len, "[%s]:%d", host, ntohs(((const struct sockaddr_in6 *)sa)->sin6_port));
    } else {
        snprintf(buf, len, "local");
    }
}

/* The address's bytes (IPv4 mapped into 16), or 0 for a Unix socket (no per-address count). */
static int ip_of(const struct sockaddr_storage *sa, uint8_t *ip)
{
    memset(ip, 0, 16);
    if (sa->ss_family == AF_INET) {
        memcpy(ip + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        return 1;
    }
    if (sa->ss_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 1;
    }
    return 0;
}

/* The count of @p sa's address, added when @p add and missing; NULL when none (or no room). */
static addr_count_t *addr_slot(coll_acceptor_t *a, const struct sockaddr_storage *sa, int add)
{
    uint8_t ip[16];
    addr_count_t *grown;

    if (!ip_of(sa, ip)) {
        return NULL;
    }
    for (size_t i = 0; i < a->naddrs; i++) {
        if (memcmp(a->addrs[i].ip, ip, 16) == 0) {
            return &a->addrs[i];
        }
    }
    if (!add) {
        return NULL;
    }
    if (a->naddrs == a->addrs_cap) {
        size_t cap = a->addrs_cap ? 2 * a->addrs_cap : 16;
        if ((grown = realloc(a->addrs, cap * sizeof(*grown))) == NULL) {
            return NULL;
        }
        a->addrs = grown;
        a->addrs_cap = cap;
    }
    memcpy(a->addrs[a->naddrs].ip, ip, 16);
    a->addrs[a->naddrs].count = 0;
    return &a->addrs[a->naddrs++];
}

void coll_refusal_note(coll_daemon_t *d, coll_listener_t listener, coll_refusal_t reason,
                       const char *fmt, ...)
{
    uint64_t n;
    char text[512];
    va_list ap;

    coll_stats_refused(&d->stats, listener, reason);
    n = d->stats.refused[listener][reason];
    if ((n & (n - 1)) != 0) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    coll_warn(COLL_SUB_CORE, "%s (%s refusals of the %s listener so far: %llu)", text,
              coll_stats_refusal_name(reason), coll_stats_listener_name(listener),
              (unsigned long long)n);
}

static void refuse(coll_acceptor_t *a, int fd, coll_refusal_t why, const char *peer,
                   const char *detail)
{
    coll_refusal_note(a->d, a->p.listener, why, "%s: closed a connection from %s at once: %s",
                      a->p.what, peer, detail);
    close(fd);
}

/* Limits that close a new connection at once; 0 when it may stay. */
static int over_limits(coll_acceptor_t *a, int fd, const struct sockaddr_storage *sa)
{
    char peer[80], detail[160];
    struct rlimit rl;
    addr_count_t *c;

    coll_acceptor_name(sa, peer, sizeof(peer));
    if (a->p.reserve > 0 && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)fd + a->p.reserve >= rl.rlim_cur) {
        snprintf(detail, sizeof(detail), "descriptor %d of the limit %llu, and %u are kept for "
                 "local jobs (fd_reserve)", fd, (unsigned long long)rl.rlim_cur, a->p.reserve);
        refuse(a, fd, COLL_REFUSED_FD_RESERVE, peer, detail);
        return 1;
    }
    if (a->p.max_per_addr > 0 && (c = addr_slot(a, sa, 0)) != NULL &&
        c->count >= a->p.max_per_addr) {
        snprintf(detail, sizeof(detail), "%u connections from that address are open "
                 "(peer_max_per_address)", c->count);
        refuse(a, fd, COLL_REFUSED_PER_ADDRESS, peer, detail);
        return 1;
    }
    return 0;
}

static void pause_cb(uv_timer_t *t)
{
    coll_acceptor_t *a = t->data;
    set_polling(a, a->p.max == 0 || a->open < a->p.max);
}

/* EMFILE or ENFILE: say it once, count it, and get the waiting connection out of the backlog
 * with the spare descriptor; without one, pause. */
static void out_of_fds(coll_acceptor_t *a, int err)
{
    int fd;

    if (!a->emfile) {
        a->emfile = 1;
        coll_error(COLL_SUB_CORE, "%s: out of file descriptors (%s): closing new connections "
                   "until some are free", a->p.what, strerror(err));
    }
    coll_stats_refused(&a->d->stats, a->p.listener, COLL_REFUSED_EMFILE);
    if (a->spare_fd >= 0) {
        close(a->spare_fd);
        fd = accept4(a->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
        }
        a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    if (a->spare_fd < 0) {
        set_polling(a, 0);
        uv_timer_start(&a->pause_timer, pause_cb, COLL_ACCEPT_PAUSE_MS, 0);
    }
}

static void take(coll_acceptor_t *a, int fd, const struct sockaddr_storage *sa)
{
    addr_count_t *c = a->p.max_per_addr > 0 ? addr_slot(a, sa, 1) : NULL;

    if (c != NULL) {
        c->count++;
    }
    a->open++;
    if (a->p.max > 0 && a->open >= a->p.max) {
        coll_refusal_note(a->d, a->p.listener, COLL_REFUSED_MAX_CONNECTIONS,
                          "%s: %u connections open, its limit: new ones wait until one closes",
                          a->p.what, a->open);
        set_polling(a, 0);
    }
    a->p.cb(a, fd, sa);
}

/* Accepts what waits, a bounded number at a time so that other callbacks run. */
static void poll_cb(uv_poll_t *h, int status, int events)
{
    coll_acceptor_t *a = h->data;
    struct sockaddr_storage sa;

    for (int i = 0; i < 64 && a->polling && !a->closing; i++) {
        socklen_t sl = sizeof(sa);
        int fd = accept4(a->fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE) {
                out_of_fds(a, errno);
            } else if (errno != EINTR && errno != ECONNABORTED) {
                return; /* EAGAIN: nothing more waits */
            }
            continue;
        }
        a->emfile = 0;
        if (sl == 0 || sa.ss_family == AF_UNIX) {
            sa.ss_family = AF_UNIX;
        }
        if (!over_limits(a, fd, &sa)) {
            take(a, fd, &sa);
        }
    }
}

coll_status_t coll_acceptor_bind(const struct sockaddr *sa, socklen_t len, int *fd_p, char *err,
                                 size_t errlen)
{
    int one = 1;
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    if (fd < 0 || (sa->sa_family != AF_UNIX &&
                   setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0) ||
        bind(fd, sa, len) < 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return COLL_ERR_IO;
    }
    *fd_p = fd;
    return COLL_OK;
}

coll_status_t coll_acceptor_open(coll_daemon_t *d, int fd, const coll_acceptor_params_t *params,
                                 coll_acceptor_t **a_p)
{
    coll_acceptor_t *a = calloc(1, sizeof(*a));

    if (a == NULL) {
        close(fd);
        return COLL_ERR_NOMEM;
    }
    if (listen(fd, SOMAXCONN) < 0) {
        coll_error(COLL_SUB_CORE, "%s: listen: %m", params->what);
        close(fd);
        free(a);
        return COLL_ERR_IO;
    }
    a->d = d;
    a->p = *params;
    a->fd = fd;
    a->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_poll_init(d->loop, &a->poll, fd);
    uv_timer_init(d->loop, &a->pause_timer);
    a->poll.data = a->pause_timer.data = a;
    a->handles = 2;
    set_polling(a, 1);
    *a_p = a;
    return COLL_OK;
}

void *coll_acceptor_data(const coll_acceptor_t *a)
{
    return a->p.data;
}

void coll_acceptor_release(coll_acceptor_t *a, const struct sockaddr_storage *peer)
{
    addr_count_t *c = addr_slot(a, peer, 0);

    if (c != NULL && c->count > 0 && --c->count == 0) {
        *c = a->addrs[--a->naddrs];
    }
    if (a->open > 0) {
        a->open--;
    }
    if (a->p.max > 0 && a->open < a->p.max && !uv_is_active((uv_handle_t *)&a->pause_timer)) {
        set_polling(a, 1);
    }
    maybe_free(a);
}

void coll_acceptor_close(coll_acceptor_t *a)
{
    if (a == NULL || a->closing) {
        return;
    }
    set_polling(a, 0);
    a->closing = 1;
    uv_close((uv_handle_t *)&a->poll, handle_closed);
    uv_close((uv_handle_t *)&a->pause_timer, handle_closed);
    close(a->fd);
    if (a->spare_fd >= 0) {
        close(a->spare_fd);
    }
}
