/*
 * fuzz-corpus DIR: writes the generated seeds of the fuzz harnesses into DIR/<harness>/ (the
 * tree's copy is tests/fuzz/corpus). Seeds are valid inputs of every kind the decoders know
 * plus edge cases at the limits; the fuzzer mutates from there. Inputs of past findings live
 * beside them as finding-*.
 *
 * The input layouts of fuzz_frame, fuzz_ctl_submit and fuzz_http_request (a few header bytes
 * before the data) are the ones their harnesses document.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/jobmsg.h"
#include "proto/ctl.h"
#include "proto/frame.h"
#include "core/pool.h"
#include "proto/wire.h"

/* Longer than the status server's COLL_HTTP_URL_MAX (1024). */
#define LONG_URL 1100

static const char *out_dir;

static void write_seed(const char *harness, const char *name, const void *data, size_t len)
{
    char path[4096];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", out_dir, harness);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", out_dir, harness, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

static uint8_t *pack(const ProtobufCMessage *m, size_t *len_p)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(len + 1);

    if (buf == NULL) {
        exit(1);
    }
    protobuf_c_message_pack(m, buf);
    *len_p = len;
    return buf;
}

static void write_msg(const char *harness, const char *name, const ProtobufCMessage *m)
{
    size_t len;
    uint8_t *buf = pack(m, &len);

    write_seed(harness, name, buf, len);
    free(buf);
}

/* ---- client envelopes ---- */

static void client_msg(const char *name, Coll__Wire__ClientMsg *m, uint32_t version)
{
    m->version = version;
    write_msg("client_msg", name, &m->base);
}

/* One Submit of every collective, and one at the count limit. */
static void client_submit_seeds(Coll__Wire__ClientMsg *mp)
{
    Coll__Wire__ClientMsg m = *mp;
    Coll__Wire__Submit sub = COLL__WIRE__SUBMIT__INIT;
    char name[64];

    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    m.submit = &sub;
    for (unsigned c = 0; c <= COLL__WIRE__COLLECTIVE__RECV; c++) {
        sub.req_id = 100 + c;
        sub.key = c % 2 ? 0 : 4097 + c;
        sub.coll = (Coll__Wire__Collective)c;
        sub.dtype = c % COLL_DTYPE_COUNT;
        sub.op = c % COLL_REDOP_COUNT;
        sub.count = 1000003;
        sub.send_offset = 20480;
        sub.recv_offset = 20480 + 4u * 1000003;
        sub.root = c % 3;
        sub.peer = (c + 1) % 3;
        sub.algo = c % COLL_ALGO_COUNT;
        snprintf(name, sizeof(name), "submit-%u", c);
        client_msg(name, &m, COLL_WIRE_VERSION);
    }
    sub.count = UINT64_MAX / 16;
    sub.dtype = COLL_DTYPE_COUNT - 1;
    client_msg("submit-count-limit", &m, COLL_WIRE_VERSION);
}

static void client_seeds(void)
{
    Coll__Wire__Abort abort_msg = COLL__WIRE__ABORT__INIT;
    Coll__Wire__ClientMsg m = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Hello hello = COLL__WIRE__HELLO__INIT;
    Coll__Wire__JoinJob join = COLL__WIRE__JOIN_JOB__INIT;
    Coll__Wire__MemAlloc alloc = COLL__WIRE__MEM_ALLOC__INIT;
    Coll__Wire__MemFree mfree = COLL__WIRE__MEM_FREE__INIT;
    char longest[COLL_JOB_ID_MAX + 1];

    hello.client = "coll-train pid 1234";
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    m.hello = &hello;
    client_msg("hello", &m, COLL_WIRE_VERSION);
    client_msg("hello-next-version", &m, COLL_WIRE_VERSION + 1);

    join.job = "job-1.a:b_c";
    join.rank = 3;
    join.world_size = 4;
    join.local_rank = 1;
    join.local_size = 2;
    join.root = "127.0.0.1:29510";
    join.pool_bytes = 64u << 20;
    join.timeout_ms = 30000;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_JOIN;
    m.join = &join;
    client_msg("join", &m, COLL_WIRE_VERSION);
    memset(longest, 'j', COLL_JOB_ID_MAX);
    longest[COLL_JOB_ID_MAX] = '\0';
    join.job = longest;
    join.world_size = COLL_WORLD_MAX;
    join.rank = COLL_WORLD_MAX - 1;
    join.local_size = 63;
    join.local_rank = 62;
    client_msg("join-limits", &m, COLL_WIRE_VERSION);
    join.rank = COLL_WORLD_MAX;
    client_msg("join-rank-out-of-range", &m, COLL_WIRE_VERSION);
    join.rank = 0;
    join.token = "s3cret-job-token";
    client_msg("join-token", &m, COLL_WIRE_VERSION);

    alloc.req_id = 7;
    alloc.bytes = 1u << 20;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_ALLOC;
    m.alloc = &alloc;
    client_msg("alloc", &m, COLL_WIRE_VERSION);
    mfree.offset = 20480;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    m.free = &mfree;
    client_msg("free", &m, COLL_WIRE_VERSION);

    client_submit_seeds(&m);
    abort_msg.status = COLL_ERR_JOB;
    abort_msg.reason = "loss is NaN at step 7";
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_ABORT;
    m.abort = &abort_msg;
    client_msg("abort", &m, COLL_WIRE_VERSION);
    abort_msg.status = 3;
    client_msg("abort-positive-status", &m, COLL_WIRE_VERSION);
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY__NOT_SET;
    client_msg("no-body", &m, COLL_WIRE_VERSION);
}

/* ---- daemon envelopes ---- */

static void daemon_seeds(void)
{
    Coll__Wire__DaemonMsg m = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__HelloReply hello = COLL__WIRE__HELLO_REPLY__INIT;
    Coll__Wire__JoinReply join = COLL__WIRE__JOIN_REPLY__INIT;
    Coll__Wire__MemAllocReply alloc = COLL__WIRE__MEM_ALLOC_REPLY__INIT;
    Coll__Wire__Complete comp = COLL__WIRE__COMPLETE__INIT;

    m.version = COLL_WIRE_VERSION;
    hello.daemon = "collectived 0.1.0";
    m.body_case = COLL__WIRE__DAEMON_MSG__BODY_HELLO;
    m.hello = &hello;
    write_msg("daemon_msg", "hello", &m.base);

    join.pool_bytes = 256u << 20;
    join.node_rank = 1;
    join.node_count = 2;
    join.ctl_bytes = COLL_CTL_BYTES;
    m.body_case = COLL__WIRE__DAEMON_MSG__BODY_JOIN;
    m.join = &join;
    write_msg("daemon_msg", "join", &m.base);
    join.status = COLL_ERR_RENDEZVOUS;
    join.error = "job j: rank 3 is claimed by node a and by node b";
    write_msg("daemon_msg", "join-error", &m.base);

    alloc.req_id = 7;
    alloc.offset = 20480;
    alloc.bytes = 1u << 20;
    m.body_case = COLL__WIRE__DAEMON_MSG__BODY_ALLOC;
    m.alloc = &alloc;
    write_msg("daemon_msg", "alloc", &m.base);

    comp.req_id = 100;
    comp.algo = "ring";
    comp.ready_ns = 1000;
    comp.peers_ns = 2000;
    comp.reduced_ns = 3000;
    comp.done_ns = 4000;
    m.body_case = COLL__WIRE__DAEMON_MSG__BODY_COMPLETE;
    m.complete = &comp;
    write_msg("daemon_msg", "complete", &m.base);
    uint64_t steps[] = {coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 0, 1500),
                        coll_ctl_step_pack(COLL_STEP_ALLGATHER, 0, 2500)};
    comp.steps = steps;
    comp.n_steps = 2;
    write_msg("daemon_msg", "complete-steps", &m.base);
    comp.n_steps = 0;
    comp.status = COLL_ERR_MISMATCH;
    comp.error = "allreduce #3: rank 1 submitted 7 elements, rank 0 submitted 5";
    write_msg("daemon_msg", "complete-error", &m.base);
    m.version = 0;
    write_msg("daemon_msg", "version-0", &m.base);
}

/* ---- peer envelopes ---- */

/* NodeJoinReply: a node table, one with a rank on two nodes, a refusal. */
static void node_join_reply_seeds(ProtobufCBinaryData worker_address)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoinReply r = COLL__WIRE__NODE_JOIN_REPLY__INIT;
    Coll__Wire__NodeInfo n0 = COLL__WIRE__NODE_INFO__INIT, n1 = COLL__WIRE__NODE_INFO__INIT;
    Coll__Wire__NodeInfo *nodes[] = {&n0, &n1};
    Coll__Wire__JobParams params = COLL__WIRE__JOB_PARAMS__INIT;
    uint32_t ranks0[] = {0, 1}, ranks1[] = {2, 3}, overlap[] = {1, 2};

    m.version = COLL_WIRE_VERSION;
    n0.n_ranks = 2;
    n0.ranks = ranks0;
    n0.worker_address = worker_address;
    n0.host = "node-a";
    n1.n_ranks = 2;
    n1.ranks = ranks1;
    n1.worker_address = worker_address;
    n1.host = "node-b";
    params.segment_bytes = 256u << 10;
    params.pipeline_depth = 4;
    params.rd_max_bytes = 64u << 10;
    r.node_rank = 1;
    r.n_nodes = 2;
    r.nodes = nodes;
    r.params = &params;
    m.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
    m.node_join_reply = &r;
    write_msg("peer_msg", "node-join-reply", &m.base);
    n1.ranks = overlap; /* rank 1 on both nodes, rank 3 on none */
    write_msg("peer_msg", "node-join-reply-duplicate-rank", &m.base);
    r.status = COLL_ERR_RENDEZVOUS;
    r.error = "node b says world size 4, earlier nodes say 2";
    r.n_nodes = 0;
    r.nodes = NULL;
    r.params = NULL;
    write_msg("peer_msg", "node-join-reply-error", &m.base);
}

static void peer_seeds(void)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;
    uint32_t ranks0[] = {0, 1}, ranks1[] = {2, 3}, dup[] = {2, 2};
    uint8_t addr[] = {0x55, 0x43, 0x58, 0x01, 0x02, 0x03, 0x04, 0x05};
    uint8_t kernel_id[COLL_WIRE_KERNEL_ID_BYTES] = {0x9c, 0x41, 0x07};

    m.version = COLL_WIRE_VERSION;
    j.job = "job-1";
    j.world_size = 4;
    j.n_ranks = 2;
    j.ranks = ranks1;
    j.worker_address = (ProtobufCBinaryData){sizeof(addr), addr};
    j.host = "node-b";
    m.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    m.node_join = &j;
    write_msg("peer_msg", "node-join", &m.base);
    j.ranks = dup;
    write_msg("peer_msg", "node-join-duplicate-rank", &m.base);
    j.n_ranks = 1;
    j.world_size = 1;
    j.ranks = ranks0;
    write_msg("peer_msg", "node-join-world-1", &m.base);
    j.pid = 4242;
    j.kernel_id = (ProtobufCBinaryData){COLL_WIRE_KERNEL_ID_BYTES, kernel_id};
    write_msg("peer_msg", "node-join-pid", &m.base);
    j.kernel_id.len = COLL_WIRE_KERNEL_ID_BYTES - 1;
    write_msg("peer_msg", "node-join-short-kernel-id", &m.base);
    j.kernel_id.len = 0;
    j.n_ranks = 0;
    j.worker_address.len = 0;
    j.refusal = COLL_ERR_NOMEM;
    j.refusal_error = "job job-1 asks for a pool of 134254592 bytes; this daemon's budget is "
                      "67108864 (pool_budget), of which jobs use 0";
    write_msg("peer_msg", "node-join-refusal", &m.base);
    j.refusal = 7;
    write_msg("peer_msg", "node-join-refusal-positive", &m.base);
    j.refusal = 0;
    j.n_ranks = 1;
    j.worker_address.len = sizeof(addr);

    node_join_reply_seeds(j.worker_address);
}

/* Peer authentication (daemon/auth.h) and a NodeJoin with a job-token digest. */
static void auth_seeds(void)
{
    Coll__Wire__PeerMsg m = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__Challenge c = COLL__WIRE__CHALLENGE__INIT;
    Coll__Wire__Auth a = COLL__WIRE__AUTH__INIT;
    Coll__Wire__AuthOk ok = COLL__WIRE__AUTH_OK__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;
    uint8_t nonce[COLL_WIRE_AUTH_BYTES], mac[COLL_WIRE_AUTH_BYTES], addr[] = {0x55, 0x43, 0x58};
    uint32_t ranks[] = {1};

    memset(nonce, 0xa5, sizeof(nonce));
    memset(mac, 0x5a, sizeof(mac));
    m.version = COLL_WIRE_VERSION;
    c.nonce = (ProtobufCBinaryData){sizeof(nonce), nonce};
    m.body_case = COLL__WIRE__PEER_MSG__BODY_CHALLENGE;
    m.challenge = &c;
    write_msg("peer_msg", "challenge", &m.base);
    a.mac = (ProtobufCBinaryData){sizeof(mac), mac};
    a.nonce = c.nonce;
    m.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH;
    m.auth = &a;
    write_msg("peer_msg", "auth", &m.base);
    a.nonce.len = sizeof(nonce) - 1;
    write_msg("peer_msg", "auth-short-nonce", &m.base);
    ok.mac = a.mac;
    m.body_case = COLL__WIRE__PEER_MSG__BODY_AUTH_OK;
    m.auth_ok = &ok;
    write_msg("peer_msg", "auth-ok", &m.base);

    j.job = "job-1";
    j.world_size = 2;
    j.n_ranks = 1;
    j.ranks = ranks;
    j.worker_address = (ProtobufCBinaryData){sizeof(addr), addr};
    j.host = "node-b";
    j.timeout_ms = 30000;
    j.token_digest = a.mac;
    m.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    m.node_join = &j;
    write_msg("peer_msg", "node-join-token", &m.base);
}

/* ---- frame streams: 2 bytes maximum, 8 bytes chunk seed, the stream ---- */

/* Control messages between daemons (fuzz_control_msg.c: a text bound byte, then the message
 * for a job of 4 nodes and epoch 0x1122334455667788). */
static void control_seed(const char *name, uint8_t text_max, uint32_t type, int32_t status,
                         uint32_t node, uint32_t lost, uint64_t epoch, const char *text,
                         size_t cut)
{
    uint8_t buf[256];
    coll_jobmsg_t m = {type, status, node, lost, epoch};
    uint64_t key = 0x8000000005ull;
    size_t head = 1 + sizeof(m), n;

    buf[0] = text_max;
    memcpy(buf + 1, &m, sizeof(m));
    if (type == COLL_JOBMSG_BLAME_QUERY || type == COLL_JOBMSG_BLAME) {
        memcpy(buf + head, &key, sizeof(key));
        head += sizeof(key);
    }
    memcpy(buf + head, text, strlen(text));
    n = head + strlen(text);
    write_seed("control_msg", name, buf, n - cut);
}

static void control_seeds(void)
{
    const uint64_t e = 0x1122334455667788ull;

    control_seed("abort-peer", 200, COLL_JOBMSG_ABORT, COLL_ERR_PEER, 2, 1, e,
                 "node 1 (host, ranks from 1): no heartbeat for 1501 ms", 0);
    control_seed("abort-nolost", 16, COLL_JOBMSG_ABORT, COLL_ERR_TIMEDOUT, 0, COLL_JOBMSG_NO_NODE, e,
                 "allreduce #5 timed out after 3000 ms waiting for rank 3", 0);
    control_seed("goodbye", 0, COLL_JOBMSG_GOODBYE, 0, 3, COLL_JOBMSG_NO_NODE, e, "", 0);
    control_seed("heartbeat", 0, COLL_JOBMSG_HEARTBEAT, 0, 1, COLL_JOBMSG_NO_NODE, e, "", 0);
    control_seed("goodbye-named", 64, COLL_JOBMSG_GOODBYE, 0, 3, COLL_JOBMSG_NO_NODE, e,
                 "rank 7 (pid 4242)", 0);
    control_seed("blame-query", 0, COLL_JOBMSG_BLAME_QUERY, 0, 2, COLL_JOBMSG_NO_NODE, e, "", 0);
    control_seed("blame", 200, COLL_JOBMSG_BLAME, 0, 1, COLL_JOBMSG_NO_NODE, e,
                 "rank 2 (pid 4242, node 1, not submitted)", 0);
    control_seed("blame-short-key", 200, COLL_JOBMSG_BLAME, 0, 1, COLL_JOBMSG_NO_NODE, e, "", 5);
    control_seed("other-epoch", 64, COLL_JOBMSG_ABORT, COLL_ERR_PEER, 1, 2, 7, "stale", 0);
    control_seed("short", 8, COLL_JOBMSG_ABORT, COLL_ERR_PEER, 1, 2, e, "", 4);
}

static size_t put_frame(uint8_t *at, const uint8_t *payload, uint32_t len)
{
    at[0] = (uint8_t)len;
    at[1] = (uint8_t)(len >> 8);
    at[2] = (uint8_t)(len >> 16);
    at[3] = (uint8_t)(len >> 24);
    memcpy(at + 4, payload, len);
    return 4 + (size_t)len;
}

static void frame_seeds(void)
{
    static uint8_t buf[1 << 16];
    const uint8_t head[10] = {0x80, 0x00, 1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t big[3000];
    size_t n = sizeof(head), len;
    Coll__Wire__ClientMsg m = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Hello hello = COLL__WIRE__HELLO__INIT;
    uint8_t *hello_bytes;

    hello.client = "coll-train pid 1234";
    m.version = COLL_WIRE_VERSION;
    m.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    m.hello = &hello;
    hello_bytes = pack(&m.base, &len);

    memcpy(buf, head, sizeof(head));
    n += put_frame(buf + n, hello_bytes, (uint32_t)len);
    n += put_frame(buf + n, (const uint8_t *)"", 0);
    memset(big, 0xab, sizeof(big));
    n += put_frame(buf + n, big, sizeof(big));
    n += put_frame(buf + n, hello_bytes, (uint32_t)len);
    write_seed("frame", "stream-client", buf, n);

    /* Maximum 16 bytes: a frame of exactly 16, then one of 17 (refused). */
    buf[0] = 0x00;
    buf[1] = 0x10;
    n = sizeof(head);
    n += put_frame(buf + n, big, 16);
    n += put_frame(buf + n, big, 17);
    write_seed("frame", "at-and-over-max", buf, n);

    /* Maximum 0: empty frames only. */
    buf[0] = buf[1] = 0;
    n = sizeof(head);
    n += put_frame(buf + n, big, 0);
    n += put_frame(buf + n, big, 0);
    write_seed("frame", "max-0", buf, n);

    /* A header announcing 4 GiB - 1. */
    buf[0] = 0x80;
    n = sizeof(head);
    memset(buf + n, 0xff, 4);
    write_seed("frame", "huge-header", buf, n + 4);
    free(hello_bytes);
}

/* ---- control-block rings: see fuzz_ctl_submit.c for the layout ---- */

static void ctl_seeds(void)
{
    static const uint16_t sizes[4] = {1023, 1023, 16383, 255}; /* 4 * v + 1 bytes each */
    static const uint8_t owners[4] = {0, 1, 0, 0};             /* 1: the other rank */
    uint8_t buf[2 + 5 + 12 + sizeof(coll_submission_t) * COLL_CTL_SUB_SLOTS];
    size_t off[4], n = 0;
    coll_pool_t *pool;
    coll_submission_t recs[COLL_CTL_SUB_SLOTS];

    /* The harness's pool, allocated in the same order, gives the same offsets. */
    if (coll_pool_create("seed", 1u << 20, &pool) != COLL_OK ||
        coll_pool_reserve(pool, COLL_CTL_TOTAL(2)) != COLL_OK) {
        exit(1);
    }
    for (int i = 0; i < 4; i++) {
        if (coll_pool_alloc(pool, 1 + (size_t)sizes[i] * 4, owners[i] ? (void *)pool : NULL,
                            &off[i]) != COLL_OK) {
            exit(1);
        }
    }
    coll_pool_destroy(pool);

    buf[n++] = 3; /* world 4 */
    buf[n++] = 1; /* rank 1 */
    buf[n++] = 0xff, buf[n++] = 0xff, buf[n++] = 0xff, buf[n++] = 0xfe; /* tail: wraps */
    buf[n++] = 5;                                                       /* head = tail + 5 */
    for (int i = 0; i < 4; i++) {
        buf[n++] = owners[i];
        buf[n++] = (uint8_t)(sizes[i] >> 8);
        buf[n++] = (uint8_t)sizes[i];
    }
    memset(recs, 0, sizeof(recs));
    for (uint32_t i = 0; i < 5; i++) {
        coll_submission_t *r = &recs[(0xfffffffeu + i) % COLL_CTL_SUB_SLOTS];
        r->req_id = i + 1;
        r->key = i == 4 ? 0 : 4096 + i;
        r->coll = i; /* allreduce, reduce-scatter, all-gather, broadcast, reduce */
        r->dtype = COLL_FLOAT32;
        r->redop = COLL_SUM;
        r->count = 64;
        r->send_offset = off[0];
        r->recv_offset = off[2];
        r->root = 2;
    }
    recs[(0xfffffffeu + 2) % COLL_CTL_SUB_SLOTS].recv_offset = off[1]; /* the other rank's */
    memcpy(buf + n, recs, sizeof(recs));
    write_seed("ctl_submit", "ring-5", buf, n + sizeof(recs));
    buf[6] = 65; /* more than the ring holds */
    write_seed("ctl_submit", "ring-overfull", buf, n + sizeof(recs));
    buf[6] = 0;
    write_seed("ctl_submit", "ring-empty", buf, n);
}

/* ---- text inputs ---- */

static void text_seed(const char *harness, const char *name, const char *prefix, size_t plen,
                      const char *text)
{
    size_t tlen = strlen(text);
    char *buf = malloc(plen + tlen + 1);
    if (buf == NULL) {
        exit(1);
    }
    memcpy(buf, prefix, plen);
    memcpy(buf + plen, text, tlen);
    write_seed(harness, name, buf, plen + tlen);
    free(buf);
}

static void http_seeds(void)
{
    static const struct {
        const char *name, *text;
    } reqs[] = {
        {"get-status", "GET /status HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n"},
        {"head-metrics", "HEAD /metrics?x=1#frag HTTP/1.1\r\nHost: a\r\n\r\n"},
        {"get-http10", "GET / HTTP/1.0\r\n\r\n"},
        {"post-body", "POST /status HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"},
        {"chunked", "GET /healthz HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"},
        {"pipelined", "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n"},
        {"absolute-uri", "GET http://host:80/status HTTP/1.1\r\n\r\n"},
        {"percent", "GET /%2e%2e/st%41tus?%00 HTTP/1.1\r\n\r\n"},
        {"folded-header", "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n"},
        {"bad-version", "GET / HTTP/9.9\r\n\r\n"},
        {"lf-only", "GET /metrics HTTP/1.1\nHost: x\n\n"},
    };
    const char seed[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tiny[8] = {0, 0, 0, 0, 0, 0, 0, 1};
    char *long_url = malloc(LONG_URL + 64);

    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        text_seed("http_request", reqs[i].name, seed, sizeof(seed), reqs[i].text);
    }
    text_seed("http_request", "get-status-bytewise", tiny, sizeof(tiny), reqs[0].text);
    if (long_url == NULL) {
        exit(1);
    }
    strcpy(long_url, "GET /");
    memset(long_url + 5, 'a', LONG_URL);
    strcpy(long_url + 5 + LONG_URL, " HTTP/1.1\r\n\r\n");
    text_seed("http_request", "url-too-long", seed, sizeof(seed), long_url);
    free(long_url);
}

static void config_seeds(void)
{
    static const struct {
        const char *name, *text;
    } files[] = {
        {"every-key",
         "[collectived]\nsocket = /tmp/c.sock\nlisten = 127.0.0.1:0\naddr_file = /tmp/c.addr\n"
         "pool_size = 8M\npool_max = 1G\nsegment_size = 256K\npipeline_depth = 4\n"
         "timeout_ms = 60000\nrd_max_bytes = 64K\nkernel_threads = 2\nucx_error_mode = peer\n"
         "log_level = debug\nlog_subsys = core,rdv\nstatus_socket = none\n"
         "status_listen = 127.0.0.1:9464\nsocket_group = \nbusbw_min_bytes = 1M\n"
         "pool_budget = 4G\npeer_secret_file = /etc/collectived/secret\nrequire_job_token = 1\n"},
        {"top-level-keys", "; comment\n# comment\npool_size = 1T\npool_max = 2T\n"},
        {"inline-comment", "segment_size = 64M ; the largest\n"},
        {"unknown-key-and-section", "bogus = 1\n[other]\npool_size = 1\n"},
        {"bad-size", "pool_size = 12Q\n"},
        {"bad-uint", "pipeline_depth = -1\n"},
        {"out-of-range", "pipeline_depth = 65\n"},
        {"syntax-error", "[collectived\nkey value\n"},
        {"ipv6-status", "status_listen = [::1]:9464\n"},
        {"status-socket-same", "socket = /tmp/a.sock\nstatus_socket = /tmp/a.sock\n"},
        {"empty", ""},
    };

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        text_seed("config", files[i].name, "", 0, files[i].text);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (writes DIR/<harness>/<seed>)\n", argv[0]);
        return 2;
    }
    out_dir = argv[1];
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) {
        perror(out_dir);
        return 1;
    }
    client_seeds();
    daemon_seeds();
    peer_seeds();
    auth_seeds();
    control_seeds();
    frame_seeds();
    ctl_seeds();
    http_seeds();
    config_seeds();
    return 0;
}
