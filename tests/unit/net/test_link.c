/*
 * Unit tests of the control links' handshake and its bounds (daemon/net/link.h), on a real loop
 * over real loopback connections. The accepting side speaks first, one Challenge and nothing
 * else; a peer that sends anything but an Auth before authenticating, a wrong proof, more than
 * peer_handshake_bytes, a frame above them, or nothing within peer_handshake_ms is refused (the
 * link closed, the refusal counted under its reason) and nothing it sent reaches the owner; a
 * right proof gets the root's proof back (an AuthOk the test checks with the secret) and its
 * next message reaches the owner. Two daemons' links authenticate each other, or fail to with
 * another secret. The test plays the raw peer with the wire's own framing (proto/frame.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "../core/daemon_fixture.h"
#include "base/auth.h"
#include "net/link.h"
#include "proto/frame.h"
#include "proto/wire.h"

#define BOUND_MS 2000 /* how long a loop may take to do what a test waits for */
#define QUIET_MS 200  /* how long a test watches for what must not happen */

typedef struct {
    uv_loop_t loop;
    coll_daemon_t d, other;          /* the listening daemon; a connecting one */
    int msgs, msg_body;              /* what reached the owner: how many, the last body */
    int ups, downs;                  /* connecting side: on_up, on_down */
    int refusals;                    /* accepted links that went down */
    coll_status_t down_status;
    coll_peer_link_t *out;           /* the connecting side's link */
    int client;                      /* the raw peer's socket, -1 when none */
    uint8_t buf[4096];
    size_t have;
} fx_t;

static fx_t *fx; /* the test's, for the callbacks of accepted links (they have no owner) */

static void send_node_join(coll_peer_link_t *l);

/* The layer above, as the rendezvous would be: accepted links count what reaches them and
 * their going down; a connecting link sends a NodeJoin once up, and keeps why it went down. */
static void on_msg(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    fx->msgs++;
    fx->msg_body = m->body_case;
}

static void on_accepted_down(coll_peer_link_t *l, coll_status_t status, const char *why)
{
    fx->refusals++;
}

static void on_up(coll_peer_link_t *l)
{
    fx->ups++;
    send_node_join(l);
}

static void on_down(coll_peer_link_t *l, coll_status_t status, const char *why)
{
    fx->downs++;
    fx->down_status = status;
    fx->out = NULL;
}

static const coll_link_hooks_t listen_hooks = {NULL, on_msg, on_accepted_down};
static const coll_link_hooks_t connect_hooks = {on_up, on_msg, on_down};

static int setup(void **state)
{
    fx = calloc(1, sizeof(*fx));

    assert_int_equal(uv_loop_init(&fx->loop), 0);
    daemon_fixture_init(&fx->d, &fx->loop, 1);
    assert_int_equal(coll_link_listen(&fx->d, &listen_hooks), COLL_OK);
    fx->client = -1;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    if (fx->client >= 0) {
        close(fx->client);
    }
    coll_link_close_all(&fx->d);
    if (fx->other.loop != NULL) {
        coll_link_close_all(&fx->other);
    }
    daemon_fixture_close_loop(&fx->loop);
    daemon_fixture_fini(&fx->d);
    if (fx->other.loop != NULL) {
        daemon_fixture_fini(&fx->other);
    }
    free(fx);
    fx = NULL;
    return 0;
}

static uint64_t refused(coll_refusal_t why)
{
    return fx->d.stats.refused[COLL_LISTENER_CONTROL][why];
}

/* ---- the raw peer ------------------------------------------------------------------------- */

static void connect_raw(fx_t *fx)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};

    sa.sin_port = htons((uint16_t)atoi(strrchr(fx->d.control_addr, ':') + 1));
    fx->client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fx->client >= 0);
    assert_int_equal(connect(fx->client, (struct sockaddr *)&sa, sizeof(sa)), 0);
}

static void send_bytes(fx_t *fx, const void *p, size_t n)
{
    assert_int_equal(write(fx->client, p, n), (ssize_t)n);
}

static void send_raw(fx_t *fx, Coll__Wire__PeerMsg *m)
{
    uint8_t *frame;
    size_t len;

    m->version = COLL_WIRE_VERSION;
    assert_int_equal(coll_frame_pack(&m->base, &frame, &len), COLL_OK);
    send_bytes(fx, frame, len);
    free(frame);
}

/* Reads what the daemon sent; 1 when the client saw end of file. */
static int read_raw(fx_t *fx)
{
    struct pollfd p = {.fd = fx->client, .events = POLLIN};
    ssize_t n;

    while (poll(&p, 1, 0) == 1) {
        n = recv(fx->client, fx->buf + fx->have, sizeof(fx->buf) - fx->have, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            return 1;
        }
        if (n < 0) {
            return 0;
        }
        fx->have += (size_t)n;
    }
    return 0;
}

static int whole_frame(const fx_t *fx)
{
    uint32_t n;

    if (fx->have < COLL_FRAME_HDR) {
        return 0;
    }
    n = (uint32_t)fx->buf[0] | (uint32_t)fx->buf[1] << 8 | (uint32_t)fx->buf[2] << 16 |
        (uint32_t)fx->buf[3] << 24;
    return fx->have - COLL_FRAME_HDR >= n;
}

static int frame_came(void *arg)
{
    fx_t *fx = arg;

    read_raw(fx);
    return whole_frame(fx);
}

static int closed(void *arg)
{
    return read_raw(arg);
}

static int msg_came(void *arg)
{
    return ((fx_t *)arg)->msgs > 0;
}

static int went_down(void *arg)
{
    return ((fx_t *)arg)->downs > 0;
}

/* The next frame the daemon sent, decoded (fails the test when none comes). */
static coll_peer_msg_t *next_msg(fx_t *fx)
{
    coll_peer_msg_t *m = NULL;
    char err[256];
    uint32_t n;

    assert_true(daemon_fixture_run_until(&fx->loop, frame_came, fx, BOUND_MS));
    n = (uint32_t)fx->buf[0] | (uint32_t)fx->buf[1] << 8 | (uint32_t)fx->buf[2] << 16 |
        (uint32_t)fx->buf[3] << 24;
    assert_int_equal(coll_wire_unpack_peer(fx->buf + COLL_FRAME_HDR, n, &m, err, sizeof(err)),
                     COLL_OK);
    fx->have -= COLL_FRAME_HDR + n;
    memmove(fx->buf, fx->buf + COLL_FRAME_HDR + n, fx->have);
    return m;
}

/* The daemon's challenge: its nonce in @p nonce. */
static void take_challenge(fx_t *fx, uint8_t *nonce)
{
    coll_peer_msg_t *m = next_msg(fx);

    assert_int_equal(m->body_case, COLL__WIRE__PEER_MSG__BODY_CHALLENGE);
    assert_int_equal(m->challenge->nonce.len, COLL_AUTH_BYTES);
    memcpy(nonce, m->challenge->nonce.data, COLL_AUTH_BYTES);
    coll__wire__peer_msg__free_unpacked(m, NULL);
}

/* An Auth that answers @p their nonce with @p auth's key, asking for a proof of @p mine. */
static void send_auth(fx_t *fx, const coll_auth_t *auth, const uint8_t *their,
                      const uint8_t *mine)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Auth a = COLL__WIRE__AUTH__INIT;
    uint8_t mac[COLL_AUTH_BYTES];

    coll_auth_mac(auth, "node", their, mac);
    a.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    a.nonce = (ProtobufCBinaryData){COLL_AUTH_BYTES, (uint8_t *)mine};
    m.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH;
    m.auth = &a;
    send_raw(fx, &m);
}

/* A NodeJoin as a node sends it (the fuzz corpus' node-join). */
static void node_join(Coll__Wire__PeerMsg *m, Coll__Wire__NodeJoin *j)
{
    static uint32_t ranks[] = {2, 3};
    static uint8_t addr[] = {0x55, 0x43, 0x58, 0x01, 0x02, 0x03, 0x04, 0x05};

    j->job = "job-1";
    j->world_size = 4;
    j->n_ranks = 2;
    j->ranks = ranks;
    j->worker_address = (ProtobufCBinaryData){sizeof(addr), addr};
    j->host = "node-b";
    m->body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    m->node_join = j;
}

static void send_node_join(coll_peer_link_t *l)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;

    node_join(&m, &j);
    coll_link_send(l, &m);
}

static void assert_refused(coll_refusal_t why)
{
    assert_true(daemon_fixture_run_until(&fx->loop, closed, fx, BOUND_MS));
    assert_int_equal(refused(why), 1);
    assert_int_equal(fx->refusals, 1);
    assert_int_equal(fx->msgs, 0);
}

/* ---- the tests ---------------------------------------------------------------------------- */

static void test_challenge_first_and_only(void **state)
{
    uint8_t nonce[COLL_AUTH_BYTES];

    connect_raw(fx);
    take_challenge(fx, nonce);
    assert_false(daemon_fixture_run_until(&fx->loop, frame_came, fx, QUIET_MS));
    assert_int_equal(fx->have, 0);
    for (int r = 0; r < COLL_REFUSED_REASONS; r++) {
        assert_int_equal(refused(r), 0);
    }
}

/* A message other than Auth before authenticating (here an AuthOk, valid on the wire). */
static void test_message_before_auth_refused(void **state)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__AuthOk ok = COLL__WIRE__AUTH_OK__INIT;
    uint8_t nonce[COLL_AUTH_BYTES], mac[COLL_AUTH_BYTES] = {0};

    connect_raw(fx);
    take_challenge(fx, nonce);
    ok.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    m.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH_OK;
    m.auth_ok = &ok;
    send_raw(fx, &m);
    assert_refused(COLL_REFUSED_AUTH);
}

/* A NodeJoin before authenticating never reaches the owner. */
static void test_node_join_before_auth_refused(void **state)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;
    uint8_t nonce[COLL_AUTH_BYTES];

    connect_raw(fx);
    take_challenge(fx, nonce);
    node_join(&m, &j);
    send_raw(fx, &m);
    assert_refused(COLL_REFUSED_AUTH);
}

static void test_wrong_secret_refused(void **state)
{
    coll_auth_t wrong = fx->d.auth;
    uint8_t nonce[COLL_AUTH_BYTES], mine[COLL_AUTH_BYTES] = {7};

    wrong.key[0] ^= 1;
    connect_raw(fx);
    take_challenge(fx, nonce);
    send_auth(fx, &wrong, nonce, mine);
    assert_refused(COLL_REFUSED_AUTH);
}

/* peer_handshake_bytes in all before authenticating: a frame announced within the bound whose
 * bytes reach it is refused before it is whole. */
static void test_handshake_bytes_refused(void **state)
{
    size_t budget = fx->d.cfg.peer_handshake_bytes;
    uint8_t *bytes = calloc(1, budget);
    uint8_t nonce[COLL_AUTH_BYTES];
    uint32_t n = (uint32_t)budget;

    connect_raw(fx);
    take_challenge(fx, nonce);
    memcpy(bytes, &n, sizeof(n)); /* little endian, as the wire (x86, arm64) */
    send_bytes(fx, bytes, budget);
    assert_refused(COLL_REFUSED_HANDSHAKE_BYTES);
    free(bytes);
}

/* A frame announced above peer_handshake_bytes: refused on its header. */
static void test_frame_above_bound_refused(void **state)
{
    uint32_t n = (uint32_t)fx->d.cfg.peer_handshake_bytes + 1;
    uint8_t nonce[COLL_AUTH_BYTES];

    connect_raw(fx);
    take_challenge(fx, nonce);
    send_bytes(fx, &n, sizeof(n));
    assert_refused(COLL_REFUSED_PROTOCOL);
}

static void test_silent_peer_refused(void **state)
{

    fx->d.cfg.peer_handshake_ms = 100;
    connect_raw(fx);
    assert_refused(COLL_REFUSED_HANDSHAKE_TIME);
}

/* The right proof: the root proves the secret back on our nonce, and the next message reaches
 * the owner. */
static void test_authenticated_peer_served(void **state)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;
    uint8_t nonce[COLL_AUTH_BYTES], mine[COLL_AUTH_BYTES];
    coll_peer_msg_t *ok;

    coll_auth_nonce(mine);
    connect_raw(fx);
    take_challenge(fx, nonce);
    send_auth(fx, &fx->d.auth, nonce, mine);
    ok = next_msg(fx);
    assert_int_equal(ok->body_case, COLL__WIRE__PEER_MSG__BODY_AUTH_OK);
    assert_true(coll_auth_check(&fx->d.auth, "root", mine, ok->auth_ok->mac.data,
                                ok->auth_ok->mac.len));
    coll__wire__peer_msg__free_unpacked(ok, NULL);
    node_join(&m, &j);
    send_raw(fx, &m);
    assert_true(daemon_fixture_run_until(&fx->loop, msg_came, fx, BOUND_MS));
    assert_int_equal(fx->msgs, 1);
    assert_int_equal(fx->msg_body, COLL__WIRE__PEER_MSG__BODY_NODE_JOIN);
    for (int r = 0; r < COLL_REFUSED_REASONS; r++) {
        assert_int_equal(refused(r), 0);
    }
}

/* Two daemons with one secret: the connecting link comes up (its owner sends a NodeJoin, which
 * reaches the listening side's owner). */
static void test_two_daemons_authenticate(void **state)
{
    char err[256];

    daemon_fixture_init(&fx->other, &fx->loop, 1);
    assert_int_equal(coll_link_connect(&fx->other, fx->d.control_addr, &connect_hooks, fx,
                                       &fx->out, err, sizeof(err)), COLL_OK);
    assert_true(daemon_fixture_run_until(&fx->loop, msg_came, fx, BOUND_MS));
    assert_int_equal(fx->ups, 1);
    assert_int_equal(fx->downs, 0);
    assert_int_equal(fx->msgs, 1);
    assert_int_equal(fx->msg_body, COLL__WIRE__PEER_MSG__BODY_NODE_JOIN);
    assert_ptr_equal(fx->out->owner, fx);
}

/* Another secret: the root refuses it (counted), the connecting side hears it went down and
 * never comes up. */
static void test_two_daemons_other_secret(void **state)
{
    char err[256];

    daemon_fixture_init(&fx->other, &fx->loop, 2);
    assert_int_equal(coll_link_connect(&fx->other, fx->d.control_addr, &connect_hooks, fx,
                                       &fx->out, err, sizeof(err)), COLL_OK);
    assert_true(daemon_fixture_run_until(&fx->loop, went_down, fx, BOUND_MS));
    assert_int_equal(fx->ups, 0);
    assert_true(fx->down_status < 0);
    assert_int_equal(refused(COLL_REFUSED_AUTH), 1);
    assert_int_equal(fx->msgs, 0);
}

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FX_TEST(test_challenge_first_and_only),
        FX_TEST(test_message_before_auth_refused),
        FX_TEST(test_node_join_before_auth_refused),
        FX_TEST(test_wrong_secret_refused),
        FX_TEST(test_handshake_bytes_refused),
        FX_TEST(test_frame_above_bound_refused),
        FX_TEST(test_silent_peer_refused),
        FX_TEST(test_authenticated_peer_served),
        FX_TEST(test_two_daemons_authenticate),
        FX_TEST(test_two_daemons_other_secret),
    };
    return cmocka_run_group_tests_name("net_link", tests, NULL, NULL);
}
