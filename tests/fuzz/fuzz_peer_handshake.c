/*
 * libFuzzer harness: the control listener as a peer reaches it, state machine and all: the
 * acceptor (net/accept.h), the link's handshake and its bounds (net/link.c), and once
 * authenticated the root's rendezvous (net/rdv.c) with its check of worker addresses
 * (net/ucx_address.h), on a real loop over a real TCP connection on loopback. The first byte
 * picks the mode: even, the rest is what a peer that does not hold the secret sends; odd, the
 * harness first completes the handshake with the node secret (it answers the daemon's
 * challenge and checks its proof) and then sends the rest, so that it reaches the rendezvous.
 *
 * Invariants: before authentication nothing comes back but the one Challenge, the link never
 * buffers more than its first 4 KiB, and every link the daemon closed is counted once as a
 * refusal; after authentication every frame that comes back is whole, a valid PeerMsg and an
 * answer to a NodeJoin (a NodeJoinReply). The daemon never crashes, leaks or reads outside what
 * came (ASan, LeakSanitizer).
 */
#include "fuzz.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/auth.h"
#include "base/log.h"
#include "core/daemon.h"
#include "core/hooks.h"
#include "engine/crossover.h"
#include "net/link.h"
#include "net/rdv.h"
#include "proto/frame.h"
#include "proto/wire.h"

#define TURNS 64 /* loop turns per input: enough for every byte to be read and answered */

static coll_daemon_t d;
static uv_loop_t loop;
static const coll_job_hooks_t hooks = {.params = coll_crossover_fill};

static void setup(void)
{
    char *argv[] = {"fuzz", "--config", "none", "--log-level", "error", NULL};

    if (d.loop != NULL) {
        return;
    }
    if (coll_config_load(5, argv, &d.cfg) != COLL_CONFIG_RUN ||
        coll_log_configure(d.cfg.log_level, "") < 0) {
        abort();
    }
    free(d.cfg.listen);
    d.cfg.listen = strdup("127.0.0.1:0");
    d.cfg.fd_reserve = 0;
    uv_loop_init(&loop);
    d.loop = &loop;
    coll_list_init(&d.sessions);
    coll_list_init(&d.jobs);
    coll_list_init(&d.peer_links);
    coll_list_init(&d.rdvs);
    coll_list_init(&d.barred_jobs);
    coll_stats_init(&d.stats, 0);
    coll_auth_load(&d.auth, "", 0, 0);
    for (unsigned i = 0; i < COLL_AUTH_BYTES; i++) {
        d.auth.key[i] = (uint8_t)(i * 7 + 1);
    }
    d.auth.enabled = 1;
    d.auth.mode = COLL_PEERS_AUTHENTICATED;
    snprintf(d.hostname, sizeof(d.hostname), "fuzz");
    /* The root's rendezvous asks the job layer for the job parameters it adds before it
     * answers (core/hooks.h): without the hook a complete rendezvous dereferenced NULL. The
     * harness has no local jobs, so that is the only hook it needs (the job layer's own). */
    d.job_hooks = &hooks;
}

static void turn(int n)
{
    for (int i = 0; i < n; i++) {
        uv_run(&loop, UV_RUN_NOWAIT);
    }
}

/* A connection to the listener. Closed with a reset (SO_LINGER 0): a connection per input
 * leaves no TIME_WAIT behind, which at thousands of inputs a second would use up the ephemeral
 * ports within a 35 s run. The daemon's side of a link it closed first does wait in TIME_WAIT;
 * a new connection whose ports happen to match one waits for the SYN to be sent again (1 s),
 * and libFuzzer's timer signal can interrupt that connect(): it then completes in the
 * background, and the harness waits for it (at most 10 s). */
static int connect_root(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct linger reset = {.l_onoff = 1, .l_linger = 0};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc, soerr = 0;
    socklen_t sl = sizeof(soerr);

    sa.sin_port = htons((uint16_t)atoi(strrchr(d.control_addr, ':') + 1));
    FUZZ_CHECK(fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) == 0,
               "socket: %m");
    rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    for (int i = 0; i < 10 && rc != 0 && errno == EINTR; i++) {
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        if ((rc = poll(&p, 1, 1000)) > 0 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0) {
            rc = soerr == 0 ? 0 : -1;
            errno = soerr;
        } else if (rc >= 0) {
            rc = -1;
            errno = EINTR;
        }
    }
    FUZZ_CHECK(rc == 0, "cannot connect to the control listener %s: %m", d.control_addr);
    return fd;
}

/* What the daemon wrote back, once the loop has run: appended to @p buf (at most @p cap). */
static size_t drain(int fd, uint8_t *buf, size_t have, size_t cap)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ssize_t n;

    turn(TURNS);
    while (have < cap && poll(&p, 1, 0) > 0 && (n = read(fd, buf + have, cap - have)) > 0) {
        have += (size_t)n;
        turn(4);
    }
    return have;
}

/* The next whole frame of @p buf from @p *off, decoded (NULL when none is whole). */
static coll_peer_msg_t *next_frame(const uint8_t *buf, size_t len, size_t *off)
{
    char err[256];
    uint32_t n;
    coll_peer_msg_t *m = NULL;

    if (len - *off < COLL_FRAME_HDR) {
        return NULL;
    }
    n = (uint32_t)buf[*off] | (uint32_t)buf[*off + 1] << 8 | (uint32_t)buf[*off + 2] << 16 |
        (uint32_t)buf[*off + 3] << 24;
    if (len - *off - COLL_FRAME_HDR < n) {
        return NULL;
    }
    FUZZ_CHECK(coll_wire_unpack_peer(buf + *off + COLL_FRAME_HDR, n, &m, err, sizeof(err)) ==
                   COLL_OK, "the daemon sent a frame it would refuse: %s", err);
    *off += COLL_FRAME_HDR + n;
    return m;
}

static void send_frame(int fd, Coll__Wire__PeerMsg *m)
{
    uint8_t *frame;
    size_t len;

    m->version = COLL_WIRE_VERSION;
    FUZZ_CHECK(coll_frame_pack(&m->base, &frame, &len) == COLL_OK, "packing a frame");
    FUZZ_CHECK(write(fd, frame, len) == (ssize_t)len, "writing a frame");
    free(frame);
}

/* The node's side of the handshake (auth.h): answer the challenge, check the proof. */
static void authenticate(int fd)
{
    uint8_t buf[512], mac[COLL_AUTH_BYTES], nonce[COLL_AUTH_BYTES];
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Auth a = COLL__WIRE__AUTH__INIT;
    size_t len = drain(fd, buf, 0, sizeof(buf)), off = 0;
    coll_peer_msg_t *m = next_frame(buf, len, &off);

    FUZZ_CHECK(m != NULL && m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE,
               "no challenge from the root");
    coll_auth_mac(&d.auth, "node", m->challenge->nonce.data, mac);
    coll__wire__peer_msg__free_unpacked(m, NULL);
    coll_auth_nonce(nonce);
    a.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    a.nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
    out.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH;
    out.auth = &a;
    send_frame(fd, &out);
    len = drain(fd, buf, 0, sizeof(buf));
    off = 0;
    m = next_frame(buf, len, &off);
    FUZZ_CHECK(m != NULL && m->body_case == COLL__WIRE__PEER_MSG__BODY_AUTH_OK &&
                   coll_auth_check(&d.auth, "root", nonce, m->auth_ok->mac.data,
                                   m->auth_ok->mac.len), "no valid proof from the root");
    coll__wire__peer_msg__free_unpacked(m, NULL);
}

static uint64_t refusals(void)
{
    uint64_t n = 0;
    for (unsigned r = 0; r < COLL_REFUSED_REASONS; r++) {
        n += d.stats.refused[COLL_LISTENER_CONTROL][r];
    }
    return n;
}

/* Before authentication: one Challenge back at most, a bounded buffer, a counted close. */
static void check_unauthenticated(const uint8_t *back, size_t len, uint64_t before)
{
    coll_peer_link_t *l, *tmp;
    coll_peer_msg_t *m;
    size_t off = 0;
    int frames = 0;

    while ((m = next_frame(back, len, &off)) != NULL) {
        FUZZ_CHECK(m->body_case == COLL__WIRE__PEER_MSG__BODY_CHALLENGE && frames++ == 0,
                   "an unauthenticated peer got body %d", (int)m->body_case);
        coll__wire__peer_msg__free_unpacked(m, NULL);
    }
    coll_list_for_each_safe(l, tmp, &d.peer_links, coll_peer_link_t, link)
    {
        FUZZ_CHECK(!l->trusted && l->reader.cap <= 4096,
                   "an unauthenticated link is trusted (%d) or buffers %zu bytes", l->trusted,
                   l->reader.cap);
    }
    FUZZ_CHECK(refusals() - before == (coll_list_empty(&d.peer_links) ? 1u : 0u),
               "%llu refusals counted for one link that is %s",
               (unsigned long long)(refusals() - before),
               coll_list_empty(&d.peer_links) ? "closed" : "open");
}

/* After authentication: whole, valid frames, and nothing but answers to NodeJoins. */
static void check_authenticated(const uint8_t *back, size_t len)
{
    coll_peer_msg_t *m;
    size_t off = 0;

    while ((m = next_frame(back, len, &off)) != NULL) {
        FUZZ_CHECK(m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY,
                   "an authenticated peer got body %d", (int)m->body_case);
        coll__wire__peer_msg__free_unpacked(m, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t back[1 << 16];
    uint64_t before;
    size_t len = 0;
    int fd, authed;

    if (size < 1) {
        return 0;
    }
    setup();
    FUZZ_CHECK(coll_rdv_listen(&d) == COLL_OK, "the control listener did not open");
    authed = data[0] & 1;
    fd = connect_root();
    before = refusals();
    if (authed) {
        authenticate(fd);
    }
    if (size > 1 && write(fd, data + 1, size - 1) < 0) {
        FUZZ_CHECK(0, "writing the input");
    }
    len = drain(fd, back, 0, sizeof(back));
    if (authed) {
        check_authenticated(back, len);
    } else {
        check_unauthenticated(back, len, before);
    }
    close(fd);
    coll_rdv_close_all(&d);
    turn(TURNS);
    return 0;
}
