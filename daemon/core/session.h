/**
 * @file session.h
 * @brief One connected trainer process as every layer sees it: its socket, credentials and place
 *        in a job. Accepting and reading are the job layer's (job/session.h), sending is the
 *        client link's (net/clientlink.h).
 */
#ifndef COLL_CORE_SESSION_H
#define COLL_CORE_SESSION_H

#include <sys/socket.h>
#include <uv.h>

#include <collective.h>

#include "base/list.h"
#include "core/daemon.h"
#include "proto/ctl.h"
#include "proto/frame.h"

struct coll_job;

typedef struct coll_session {
    uv_pipe_t pipe;          /**< first member: the handle's data points back here */
    coll_daemon_t *d;
    coll_list_t link;        /**< in d->sessions */
    coll_list_t fd_frames;   /**< frames with fds waiting to be sent (net/clientlink.h) */
    coll_frame_reader_t reader;
    uint64_t id;             /**< for logs */
    struct ucred cred;       /**< peer pid, uid, gid (SO_PEERCRED) */
    struct coll_acceptor *acceptor; /**< whose place it holds (net/accept.h) */
    int hello;               /**< Hello received */
    int closing;
    int protocol_error;      /**< closed for breaking the protocol (logged as an error) */
    struct coll_job *job;    /**< joined job, or NULL */
    coll_ctl_t *ctl;         /**< the rank's control block in the job's pool, or NULL */
    uint32_t local_rank;
    uint32_t rank;
} coll_session_t;

#endif
