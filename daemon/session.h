/**
 * @file session.h
 * @brief One connected trainer process: frames in, frames out, its place in a job.
 */
#ifndef COLL_SESSION_H
#define COLL_SESSION_H

#include <sys/socket.h>
#include <uv.h>

#include "collective.h"
#include "ctl.h"
#include "daemon.h"
#include "frame.h"
#include "wire.h"

struct coll_job;

typedef struct coll_session {
    uv_pipe_t pipe;          /**< first member: the handle's data points back here */
    coll_daemon_t *d;
    coll_list_t link;        /**< in d->sessions */
    coll_frame_reader_t reader;
    uint64_t id;             /**< for logs */
    struct ucred cred;       /**< peer pid, uid, gid (SO_PEERCRED) */
    int hello;               /**< Hello received */
    int closing;
    int protocol_error;      /**< closed for breaking the protocol (logged as an error) */
    struct coll_job *job;    /**< joined job, or NULL */
    coll_ctl_t *ctl;         /**< the rank's control block in the job's pool, or NULL */
    uint32_t local_rank;
    uint32_t rank;
} coll_session_t;

/**
 * @brief Accept a client on @p listener and start reading its frames.
 * Errors are logged; a failed accept does not affect other sessions.
 */
void coll_session_accept(coll_daemon_t *d, uv_stream_t *listener);

/**
 * @brief Send a DaemonMsg envelope with @p body set by the caller (version filled in).
 * @return COLL_OK; COLL_ERR_CLOSED when the session is closing; COLL_ERR_NOMEM; COLL_ERR_IO.
 */
coll_status_t coll_session_send(coll_session_t *s, coll_daemon_msg_t *msg);

/** @brief As coll_session_send(), passing @p nfds (1 or 2) descriptors with SCM_RIGHTS. */
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

/**
 * @brief Cut off a client that broke the protocol: an error logged once with @p why, then
 *        coll_session_close(). The daemon keeps serving everybody else.
 */
void coll_session_reject(coll_session_t *s, const char *why);

/** @brief Close a session (idempotent); its job learns that the rank left. */
void coll_session_close(coll_session_t *s, const char *why);

#endif
