/**
 * @file accept.h
 * @brief Accepting connections within limits, for every listener of the daemon: the client
 *        socket, the status server and the control listener.
 *
 * An acceptor listens with the kernel's largest backlog (SOMAXCONN) and accepts by itself
 * (accept4() when a uv_poll says its socket is readable), so that it sees what libuv's own
 * accept hides: at the descriptor limit libuv accepts and closes connections without a word.
 *  - max: connections open at once (0: no limit). At it the acceptor stops accepting until
 *    coll_acceptor_release() frees a place: new connections wait in the backlog, none is
 *    refused. Logged and counted once each time it fills.
 *  - max_per_addr: connections open at once from one remote address (TCP only; 0: no limit).
 *    One more is closed at once, logged and counted.
 *  - reserve: a new connection is closed at once, logged and counted, when fewer descriptors
 *    than this would stay free (Linux hands out the lowest free descriptor, so the number of
 *    an accepted one is how many are in use below it). The client socket has no reserve, so
 *    local jobs can use the descriptors the status server and peers must leave.
 *  - EMFILE and ENFILE: logged once per episode and counted; a spare descriptor kept for the
 *    purpose is given up to accept the waiting connection and close it (its sender sees it
 *    closed instead of waiting in the backlog), then taken again; while it cannot be taken
 *    again the acceptor pauses for COLL_ACCEPT_PAUSE_MS.
 * Loop thread only.
 */
#ifndef COLL_NET_ACCEPT_H
#define COLL_NET_ACCEPT_H

#include <sys/socket.h>

#include "core/daemon.h"

typedef struct coll_acceptor coll_acceptor_t;

/**
 * @brief A connection was accepted: @p fd (non-blocking, close-on-exec) is the callee's, who
 *        calls coll_acceptor_release() with @p peer once it is closed.
 */
typedef void (*coll_accept_cb)(coll_acceptor_t *a, int fd, const struct sockaddr_storage *peer);

/** What an acceptor is for. */
typedef struct {
    coll_listener_t listener; /**< whose counters (core/stats.h) */
    const char *what;         /**< for the log: "control listener" */
    unsigned max;             /**< open at once (0: no limit) */
    unsigned max_per_addr;    /**< open at once from one address (0: no limit) */
    unsigned reserve;         /**< descriptors to leave free */
    coll_accept_cb cb;
    void *data;               /**< the owner's, for the callback (coll_acceptor_data()) */
} coll_acceptor_params_t;

/** How long an acceptor pauses when it can take no spare descriptor, ms. */
#define COLL_ACCEPT_PAUSE_MS 100

/**
 * @brief A stream socket bound to @p sa (TCP with SO_REUSEADDR, or a Unix socket's path), for
 *        coll_acceptor_open().
 * @return COLL_OK and the socket in @p fd_p; COLL_ERR_IO with the reason (strerror) in @p err.
 */
coll_status_t coll_acceptor_bind(const struct sockaddr *sa, socklen_t len, int *fd_p, char *err,
                                 size_t errlen);

/**
 * @brief Start accepting on @p fd, a bound socket (its ownership passes to the acceptor, which
 *        listens on it with SOMAXCONN and closes it in coll_acceptor_close(), or here on error).
 * @return COLL_OK and the acceptor in @p a_p; COLL_ERR_NOMEM; COLL_ERR_IO (listen() failed,
 *         logged with @p params->what).
 */
coll_status_t coll_acceptor_open(coll_daemon_t *d, int fd, const coll_acceptor_params_t *params,
                                 coll_acceptor_t **a_p);

/** @return The params' data of @p a. */
void *coll_acceptor_data(const coll_acceptor_t *a);

/** @brief A connection the callback got from @p a, from @p peer, is closed: its place frees. */
void coll_acceptor_release(coll_acceptor_t *a, const struct sockaddr_storage *peer);

/** @brief Stop accepting and free @p a (NULL is fine); connections already given out stay. */
void coll_acceptor_close(coll_acceptor_t *a);

/**
 * @brief Count a connection @p listener refused for @p reason, and log @p fmt at warn the 1st,
 *        2nd, 4th, 8th... time (with the count), so that a flood cannot flood the log.
 */
void coll_refusal_note(coll_daemon_t *d, coll_listener_t listener, coll_refusal_t reason,
                       const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/** @brief "host:port" or "[v6]:port" of @p sa (a Unix socket: "local"). */
void coll_acceptor_name(const struct sockaddr_storage *sa, char *buf, size_t len);

#endif
