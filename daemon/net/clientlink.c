/*
 * Sending to a trainer: frames on its socket (with fds where a reply carries them) and
 * completions, through its control block's ring when there is room.
 */
#include "net/clientlink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/assert.h"
#include "base/log.h"
#include "base/stream.h"
#include "core/stats.h"
#include "proto/frame.h"

/* How often, and how many times, a frame with fds tries again while the socket is full: the
 * client's wait for its reply (30 s) bounds it. */
#define FD_RETRY_MS 2
#define FD_RETRIES 15000

/* A frame with fds that waits for the frames queued before it and for room on the socket. */
typedef struct {
    uv_write_t req;   /* an empty write: its callback runs once those before it are written */
    uv_timer_t timer; /* a retry while the socket is full; its close frees all this */
    coll_list_t link; /* in the session's fd_frames; s NULL once the session closed */
    coll_session_t *s;
    unsigned tries;
    unsigned nfds;
    int fds[COLL_FRAME_MAX_FDS]; /* duplicates, closed once sent */
    size_t len;
    uint8_t frame[];
} fd_frame_t;

/* The first bytes of a frame carry the fds, so the client receives them with the reply; the
 * socket's write queue must be empty (a frame part-written before it would be cut).
 * COLL_INPROGRESS: the socket has no room now. */
static coll_status_t send_now(coll_session_t *s, const uint8_t *frame, size_t len,
                              const int *fds, unsigned nfds)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(COLL_FRAME_MAX_FDS * sizeof(int))];
    } ctl;
    struct iovec iov = {(void *)frame, len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    uv_os_fd_t sock;
    ssize_t n;

    COLL_ASSERT(nfds <= COLL_FRAME_MAX_FDS);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
    if (uv_fileno((uv_handle_t *)&s->pipe, &sock) != 0) {
        return COLL_ERR_IO;
    }
    do {
        n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        return COLL_INPROGRESS;
    }
    if (n <= 0) {
        coll_warn(COLL_SUB_SESSION, "session %llu: sending the pool's fds: %m",
                  (unsigned long long)s->id);
        return COLL_ERR_IO;
    }
    return (size_t)n == len ? COLL_OK
                            : coll_stream_write((uv_stream_t *)&s->pipe, frame + n, len - (size_t)n);
}

static void fd_frame_freed(uv_handle_t *h)
{
    fd_frame_t *f = h->data;

    for (unsigned i = 0; i < f->nfds; i++) {
        close(f->fds[i]);
    }
    free(f);
}

static void fd_frame_end(fd_frame_t *f)
{
    if (f->s != NULL) {
        coll_list_remove(&f->link);
    }
    uv_close((uv_handle_t *)&f->timer, fd_frame_freed);
}

static void fd_frame_step(fd_frame_t *f);

static void fd_frame_written(uv_write_t *req, int status)
{
    fd_frame_t *f = req->data;

    if (status != 0) {
        fd_frame_end(f); /* the session is closing */
        return;
    }
    fd_frame_step(f);
}

static void fd_frame_retry(uv_timer_t *t)
{
    fd_frame_step(t->data);
}

/* Send it once nothing is queued before it and the socket has room: wait for the queue (an
 * empty write), or try again shortly while the socket is full. */
static void fd_frame_step(fd_frame_t *f)
{
    uv_buf_t none = uv_buf_init(NULL, 0);
    coll_status_t st;

    if (f->s == NULL || f->s->closing) {
        fd_frame_end(f);
    } else if (uv_stream_get_write_queue_size((uv_stream_t *)&f->s->pipe) != 0) {
        if (uv_write(&f->req, (uv_stream_t *)&f->s->pipe, &none, 1, fd_frame_written) != 0) {
            fd_frame_end(f);
        }
    } else if ((st = send_now(f->s, f->frame, f->len, f->fds, f->nfds)) == COLL_INPROGRESS &&
               ++f->tries < FD_RETRIES) {
        uv_timer_start(&f->timer, fd_frame_retry, FD_RETRY_MS, 0);
    } else {
        if (st == COLL_INPROGRESS) {
            coll_warn(COLL_SUB_SESSION, "session %llu: the client read nothing for %d s; its "
                      "pool's fds are not sent", (unsigned long long)f->s->id,
                      FD_RETRY_MS * FD_RETRIES / 1000);
        }
        fd_frame_end(f);
    }
}

/* A frame with fds that cannot go now: it waits in the session's fd_frames, with duplicates
 * of the fds (the caller's may close before then). */
static coll_status_t fd_frame_later(coll_session_t *s, const uint8_t *frame, size_t len,
                                    const int *fds, unsigned nfds)
{
    fd_frame_t *f = calloc(1, sizeof(*f) + len);

    if (f == NULL) {
        return COLL_ERR_NOMEM;
    }
    f->s = s;
    f->len = len;
    memcpy(f->frame, frame, len);
    f->req.data = f->timer.data = f;
    uv_timer_init(s->pipe.loop, &f->timer);
    coll_list_push(&s->fd_frames, &f->link);
    for (; f->nfds < nfds; f->nfds++) {
        if ((f->fds[f->nfds] = fcntl(fds[f->nfds], F_DUPFD_CLOEXEC, 0)) < 0) {
            fd_frame_end(f);
            return COLL_ERR_IO;
        }
    }
    fd_frame_step(f);
    return COLL_OK;
}

static coll_status_t send_with_fds(coll_session_t *s, const uint8_t *frame, size_t len,
                                   const int *fds, unsigned nfds)
{
    coll_status_t st = uv_stream_get_write_queue_size((uv_stream_t *)&s->pipe) == 0
                           ? send_now(s, frame, len, fds, nfds)
                           : COLL_INPROGRESS;

    return st == COLL_INPROGRESS ? fd_frame_later(s, frame, len, fds, nfds) : st;
}

void coll_session_drop_fd_frames(coll_session_t *s)
{
    coll_list_t *e;

    while ((e = coll_list_pop(&s->fd_frames)) != NULL) {
        fd_frame_t *f = (fd_frame_t *)(void *)((char *)e - offsetof(fd_frame_t, link));
        f->s = NULL;
        uv_timer_stop(&f->timer);
    }
}

coll_status_t coll_session_send(coll_session_t *s, coll_daemon_msg_t *msg)
{
    return coll_session_send_fds(s, msg, NULL, 0);
}

coll_status_t coll_session_send_fds(coll_session_t *s, coll_daemon_msg_t *msg, const int *fds,
                                    unsigned nfds)
{
    uint8_t *frame;
    size_t len;
    coll_status_t st;

    if (s->closing) {
        return COLL_ERR_CLOSED;
    }
    msg->version = COLL_WIRE_VERSION;
    st = coll_frame_pack(&msg->base, &frame, &len);
    if (st == COLL_OK) {
        st = nfds > 0 ? send_with_fds(s, frame, len, fds, nfds)
                      : coll_stream_write((uv_stream_t *)&s->pipe, frame, len);
        free(frame);
    }
    /* Not closed here: the caller may be walking job state. A client that is gone is seen by
     * the read side, which closes the session from the loop. */
    if (st != COLL_OK) {
        coll_debug(COLL_SUB_SESSION, "session %llu: write failed: %s", (unsigned long long)s->id,
                   coll_strerror(st));
    } else if (s->ctl != NULL) {
        /* The client may sleep on its control block rather than on the socket. */
        atomic_fetch_add(&s->ctl->frames, 1);
        coll_ctl_notify(s->ctl);
    }
    return st;
}

/* A success goes into the control block's ring when there is room: no socket message. */
static int complete_in_ctl(coll_session_t *s, uint32_t req_id, const char *algo,
                           const coll_ctl_times_t *t)
{
    coll_ctl_t *ctl = s->ctl;
    uint32_t head;
    coll_ctl_comp_t *slot;

    if (ctl == NULL || s->closing) {
        return 0;
    }
    head = atomic_load_explicit(&ctl->comp_head, memory_order_relaxed);
    if (head - atomic_load_explicit(&ctl->comp_tail, memory_order_acquire) >= COLL_CTL_SLOTS) {
        return 0;
    }
    slot = &ctl->comp[head % COLL_CTL_SLOTS];
    slot->req_id = req_id;
    slot->status = COLL_OK;
    snprintf(slot->algo, sizeof(slot->algo), "%s", algo);
    slot->t.ready_ns = t->ready_ns;
    slot->t.peers_ns = t->peers_ns;
    slot->t.reduced_ns = t->reduced_ns;
    slot->t.done_ns = t->done_ns;
    slot->t.nsteps = t->nsteps;
    memcpy(slot->t.steps, t->steps, t->nsteps * sizeof(t->steps[0]));
    slot->t.wire_bytes = t->wire_bytes;
    slot->t.dense_bytes = t->dense_bytes;
    atomic_store_explicit(&ctl->comp_head, head + 1, memory_order_release);
    coll_ctl_notify(ctl);
    return 1;
}

void coll_session_complete(coll_session_t *s, uint32_t req_id, coll_status_t status,
                           const char *error, const char *algo)
{
    static const coll_ctl_times_t none;
    coll_session_complete_op(s, req_id, status, error, algo, &none);
}

void coll_session_complete_op(coll_session_t *s, uint32_t req_id, coll_status_t status,
                              const char *error, const char *algo, const coll_ctl_times_t *t)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__Complete c = COLL__WIRE__COMPLETE__INIT;

    coll_stats_request_done(&s->d->stats, status);
    if (status == COLL_OK && complete_in_ctl(s, req_id, algo, t)) {
        return;
    }
    c.ready_ns = t->ready_ns;
    c.peers_ns = t->peers_ns;
    c.reduced_ns = t->reduced_ns;
    c.done_ns = t->done_ns;
    c.n_steps = t->nsteps;
    c.steps = (uint64_t *)t->steps;
    c.wire_bytes = t->wire_bytes;
    c.dense_bytes = t->dense_bytes;
    c.req_id = req_id;
    c.status = status;
    c.error = (char *)error;
    c.algo = (char *)algo;
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_COMPLETE;
    msg.complete = &c;
    coll_session_send(s, &msg);
}

