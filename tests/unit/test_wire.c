/* Unit tests of the wire decoders and their validation (proto/wire.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ctl.h"
#include "frame.h"
#include "wire.h"

#define ERRLEN 256
#define FUZZ_ROUNDS 10000

typedef enum { KIND_CLIENT, KIND_DAEMON, KIND_PEER } kind_t;

/* An encoded envelope. */
typedef struct {
    uint8_t *buf;
    size_t len;
} enc_t;

static enc_t encode(const ProtobufCMessage *m)
{
    enc_t e;
    e.len = protobuf_c_message_get_packed_size(m);
    e.buf = malloc(e.len ? e.len : 1);
    assert_non_null(e.buf);
    assert_int_equal(protobuf_c_message_pack(m, e.buf), e.len);
    return e;
}

/* Decode @p buf as @p kind, free the message on success, and return the status. */
static coll_status_t decode(kind_t kind, const uint8_t *buf, size_t len, char *err, size_t errlen)
{
    coll_client_msg_t *c;
    coll_daemon_msg_t *d;
    coll_peer_msg_t *p;
    coll_status_t st;

    if (kind == KIND_CLIENT) {
        st = coll_wire_unpack_client(buf, len, &c, err, errlen);
        if (st == COLL_OK) {
            coll__wire__client_msg__free_unpacked(c, NULL);
        }
    } else if (kind == KIND_DAEMON) {
        st = coll_wire_unpack_daemon(buf, len, &d, err, errlen);
        if (st == COLL_OK) {
            coll__wire__daemon_msg__free_unpacked(d, NULL);
        }
    } else {
        st = coll_wire_unpack_peer(buf, len, &p, err, errlen);
        if (st == COLL_OK) {
            coll__wire__peer_msg__free_unpacked(p, NULL);
        }
    }
    return st;
}

static coll_status_t decode_msg(kind_t kind, const ProtobufCMessage *m, char *err)
{
    enc_t e = encode(m);
    coll_status_t st;
    err[0] = '\0';
    st = decode(kind, e.buf, e.len, err, ERRLEN);
    free(e.buf);
    return st;
}

static void expect_ok(kind_t kind, const ProtobufCMessage *m)
{
    char err[ERRLEN];
    coll_status_t st = decode_msg(kind, m, err);
    if (st != COLL_OK) {
        fail_msg("expected COLL_OK, got %s: %s", coll_err_name(st), err);
    }
}

/* Expect @p st with an error text that contains @p field. */
static void expect_err(kind_t kind, const ProtobufCMessage *m, coll_status_t want,
                       const char *field)
{
    char err[ERRLEN];
    coll_status_t st = decode_msg(kind, m, err);
    if (st != want) {
        fail_msg("expected %s, got %s (%s)", coll_err_name(want), coll_err_name(st), err);
    }
    if (strstr(err, field) == NULL) {
        fail_msg("error text \"%s\" does not name \"%s\"", err, field);
    }
}

/* ---- message builders: every builder gives a valid message ---- */

typedef struct {
    Coll__Wire__ClientMsg msg;
    Coll__Wire__Hello hello;
    Coll__Wire__JoinJob join;
    Coll__Wire__MemAlloc alloc;
    Coll__Wire__MemFree free;
    Coll__Wire__Submit submit;
} client_t;

static void client_init(client_t *c)
{
    static const Coll__Wire__ClientMsg msg = COLL__WIRE__CLIENT_MSG__INIT;
    static const Coll__Wire__Hello hello = COLL__WIRE__HELLO__INIT;
    static const Coll__Wire__JoinJob join = COLL__WIRE__JOIN_JOB__INIT;
    static const Coll__Wire__MemAlloc alloc = COLL__WIRE__MEM_ALLOC__INIT;
    static const Coll__Wire__MemFree mfree = COLL__WIRE__MEM_FREE__INIT;
    static const Coll__Wire__Submit submit = COLL__WIRE__SUBMIT__INIT;

    c->msg = msg;
    c->msg.version = COLL_WIRE_VERSION;
    c->hello = hello;
    c->hello.client = "coll-train pid 1234";
    c->join = join;
    c->join.job = "job-1.a_b:c";
    c->join.rank = 5;
    c->join.world_size = 8;
    c->join.local_rank = 1;
    c->join.local_size = 4;
    c->join.root = "10.0.0.1:29510";
    c->alloc = alloc;
    c->alloc.req_id = 7;
    c->alloc.bytes = 1 << 20;
    c->free = mfree;
    c->free.offset = 4096;
    c->submit = submit;
    c->submit.req_id = 9;
    c->submit.coll = COLL__WIRE__COLLECTIVE__ALLREDUCE;
    c->submit.dtype = COLL_FLOAT32;
    c->submit.op = COLL_SUM;
    c->submit.count = 1000;
}

static const ProtobufCMessage *client_hello(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    c->msg.hello = &c->hello;
    return &c->msg.base;
}

static const ProtobufCMessage *client_join(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_JOIN;
    c->msg.join = &c->join;
    return &c->msg.base;
}

static const ProtobufCMessage *client_alloc(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_ALLOC;
    c->msg.alloc = &c->alloc;
    return &c->msg.base;
}

static const ProtobufCMessage *client_free(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    c->msg.free = &c->free;
    return &c->msg.base;
}

static const ProtobufCMessage *client_submit(client_t *c)
{
    c->msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    c->msg.submit = &c->submit;
    return &c->msg.base;
}

typedef struct {
    Coll__Wire__DaemonMsg msg;
    Coll__Wire__HelloReply hello;
    Coll__Wire__JoinReply join;
    Coll__Wire__MemAllocReply alloc;
    Coll__Wire__Complete complete;
} daemon_t;

static void daemon_init(daemon_t *d)
{
    static const Coll__Wire__DaemonMsg msg = COLL__WIRE__DAEMON_MSG__INIT;
    static const Coll__Wire__HelloReply hello = COLL__WIRE__HELLO_REPLY__INIT;
    static const Coll__Wire__JoinReply join = COLL__WIRE__JOIN_REPLY__INIT;
    static const Coll__Wire__MemAllocReply alloc = COLL__WIRE__MEM_ALLOC_REPLY__INIT;
    static const Coll__Wire__Complete complete = COLL__WIRE__COMPLETE__INIT;

    d->msg = msg;
    d->msg.version = COLL_WIRE_VERSION;
    d->hello = hello;
    d->hello.daemon = "collectived 0.1";
    d->join = join;
    d->join.pool_bytes = 1 << 28;
    d->join.node_count = 2;
    d->alloc = alloc;
    d->alloc.req_id = 7;
    d->alloc.offset = 128;
    d->alloc.bytes = 64;
    d->complete = complete;
    d->complete.req_id = 9;
    d->complete.algo = "ring";
}

static const ProtobufCMessage *daemon_body(daemon_t *d, Coll__Wire__DaemonMsg__BodyCase body)
{
    d->msg.body_case = body;
    switch (body) {
    case COLL__WIRE__DAEMON_MSG__BODY_HELLO: d->msg.hello = &d->hello; break;
    case COLL__WIRE__DAEMON_MSG__BODY_JOIN: d->msg.join = &d->join; break;
    case COLL__WIRE__DAEMON_MSG__BODY_ALLOC: d->msg.alloc = &d->alloc; break;
    case COLL__WIRE__DAEMON_MSG__BODY_COMPLETE: d->msg.complete = &d->complete; break;
    default: break;
    }
    return &d->msg.base;
}

#define NODES 3

typedef struct {
    Coll__Wire__PeerMsg msg;
    Coll__Wire__NodeJoin join;
    Coll__Wire__NodeJoinReply reply;
    Coll__Wire__JobParams params;
    Coll__Wire__NodeInfo info[NODES];
    Coll__Wire__NodeInfo *infop[NODES];
    uint32_t ranks[NODES][2];
    uint8_t addr[16];
} peer_t;

static void peer_init(peer_t *p)
{
    static const Coll__Wire__PeerMsg msg = COLL__WIRE__PEER_MSG__INIT;
    static const Coll__Wire__NodeJoin join = COLL__WIRE__NODE_JOIN__INIT;
    static const Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;
    static const Coll__Wire__NodeInfo info = COLL__WIRE__NODE_INFO__INIT;
    static const Coll__Wire__JobParams params = COLL__WIRE__JOB_PARAMS__INIT;

    memset(p->addr, 0xa5, sizeof(p->addr));
    p->params = params;
    p->params.segment_bytes = 256 * 1024;
    p->params.pipeline_depth = 4;
    p->params.rd_max_bytes = 64 * 1024;
    p->msg = msg;
    p->msg.version = COLL_WIRE_VERSION;
    p->join = join;
    p->join.job = "job-1";
    p->join.world_size = 2 * NODES;
    p->join.n_ranks = 2;
    p->join.ranks = p->ranks[1];
    p->join.worker_address.len = sizeof(p->addr);
    p->join.worker_address.data = p->addr;
    p->join.host = "node1";
    p->reply = reply;
    p->reply.node_rank = 1;
    p->reply.n_nodes = NODES;
    p->reply.nodes = p->infop;
    p->reply.params = &p->params;
    for (int i = 0; i < NODES; i++) {
        p->ranks[i][0] = (uint32_t)(2 * i);
        p->ranks[i][1] = (uint32_t)(2 * i + 1);
        p->info[i] = info;
        p->info[i].n_ranks = 2;
        p->info[i].ranks = p->ranks[i];
        p->info[i].worker_address.len = sizeof(p->addr);
        p->info[i].worker_address.data = p->addr;
        p->info[i].host = "node";
        p->infop[i] = &p->info[i];
    }
}

static const ProtobufCMessage *peer_join(peer_t *p)
{
    p->msg.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    p->msg.node_join = &p->join;
    return &p->msg.base;
}

static const ProtobufCMessage *peer_reply(peer_t *p)
{
    p->msg.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
    p->msg.node_join_reply = &p->reply;
    return &p->msg.base;
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* ---- valid messages ---- */

static void test_client_valid_messages_accepted(void **state)
{
    client_t c;
    client_init(&c);
    expect_ok(KIND_CLIENT, client_hello(&c));
    expect_ok(KIND_CLIENT, client_join(&c));
    expect_ok(KIND_CLIENT, client_alloc(&c));
    expect_ok(KIND_CLIENT, client_free(&c));
    expect_ok(KIND_CLIENT, client_submit(&c));
}

static void test_client_join_fields_decoded(void **state)
{
    client_t c;
    coll_client_msg_t *m;
    char err[ERRLEN];
    enc_t e;

    client_init(&c);
    e = encode(client_join(&c));
    assert_int_equal(coll_wire_unpack_client(e.buf, e.len, &m, err, sizeof(err)), COLL_OK);
    assert_int_equal(m->body_case, COLL__WIRE__CLIENT_MSG__BODY_JOIN);
    assert_string_equal(m->join->job, "job-1.a_b:c");
    assert_int_equal(m->join->rank, 5);
    assert_int_equal(m->join->world_size, 8);
    assert_int_equal(m->join->local_rank, 1);
    assert_int_equal(m->join->local_size, 4);
    assert_string_equal(m->join->root, "10.0.0.1:29510");
    coll__wire__client_msg__free_unpacked(m, NULL);
    free(e.buf);
}

static void test_daemon_valid_messages_accepted(void **state)
{
    daemon_t d;
    daemon_init(&d);
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_HELLO));
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_JOIN));
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC));
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE));
}

static void test_peer_valid_messages_accepted(void **state)
{
    peer_t p;
    peer_init(&p);
    expect_ok(KIND_PEER, peer_join(&p));
    expect_ok(KIND_PEER, peer_reply(&p));
}

static void test_peer_error_reply_needs_no_nodes(void **state)
{
    peer_t p;
    peer_init(&p);
    p.reply.status = COLL_ERR_RENDEZVOUS;
    p.reply.error = "world size mismatch";
    p.reply.n_nodes = 0;
    p.reply.node_rank = 7;
    expect_ok(KIND_PEER, peer_reply(&p));
}

/* ---- version and body ---- */

static void test_wrong_version_rejected(void **state)
{
    const uint32_t versions[] = {0, COLL_WIRE_VERSION + 1, 0xffffffffu};
    client_t c;
    daemon_t d;
    peer_t p;

    client_init(&c);
    daemon_init(&d);
    peer_init(&p);
    for (int i = 0; i < 3; i++) {
        c.msg.version = d.msg.version = p.msg.version = versions[i];
        expect_err(KIND_CLIENT, client_hello(&c), COLL_ERR_VERSION, "version");
        expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_HELLO),
                   COLL_ERR_VERSION, "version");
        expect_err(KIND_PEER, peer_join(&p), COLL_ERR_VERSION, "version");
    }
}

static void test_missing_body_rejected(void **state)
{
    client_t c;
    daemon_t d;
    peer_t p;

    client_init(&c);
    daemon_init(&d);
    peer_init(&p);
    expect_err(KIND_CLIENT, &c.msg.base, COLL_ERR_PROTOCOL, "body");
    expect_err(KIND_DAEMON, &d.msg.base, COLL_ERR_PROTOCOL, "body");
    expect_err(KIND_PEER, &p.msg.base, COLL_ERR_PROTOCOL, "body");
}

/* ---- undecodable bytes ---- */

static void test_garbage_bytes_rejected(void **state)
{
    static const struct {
        uint8_t bytes[12];
        size_t len;
    } cases[] = {
        {{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 12},
        {{0x0f}, 1},                         /* wire type 7 does not exist */
        {{0x08, 0x80}, 2},                   /* varint cut short */
        {{0x08, 0x01, 0x12, 0x05, 0x0a}, 5}, /* body announces 5 bytes, 1 follows */
        {{0x08, 0x01, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f}, 8}, /* body of 4 GiB */
        {{0x00}, 1},                                           /* field number 0 */
    };
    char err[ERRLEN];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (kind_t k = KIND_CLIENT; k <= KIND_PEER; k++) {
            coll_status_t st = decode(k, cases[i].bytes, cases[i].len, err, sizeof(err));
            if (st != COLL_ERR_PROTOCOL) {
                fail_msg("case %zu kind %d: got %s", i, k, coll_err_name(st));
            }
        }
    }
}

/* Every proper prefix of a valid envelope is undecodable or has no body. */
static void expect_prefixes_rejected(kind_t kind, const ProtobufCMessage *m)
{
    enc_t e = encode(m);
    char err[ERRLEN];

    for (size_t n = 1; n < e.len; n++) {
        coll_status_t st = decode(kind, e.buf, n, err, sizeof(err));
        if (st != COLL_ERR_PROTOCOL) {
            fail_msg("prefix of %zu/%zu bytes: got %s", n, e.len, coll_err_name(st));
        }
    }
    free(e.buf);
}

static void test_truncated_encodings_rejected(void **state)
{
    client_t c;
    daemon_t d;
    peer_t p;

    client_init(&c);
    daemon_init(&d);
    peer_init(&p);
    expect_prefixes_rejected(KIND_CLIENT, client_hello(&c));
    expect_prefixes_rejected(KIND_CLIENT, client_join(&c));
    expect_prefixes_rejected(KIND_CLIENT, client_submit(&c));
    expect_prefixes_rejected(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE));
    expect_prefixes_rejected(KIND_PEER, peer_join(&p));
    expect_prefixes_rejected(KIND_PEER, peer_reply(&p));
}

static void test_error_text_truncated_to_errlen(void **state)
{
    client_t c;
    char err[8];
    enc_t e;

    client_init(&c);
    c.join.rank = 100;
    e = encode(client_join(&c));
    memset(err, 'x', sizeof(err));
    assert_int_equal(decode(KIND_CLIENT, e.buf, e.len, err, sizeof(err)), COLL_ERR_PROTOCOL);
    assert_int_equal(strlen(err), sizeof(err) - 1);
    free(e.buf);
}

/* ---- JoinJob fields ---- */

static void test_join_rank_at_world_size_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.rank = c.join.world_size;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "rank 8 >= world size 8");
}

static void test_join_local_rank_at_local_size_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.local_rank = c.join.local_size;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "local rank");
}

static void test_join_local_size_above_world_size_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.local_size = c.join.world_size + 1;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "local size");
}

static void test_join_local_size_zero_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.local_size = 0;
    c.join.local_rank = 0;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "local size");
}

static void test_join_world_size_zero_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.world_size = 0;
    c.join.rank = 0;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "world size");
}

static void test_join_world_size_above_max_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.world_size = COLL_WORLD_MAX + 1;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "world size");
}

static void test_join_world_size_at_max_accepted(void **state)
{
    client_t c;
    client_init(&c);
    c.join.world_size = COLL_WORLD_MAX;
    c.join.rank = COLL_WORLD_MAX - 1;
    c.join.local_size = COLL_WORLD_MAX;
    c.join.local_rank = COLL_WORLD_MAX - 1;
    expect_ok(KIND_CLIENT, client_join(&c));
}

static void test_join_job_id_empty_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.join.job = "";
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "job id");
}

static void test_join_job_id_length_limit(void **state)
{
    char *max = repeat('j', COLL_JOB_ID_MAX), *over = repeat('j', COLL_JOB_ID_MAX + 1);
    client_t c;

    client_init(&c);
    c.join.job = max;
    expect_ok(KIND_CLIENT, client_join(&c));
    c.join.job = over;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "job id");
    free(max);
    free(over);
}

static void test_join_job_id_illegal_chars_rejected(void **state)
{
    const char *bad[] = {"a b", "a/b", "job\n", "caf\xc3\xa9", "a,b", "$job", "a\tb"};
    client_t c;

    client_init(&c);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        c.join.job = (char *)bad[i];
        expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "job id");
    }
}

static void test_job_id_valid_charset(void **state)
{
    assert_true(coll_wire_job_id_valid("AZaz09._:-"));
    assert_false(coll_wire_job_id_valid(""));
    assert_false(coll_wire_job_id_valid("a@b"));
    assert_false(coll_wire_job_id_valid("a\x7f"));
}

static void test_join_root_too_long_rejected(void **state)
{
    char *ok = repeat('r', 255), *over = repeat('r', 256);
    client_t c;

    client_init(&c);
    c.join.root = ok;
    expect_ok(KIND_CLIENT, client_join(&c));
    c.join.root = over;
    expect_err(KIND_CLIENT, client_join(&c), COLL_ERR_PROTOCOL, "root");
    free(ok);
    free(over);
}

static void test_hello_client_name_too_long_rejected(void **state)
{
    char *over = repeat('n', 256);
    client_t c;

    client_init(&c);
    c.hello.client = over;
    expect_err(KIND_CLIENT, client_hello(&c), COLL_ERR_PROTOCOL, "client name");
    free(over);
}

/* ---- Submit fields ---- */

static void test_submit_dtype_out_of_range_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.submit.dtype = COLL_DTYPE_COUNT;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "dtype");
    c.submit.dtype = 0xffffffffu;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "dtype");
}

static void test_submit_op_out_of_range_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.submit.op = COLL_REDOP_COUNT;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "op");
}

static void test_submit_every_known_op_accepted(void **state)
{
    client_t c;
    client_init(&c);
    for (uint32_t op = 0; op < COLL_REDOP_COUNT; op++) {
        c.submit.op = op;
        expect_ok(KIND_CLIENT, client_submit(&c));
    }
}

static void test_submit_unknown_collective_rejected(void **state)
{
    client_t c;
    client_init(&c);
    c.submit.coll = (Coll__Wire__Collective)(COLL__WIRE__COLLECTIVE__RECV + 1);
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "collective");
    c.submit.coll = (Coll__Wire__Collective)-1;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "collective");
}

static void test_submit_count_limit(void **state)
{
    client_t c;
    client_init(&c);
    c.submit.count = UINT64_MAX / 16;
    expect_ok(KIND_CLIENT, client_submit(&c));
    c.submit.count = UINT64_MAX / 16 + 1;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "count");
}

/* ---- Complete fields ---- */

/* The steps of a ring on 3 nodes pass; too many records, an unknown phase, a step that does
 * not rise within its phase, a phase out of order and time running backwards do not. */
static void test_complete_steps_checked(void **state)
{
    static const struct {
        uint64_t steps[3];
        size_t n;
        const char *what;
    } bad[] = {
        {{0}, COLL_CTL_MAX_STEPS + 1, "too many"},
        {{((uint64_t)9 << 56) | 5}, 1, "unknown phase"},
        {{((uint64_t)COLL_STEP_REDUCE_SCATTER << 56) | ((uint64_t)1 << 32) | 5,
          ((uint64_t)COLL_STEP_REDUCE_SCATTER << 56) | ((uint64_t)1 << 32) | 6}, 2, "step twice"},
        {{((uint64_t)COLL_STEP_ALLGATHER << 56) | 5,
          ((uint64_t)COLL_STEP_REDUCE_SCATTER << 56) | 6}, 2, "phases out of order"},
        {{((uint64_t)COLL_STEP_REDUCE_SCATTER << 56) | 6,
          ((uint64_t)COLL_STEP_REDUCE_SCATTER << 56) | ((uint64_t)1 << 32) | 5}, 2, "time back"},
    };
    uint64_t ring[4] = {coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 0, 10),
                        coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 1, 20),
                        coll_ctl_step_pack(COLL_STEP_ALLGATHER, 0, 20),
                        coll_ctl_step_pack(COLL_STEP_ALLGATHER, 1, 31)};
    uint64_t many[COLL_CTL_MAX_STEPS + 1];
    daemon_t d;

    for (uint32_t i = 0; i <= COLL_CTL_MAX_STEPS; i++) { /* valid but for their number */
        many[i] = coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, i, i);
    }
    daemon_init(&d);
    d.complete.steps = ring;
    d.complete.n_steps = 4;
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        print_message("%s\n", bad[i].what);
        d.complete.steps = bad[i].n > 3 ? many : (uint64_t *)bad[i].steps;
        d.complete.n_steps = bad[i].n;
        expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE),
                   COLL_ERR_PROTOCOL, "malformed step records");
    }
}

/* ---- NodeJoin fields ---- */

static void test_node_join_rank_at_world_size_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.ranks[1][1] = p.join.world_size;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "rank 6 >= world size 6");
}

static void test_node_join_without_ranks_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.n_ranks = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "ranks");
}

static void test_node_join_more_ranks_than_world_rejected(void **state)
{
    uint32_t ranks[3] = {0, 1, 1};
    peer_t p;

    peer_init(&p);
    p.join.world_size = 2;
    p.join.ranks = ranks;
    p.join.n_ranks = 3;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "ranks");
}

static void test_node_join_worker_address_empty_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.worker_address.len = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "worker address");
}

static void test_node_join_worker_address_size_limit(void **state)
{
    uint8_t *addr = calloc(1, COLL_WORKER_ADDR_MAX + 1);
    peer_t p;

    assert_non_null(addr);
    peer_init(&p);
    p.join.worker_address.data = addr;
    p.join.worker_address.len = COLL_WORKER_ADDR_MAX;
    expect_ok(KIND_PEER, peer_join(&p));
    p.join.worker_address.len = COLL_WORKER_ADDR_MAX + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "worker address");
    free(addr);
}

static void test_node_join_world_size_out_of_range_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.world_size = 0;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "world size");
    p.join.world_size = COLL_WORLD_MAX + 1;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "world size");
}

static void test_node_join_bad_job_id_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.join.job = "";
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "job id");
    p.join.job = "a b";
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "job id");
}

static void test_node_join_host_too_long_rejected(void **state)
{
    char *over = repeat('h', 256);
    peer_t p;

    peer_init(&p);
    p.join.host = over;
    expect_err(KIND_PEER, peer_join(&p), COLL_ERR_PROTOCOL, "host");
    free(over);
}

/* ---- NodeJoinReply fields ---- */

static void test_node_join_reply_node_rank_at_n_nodes_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.reply.node_rank = NODES;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "node rank");
}

static void test_node_join_reply_without_nodes_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.reply.n_nodes = 0;
    p.reply.node_rank = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "nodes");
}

static void test_node_join_reply_node_without_address_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.info[2].worker_address.len = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "worker address");
}

static void test_node_join_reply_node_without_ranks_rejected(void **state)
{
    peer_t p;
    peer_init(&p);
    p.info[0].n_ranks = 0;
    expect_err(KIND_PEER, peer_reply(&p), COLL_ERR_PROTOCOL, "ranks");
}

/* ---- fuzzing: every accepted message must satisfy what the decoders promise ---- */

static uint64_t rng_state;

static uint64_t rng(void)
{
    /* xorshift64*: deterministic for a fixed seed. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dULL;
}

static int job_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > COLL_JOB_ID_MAX) {
        return 0;
    }
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") == n;
}

static void check_client(const coll_client_msg_t *m)
{
    assert_int_equal(m->version, COLL_WIRE_VERSION);
    switch (m->body_case) {
    case COLL__WIRE__CLIENT_MSG__BODY_HELLO:
        assert_true(strlen(m->hello->client) < 256);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_JOIN:
        assert_true(job_ok(m->join->job));
        assert_true(m->join->world_size >= 1 && m->join->world_size <= COLL_WORLD_MAX);
        assert_true(m->join->rank < m->join->world_size);
        assert_true(m->join->local_size >= 1 && m->join->local_size <= m->join->world_size);
        assert_true(m->join->local_rank < m->join->local_size);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_SUBMIT:
        assert_int_equal(m->submit->coll, COLL__WIRE__COLLECTIVE__ALLREDUCE);
        assert_true(m->submit->dtype < COLL_DTYPE_COUNT);
        assert_true(m->submit->op < COLL_REDOP_COUNT);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_ALLOC:
    case COLL__WIRE__CLIENT_MSG__BODY_FREE:
        assert_non_null(m->alloc);
        break;
    default:
        fail_msg("accepted client message with body %d", (int)m->body_case);
    }
}

static void check_peer(const coll_peer_msg_t *m)
{
    assert_int_equal(m->version, COLL_WIRE_VERSION);
    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN) {
        const Coll__Wire__NodeJoin *j = m->node_join;
        assert_true(job_ok(j->job));
        assert_true(j->world_size >= 1 && j->world_size <= COLL_WORLD_MAX);
        assert_true(j->n_ranks >= 1 && j->n_ranks <= j->world_size);
        for (size_t i = 0; i < j->n_ranks; i++) {
            assert_true(j->ranks[i] < j->world_size);
        }
        assert_true(j->worker_address.len >= 1 && j->worker_address.len <= COLL_WORKER_ADDR_MAX);
    } else if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY) {
        const Coll__Wire__NodeJoinReply *r = m->node_join_reply;
        if (r->status == COLL_OK) {
            assert_true(r->node_rank < r->n_nodes);
            for (size_t i = 0; i < r->n_nodes; i++) {
                assert_true(r->nodes[i]->worker_address.len >= 1);
                assert_true(r->nodes[i]->n_ranks >= 1);
            }
        }
    } else {
        fail_msg("accepted peer message with body %d", (int)m->body_case);
    }
}

/* Decoders that accepted / rejected a fuzz input, to show both paths ran. */
static unsigned fuzz_accepted, fuzz_rejected;

/* Decode @p buf with every decoder; check the status set, the error text and the invariants. */
static void fuzz_one(const uint8_t *buf, size_t len)
{
    coll_client_msg_t *c;
    coll_daemon_msg_t *d;
    coll_peer_msg_t *p;
    char err[ERRLEN];
    coll_status_t st;

#define FUZZ_STATUS(st)                                                                            \
    do {                                                                                           \
        fuzz_accepted += (st) == COLL_OK;                                                          \
        fuzz_rejected += (st) != COLL_OK;                                                          \
        if ((st) != COLL_OK) {                                                                     \
            assert_true((st) == COLL_ERR_PROTOCOL || (st) == COLL_ERR_VERSION);                    \
            assert_true(err[0] != '\0' && strlen(err) < sizeof(err));                              \
        }                                                                                          \
    } while (0)

    err[0] = '\0';
    st = coll_wire_unpack_client(buf, len, &c, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        check_client(c);
        coll__wire__client_msg__free_unpacked(c, NULL);
    }
    err[0] = '\0';
    st = coll_wire_unpack_daemon(buf, len, &d, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        assert_int_equal(d->version, COLL_WIRE_VERSION);
        assert_int_not_equal(d->body_case, COLL__WIRE__DAEMON_MSG__BODY__NOT_SET);
        coll__wire__daemon_msg__free_unpacked(d, NULL);
    }
    err[0] = '\0';
    st = coll_wire_unpack_peer(buf, len, &p, err, sizeof(err));
    FUZZ_STATUS(st);
    if (st == COLL_OK) {
        check_peer(p);
        coll__wire__peer_msg__free_unpacked(p, NULL);
    }
#undef FUZZ_STATUS
}

static void test_fuzz_random_bytes(void **state)
{
    uint8_t buf[96];

    rng_state = 0x9e3779b97f4a7c15ULL;
    fuzz_accepted = fuzz_rejected = 0;
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        size_t len = rng() % sizeof(buf);
        for (size_t i = 0; i < len; i++) {
            buf[i] = (uint8_t)rng();
        }
        /* Half of them start like a version-1 envelope so the bodies get exercised too. */
        if (len >= 2 && round % 2 == 0) {
            buf[0] = 0x08;
            buf[1] = COLL_WIRE_VERSION;
        }
        fuzz_one(buf, len);
    }
    print_message("random bytes: %u accepted, %u rejected\n", fuzz_accepted, fuzz_rejected);
    assert_true(fuzz_rejected > 0);
}

#define NSEEDS 9

static void mutate(uint8_t *buf, size_t *len, size_t cap)
{
    size_t pos = *len ? rng() % *len : 0;
    switch (rng() % 5) {
    case 0: /* flip a bit */
        if (*len) {
            buf[pos] ^= (uint8_t)(1u << (rng() % 8));
        }
        break;
    case 1: /* overwrite with a random or boundary byte */
        if (*len) {
            static const uint8_t special[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
            buf[pos] = rng() % 2 ? (uint8_t)rng() : special[rng() % sizeof(special)];
        }
        break;
    case 2: /* truncate */
        *len = pos;
        break;
    case 3: /* insert a byte */
        if (*len < cap) {
            memmove(buf + pos + 1, buf + pos, *len - pos);
            buf[pos] = (uint8_t)rng();
            (*len)++;
        }
        break;
    default: /* delete a byte */
        if (*len) {
            memmove(buf + pos, buf + pos + 1, *len - pos - 1);
            (*len)--;
        }
    }
}

static void test_fuzz_mutated_valid_encodings(void **state)
{
    client_t c;
    daemon_t d;
    peer_t p;
    enc_t seeds[NSEEDS];
    uint8_t buf[1024];

    client_init(&c);
    daemon_init(&d);
    peer_init(&p);
    seeds[0] = encode(client_hello(&c));
    seeds[1] = encode(client_join(&c));
    seeds[2] = encode(client_alloc(&c));
    seeds[3] = encode(client_submit(&c));
    seeds[4] = encode(daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_JOIN));
    seeds[5] = encode(daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_COMPLETE));
    seeds[6] = encode(peer_join(&p));
    seeds[7] = encode(peer_reply(&p));
    seeds[8] = encode(client_free(&c));
    rng_state = 0x243f6a8885a308d3ULL;
    fuzz_accepted = fuzz_rejected = 0;
    for (int round = 0; round < FUZZ_ROUNDS; round++) {
        const enc_t *s = &seeds[round % NSEEDS];
        size_t len = s->len;
        assert_true(len <= sizeof(buf));
        memcpy(buf, s->buf, len);
        for (int m = 1 + (int)(rng() % 4); m > 0; m--) {
            mutate(buf, &len, sizeof(buf));
        }
        fuzz_one(buf, len);
    }
    print_message("mutations: %u accepted, %u rejected\n", fuzz_accepted, fuzz_rejected);
    /* Both paths must have run, or the invariant checks above checked nothing. */
    assert_true(fuzz_accepted > FUZZ_ROUNDS / 20);
    assert_true(fuzz_rejected > FUZZ_ROUNDS / 20);
    for (int i = 0; i < NSEEDS; i++) {
        free(seeds[i].buf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_valid_messages_accepted),
        cmocka_unit_test(test_client_join_fields_decoded),
        cmocka_unit_test(test_daemon_valid_messages_accepted),
        cmocka_unit_test(test_peer_valid_messages_accepted),
        cmocka_unit_test(test_peer_error_reply_needs_no_nodes),
        cmocka_unit_test(test_wrong_version_rejected),
        cmocka_unit_test(test_missing_body_rejected),
        cmocka_unit_test(test_garbage_bytes_rejected),
        cmocka_unit_test(test_truncated_encodings_rejected),
        cmocka_unit_test(test_error_text_truncated_to_errlen),
        cmocka_unit_test(test_join_rank_at_world_size_rejected),
        cmocka_unit_test(test_join_local_rank_at_local_size_rejected),
        cmocka_unit_test(test_join_local_size_above_world_size_rejected),
        cmocka_unit_test(test_join_local_size_zero_rejected),
        cmocka_unit_test(test_join_world_size_zero_rejected),
        cmocka_unit_test(test_join_world_size_above_max_rejected),
        cmocka_unit_test(test_join_world_size_at_max_accepted),
        cmocka_unit_test(test_join_job_id_empty_rejected),
        cmocka_unit_test(test_join_job_id_length_limit),
        cmocka_unit_test(test_join_job_id_illegal_chars_rejected),
        cmocka_unit_test(test_job_id_valid_charset),
        cmocka_unit_test(test_join_root_too_long_rejected),
        cmocka_unit_test(test_hello_client_name_too_long_rejected),
        cmocka_unit_test(test_submit_dtype_out_of_range_rejected),
        cmocka_unit_test(test_submit_op_out_of_range_rejected),
        cmocka_unit_test(test_submit_every_known_op_accepted),
        cmocka_unit_test(test_submit_unknown_collective_rejected),
        cmocka_unit_test(test_submit_count_limit),
        cmocka_unit_test(test_complete_steps_checked),
        cmocka_unit_test(test_node_join_rank_at_world_size_rejected),
        cmocka_unit_test(test_node_join_without_ranks_rejected),
        cmocka_unit_test(test_node_join_more_ranks_than_world_rejected),
        cmocka_unit_test(test_node_join_worker_address_empty_rejected),
        cmocka_unit_test(test_node_join_worker_address_size_limit),
        cmocka_unit_test(test_node_join_world_size_out_of_range_rejected),
        cmocka_unit_test(test_node_join_bad_job_id_rejected),
        cmocka_unit_test(test_node_join_host_too_long_rejected),
        cmocka_unit_test(test_node_join_reply_node_rank_at_n_nodes_rejected),
        cmocka_unit_test(test_node_join_reply_without_nodes_rejected),
        cmocka_unit_test(test_node_join_reply_node_without_address_rejected),
        cmocka_unit_test(test_node_join_reply_node_without_ranks_rejected),
        cmocka_unit_test(test_fuzz_random_bytes),
        cmocka_unit_test(test_fuzz_mutated_valid_encodings),
    };
    return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
