/*
 * p2p_check: one rank of an engine integration test of coll_send_async() / coll_recv_async(),
 * started as every rank of a local cluster by collective-launch.
 *
 * Default mode, on a world of at least two ranks:
 * - Ring: every rank sends two messages (of different sizes and datatypes) to the next rank and
 *   receives two from the previous one, without keys (the n-th send to a peer matches its n-th
 *   receive), for each count of --counts. Even ranks post their sends first, odd ranks their
 *   receives. In a cluster of several ranks per node the ring has local and remote hops.
 * - Keyed pairs: a local pair (ranks 0 and 1, when a node has two ranks) and a remote pair
 *   (rank 0 and the first rank of node 1, when there are two nodes) exchange --messages
 *   messages each way with explicit keys, of other sizes each; the receiver posts its receives
 *   in another order than the sender its sends, and waits in a third.
 * Every received buffer must hold the sender's bytes, guards must be intact, a sent buffer
 * unchanged.
 *
 * --mismatch: the same pairs; the sender sends 1009 elements and the receiver expects 1014, then
 * 1000: both must get COLL_ERR_MISMATCH both times, the message naming both sizes in bytes. A
 * matching exchange on the same pair must then succeed.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNTS 16
#define MAX_MESSAGES 16
#define TOKEN_MAX 32
/* Keys of the keyed pairs: distinct, in the 22 significant bits of a point-to-point key. */
#define KEY_BASE 0x2a000u
#define KEY_STRIDE 37u
#define MISMATCH_COUNT 1009

typedef struct {
    char counts[MAX_COUNTS][TOKEN_MAX];
    int ncounts;
    int messages;
    int mismatch;
    int timeout_ms;
} opts_t;

/* One message: who sends it to whom, what and under which key (-1: none). */
typedef struct {
    int src, dst;
    coll_dtype_t dt;
    size_t count;
    int64_t key;
    uint64_t salt; /* distinguishes the data of messages */
    check_buf_t buf;
    coll_request_t *req;
    coll_status_t st;
} msg_t;

static const coll_dtype_t dtype_cycle[] = {COLL_FLOAT32, COLL_INT8, COLL_FLOAT64, COLL_BFLOAT16,
                                           COLL_INT64, COLL_UINT8, COLL_FLOAT16, COLL_INT32};
#define NDTYPES (sizeof(dtype_cycle) / sizeof(dtype_cycle[0]))

static uint8_t data_byte(const msg_t *m, size_t k)
{
    return (uint8_t)(check_mix(m->salt * 0x100000001ull + ((uint64_t)m->src << 56) + k / 8) >>
                     (8 * (k % 8)));
}

static void describe(const check_ctx_t *c, const msg_t *m, int sending, char *buf, size_t len)
{
    snprintf(buf, len, "%s of %zu %s from rank %d to rank %d (%s peer, key %lld) (world %d = %d "
             "nodes x %d)", sending ? "send" : "receive", m->count, coll_dtype_name(m->dt), m->src,
             m->dst, m->src / c->local_size == m->dst / c->local_size ? "local" : "remote",
             (long long)m->key, c->world, c->nodes, c->local_size);
}

/* Post this rank's side of @p m (nothing when it is not an end). */
static void post(const check_ctx_t *c, msg_t *m, size_t recv_count)
{
    int sending = m->src == c->rank;
    size_t es = coll_dtype_size(m->dt), n = sending ? m->count : recv_count;
    coll_op_params_t p = {.field_mask = m->key >= 0 ? COLL_OP_PARAM_KEY : 0,
                          .key = (uint64_t)m->key};
    char what[256];

    m->req = NULL;
    m->st = COLL_OK;
    if (!sending && m->dst != c->rank) {
        return;
    }
    check_buf_alloc(c, n * es, sending, &m->buf);
    for (size_t k = 0; k < m->buf.bytes; k++) {
        m->buf.data[k] = sending ? data_byte(m, k) : (uint8_t)(0xc3 ^ k);
    }
    m->st = sending ? coll_send_async(c->comm, m->buf.data, n, m->dt, m->dst, &p, &m->req)
                    : coll_recv_async(c->comm, m->buf.data, n, m->dt, m->src, &p, &m->req);
    if (m->st != COLL_INPROGRESS && m->st != COLL_OK) {
        describe(c, m, sending, what, sizeof(what));
        check_die("%s: submitting failed: %s: %s", what, coll_err_name(m->st),
                  coll_comm_last_error(c->comm));
    }
}

static void wait_msg(const check_ctx_t *c, msg_t *m, int timeout_ms)
{
    char what[256], algo[32];
    if (m->req == NULL) {
        return;
    }
    describe(c, m, m->src == c->rank, what, sizeof(what));
    m->st = check_wait(c, m->req, timeout_ms, what, algo, sizeof(algo));
    m->req = NULL;
}

/* After a successful transfer: the receiver holds the sender's bytes, the sender's are kept. */
static void verify(const check_ctx_t *c, msg_t *m)
{
    char what[256];
    int sending = m->src == c->rank;

    if (m->buf.alloc == NULL) {
        return;
    }
    describe(c, m, sending, what, sizeof(what));
    if (m->st != COLL_OK) {
        check_die("%s: %s (%s): %s", what, coll_err_name(m->st), coll_strerror(m->st),
                  coll_comm_last_error(c->comm));
    }
    for (size_t k = 0; k < m->buf.bytes; k++) {
        if (m->buf.data[k] != data_byte(m, k)) {
            check_die("%s: byte %zu of %zu is 0x%02x, expected 0x%02x%s", what, k, m->buf.bytes,
                      m->buf.data[k], data_byte(m, k),
                      sending ? " (the send buffer changed)" : "");
        }
    }
    check_buf_guards(c, &m->buf, what);
    check_buf_free(c, &m->buf);
}

/* ---- ring ----------------------------------------------------------------------------------- */

static void ring_round(const check_ctx_t *c, const opts_t *o, size_t count, int round)
{
    int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world;
    msg_t m[4]; /* 0, 1: to next; 2, 3: from prev */
    int order[4] = {0, 1, 2, 3};

    for (int k = 0; k < 4; k++) {
        int out = k < 2;
        m[k] = (msg_t){.src = out ? c->rank : prev, .dst = out ? next : c->rank,
                       .dt = dtype_cycle[(size_t)(round + k % 2) % NDTYPES],
                       .count = k % 2 ? count / 2 + 3 : count, .key = -1,
                       .salt = (uint64_t)round * 2 + (uint64_t)(k % 2)};
    }
    if (c->rank % 2 == 1) {
        memcpy(order, (int[]){2, 3, 0, 1}, sizeof(order));
    }
    for (int k = 0; k < 4; k++) {
        post(c, &m[order[k]], m[order[k]].count);
    }
    for (int k = 3; k >= 0; k--) {
        wait_msg(c, &m[k], o->timeout_ms);
    }
    for (int k = 0; k < 4; k++) {
        verify(c, &m[k]);
    }
}

static void run_ring(const check_ctx_t *c, const opts_t *o, const size_t *counts, int ncounts)
{
    double t0 = check_now_s();
    for (int i = 0; i < ncounts; i++) {
        ring_round(c, o, counts[i], i);
    }
    check_say(c, 1, "ring: %d rounds of 2 messages per rank ok, %.1f ms", ncounts,
              1e3 * (check_now_s() - t0));
}

/* ---- keyed pairs ---------------------------------------------------------------------------- */

/* The pairs tested: local (0, 1) when a node has two ranks, remote (0, first of node 1). */
static int pairs(const check_ctx_t *c, int p[2][2])
{
    int n = 0;
    if (c->local_size >= 2) {
        p[n][0] = 0;
        p[n++][1] = 1;
    }
    if (c->nodes >= 2) {
        p[n][0] = 0;
        p[n++][1] = c->local_size;
    }
    return n;
}

static size_t keyed_count(int j)
{
    static const size_t counts[] = {1009, 1, 65537, 0, 7, 300007, 257, 65536};
    return counts[(size_t)j % (sizeof(counts) / sizeof(counts[0]))];
}

static int gcd(int x, int y)
{
    while (y != 0) {
        int t = x % y;
        x = y;
        y = t;
    }
    return x;
}

/* The smallest stride >= 5 that visits all of 0..n-1. */
static int coprime_stride(int n)
{
    int s = 5;
    while (gcd(s, n) != 1) {
        s++;
    }
    return s;
}

/* Messages j = 0..M-1 from a to b, then from b to a; each rank posts its sends in key order
 * and its receives in reverse (a) or odd-even (b) order, and waits in yet another. */
static void keyed_pair(const check_ctx_t *c, const opts_t *o, int a, int b)
{
    msg_t m[2 * MAX_MESSAGES];
    int M = o->messages, n = 2 * M;

    for (int k = 0; k < n; k++) {
        int j = k % M, ab = k < M;
        m[k] = (msg_t){.src = ab ? a : b, .dst = ab ? b : a,
                       .dt = dtype_cycle[(size_t)(j + !ab) % NDTYPES],
                       .count = keyed_count(j + 3 * !ab),
                       .key = (int64_t)(KEY_BASE + KEY_STRIDE * (unsigned)j),
                       .salt = 1000u + (uint64_t)k};
    }
    for (int k = 0; k < n; k++) { /* sends in key order */
        if (m[k].src == c->rank) {
            post(c, &m[k], m[k].count);
        }
    }
    for (int i = 0; i < n; i++) { /* receives reversed at a, odd then even at b */
        int k = c->rank == a ? n - 1 - i : (2 * i + 1 < n ? 2 * i + 1 : 2 * i - n);
        if (m[k].dst == c->rank) {
            post(c, &m[k], m[k].count);
        }
    }
    for (int i = 0; i < n; i++) { /* waits with a stride coprime to n */
        wait_msg(c, &m[(i * coprime_stride(n) + 1) % n], o->timeout_ms);
    }
    for (int k = 0; k < n; k++) {
        verify(c, &m[k]);
    }
}

static void run_keyed(const check_ctx_t *c, const opts_t *o)
{
    int p[2][2], np = pairs(c, p);
    for (int i = 0; i < np; i++) {
        double t0 = check_now_s();
        if (c->rank == p[i][0] || c->rank == p[i][1]) {
            keyed_pair(c, o, p[i][0], p[i][1]);
        }
        check_say(c, 1, "keyed %s pair (%d, %d): %d messages each way out of order ok, %.1f ms",
                  p[i][0] / c->local_size == p[i][1] / c->local_size ? "local" : "remote",
                  p[i][0], p[i][1], o->messages, 1e3 * (check_now_s() - t0));
    }
}

/* ---- mismatch ------------------------------------------------------------------------------- */

/* Whether @p msg names the sent and the expected byte counts. */
static int mentions_sizes(const char *msg, size_t recv_count)
{
    char sent[32], expected[32];

    snprintf(sent, sizeof(sent), "%d bytes", 4 * MISMATCH_COUNT);
    snprintf(expected, sizeof(expected), "expected %zu", 4 * recv_count);
    return strstr(msg, sent) != NULL && strstr(msg, expected) != NULL;
}

/* a sends MISMATCH_COUNT floats to b, which expects @p recv_count: both must get MISMATCH,
 * told both sizes. */
static void mismatch_once(const check_ctx_t *c, const opts_t *o, int a, int b, size_t recv_count,
                          int64_t key)
{
    msg_t m = {.src = a, .dst = b, .dt = COLL_FLOAT32, .count = MISMATCH_COUNT, .key = key,
               .salt = 7};
    char what[256];

    post(c, &m, recv_count);
    wait_msg(c, &m, o->timeout_ms);
    describe(c, &m, c->rank == a, what, sizeof(what));
    if ((c->rank == a || c->rank == b) && m.st != COLL_ERR_MISMATCH) {
        check_die("%s: the receiver posted %zu elements: expected COLL_ERR_MISMATCH, got %s (%s)",
                  what, recv_count, coll_err_name(m.st), coll_comm_last_error(c->comm));
    }
    if (c->rank == a && !mentions_sizes(coll_comm_last_error(c->comm), recv_count)) {
        check_die("%s: the sender's error does not name %d and %zu bytes: '%s'", what,
                  4 * MISMATCH_COUNT, 4 * recv_count, coll_comm_last_error(c->comm));
    }
    if (c->rank == a || c->rank == b) {
        check_say(c, 0, "%s, receiver expecting %zu: %s: %s", what, recv_count,
                  coll_err_name(m.st), m.st == COLL_OK ? "" : coll_comm_last_error(c->comm));
        check_buf_guards(c, &m.buf, what);
        check_buf_free(c, &m.buf);
    }
}

static void run_mismatch(const check_ctx_t *c, const opts_t *o)
{
    int p[2][2], np = pairs(c, p);
    for (int i = 0; i < np; i++) {
        int a = p[i][0], b = p[i][1];
        if (c->rank != a && c->rank != b) {
            continue;
        }
        mismatch_once(c, o, a, b, MISMATCH_COUNT + 5, 0x3000 + 2 * i);
        mismatch_once(c, o, a, b, MISMATCH_COUNT - 9, 0x3001 + 2 * i);
        /* The pair still works: a matching exchange each way. */
        keyed_pair(c, o, a, b);
        check_say(c, c->rank != a, "%s pair (%d, %d): both got COLL_ERR_MISMATCH for a longer "
                  "and a shorter message; a next exchange works",
                  a / c->local_size == b / c->local_size ? "local" : "remote", a, b);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: p2p_check [--counts LIST] [--messages M] [--mismatch] [--timeout-ms T]\n"
               "Run as every rank of a collective-launch job (world size >= 2).\n"
               "  --counts LIST  ring message counts: integers (Ki/Mi suffix) or N, N-k, N+k\n"
               "                 (default 0,1,N+1,1009,65537,300007)\n"
               "  --messages M   keyed messages each way per pair, 1..%d (default 6)\n"
               "  --mismatch     size mismatches instead (see the source's header)\n"
               "  --timeout-ms T bound on each wait (default 60000)\n", MAX_MESSAGES);
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"counts", required_argument, NULL, 'c'}, {"messages", required_argument, NULL, 'm'},
        {"mismatch", no_argument, NULL, 'M'},     {"timeout-ms", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    const char *counts = "0,1,N+1,1009,65537,300007";
    int ch, bad = 0;
    long v;

    *o = (opts_t){.messages = 6, .timeout_ms = 60000};
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': counts = optarg; break;
        case 'm': bad = check_parse_int(optarg, 1, MAX_MESSAGES, &v) < 0; o->messages = (int)v; break;
        case 'M': o->mismatch = 1; break;
        case 't': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->timeout_ms = (int)v; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
    }
    if (bad || optind != argc) {
        usage(stderr);
        exit(2);
    }
    char buf[MAX_COUNTS * TOKEN_MAX], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", counts);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (o->ncounts == MAX_COUNTS || strlen(t) >= TOKEN_MAX) {
            check_usage_error("too many or too long counts in '%s'", counts);
        }
        snprintf(o->counts[o->ncounts++], TOKEN_MAX, "%s", t);
    }
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;
    size_t counts[MAX_COUNTS];
    int world, local;

    check_set_prog(argv[0]);
    parse_opts(argc, argv, &o);
    check_env_sizes(&world, &local);
    if (world < 2) {
        check_usage_error("point-to-point needs a world of at least 2 ranks, not %d", world);
    }
    for (int i = 0; i < o.ncounts; i++) {
        long long v = check_parse_count(o.counts[i], world / local);
        if (v < 0) {
            check_usage_error("bad count '%s'", o.counts[i]);
        }
        counts[i] = (size_t)v;
    }
    /* The largest messages: two of 300007 8-byte elements per rank, and their receives. */
    check_join(&c, (uint64_t)local * (64u << 20) + (16u << 20));
    if (o.mismatch) {
        run_mismatch(&c, &o);
    } else {
        run_ring(&c, &o, counts, o.ncounts);
        run_keyed(&c, &o);
    }
    check_say(&c, 1, "all checks passed: world %d (%d nodes x %d ranks)", c.world, c.nodes,
              c.local_size);
    coll_comm_destroy(c.comm);
    return 0;
}
