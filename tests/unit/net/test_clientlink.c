/*
 * Unit tests of a reply that carries descriptors (daemon/net/clientlink.h,
 * coll_session_send_fds), on a real loop over a real socket pair, the test reading the client's
 * end itself: while earlier bytes still wait in the session's write queue, the reply goes out
 * after them, whole, with its descriptor (which names the file the daemon passed); while the
 * socket has no room at all (its buffer filled behind libuv's back), it goes out once the client
 * reads; a session that closes with such a reply still waiting drops it and leaks no descriptor.
 * Before these, a reply with descriptors was refused (COLL_ERR_IO) whenever anything waited
 * before it, and the rank waited out its 30 s.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/stream.h"
#include "core/session.h"
#include "net/clientlink.h"
#include "proto/frame.h"
#include "proto/wire.h"

#define BOUND_MS 5000          /* how long the loop may take to deliver what a test waits for */
#define BACKLOG (1u << 20)     /* bytes written before the reply: more than the socket holds */

typedef struct {
    uv_loop_t loop;
    coll_session_t s;          /* the daemon's end */
    int client;                /* the client's end, read by the test */
    int memfd;                 /* the descriptor the reply passes */
    uint8_t *got;              /* what the client read */
    size_t ngot;
    int fd_got;                /* the descriptor it received, -1: none yet */
    size_t fd_at, fd_end;      /* the bytes of the read that brought it */
} fx_t;

static int open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;

    assert_non_null(dir);
    while (readdir(dir) != NULL) {
        n++;
    }
    closedir(dir);
    return n;
}

static int setup(void **state)
{
    fx_t *fx = calloc(1, sizeof(*fx));
    int sv[2];

    assert_non_null(fx);
    assert_int_equal(uv_loop_init(&fx->loop), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    uv_pipe_init(&fx->loop, &fx->s.pipe, 0);
    fx->s.pipe.data = &fx->s;
    coll_list_init(&fx->s.fd_frames);
    coll_list_init(&fx->s.link);
    fx->s.id = 1;
    assert_int_equal(uv_pipe_open(&fx->s.pipe, sv[0]), 0);
    fx->client = sv[1];
    fx->memfd = memfd_create("clientlink-test", MFD_CLOEXEC);
    assert_true(fx->memfd >= 0);
    fx->got = malloc(2 * BACKLOG);
    assert_non_null(fx->got);
    fx->fd_got = -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fx_t *fx = *state;

    if (!uv_is_closing((uv_handle_t *)&fx->s.pipe)) {
        coll_session_drop_fd_frames(&fx->s);
        uv_close((uv_handle_t *)&fx->s.pipe, NULL);
    }
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    close(fx->client);
    close(fx->memfd);
    if (fx->fd_got >= 0) {
        close(fx->fd_got);
    }
    free(fx->got);
    free(fx);
    return 0;
}

/* The reply under test (a JoinReply naming a pool size) and its frame as the client must get it. */
static void reply(coll_daemon_msg_t *msg, Coll__Wire__JoinReply *r, uint8_t **frame_p,
                  size_t *len_p)
{
    coll__wire__daemon_msg__init(msg);
    coll__wire__join_reply__init(r);
    r->pool_bytes = 123456789;
    msg->body_case = COLL__WIRE__DAEMON_MSG__BODY_JOIN;
    msg->join = r;
    msg->version = COLL_WIRE_VERSION;
    assert_int_equal(coll_frame_pack(&msg->base, frame_p, len_p), COLL_OK);
}

/* Read what the client's end has now (non-blocking), keeping the first descriptor and where. */
static void client_read(fx_t *fx)
{
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(COLL_FRAME_MAX_FDS * sizeof(int))];
    } ctl;
    struct iovec iov = {fx->got + fx->ngot, 2 * BACKLOG - fx->ngot};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    ssize_t n = recvmsg(fx->client, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

    if (n <= 0) {
        assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        return;
    }
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            assert_int_equal(fx->fd_got, -1);
            assert_int_equal(c->cmsg_len, CMSG_LEN(sizeof(int)));
            memcpy(&fx->fd_got, CMSG_DATA(c), sizeof(int));
            fx->fd_at = fx->ngot;
            fx->fd_end = fx->ngot + (size_t)n;
        }
    }
    fx->ngot += (size_t)n;
}

/* Run the loop and read as the client until @p want bytes came, within BOUND_MS. */
static void drain(fx_t *fx, size_t want)
{
    struct timespec t0, t;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        client_read(fx);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (fx->ngot >= want ||
            (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > BOUND_MS) {
            break;
        }
        usleep(500);
    }
    assert_int_equal(fx->ngot, want);
}

/* @p backlog bytes (i % 251), then the reply whole, the memfd with its first byte (a read may
 * bring bytes before it too, never bytes after a descriptor's). */
static void check_received(const fx_t *fx, size_t backlog, const uint8_t *frame, size_t len)
{
    struct stat a, b;

    for (size_t i = 0; i < backlog; i++) {
        if (fx->got[i] != (uint8_t)(i % 251)) {
            fail_msg("byte %zu of the backlog is %u, not %u", i, fx->got[i], (unsigned)(i % 251));
        }
    }
    assert_memory_equal(fx->got + backlog, frame, len);
    assert_true(fx->fd_got >= 0);
    assert_true(fx->fd_at <= backlog && backlog < fx->fd_end);
    assert_int_equal(fstat(fx->fd_got, &a), 0);
    assert_int_equal(fstat(fx->memfd, &b), 0);
    assert_true(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
}

static uint8_t *backlog_bytes(size_t n)
{
    uint8_t *b = malloc(n);

    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        b[i] = (uint8_t)(i % 251);
    }
    return b;
}

static void test_after_queued_bytes(void **state)
{
    fx_t *fx = *state;
    uint8_t *junk = backlog_bytes(BACKLOG), *frame;
    coll_daemon_msg_t msg;
    Coll__Wire__JoinReply r;
    size_t len;

    reply(&msg, &r, &frame, &len);
    assert_int_equal(coll_stream_write((uv_stream_t *)&fx->s.pipe, junk, BACKLOG), COLL_OK);
    assert_true(uv_stream_get_write_queue_size((uv_stream_t *)&fx->s.pipe) > 0);
    assert_int_equal(coll_session_send_fds(&fx->s, &msg, &fx->memfd, 1), COLL_OK);
    drain(fx, BACKLOG + len);
    check_received(fx, BACKLOG, frame, len);
    assert_true(coll_list_empty(&fx->s.fd_frames));
    free(frame);
    free(junk);
}

/* The socket's buffer filled with write(2), libuv's queue empty: the reply waits for room. */
static void test_socket_full(void **state)
{
    fx_t *fx = *state;
    uint8_t *junk = backlog_bytes(BACKLOG), *frame;
    coll_daemon_msg_t msg;
    Coll__Wire__JoinReply r;
    uv_os_fd_t sock;
    size_t len, filled = 0;
    ssize_t n;

    reply(&msg, &r, &frame, &len);
    assert_int_equal(uv_fileno((uv_handle_t *)&fx->s.pipe, &sock), 0);
    while (filled < BACKLOG && (n = write(sock, junk + filled, BACKLOG - filled)) > 0) {
        filled += (size_t)n;
    }
    assert_true(filled < BACKLOG);
    assert_int_equal(coll_session_send_fds(&fx->s, &msg, &fx->memfd, 1), COLL_OK);
    assert_false(coll_list_empty(&fx->s.fd_frames));
    drain(fx, filled + len);
    check_received(fx, filled, frame, len);
    free(frame);
    free(junk);
}

static void test_close_drops(void **state)
{
    fx_t *fx = *state;
    uint8_t *junk = backlog_bytes(BACKLOG), *frame;
    coll_daemon_msg_t msg;
    Coll__Wire__JoinReply r;
    size_t len;
    int before = open_fds();

    reply(&msg, &r, &frame, &len);
    assert_int_equal(coll_stream_write((uv_stream_t *)&fx->s.pipe, junk, BACKLOG), COLL_OK);
    assert_int_equal(coll_session_send_fds(&fx->s, &msg, &fx->memfd, 1), COLL_OK);
    assert_int_equal(open_fds(), before + 1); /* the duplicate it holds */
    coll_session_drop_fd_frames(&fx->s);
    uv_close((uv_handle_t *)&fx->s.pipe, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(open_fds(), before - 1); /* and the session's socket */
    client_read(fx);
    assert_int_equal(fx->fd_got, -1);
    free(frame);
    free(junk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_after_queued_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_drops, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
