/**
 * @file status_server.h
 * @brief The status server: HTTP/1.1 on a Unix socket (status_socket) and optionally on TCP
 *        (status_listen), served by the daemon's loop. GET /status (JSON), GET /metrics
 *        (Prometheus), GET /healthz, GET / (an index).
 *
 * One request per connection, of at most 2 KiB; a connection lives at most COLL_STATUS_IDLE_MS
 * (its request, the answer and its write: a client that does not read is cut off). Both
 * listeners take connections through acceptors (net/accept.h) with the kernel's largest backlog:
 * status_max_connections are served at once (a burst waits in the backlog), and none is taken
 * when fewer than half fd_reserve descriptors are free (the control listener leaves all of it:
 * /status answers while peers hold what they may). Answers are built whole on the loop thread
 * (report.h).
 */
#ifndef COLL_ADMIN_STATUS_SERVER_H
#define COLL_ADMIN_STATUS_SERVER_H

#include <stddef.h>

#include <collective.h>

#include "base/http.h"
#include "core/daemon.h"

/** The longest a status connection lives, milliseconds. */
#define COLL_STATUS_IDLE_MS 10000

typedef struct coll_status_server coll_status_server_t;

/**
 * @brief Open the listeners the configuration asks for (d->cfg.status_socket,
 *        d->cfg.status_listen).
 * @param [out] srv_p The server, or NULL when both are off.
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_INVALID (another daemon owns the socket) or
 *         COLL_ERR_IO (bind or listen failed), logged.
 */
coll_status_t coll_status_server_open(coll_daemon_t *d, coll_status_server_t **srv_p);

/**
 * @brief Close the listeners and every connection and remove the socket file; the server is
 *        freed once its handles closed. Safe with NULL; call once.
 */
void coll_status_server_close(coll_status_server_t *srv);

/** @return The bound TCP address ("127.0.0.1:9464"), "" when TCP is off. */
const char *coll_status_server_tcp_addr(const coll_status_server_t *srv);

/**
 * @brief The whole HTTP response to a complete (or refused) request @p r.
 * @param [out] len_p Length of the response.
 * @return The response (free() it), or NULL when out of memory.
 */
char *coll_status_answer(coll_daemon_t *d, const coll_http_request_t *r, size_t *len_p);

#endif
