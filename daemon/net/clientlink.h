/**
 * @file clientlink.h
 * @brief Sending to a trainer process (net/clientlink.c): framed DaemonMsg envelopes on its
 *        socket, descriptors with SCM_RIGHTS, and completions of its requests. Loop thread.
 */
#ifndef COLL_NET_CLIENTLINK_H
#define COLL_NET_CLIENTLINK_H

#include "core/session.h"
#include "proto/ctl.h"
#include "proto/wire.h"

/**
 * @brief Send a DaemonMsg envelope with @p body set by the caller (version filled in).
 * @return COLL_OK; COLL_ERR_CLOSED when the session is closing; COLL_ERR_NOMEM; COLL_ERR_IO.
 */
coll_status_t coll_session_send(coll_session_t *s, coll_daemon_msg_t *msg);

/** @brief As coll_session_send(), passing @p nfds (0 .. COLL_FRAME_MAX_FDS) descriptors with
 *         SCM_RIGHTS. */
coll_status_t coll_session_send_fds(coll_session_t *s, coll_daemon_msg_t *msg, const int *fds,
                                    unsigned nfds);

/** @brief Send a Complete for @p req_id, with no phase times. */
void coll_session_complete(coll_session_t *s, uint32_t req_id, coll_status_t status,
                           const char *error, const char *algo);

/**
 * @brief Send a Complete for @p req_id with the operation's phase times: through the control
 *        block's ring for a success when it has room, else as a socket message.
 */
void coll_session_complete_op(coll_session_t *s, uint32_t req_id, coll_status_t status,
                              const char *error, const char *algo, const coll_ctl_times_t *t);

#endif
