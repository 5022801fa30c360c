/* Unit tests of the wire decoders and their validation (proto/wire.h). */
#include "wire_msgs.h"
#include "device/dev.h"

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
    c.submit.coll = (Coll__Wire__Collective)(COLL__WIRE__COLLECTIVE__ALLTOALLV + 1);
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

/* ---- Memory kinds, devices and pools ---- */

static void test_alloc_kind_device_uuid_layer_checked(void **state)
{
    static const uint8_t uuid[17] = {1, 2, 3};
    client_t c;

    client_init(&c);
    c.alloc.kind = 1;
    c.alloc.device = COLL_DEV_MAX - 1;
    c.alloc.device_uuid.data = (uint8_t *)uuid;
    c.alloc.device_uuid.len = COLL_DEV_UUID_BYTES;
    c.alloc.layer = "cuda";
    expect_ok(KIND_CLIENT, client_alloc(&c));
    c.alloc.kind = 2;
    expect_err(KIND_CLIENT, client_alloc(&c), COLL_ERR_PROTOCOL, "memory kind");
    c.alloc.kind = 1;
    c.alloc.device = COLL_DEV_MAX;
    expect_err(KIND_CLIENT, client_alloc(&c), COLL_ERR_PROTOCOL, "device");
    c.alloc.device = 0;
    c.alloc.device_uuid.len = COLL_DEV_UUID_BYTES + 1;
    expect_err(KIND_CLIENT, client_alloc(&c), COLL_ERR_PROTOCOL, "UUID");
    c.alloc.device_uuid.len = 0;
    expect_ok(KIND_CLIENT, client_alloc(&c));
    c.alloc.layer = "a-layer-too-long";
    expect_err(KIND_CLIENT, client_alloc(&c), COLL_ERR_PROTOCOL, "layer");
}

static void test_free_and_submit_pool_checked(void **state)
{
    client_t c;

    client_init(&c);
    c.free.pool = COLL_DEV_MAX;
    expect_ok(KIND_CLIENT, client_free(&c));
    c.free.pool = COLL_DEV_MAX + 1;
    expect_err(KIND_CLIENT, client_free(&c), COLL_ERR_PROTOCOL, "pool");
    c.submit.pool = COLL_DEV_MAX;
    expect_ok(KIND_CLIENT, client_submit(&c));
    c.submit.pool = COLL_DEV_MAX + 1;
    expect_err(KIND_CLIENT, client_submit(&c), COLL_ERR_PROTOCOL, "pool");
}

/* A device allocation's chunks follow each other inside the pool's range; their count is
 * bounded by the fds one frame carries. */
static void test_alloc_reply_chunks_checked(void **state)
{
    Coll__Wire__PoolChunk ch[COLL_FRAME_MAX_FDS + 1];
    Coll__Wire__PoolChunk *chp[COLL_FRAME_MAX_FDS + 1];
    daemon_t d;

    for (size_t i = 0; i <= COLL_FRAME_MAX_FDS; i++) {
        coll__wire__pool_chunk__init(&ch[i]);
        ch[i].offset = i << 21;
        ch[i].bytes = 1 << 21;
        chp[i] = &ch[i];
    }
    daemon_init(&d);
    d.alloc.kind = 1;
    d.alloc.pool = 1;
    d.alloc.pool_bytes = (uint64_t)(COLL_FRAME_MAX_FDS + 1) << 21;
    d.alloc.chunks = chp;
    d.alloc.n_chunks = COLL_FRAME_MAX_FDS;
    expect_ok(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC));
    d.alloc.n_chunks = COLL_FRAME_MAX_FDS + 1;
    expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC),
               COLL_ERR_PROTOCOL, "chunks");
    d.alloc.n_chunks = 2;
    ch[1].offset = 1 << 20; /* overlaps the first */
    expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC),
               COLL_ERR_PROTOCOL, "out of order");
    ch[1].offset = d.alloc.pool_bytes - (1 << 20); /* runs past the end */
    expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC),
               COLL_ERR_PROTOCOL, "outside the pool");
    ch[1].offset = 1 << 21;
    d.alloc.pool = COLL_DEV_MAX + 1;
    expect_err(KIND_DAEMON, daemon_body(&d, COLL__WIRE__DAEMON_MSG__BODY_ALLOC),
               COLL_ERR_PROTOCOL, "pool");
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
        cmocka_unit_test(test_alloc_kind_device_uuid_layer_checked),
        cmocka_unit_test(test_free_and_submit_pool_checked),
        cmocka_unit_test(test_alloc_reply_chunks_checked),
        cmocka_unit_test(test_complete_steps_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
