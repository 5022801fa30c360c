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
 *         SCM_RIGHTS. While frames wait on the socket, or it has no room, the frame waits in
 *         the session's fd_frames (with duplicates of the fds: the caller keeps its own) and
 *         goes out once they are written, ahead of none it was queued after but possibly after
 *         frames sent later (every frame stands alone); it is dropped, with a warning, when the
 *         client reads nothing for 30 s, and silently when the session closes. */
coll_status_t coll_session_send_fds(coll_session_t *s, coll_daemon_msg_t *msg, const int *fds,
                                    unsigned nfds);

/** @brief Forget the frames with fds that still wait to be sent on @p s (at its close; each
 *         frees itself with its duplicates from the loop). */
void coll_session_drop_fd_frames(coll_session_t *s);

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
