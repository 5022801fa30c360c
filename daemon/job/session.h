/**
 * @file session.h
 * @brief A connected trainer process, the job layer's part: accepting it, reading and
 *        dispatching its frames, closing it (the struct is core/session.h).
 */
#ifndef COLL_JOB_SESSION_H
#define COLL_JOB_SESSION_H

#include "core/session.h"

/**
 * @brief Open the session of a client whose connection @p fd the client listener's acceptor
 *        @p a accepted (net/accept.h), and start reading its frames; the session gives its
 *        place back when it closes. Errors are logged (and close @p fd); they do not affect
 *        other sessions.
 */
void coll_session_open(coll_daemon_t *d, int fd, struct coll_acceptor *a);

/**
 * @brief Cut off a client that broke the protocol: an error logged once with @p why, then
 *        coll_session_close(). The daemon keeps serving everybody else.
 */
void coll_session_reject(coll_session_t *s, const char *why);

/** @brief Close a session (idempotent); its job learns that the rank left. */
void coll_session_close(coll_session_t *s, const char *why);

#endif
