/*
 * The link to the daemon: a Unix stream socket carrying frames. There is no background thread:
 * whichever caller waits reads the socket (one at a time, without the lock while in poll) and
 * dispatches what arrived, so a thread blocked in coll_req_wait() never stops another thread
 * from submitting.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client/link/link.h"

/* Longest sleep on the control block before the socket is checked for a dead daemon. */
#define COLL_CTL_POLL_MS 100

/* One attempt: the connected fd, or -errno. */
static int connect_once(const struct sockaddr_un *sa)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), e;

    if (fd < 0 || connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0) {
        return fd < 0 ? -errno : fd;
    }
    e = errno;
    close(fd);
    return -e;
}

/* Refused by a socket means its daemon is not accepting yet; refused by anything else (a file, a
 * directory) will not change. */
static int is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int coll__connect(const char *path, int wait_ms, int rank, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    uint64_t start = coll__now_ns(), waited_ms;
    long delay_ms = 10;
    int noted = 0, fd;

    if (path[0] == '\0' || strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(err, errlen, "socket path '%s' is %s (COLL_SOCKET)", path,
                 path[0] == '\0' ? "empty" : "too long");
        return COLL_ERR_INVALID;
    }
    strcpy(sa.sun_path, path);
    /* A daemon that is starting (or restarting) has no socket yet, or does not accept yet. */
    while ((fd = connect_once(&sa)) == -ENOENT || (fd == -ECONNREFUSED && is_socket(path))) {
        waited_ms = (coll__now_ns() - start) / 1000000;
        if (waited_ms >= (uint64_t)wait_ms) {
            snprintf(err, errlen, "cannot connect to collectived at %s within %d ms "
                     "(COLL_CONNECT_TIMEOUT_MS): %s; is the daemon running on this node, with "
                     "this socket (COLL_SOCKET)?", path, wait_ms, strerror(-fd));
            return COLL_ERR_CONNREFUSED;
        }
        if (!noted && waited_ms >= COLL_CONNECT_NOTE_MS) {
            coll__debug(COLL__DEBUG_WARN, "rank %d: no collectived at %s yet (%s); waiting up "
                        "to %d ms", rank, path, strerror(-fd), wait_ms);
            noted = 1;
        }
        delay_ms = delay_ms > wait_ms - (long)waited_ms ? wait_ms - (long)waited_ms : delay_ms;
        nanosleep(&(struct timespec){delay_ms / 1000, delay_ms % 1000 * 1000000}, NULL);
        delay_ms = delay_ms * 2 > COLL_CONNECT_RETRY_MS ? COLL_CONNECT_RETRY_MS : delay_ms * 2;
    }
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to collectived at %s: %s", path,
                 fd == -ECONNREFUSED ? "not a socket (COLL_SOCKET)" : strerror(-fd));
        return -fd == EACCES ? COLL_ERR_DENIED : COLL_ERR_CONNREFUSED;
    }
    return fd;
}

coll_status_t coll__send(coll_comm_t *c, coll_client_msg_t *msg)
{
    uint8_t *frame;
    size_t len, off = 0;

    if (c->broken != COLL_OK) {
        return c->broken;
    }
    msg->version = COLL_WIRE_VERSION;
    if (coll_frame_pack(&msg->base, &frame, &len) != COLL_OK) {
        return COLL_ERR_NOMEM;
    }
    while (off < len) {
        ssize_t n = send(c->fd, frame + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            coll__set_error(c, "writing to collectived: %s", strerror(errno));
            c->broken = COLL_ERR_CLOSED;
            break;
        }
        off += (size_t)n;
    }
    free(frame);
    return c->broken;
}

/* Through the control block when it has room (no socket, and a system call only when the
 * daemon sleeps), else as a socket message, which alone carries stream words. Lock held. */
coll_status_t coll__submit_send(coll_comm_t *c, const coll_submission_t *s,
                                const coll_req_sync_t *sync)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Submit m;
    int ring = 0;

    if ((sync == NULL || sync->flags == 0) && c->ctl != NULL && c->broken == COLL_OK &&
        coll_ctl_submit(c->ctl_job, c->ctl, s, &ring)) {
        if (ring && c->doorbell_fd >= 0) {
            uint64_t one = 1;
            (void)!write(c->doorbell_fd, &one, sizeof(one));
        }
        return COLL_OK;
    }
    coll_submission_to_wire(s, &m);
    if (sync != NULL) {
        m.sync_offset = sync->off;
        m.sync_value = sync->value;
        m.sync_flags = sync->flags;
    }
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &m;
    return coll__send(c, &msg);
}

void coll__abort(coll_comm_t *c, coll_status_t status, const char *reason)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Abort a = COLL__WIRE__ABORT__INIT;
    char text[1024];

    if (c->broken != COLL_OK) {
        return;
    }
    snprintf(text, sizeof(text), "%s", reason);
    a.status = status;
    a.reason = text;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_ABORT;
    msg.abort = &a;
    (void)coll__send(c, &msg);
}

/* Keep the fds the daemon passed (the pool, its doorbell, a device pool's chunks) in order for
 * the frames that carry them; close any beyond what a frame may carry. */
static void take_fds(coll_comm_t *c, struct msghdr *mh)
{
    for (struct cmsghdr *h = CMSG_FIRSTHDR(mh); h != NULL; h = CMSG_NXTHDR(mh, h)) {
        size_t n = h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS
                       ? (h->cmsg_len - CMSG_LEN(0)) / sizeof(int)
                       : 0;
        for (size_t k = 0; k < n; k++) {
            int fd;
            memcpy(&fd, CMSG_DATA(h) + k * sizeof(int), sizeof(fd));
            if (c->npassed < (int)COLL_FRAME_MAX_FDS) {
                c->passed_fd[c->npassed++] = fd;
            } else {
                close(fd);
            }
        }
    }
}

int coll__take_fd(coll_comm_t *c)
{
    int fd;

    if (c->npassed == 0) {
        return -1;
    }
    fd = c->passed_fd[0];
    memmove(&c->passed_fd[0], &c->passed_fd[1], (size_t)--c->npassed * sizeof(int));
    return fd;
}

/* Read what is available, waiting at most @p timeout_ms for the first byte. Lock not held. */
static coll_status_t read_some(coll_comm_t *c, int timeout_ms)
{
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(COLL_FRAME_MAX_FDS * sizeof(int))];
    } ctl;
    struct iovec iov;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    uint8_t *p;
    size_t len;
    ssize_t n;
    /* Without a time limit a blocking receive does the wait: one system call, not two. */
    int rc = timeout_ms < 0 ? 1 : poll(&pfd, 1, timeout_ms);

    if (rc <= 0) {
        return (rc == 0 || errno == EINTR) ? COLL_INPROGRESS : COLL_ERR_IO;
    }
    if (coll_frame_reader_space(&c->reader, 4096, &p, &len) != COLL_OK) {
        return COLL_ERR_NOMEM;
    }
    iov = (struct iovec){p, len};
    mh.msg_control = ctl.buf;
    mh.msg_controllen = sizeof(ctl.buf);
    do {
        n = recvmsg(c->fd, &mh, (timeout_ms < 0 ? 0 : MSG_DONTWAIT) | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {
        return COLL_ERR_CLOSED;
    }
    if (n > 0) {
        take_fds(c, &mh);
        coll_frame_reader_commit(&c->reader, (size_t)n);
    }
    return COLL_OK;
}

static void process_frames(coll_comm_t *c)
{
    const uint8_t *p;
    size_t n;
    coll_status_t st;
    char err[256];

    while ((st = coll_frame_reader_next(&c->reader, &p, &n)) == COLL_OK) {
        coll_daemon_msg_t *m;
        if ((st = coll_wire_unpack_daemon(p, n, &m, err, sizeof(err))) != COLL_OK) {
            coll__set_error(c, "from collectived: %s", err);
            c->broken = st;
            return;
        }
        c->hooks->dispatch(c, m);
        coll__wire__daemon_msg__free_unpacked(m, NULL);
    }
    if (st == COLL_ERR_PROTOCOL) {
        coll__set_error(c, "collectived sent a frame above %u bytes%s", COLL_FRAME_MAX_CLIENT,
                        c->hello_done ? "" : " as its first answer: is COLL_SOCKET the daemon's "
                                             "status socket instead of its client socket?");
        c->broken = COLL_ERR_PROTOCOL;
    }
}

static void cond_wait_ms(coll_comm_t *c, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (timeout_ms < 0) {
        timeout_ms = 1000;
    }
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&c->cond, &c->lock, &ts);
}

/* Read the socket (waiting at most @p timeout_ms) and handle what came. Lock held on entry and
 * exit; released while reading. */
static void wait_socket(coll_comm_t *c, int timeout_ms)
{
    coll_status_t st;

    pthread_mutex_unlock(&c->lock);
    st = read_some(c, timeout_ms);
    pthread_mutex_lock(&c->lock);
    if (st == COLL_OK) {
        process_frames(c);
    } else if (st != COLL_INPROGRESS) {
        if (c->last_error[0] == '\0' || c->broken == COLL_OK) {
            coll__set_error(c, "rank %d of job %s: connection to collectived lost (the daemon "
                            "exited, was killed or closed it: its log says which)", c->rank,
                            c->job);
        }
        c->broken = st == COLL_ERR_NOMEM ? st : COLL_ERR_CLOSED;
    }
}

/* The reading thread, once a tick: whether the daemon closed the socket. What it wrote before
 * is read and handled, then the end sets c->broken. */
static void check_closed(coll_comm_t *c, uint64_t now_ns)
{
    struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};

    if (now_ns < c->link_check_ns || c->broken != COLL_OK) {
        return;
    }
    c->link_check_ns = now_ns + coll_job_tick_ms(c->job_timeout_ms) * 1000000;
    if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLRDHUP | POLLHUP | POLLERR))) {
        return;
    }
    for (int i = 0; i < 64 && c->broken == COLL_OK; i++) { /* 64 reads of 4 KiB or more */
        wait_socket(c, 0);
    }
}

void coll__link_check(coll_comm_t *c, uint64_t now_ns)
{
    if (c->reading || now_ns < c->link_check_ns) {
        return;
    }
    c->reading = 1;
    check_closed(c, now_ns);
    c->reading = 0;
    if (c->broken != COLL_OK) {
        c->hooks->fail_all(c, c->broken);
    }
    pthread_cond_broadcast(&c->cond);
}

/* The daemon said it wrote socket frames we have not read yet. */
static int frames_pending(coll_comm_t *c)
{
    uint32_t f = atomic_load(&c->ctl->frames);
    if (f == c->frames_seen) {
        return 0;
    }
    c->frames_seen = f;
    return 1;
}

/* With a control block: take completions from its ring, read the socket only when the daemon
 * wrote to it, and sleep on the block's futex otherwise. The sleep is bounded so that a daemon
 * that died (and can no longer wake us) is noticed on the socket; so is a daemon that died
 * while the local ranks keep completing collectives among themselves, once a tick. */
static void wait_ctl(coll_comm_t *c, int timeout_ms)
{
    uint32_t seen = atomic_load(&c->ctl->events);
    int slice = timeout_ms < 0 || timeout_ms > COLL_CTL_POLL_MS ? COLL_CTL_POLL_MS : timeout_ms;
    coll__link_watch_t w;

    check_closed(c, coll__now_ns()); /* operations that complete in shared memory do not */
    if (c->broken != COLL_OK || c->hooks->progress(c) > 0) {
        return;
    }
    if (frames_pending(c)) {
        wait_socket(c, 0);
        return;
    }
    c->hooks->watch(c, &w); /* the other local ranks complete these without waking us */
    pthread_mutex_unlock(&c->lock);
    coll__link_sleep(c->ctl, &w, seen, slice);
    pthread_mutex_lock(&c->lock);
    if (c->hooks->progress(c) == 0 &&
        (frames_pending(c) || atomic_load(&c->ctl->events) == seen)) {
        wait_socket(c, 0);
    }
}

/* One round: read as the reader, or wait for the thread that is. Lock held on entry and exit. */
static void wait_round(coll_comm_t *c, int timeout_ms)
{
    if (c->reading) {
        cond_wait_ms(c, timeout_ms);
        return;
    }
    c->reading = 1;
    if (c->ctl != NULL) {
        wait_ctl(c, timeout_ms);
    } else {
        wait_socket(c, timeout_ms);
    }
    c->reading = 0;
    if (c->broken != COLL_OK) {
        c->hooks->fail_all(c, c->broken);
    }
    pthread_cond_broadcast(&c->cond);
}

coll_status_t coll__wait_flag(coll_comm_t *c, const int *flag, int timeout_ms)
{
    /* In nanoseconds: a deadline in truncated milliseconds would time out up to 1 ms early,
     * and callers with a deadline of their own take an early timeout for someone else's. */
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
                                       : coll__now_ns() + (uint64_t)timeout_ms * 1000000;

    if (timeout_ms == 0 && !*flag && c->broken == COLL_OK) {
        wait_round(c, 0); /* a poll: take what already arrived */
    }
    while (!*flag) {
        uint64_t now = coll__now_ns();
        int64_t left_ms = -1;
        if (c->broken != COLL_OK) {
            return c->broken;
        }
        if (deadline != UINT64_MAX) {
            if (now >= deadline) {
                return COLL_ERR_TIMEDOUT;
            }
            left_ms = (int64_t)((deadline - now + 999999) / 1000000); /* rounded up */
        }
        wait_round(c, (int)(left_ms > INT32_MAX ? INT32_MAX : left_ms));
    }
    return COLL_OK;
}
