/*
 * rooted_check: one rank of an engine integration test of coll_gather_async() and
 * coll_scatter_async(), started as every rank of a local cluster by collective-launch.
 *
 * Default mode: for each count of --counts, each root (the first, a middle and the last rank)
 * and each datatype (4, 1, 8 and 2 bytes per element), a gather and a scatter in flight
 * together, out of place, then both again in place at the root (the root's own block of its
 * buffer). The data are bytes computed from (rank, round, position), so the test knows every
 * byte: the gather's root must hold every rank's block in rank order, every scatter output
 * block r of the root's buffer; send buffers stay unchanged, guards intact, non-roots' gather
 * receive buffers are not even passed. coll_req_algo() must say "direct" (several nodes) or
 * "local" (one).
 *
 * --mismatch gather|scatter: rank --mismatch-rank submits another count (count + count/2 + 1)
 * than the others: every rank must get COLL_ERR_MISMATCH naming both counts, and no receive
 * buffer may change (the root's, for a gather; every rank's, for a scatter).
 *
 * --mismatch allreduce: rank --mismatch-rank submits an allreduce of the first count where the
 * others submit a gather of it (the same key): every rank must get COLL_ERR_MISMATCH naming both
 * collectives, at once, not at the timeout, even on one node, where the allreduce waits in the
 * shared-memory area and the gathers in the daemon; the root's buffer stays unchanged.
 *
 * --bad-root: every rank names root = world size: every call returns COLL_ERR_INVALID at once,
 * saying the root is not a rank, and the job is failed for every later operation.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_COUNTS 16
#define TOKEN_MAX 32
#define SENTINEL 0xa5
#define MISMATCH_DEADLINE_MS 30000

typedef struct {
    char counts[MAX_COUNTS][TOKEN_MAX];
    int ncounts;
    int mismatch;      /* 0: none, else GATHER, SCATTER or ALLREDUCE */
    int mismatch_rank;
    int bad_root;
    int timeout_ms;
} opts_t;

enum { GATHER = 1, SCATTER = 2, ALLREDUCE = 3 };

static const coll_dtype_t dtypes[] = {COLL_FLOAT32, COLL_INT8, COLL_FLOAT64, COLL_BFLOAT16};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* Byte @p k of rank @p r's send buffer in round @p round. */
static uint8_t data_byte(int r, uint64_t round, size_t k)
{
    return (uint8_t)(check_mix(round * 0x9e3779b97f4a7c15ull + ((uint64_t)r << 48) + k / 8) >>
                     (8 * (k % 8)));
}

/* One operation of this rank: its buffers (the in-place one aliases @c big). */
typedef struct {
    int kind;
    check_buf_t big, small; /* the root's whole buffer, every rank's block */
    coll_request_t *req;
    coll_status_t st;
} op_t;

static const char *kind_name(int kind)
{
    return kind == GATHER ? "gather" : "scatter";
}

static void fill(uint8_t *p, size_t n, int r, uint64_t round)
{
    for (size_t k = 0; k < n; k++) {
        p[k] = data_byte(r, round, k);
    }
}

/* Allocate and fill this rank's buffers: the root's big one (gather: receive, sentinel;
 * scatter: send, its data), every rank's block (gather: its data; scatter: sentinel) unless
 * in place at the root. */
static void prepare(const check_ctx_t *c, op_t *o, int kind, size_t bytes, int root,
                    int inplace, uint64_t round)
{
    size_t all = bytes * (size_t)c->world;

    *o = (op_t){.kind = kind};
    if (c->rank == root) {
        check_buf_alloc(c, all, 2 * kind, &o->big);
        memset(o->big.data, SENTINEL, all);
        if (kind == SCATTER) {
            fill(o->big.data, all, root, round);
        }
    }
    if (!(inplace && c->rank == root)) {
        check_buf_alloc(c, bytes, 2 * kind + 1, &o->small);
        memset(o->small.data, SENTINEL, bytes);
    }
    if (kind == GATHER) {
        uint8_t *mine = o->small.data != NULL ? o->small.data
                                              : o->big.data + (size_t)root * bytes;
        fill(mine, bytes, c->rank, round);
    }
}

/* The block of this rank: its own buffer, or its block of the root's in place. */
static uint8_t *block(const check_ctx_t *c, const op_t *o, size_t bytes)
{
    return o->small.alloc != NULL ? o->small.data : o->big.data + (size_t)c->rank * bytes;
}

static coll_status_t submit(const check_ctx_t *c, op_t *o, size_t count, coll_dtype_t dt,
                            int root)
{
    size_t bytes = count * coll_dtype_size(dt);
    void *big = o->big.alloc != NULL ? o->big.data : NULL;
    void *mine = block(c, o, bytes);

    o->st = o->kind == GATHER
                ? coll_gather_async(c->comm, mine, big, count, dt, root, NULL, &o->req)
                : coll_scatter_async(c->comm, big, mine, count, dt, root, NULL, &o->req);
    return o->st;
}

static void die_at(const char *what, const op_t *o, size_t k, uint8_t got, uint8_t want)
{
    check_die("%s: byte %zu is 0x%02x, expected 0x%02x (%s)", what, k, got, want,
              kind_name(o->kind));
}

/* The outputs hold what every rank computes here; the inputs are unchanged. */
static void verify(const check_ctx_t *c, const op_t *o, size_t bytes, int root, uint64_t round,
                   const char *what)
{
    const uint8_t *mine = block(c, o, bytes);

    for (size_t k = 0; o->kind == GATHER && c->rank == root && k < bytes * c->world; k++) {
        uint8_t want = data_byte((int)(k / bytes), round, k % bytes);
        if (o->big.data[k] != want) {
            die_at(what, o, k, o->big.data[k], want);
        }
    }
    for (size_t k = 0; o->kind == SCATTER && c->rank == root && k < bytes * c->world; k++) {
        if (o->big.data[k] != data_byte(root, round, k)) {
            die_at(what, o, k, o->big.data[k], data_byte(root, round, k));
        }
    }
    for (size_t k = 0; k < bytes; k++) {
        uint8_t want = o->kind == GATHER ? data_byte(c->rank, round, k)
                                         : data_byte(root, round, (size_t)c->rank * bytes + k);
        if (mine[k] != want) {
            die_at(what, o, k, mine[k], want);
        }
    }
}

static void release(const check_ctx_t *c, op_t *o, const char *what)
{
    if (o->big.alloc != NULL) {
        check_buf_guards(c, &o->big, what);
        check_buf_free(c, &o->big);
    }
    if (o->small.alloc != NULL) {
        check_buf_guards(c, &o->small, what);
        check_buf_free(c, &o->small);
    }
}

/* A gather and a scatter of @p count elements of @p dt from @p root, in flight together. */
static void round_pair(const check_ctx_t *c, const opts_t *opt, size_t count, coll_dtype_t dt,
                       int root, int inplace, uint64_t round)
{
    size_t bytes = count * coll_dtype_size(dt);
    op_t ops[2];
    char what[2][200], algo[32];
    const char *want_algo = c->nodes > 1 ? "direct" : "local";

    for (int i = 0; i < 2; i++) {
        snprintf(what[i], sizeof(what[i]), "%s of %zu %s from root %d %s (world %d = %d x %d)",
                 kind_name(GATHER + i), count, coll_dtype_name(dt), root,
                 inplace ? "in place" : "out of place", c->world, c->nodes, c->local_size);
        prepare(c, &ops[i], GATHER + i, bytes, root, inplace, round * 2 + (uint64_t)i);
        if (submit(c, &ops[i], count, dt, root) != COLL_INPROGRESS) {
            check_die("%s: submitting: %s: %s", what[i], coll_err_name(ops[i].st),
                      coll_comm_last_error(c->comm));
        }
    }
    for (int i = 0; i < 2; i++) {
        coll_status_t st = check_wait(c, ops[i].req, opt->timeout_ms, what[i], algo,
                                      sizeof(algo));
        if (st != COLL_OK) {
            check_die("%s: %s: %s", what[i], coll_err_name(st), coll_comm_last_error(c->comm));
        }
        if (strcmp(algo, want_algo) != 0) {
            check_die("%s ran '%s', expected '%s'", what[i], algo, want_algo);
        }
        verify(c, &ops[i], bytes, root, round * 2 + (uint64_t)i, what[i]);
        release(c, &ops[i], what[i]);
    }
}

static void run_all(const check_ctx_t *c, const opts_t *o, const size_t *counts)
{
    int roots[3] = {0, c->world / 2, c->world - 1};
    uint64_t round = 0;
    double t0 = check_now_s();

    for (int i = 0; i < o->ncounts; i++) {
        for (size_t d = 0; d < NDTYPES; d++) {
            for (int r = 0; r < 3; r++) {
                round_pair(c, o, counts[i], dtypes[d], roots[r], 0, round++);
                round_pair(c, o, counts[i], dtypes[d], roots[r], 1, round++);
            }
        }
    }
    check_say(c, 1, "gather and scatter: %llu rounds of both ok, %.1f ms",
              (unsigned long long)round, 1e3 * (check_now_s() - t0));
}

/* ---- failures -------------------------------------------------------------------------------- */

/* Every rank holds its buffers before anyone submits what fails the job: a failed job
 * allocates nothing. */
static void barrier(const check_ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);

    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, MISMATCH_DEADLINE_MS, "barrier before the failure", NULL, 0);
    }
    if (st != COLL_OK) {
        check_die("barrier before the failure: %s: %s", coll_err_name(st),
                  coll_comm_last_error(c->comm));
    }
}

static int names_count(const char *msg, size_t n)
{
    char want[40];
    snprintf(want, sizeof(want), "count=%zu ", n);
    return strstr(msg, want) != NULL;
}

/* The mismatching submission of run_mismatch(): another count, or another collective. */
static coll_status_t submit_mismatch(const check_ctx_t *c, const opts_t *o, op_t *op,
                                     size_t count, size_t other, int root)
{
    if (c->rank != o->mismatch_rank) {
        return submit(c, op, count, COLL_FLOAT32, root);
    }
    if (o->mismatch != ALLREDUCE) {
        return submit(c, op, other, COLL_FLOAT32, root);
    }
    void *mine = block(c, op, count * 4);
    return op->st = coll_allreduce_async(c->comm, mine, mine, count, COLL_FLOAT32, COLL_SUM,
                                         NULL, &op->req);
}

/* Whether @p msg names what differs: both counts, or both collectives. */
static int names_difference(const opts_t *o, const char *msg, size_t count, size_t other)
{
    if (o->mismatch == ALLREDUCE) {
        return strstr(msg, "allreduce") != NULL && strstr(msg, "gather") != NULL;
    }
    return names_count(msg, count) && names_count(msg, other);
}

static void run_mismatch(const check_ctx_t *c, const opts_t *o, size_t count)
{
    size_t other = count + count / 2 + 1;
    int root = c->world - 1, kind = o->mismatch == ALLREDUCE ? GATHER : o->mismatch;
    op_t op;
    char what[200];

    /* Buffers for the larger count, so that only the daemons can refuse it. */
    prepare(c, &op, kind, other * 4, root, 0, 1);
    snprintf(what, sizeof(what), "%s from root %d where rank %d submits %s", kind_name(kind),
             root, o->mismatch_rank, o->mismatch == ALLREDUCE ? "an allreduce" : "more elements");
    barrier(c);
    if (submit_mismatch(c, o, &op, count, other, root) != COLL_INPROGRESS) {
        check_die("%s: submitting: %s: %s", what, coll_err_name(op.st),
                  coll_comm_last_error(c->comm));
    }
    op.st = check_wait(c, op.req, MISMATCH_DEADLINE_MS, what, NULL, 0);
    const char *msg = coll_comm_last_error(c->comm);
    if (op.st != COLL_ERR_MISMATCH || !names_difference(o, msg, count, other)) {
        check_die("%s: %s, expected COLL_ERR_MISMATCH naming both: '%s'", what,
                  coll_err_name(op.st), msg);
    }
    /* No output: the gather's root's buffer, every scatter output, all still the sentinel. */
    const uint8_t *out = kind == GATHER ? op.big.data : op.small.data;
    size_t n = kind == GATHER ? (c->rank == root ? other * 4 * (size_t)c->world : 0) : other * 4;
    for (size_t k = 0; k < n; k++) {
        if (out[k] != SENTINEL) {
            die_at(what, &op, k, out[k], SENTINEL);
        }
    }
    release(c, &op, what);
    check_say(c, 0, "%s: COLL_ERR_MISMATCH, no output written: %s", what, msg);
}

static void run_bad_root(const check_ctx_t *c)
{
    op_t ops[2];
    char what[64];

    for (int kind = GATHER; kind <= SCATTER; kind++) {
        prepare(c, &ops[kind - GATHER], kind, 64, c->rank, 0, 0);
    }
    barrier(c);
    for (int kind = GATHER; kind <= SCATTER; kind++) {
        op_t *op = &ops[kind - GATHER];
        snprintf(what, sizeof(what), "%s from root %d", kind_name(kind), c->world);
        coll_status_t st = submit(c, op, 16, COLL_FLOAT32, c->world);
        const char *msg = coll_comm_last_error(c->comm);
        if (kind == GATHER && (st != COLL_ERR_INVALID || strstr(msg, "root") == NULL)) {
            check_die("%s: %s, expected COLL_ERR_INVALID naming the root: '%s'", what,
                      coll_err_name(st), msg);
        }
        if (kind == SCATTER && st == COLL_INPROGRESS) {
            check_die("%s after a refused gather: accepted; the job should have failed", what);
        }
        release(c, op, what);
        check_say(c, 0, "%s: %s: %s", what, coll_err_name(st), msg);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: rooted_check [--counts LIST] [--mismatch gather|scatter|allreduce "
               "--mismatch-rank R] [--bad-root] [--timeout-ms T]\n"
               "Run as every rank of a collective-launch job.\n"
               "  --counts LIST      integers (Ki/Mi suffix) or N, N-k, N+k (default "
               "0,1,N+1,1009,65537)\n"
               "  --mismatch KIND    rank R submits another count (the first count); with\n"
               "                     allreduce, an allreduce where the others gather\n"
               "  --bad-root         every rank names a root outside the job\n"
               "  --timeout-ms T     bound on each wait (default 60000)\n");
}

static void parse_counts(opts_t *o, const char *counts)
{
    char buf[MAX_COUNTS * TOKEN_MAX], *save = NULL;

    snprintf(buf, sizeof(buf), "%s", counts);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (o->ncounts == MAX_COUNTS || strlen(t) >= TOKEN_MAX) {
            check_usage_error("too many or too long counts in '%s'", counts);
        }
        snprintf(o->counts[o->ncounts++], TOKEN_MAX, "%s", t);
    }
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"counts", required_argument, NULL, 'c'},  {"mismatch", required_argument, NULL, 'm'},
        {"mismatch-rank", required_argument, NULL, 'r'}, {"bad-root", no_argument, NULL, 'b'},
        {"timeout-ms", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *counts = "0,1,N+1,1009,65537";
    int ch, bad = 0;
    long v;

    *o = (opts_t){.timeout_ms = 60000, .mismatch_rank = -1};
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': counts = optarg; break;
        case 'm':
            o->mismatch = strcmp(optarg, "gather") == 0    ? GATHER
                          : strcmp(optarg, "scatter") == 0 ? SCATTER
                          : strcmp(optarg, "allreduce") == 0 ? ALLREDUCE : -1;
            bad = o->mismatch < 0;
            break;
        case 'r':
            bad = check_parse_int(optarg, 0, 1 << 20, &v) < 0;
            o->mismatch_rank = (int)v;
            break;
        case 'b': o->bad_root = 1; break;
        case 't': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->timeout_ms = (int)v; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
    }
    if (bad || optind != argc || (o->mismatch > 0) != (o->mismatch_rank >= 0)) {
        usage(stderr);
        exit(2);
    }
    parse_counts(o, counts);
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
    for (int i = 0; i < o.ncounts; i++) {
        long long v = check_parse_count(o.counts[i], world / local);
        if (v < 0) {
            check_usage_error("bad count '%s'", o.counts[i]);
        }
        counts[i] = (size_t)v;
    }
    if (o.mismatch_rank >= world) {
        check_usage_error("--mismatch-rank %d beyond the world of %d", o.mismatch_rank, world);
    }
    /* The largest buffers: a root's world blocks of 65537 8-byte elements, twice. */
    check_join(&c, (uint64_t)local * (8u << 20) + (uint64_t)world * (4u << 20) + (16u << 20));
    if (o.mismatch) {
        run_mismatch(&c, &o, counts[0]);
    } else if (o.bad_root) {
        run_bad_root(&c);
    } else {
        run_all(&c, &o, counts);
    }
    check_say(&c, 1, "all checks passed: world %d (%d nodes x %d ranks)", c.world, c.nodes,
              c.local_size);
    coll_comm_destroy(c.comm);
    return 0;
}
