/*
 * malformed_frames: one rank of a job that keeps running allreduces while rank 0 connects raw
 * Unix sockets to its daemon (COLL_SOCKET) and sends what no client library would:
 *
 *   hello            control: a valid Hello gets a HelloReply and the link stays open
 *   oversize         a frame header announcing 1 GiB
 *   garbage          a frame of valid length whose payload does not decode
 *   bad-version      a well-formed ClientMsg (Hello) with another protocol version
 *   submit-first     a well-formed Submit before any Hello
 *   hello-oversize   a valid Hello, then a 1 GiB header (an established session)
 *
 * For each attack the daemon must close that connection (read gives 0 or ECONNRESET) within
 * CLOSE_DEADLINE_MS, and the real ranks' allreduce in flight during the attack, and the ones
 * after it, must complete with correct results. Rank 0 prints its pid and each attack so that
 * malformed_frames.py can match the daemon's log lines to them.
 *
 * Exit status: 0 when every check passed, 1 otherwise (with a message), 2 on a usage error.
 */
#include <collective.h>

#include "proto/collective.pb-c.h"
#include "proto/frame.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define COUNT 100003
#define CLOSE_DEADLINE_MS 5000
#define STAY_OPEN_MS 300
#define WAIT_MS 30000
#define OPS_AFTER 2

typedef struct {
    coll_comm_t *comm;
    int rank, world;
    float *buf;
    int seq; /* operations run so far, the same on every rank */
} ctx_t;

typedef struct {
    const char *name;
    void (*run)(const char *socket_path);
} attack_t;

static int g_rank = -1;

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "malformed_frames: rank %d: FAIL: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the real job ------------------------------------------------------------------------- */

static float value(int rank, size_t i, int seq)
{
    return (float)((int)(((unsigned)rank + 1u) * (unsigned)(i % 89 + 1) + 7u * (unsigned)seq) %
                   512);
}

static coll_request_t *submit(ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st;

    for (size_t i = 0; i < COUNT; i++) {
        c->buf[i] = value(c->rank, i, c->seq);
    }
    st = coll_allreduce_async(c->comm, c->buf, c->buf, COUNT, COLL_FLOAT32, COLL_SUM, NULL, &req);
    if (st != COLL_INPROGRESS && st != COLL_OK) {
        die("allreduce %d: submit: %s: %s", c->seq, coll_err_name(st),
            coll_comm_last_error(c->comm));
    }
    return req; /* NULL when it completed at once */
}

static void finish(ctx_t *c, coll_request_t *req, const char *during)
{
    coll_status_t st = req != NULL ? coll_req_wait(req, WAIT_MS) : COLL_OK;
    coll_req_free(req);
    if (st != COLL_OK) {
        die("allreduce %d (%s): %s: %s", c->seq, during, coll_err_name(st),
            coll_comm_last_error(c->comm));
    }
    for (size_t i = 0; i < COUNT; i++) {
        float want = 0;
        for (int r = 0; r < c->world; r++) {
            want += value(r, i, c->seq);
        }
        if (c->buf[i] != want) {
            die("allreduce %d (%s): count %d: first bad index %zu: got %.9g, expected %.9g",
                c->seq, during, COUNT, i, c->buf[i], want);
        }
    }
    c->seq++;
}

/* ---- raw connections ---------------------------------------------------------------------- */

static int raw_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0 || strlen(path) >= sizeof(sa.sun_path)) {
        die("socket for %s: %s", path, strerror(errno));
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        die("connect to the daemon at %s: %s", path, strerror(errno));
    }
    return fd;
}

/* Send all of @p len bytes; a daemon that already closed the link (EPIPE, ECONNRESET) is fine:
 * the caller checks the close. */
static void raw_send(int fd, const void *p, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t n = send(fd, (const char *)p + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
            return;
        }
        if (n <= 0) {
            die("send on the raw connection: %s", strerror(errno));
        }
        off += (size_t)n;
    }
}

static void send_msg(int fd, Coll__Wire__ClientMsg *m)
{
    uint8_t *frame;
    size_t len;
    if (coll_frame_pack(&m->base, &frame, &len) != COLL_OK) {
        die("coll_frame_pack: out of memory");
    }
    raw_send(fd, frame, len);
    free(frame);
}

/* Read and drop whatever arrives until the daemon closes the link; die after the deadline. */
static void expect_closed(int fd, const char *what)
{
    long long start = now_ms(), left;
    char buf[4096];

    while ((left = start + CLOSE_DEADLINE_MS - now_ms()) > 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int k = poll(&p, 1, (int)left);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            break;
        }
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            printf("malformed_frames: %s: daemon closed the connection after %lld ms\n", what,
                   now_ms() - start);
            close(fd);
            return;
        }
        if (n < 0 && errno != EINTR && errno != EAGAIN) {
            die("%s: read on the raw connection: %s", what, strerror(errno));
        }
    }
    die("%s: the daemon did not close the connection within %d ms", what, CLOSE_DEADLINE_MS);
}

static void read_full(int fd, void *p, size_t len, long long deadline, const char *what)
{
    size_t off = 0;
    while (off < len) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        long long left = deadline - now_ms();
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) {
            die("%s: no complete answer from the daemon within %d ms", what, CLOSE_DEADLINE_MS);
        }
        ssize_t n = recv(fd, (char *)p + off, len - off, 0);
        if (n <= 0) {
            die("%s: the daemon closed the connection instead of answering (%s)", what,
                n == 0 ? "EOF" : strerror(errno));
        }
        off += (size_t)n;
    }
}

static void send_hello(int fd, uint32_t version)
{
    Coll__Wire__ClientMsg m = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Hello h = COLL__WIRE__HELLO__INIT;
    h.client = "malformed_frames";
    m.version = version;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    m.hello = &h;
    send_msg(fd, &m);
}

/* Read one frame and check it is a HelloReply of our protocol version. */
static void expect_hello_reply(int fd, const char *what)
{
    long long deadline = now_ms() + CLOSE_DEADLINE_MS;
    uint8_t hdr[COLL_FRAME_HDR], payload[COLL_FRAME_MAX_CLIENT];
    uint32_t len;
    Coll__Wire__DaemonMsg *m;

    read_full(fd, hdr, sizeof(hdr), deadline, what);
    len = (uint32_t)hdr[0] | (uint32_t)hdr[1] << 8 | (uint32_t)hdr[2] << 16 |
          (uint32_t)hdr[3] << 24;
    if (len > sizeof(payload)) {
        die("%s: the daemon announced a %u-byte frame", what, len);
    }
    read_full(fd, payload, len, deadline, what);
    m = coll__wire__daemon_msg__unpack(NULL, len, payload);
    if (m == NULL || m->version != COLL_WIRE_VERSION ||
        m->body_case != COLL__WIRE__DAEMON_MSG__BODY_HELLO) {
        die("%s: expected a HelloReply (version %u), got %s", what, COLL_WIRE_VERSION,
            m == NULL ? "an undecodable frame" : "another message");
    }
    coll__wire__daemon_msg__free_unpacked(m, NULL);
}

/* The link must stay open: nothing to read, no EOF, for a while. */
static void expect_open(int fd, const char *what)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int k = poll(&p, 1, STAY_OPEN_MS);
    if (k != 0) {
        die("%s: the daemon closed or wrote on a valid connection (poll revents 0x%x)", what,
            p.revents);
    }
}

static const uint8_t huge_header[4] = {0x00, 0x00, 0x00, 0x40}; /* 1 GiB, little-endian */

/* ---- attacks ------------------------------------------------------------------------------ */

static void attack_hello(const char *path)
{
    int fd = raw_connect(path);
    send_hello(fd, COLL_WIRE_VERSION);
    expect_hello_reply(fd, "hello");
    expect_open(fd, "hello");
    close(fd);
}

static void attack_oversize(const char *path)
{
    int fd = raw_connect(path);
    uint8_t junk[1024];
    memset(junk, 0x5a, sizeof(junk));
    raw_send(fd, huge_header, sizeof(huge_header));
    raw_send(fd, junk, sizeof(junk));
    expect_closed(fd, "oversize");
}

static void attack_garbage(const char *path)
{
    /* 0xff bytes: a field key whose varint never ends; protobuf-c rejects it. */
    uint8_t frame[4 + 64];
    int fd = raw_connect(path);
    frame[0] = 64;
    frame[1] = frame[2] = frame[3] = 0;
    memset(frame + 4, 0xff, 64);
    raw_send(fd, frame, sizeof(frame));
    expect_closed(fd, "garbage");
}

static void attack_bad_version(const char *path)
{
    int fd = raw_connect(path);
    send_hello(fd, 77); /* "version 77" in the daemon's log */
    expect_closed(fd, "bad-version");
}

static void attack_submit_first(const char *path)
{
    Coll__Wire__ClientMsg m = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
    int fd = raw_connect(path);

    s.req_id = 1;
    s.key = 1;
    s.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    s.dtype = COLL_FLOAT32;
    s.op = COLL_SUM;
    s.count = 16;
    m.version = COLL_WIRE_VERSION;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    m.submit = &s;
    send_msg(fd, &m);
    expect_closed(fd, "submit-first");
}

static void attack_hello_oversize(const char *path)
{
    int fd = raw_connect(path);
    send_hello(fd, COLL_WIRE_VERSION);
    expect_hello_reply(fd, "hello-oversize");
    raw_send(fd, huge_header, sizeof(huge_header));
    expect_closed(fd, "hello-oversize");
}

static const attack_t attacks[] = {
    {"hello", attack_hello},
    {"oversize", attack_oversize},
    {"garbage", attack_garbage},
    {"bad-version", attack_bad_version},
    {"submit-first", attack_submit_first},
    {"hello-oversize", attack_hello_oversize},
};

/* ---- main --------------------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    const char *path = getenv("COLL_SOCKET");
    ctx_t c = {0};
    coll_status_t st;
    void *p;

    if (argc != 1 || path == NULL) {
        fprintf(stderr, "usage: malformed_frames (under collective-launch, which sets "
                        "COLL_SOCKET and the job)\n");
        return 2;
    }
    if ((st = coll_comm_create(NULL, &c.comm)) != COLL_OK) {
        die("coll_comm_create: %s: %s", coll_err_name(st), coll_comm_last_error(NULL));
    }
    c.rank = g_rank = coll_comm_rank(c.comm);
    c.world = coll_comm_world_size(c.comm);
    if ((st = coll_mem_alloc(c.comm, COUNT * sizeof(float), &p)) != COLL_OK) {
        die("coll_mem_alloc: %s: %s", coll_err_name(st), coll_comm_last_error(c.comm));
    }
    c.buf = p;
    if (c.rank == 0) {
        printf("malformed_frames: attacker pid %d, daemon socket %s\n", (int)getpid(), path);
        fflush(stdout);
    }
    finish(&c, submit(&c), "before the attacks");
    for (size_t a = 0; a < sizeof(attacks) / sizeof(attacks[0]); a++) {
        coll_request_t *req = submit(&c);
        if (c.rank == 0) {
            printf("malformed_frames: attack %s\n", attacks[a].name);
            fflush(stdout);
            attacks[a].run(path);
        }
        finish(&c, req, attacks[a].name);
        for (int k = 0; k < OPS_AFTER; k++) {
            finish(&c, submit(&c), attacks[a].name);
        }
        fflush(stdout);
    }
    if (c.rank == 0) {
        printf("malformed_frames: %zu attacks, %d allreduces: ok\n",
               sizeof(attacks) / sizeof(attacks[0]), c.seq);
    }
    coll_comm_destroy(c.comm);
    return 0;
}
