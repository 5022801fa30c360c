/*
 * Unit tests of accepting within limits (daemon/net/accept.h), on a real loop over real loopback
 * connections: at max open connections the acceptor waits (the next one stays in the backlog
 * until a place frees); one more from an address at max_per_addr is closed at once; a connection
 * whose descriptor would leave fewer than reserve free is closed at once; at the descriptor limit
 * (EMFILE) the waiting connection is taken with the spare descriptor and closed, and accepting
 * goes on once descriptors are free. Each refusal is counted once under its listener and reason,
 * and logged on the 1st, 2nd, 4th, 8th... of them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "../base/capture.h"
#include "../core/daemon_fixture.h"
#include "net/accept.h"

#define MAX_CONNS 8
#define BOUND_MS 2000 /* how long a loop may take to do what a test waits for */
#define QUIET_MS 200  /* how long a test watches for what must not happen */

typedef struct {
    coll_daemon_t d;
    uv_loop_t loop;
    coll_acceptor_t *a;
    uint16_t port;
    int got[MAX_CONNS];                   /* descriptors the callback was given */
    struct sockaddr_storage from[MAX_CONNS];
    int ngot;
} fx_t;

static void on_accept(coll_acceptor_t *a, int fd, const struct sockaddr_storage *peer)
{
    fx_t *fx = coll_acceptor_data(a);

    assert_true(fx->ngot < MAX_CONNS);
    fx->got[fx->ngot] = fd;
    fx->from[fx->ngot++] = *peer;
}

/* An acceptor on 127.0.0.1 (a port of the kernel's choice) for the control listener. */
static void open_acceptor(fx_t *fx, unsigned max, unsigned max_per_addr, unsigned reserve)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    coll_acceptor_params_t p = {.listener = COLL_LISTENER_CONTROL, .what = "test listener",
                                .max = max, .max_per_addr = max_per_addr, .reserve = reserve,
                                .cb = on_accept, .data = fx};
    char err[128];
    int fd;

    assert_int_equal(coll_acceptor_bind((struct sockaddr *)&sa, sizeof(sa), &fd, err,
                                        sizeof(err)), COLL_OK);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    fx->port = ntohs(sa.sin_port);
    assert_int_equal(coll_acceptor_open(&fx->d, fd, &p, &fx->a), COLL_OK);
}

static int setup(void **state)
{
    fx_t *fx = calloc(1, sizeof(*fx));

    assert_int_equal(uv_loop_init(&fx->loop), 0);
    daemon_fixture_init(&fx->d, &fx->loop, 1);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fx_t *fx = *state;

    for (int i = 0; i < fx->ngot; i++) {
        close(fx->got[i]);
        coll_acceptor_release(fx->a, &fx->from[i]);
    }
    coll_acceptor_close(fx->a);
    daemon_fixture_close_loop(&fx->loop);
    daemon_fixture_fini(&fx->d);
    free(fx);
    return 0;
}

/* A client connected to the acceptor from @p from_ip (a loopback address). */
static int connect_from(fx_t *fx, const char *from_ip)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(fx->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct sockaddr_in from = {.sin_family = AF_INET};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    assert_int_equal(inet_pton(AF_INET, from_ip, &from.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&from, sizeof(from)), 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
    return fd;
}

/* 1 when the daemon closed client @p fd: it reads as end of file, at once. */
static int closed_by_daemon(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;

    return poll(&p, 1, 0) == 1 && recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

typedef struct {
    fx_t *fx;
    int want;     /* connections given to the callback */
    int client;   /* or: this client closed by the daemon (-1: not awaited) */
} wait_t;

static int reached(void *arg)
{
    wait_t *w = arg;

    return w->client >= 0 ? closed_by_daemon(w->client) : w->fx->ngot >= w->want;
}

static int run_until_accepted(fx_t *fx, int n, unsigned ms)
{
    wait_t w = {fx, n, -1};

    return daemon_fixture_run_until(&fx->loop, reached, &w, ms);
}

static int run_until_closed(fx_t *fx, int client)
{
    wait_t w = {fx, 0, client};

    return daemon_fixture_run_until(&fx->loop, reached, &w, BOUND_MS);
}

static uint64_t refused(fx_t *fx, coll_refusal_t why)
{
    return fx->d.stats.refused[COLL_LISTENER_CONTROL][why];
}

static void test_names(void **state)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    char buf[80];

    v4->sin_family = AF_INET;
    v4->sin_port = htons(7000);
    inet_pton(AF_INET, "10.1.2.3", &v4->sin_addr);
    coll_acceptor_name(&ss, buf, sizeof(buf));
    assert_string_equal(buf, "10.1.2.3:7000");
    memset(&ss, 0, sizeof(ss));
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(443);
    inet_pton(AF_INET6, "fe80::1", &v6->sin6_addr);
    coll_acceptor_name(&ss, buf, sizeof(buf));
    assert_string_equal(buf, "[fe80::1]:443");
    ss.ss_family = AF_UNIX;
    coll_acceptor_name(&ss, buf, sizeof(buf));
    assert_string_equal(buf, "local");
}

/* At max open the third connection waits in the backlog (not closed), noted once; a release
 * lets it in. */
static void test_max_connections_wait(void **state)
{
    fx_t *fx = *state;
    int c[3];

    open_acceptor(fx, 2, 0, 0);
    for (int i = 0; i < 3; i++) {
        c[i] = connect_from(fx, "127.0.0.1");
    }
    assert_true(run_until_accepted(fx, 2, BOUND_MS));
    assert_false(run_until_accepted(fx, 3, QUIET_MS)); /* the bound passes: it waits */
    assert_int_equal(fx->ngot, 2);
    assert_int_equal(refused(fx, COLL_REFUSED_MAX_CONNECTIONS), 1);
    assert_false(closed_by_daemon(c[2]));
    close(fx->got[0]);
    coll_acceptor_release(fx->a, &fx->from[0]);
    fx->got[0] = fx->got[--fx->ngot];
    fx->from[0] = fx->from[fx->ngot];
    assert_true(run_until_accepted(fx, 2, BOUND_MS));
    assert_false(closed_by_daemon(c[2]));
    for (int i = 0; i < 3; i++) {
        close(c[i]);
    }
}

/* One more from an address at max_per_addr is closed at once; another address is let in. */
static void test_max_per_address(void **state)
{
    fx_t *fx = *state;
    int first, again, other;

    open_acceptor(fx, 0, 1, 0);
    first = connect_from(fx, "127.0.0.1");
    assert_true(run_until_accepted(fx, 1, BOUND_MS));
    again = connect_from(fx, "127.0.0.1");
    assert_true(run_until_closed(fx, again));
    assert_int_equal(refused(fx, COLL_REFUSED_PER_ADDRESS), 1);
    other = connect_from(fx, "127.0.0.2");
    assert_true(run_until_accepted(fx, 2, BOUND_MS));
    assert_string_equal(inet_ntoa(((struct sockaddr_in *)&fx->from[1])->sin_addr), "127.0.0.2");
    /* Released, the address has its place back. */
    close(fx->got[0]);
    coll_acceptor_release(fx->a, &fx->from[0]);
    fx->got[0] = fx->got[--fx->ngot];
    fx->from[0] = fx->from[fx->ngot];
    close(again);
    again = connect_from(fx, "127.0.0.1");
    assert_true(run_until_accepted(fx, 2, BOUND_MS));
    assert_int_equal(refused(fx, COLL_REFUSED_PER_ADDRESS), 1);
    close(first);
    close(again);
    close(other);
}

/* The lowest free descriptor: the one the next accept gets (Linux hands out the lowest). */
static int next_fd(void)
{
    int fd = dup(0);

    assert_true(fd >= 0);
    close(fd);
    return fd;
}

/* With the soft limit at fd + reserve, the connection accepted as fd is closed at once; one
 * descriptor more of room and the next is let in. */
static void test_fd_reserve(void **state)
{
    fx_t *fx = *state;
    struct rlimit saved, rl;
    int c, d, fd;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    open_acceptor(fx, 0, 0, 16);
    c = connect_from(fx, "127.0.0.1");
    fd = next_fd();
    rl = saved;
    rl.rlim_cur = (rlim_t)fd + 16;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(run_until_closed(fx, c));
    assert_int_equal(refused(fx, COLL_REFUSED_FD_RESERVE), 1);
    assert_int_equal(fx->ngot, 0);
    d = connect_from(fx, "127.0.0.1");
    fd = next_fd();
    rl.rlim_cur = (rlim_t)fd + 17;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(run_until_accepted(fx, 1, BOUND_MS));
    assert_int_equal(fx->got[0], fd);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    close(c);
    close(d);
}

/* At the descriptor limit the waiting connection is closed with the spare descriptor, counted
 * (EMFILE); with descriptors free again the next one is accepted. */
static void test_emfile_closes_and_recovers(void **state)
{
    fx_t *fx = *state;
    struct rlimit saved, rl;
    int c, d;

    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    open_acceptor(fx, 0, 0, 0);
    c = connect_from(fx, "127.0.0.1");
    capture_start(STDERR_FILENO);
    rl = saved;
    rl.rlim_cur = (rlim_t)next_fd();
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(run_until_closed(fx, c));
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    capture_end();
    assert_true(refused(fx, COLL_REFUSED_EMFILE) >= 1);
    assert_contains(capture_text(), "test listener: out of file descriptors");
    assert_int_equal(fx->ngot, 0);
    d = connect_from(fx, "127.0.0.1");
    assert_true(run_until_accepted(fx, 1, BOUND_MS));
    close(c);
    close(d);
}

/* A flood cannot flood the log: the 1st, 2nd, 4th and 8th refusal are logged, with the count. */
static void test_refusal_note_logs_powers_of_two(void **state)
{
    fx_t *fx = *state;
    const char *text, *p;
    int lines = 0;

    capture_start(STDERR_FILENO);
    for (int i = 0; i < 9; i++) {
        coll_refusal_note(&fx->d, COLL_LISTENER_STATUS, COLL_REFUSED_PROTOCOL, "refusal %d", i);
    }
    text = capture_end();
    for (p = text; (p = strstr(p, " warn ")) != NULL; p++) {
        lines++;
    }
    assert_int_equal(lines, 4);
    assert_int_equal(fx->d.stats.refused[COLL_LISTENER_STATUS][COLL_REFUSED_PROTOCOL], 9);
    assert_contains(text, "refusal 0 (");
    assert_contains(text, "refusal 1 (");
    assert_contains(text, "refusal 3 (");
    assert_contains(text, "refusal 7 (");
    assert_contains(text, "refusals of the status listener so far: 8)");
    assert_null(strstr(text, "refusal 8 ("));
}

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        FX_TEST(test_max_connections_wait),
        FX_TEST(test_max_per_address),
        FX_TEST(test_fd_reserve),
        FX_TEST(test_emfile_closes_and_recovers),
        FX_TEST(test_refusal_note_logs_powers_of_two),
    };
    return cmocka_run_group_tests_name("net_accept", tests, NULL, NULL);
}
