/*
 * misuse_check: one rank of a collective-launch job that misuses the API in one way (--case)
 * and checks that every rank gets an error with its buffers as they were before the call:
 *
 *   overlap   every rank but rank 0 allreduces --count float32 elements from a buffer into the
 *             same buffer shifted by --shift elements (partly overlapping; rank 0 out of place).
 *             Every rank's call or request fails; every byte of every rank's buffers is as
 *             before the call (the overlapping ranks' whole allocation, rank 0's output).
 *   keyreuse  every rank submits two allreduces with the same key, back to back. The second
 *             submit is refused with COLL_ERR_INVALID on every rank and the first request fails
 *             too; the second's buffers are untouched, the first's output is untouched or holds
 *             the right sum (it may have finished on its node before the key came again).
 *   free      the last rank submits its allreduce 300 ms late; meanwhile rank 0 frees the buffer
 *             of its own pending allreduce: coll_mem_free() refuses it with COLL_ERR_BUSY, a
 *             new allocation is not written by the allreduce, which completes with the right
 *             sum on every rank, and the buffer can be freed once it completed.
 *   root      a broadcast in which each rank names itself as the root: every rank's call or
 *             request fails, every output holds its sentinel and every input its data.
 *   stream    the last rank submits an allreduce of a key no other rank uses, then one with a
 *             stream on host buffers (refused: COLL_ERR_INVALID naming the stream) where the
 *             others submit their allreduce. It sees its own code (COLL_ERR_INVALID) on its
 *             keyed request and its next call; every other rank's allreduce and next call end
 *             with COLL_ERR_JOB naming the last rank and the stream; no output is written.
 *   count     the last rank asks a reduce-scatter of SIZE_MAX / 2 + 1 elements per rank (its
 *             world_size blocks overflow), the others one of --count: refused there at once
 *             (COLL_ERR_INVALID naming coll_reduce_scatter_async and the count); every other
 *             rank's reduce-scatter ends with COLL_ERR_JOB naming the last rank and the call
 *             within QUICK_MS (well before the job's timeout), and its next call too; no output
 *             is written.
 *   kinds     ranks submit different collectives under one key (--count elements, one node):
 *             rank 1 a broadcast that goes to the daemon (it asks for compression), every other
 *             rank an allreduce that the local ranks run in shared memory. Every rank's request
 *             ends with COLL_ERR_MISMATCH naming each side by its ranks and collective ("ranks
 *             0,2: allreduce key 9, in shared memory; rank 1: broadcast key 9, to the daemon"),
 *             no rank as "not submitted"; no output is written.
 *
 * Exit status: 0 the rule held on this rank, 1 it did not (a message says how), 2 usage.
 */
#include "check_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WAIT_MS 30000
#define QUICK_MS 5000
#define LATE_MS 300
#define SENTINEL -7.0f

typedef struct {
    const char *name;
    size_t count;
    size_t shift;
} opts_t;

/* Small integers: float32 sums of them are exact in any order. */
static float value(int rank, size_t i, int salt)
{
    return (float)((int)((i * 2654435761u + (size_t)salt * 40503u) % 97u) - 48 + rank);
}

static void fill(float *p, size_t n, int rank, int salt)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = salt < 0 ? SENTINEL : value(rank, i, salt);
    }
}

/* Die unless @p p holds what fill(p, n, rank, salt) wrote. */
static void unchanged(const float *p, size_t n, int rank, int salt, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = salt < 0 ? SENTINEL : value(rank, i, salt);
        if (p[i] != want) {
            check_die("%s: element %zu of %zu was written (%.9g, was %.9g)", what, i, n,
                      (double)p[i], (double)want);
        }
    }
}

static float *alloc(const check_ctx_t *c, size_t elems)
{
    void *p;
    coll_status_t st = coll_mem_alloc(c->comm, elems * sizeof(float) + 64, &p);

    if (st != COLL_OK) {
        check_die("coll_mem_alloc: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
    return p;
}

/* Every rank has its buffers before any misuses them (an allocation after the job failed
 * would fail). A rank that left the barrier first may misuse the API and end the job before
 * this rank's barrier completed (its daemon hears of the failure before the barrier's last
 * message): COLL_ERR_JOB, and the case goes on to check what this rank's calls get then. */
static void barrier(const check_ctx_t *c)
{
    coll_request_t *req;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);

    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, WAIT_MS, "barrier", NULL, 0);
    }
    if (st != COLL_OK && st != COLL_ERR_JOB) {
        check_die("barrier: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
}

/* The call's status, or its request's once it ended (bounded). */
static coll_status_t outcome(const check_ctx_t *c, coll_status_t st, coll_request_t *req,
                             const char *what)
{
    return st == COLL_INPROGRESS ? check_wait(c, req, WAIT_MS, what, NULL, 0) : st;
}

static void expect_failed(const check_ctx_t *c, coll_status_t st, const char *what)
{
    if (st == COLL_OK) {
        check_die("%s returned COLL_OK", what);
    }
    check_say(c, 0, "rank %d: %s: %s: %s", c->rank, what, coll_err_name(st),
              coll_comm_last_error(c->comm));
}

/* Die unless @p p holds the sum over @p world ranks of fill(.., rank, 1). */
static void expect_sum(const float *p, size_t n, int world, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float want = 0;
        for (int r = 0; r < world; r++) {
            want += value(r, i, 1);
        }
        if (p[i] != want) {
            check_die("%s: element %zu is %.9g, expected %.9g", what, i, (double)p[i],
                      (double)want);
        }
    }
}

static void case_overlap(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count, s = o->shift;
    float *in = alloc(c, n + s), *out = c->rank == 0 ? alloc(c, n) : in + s;
    coll_request_t *req = NULL;
    coll_status_t st;

    fill(in, n + s, c->rank, 1);
    if (c->rank == 0) {
        fill(out, n, c->rank, -1);
    }
    barrier(c);
    st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
    expect_failed(c, outcome(c, st, req, "allreduce"), "overlapping allreduce");
    unchanged(in, c->rank == 0 ? n : n + s, c->rank, 1, "the input");
    if (c->rank == 0) {
        unchanged(out, n, c->rank, -1, "rank 0's output");
    }
}

static void case_keyreuse(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count;
    float *in1 = alloc(c, n), *out1 = alloc(c, n), *in2 = alloc(c, n), *out2 = alloc(c, n);
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY, .key = 77};
    coll_request_t *r1 = NULL, *r2 = NULL;
    coll_status_t st1, st2;

    fill(in1, n, c->rank, 1);
    fill(in2, n, c->rank, 2);
    fill(out1, n, c->rank, -1);
    fill(out2, n, c->rank, -1);
    barrier(c);
    st1 = coll_allreduce_async(c->comm, in1, out1, n, COLL_FLOAT32, COLL_SUM, &p, &r1);
    st2 = coll_allreduce_async(c->comm, in2, out2, n, COLL_FLOAT32, COLL_SUM, &p, &r2);
    if (st2 != COLL_ERR_INVALID) {
        check_die("the second submit of key 77 returned %s, expected COLL_ERR_INVALID",
                  coll_err_name(st2));
    }
    expect_failed(c, outcome(c, st1, r1, "the first allreduce of key 77"),
                  "the first allreduce of key 77");
    unchanged(in2, n, c->rank, 2, "the second input");
    unchanged(out2, n, c->rank, -1, "the second output");
    if (out1[0] == SENTINEL) {
        unchanged(out1, n, c->rank, -1, "the first output");
    } else {
        expect_sum(out1, n, c->world, "the first output (written: it must hold the sum)");
    }
}

static void sleep_ms(int ms)
{
    nanosleep(&(struct timespec){ms / 1000, (long)(ms % 1000) * 1000000}, NULL);
}

static void case_free(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count;
    float *buf = alloc(c, n), *next;
    coll_request_t *req = NULL;
    coll_status_t st;

    fill(buf, n, c->rank, 1);
    barrier(c);
    if (c->rank == c->world - 1) {
        sleep_ms(LATE_MS);
    }
    st = coll_allreduce_async(c->comm, buf, buf, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
    if (st != COLL_INPROGRESS) {
        check_die("allreduce: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
    if (c->rank == 0 && (st = coll_mem_free(c->comm, buf)) != COLL_ERR_BUSY) {
        check_die("coll_mem_free of the buffer of a pending allreduce returned %s, expected "
                  "COLL_ERR_BUSY", coll_err_name(st));
    }
    next = alloc(c, n);
    fill(next, n, c->rank, -1);
    if ((st = check_wait(c, req, WAIT_MS, "allreduce", NULL, 0)) != COLL_OK) {
        check_die("allreduce: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
    unchanged(next, n, c->rank, -1, "the allocation after the refused free");
    expect_sum(buf, n, c->world, "the allreduce");
    if ((st = coll_mem_free(c->comm, buf)) != COLL_OK) {
        check_die("coll_mem_free after completion: %s", coll_err_name(st));
    }
    check_say(c, 1, "free of a buffer in flight refused; the allreduce completed correctly");
}

static void case_root(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count;
    float *in = alloc(c, n), *out = alloc(c, n);
    coll_request_t *req = NULL;
    coll_status_t st;

    fill(in, n, c->rank, 1);
    fill(out, n, c->rank, -1);
    barrier(c);
    st = coll_broadcast_async(c->comm, in, out, n, COLL_FLOAT32, c->rank, NULL, &req);
    expect_failed(c, outcome(c, st, req, "broadcast"), "broadcast with disagreeing roots");
    unchanged(in, n, c->rank, 1, "the input");
    unchanged(out, n, c->rank, -1, "the output");
}

/* Whether @p msg names "rank R" (not a rank whose number starts with R's digits). */
static int names_rank(const char *msg, int r)
{
    char who[32];
    size_t len = (size_t)snprintf(who, sizeof(who), "rank %d", r);

    for (const char *p = strstr(msg, who); p != NULL; p = strstr(p + 1, who)) {
        if (p[len] < '0' || p[len] > '9') {
            return 1;
        }
    }
    return 0;
}

/* @p st and the last error are @p want and name the refusing rank @p culprit and @p word (what
 * it refused). */
static void expect_refusal(const check_ctx_t *c, coll_status_t st, coll_status_t want,
                           int culprit, const char *word, const char *what)
{
    const char *msg = coll_comm_last_error(c->comm);

    if (st != want || !names_rank(msg, culprit) || strstr(msg, word) == NULL) {
        check_die("%s: %s, expected %s naming rank %d and '%s': '%s'", what, coll_err_name(st),
                  coll_err_name(want), culprit, word, msg);
    }
    check_say(c, 0, "rank %d: %s: %s: %s", c->rank, what, coll_err_name(st), msg);
}

static void case_stream(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count;
    int culprit = c->world - 1, mine = c->rank == culprit;
    float *in = alloc(c, n), *out = alloc(c, n);
    coll_op_params_t keyed = {.field_mask = COLL_OP_PARAM_KEY, .key = 5};
    coll_op_params_t streamed = {.field_mask = COLL_OP_PARAM_STREAM, .stream = NULL};
    coll_status_t want = mine ? COLL_ERR_INVALID : COLL_ERR_JOB;
    coll_request_t *req = NULL, *lone = NULL;
    coll_status_t st;

    fill(in, n, c->rank, 1);
    fill(out, n, c->rank, -1);
    barrier(c);
    if (mine) {
        st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, &keyed, &lone);
        if (st != COLL_INPROGRESS) {
            check_die("the allreduce of key 5: %s: %s", coll_err_name(st),
                      coll_comm_last_error(c->comm));
        }
        st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, &streamed, &req);
        expect_refusal(c, st, COLL_ERR_INVALID, culprit, "stream",
                       "the allreduce with a stream");
        st = outcome(c, COLL_INPROGRESS, lone, "the allreduce of key 5");
        expect_refusal(c, st, COLL_ERR_INVALID, culprit, "stream",
                       "its pending allreduce of key 5");
    } else {
        st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
        expect_refusal(c, outcome(c, st, req, "allreduce"), COLL_ERR_JOB, culprit, "stream",
                       "the allreduce the last rank refused");
    }
    st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
    expect_refusal(c, outcome(c, st, req, "the next allreduce"), want, culprit, "stream",
                   "the next allreduce");
    unchanged(in, n, c->rank, 1, "the input");
    unchanged(out, n, c->rank, -1, "the output");
}

static void case_count(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count, all = n * (size_t)c->world;
    int culprit = c->world - 1, mine = c->rank == culprit;
    float *in = alloc(c, all), *out = alloc(c, n);
    coll_status_t want = mine ? COLL_ERR_INVALID : COLL_ERR_JOB;
    const char *call = "coll_reduce_scatter_async";
    coll_request_t *req = NULL;
    coll_status_t st;
    double t0;

    fill(in, all, c->rank, 1);
    fill(out, n, c->rank, -1);
    barrier(c);
    t0 = check_now_s();
    st = coll_reduce_scatter_async(c->comm, in, out, mine ? SIZE_MAX / 2 + 1 : n, COLL_FLOAT32,
                                   COLL_SUM, NULL, &req);
    st = st == COLL_INPROGRESS ? check_wait(c, req, QUICK_MS, "reduce-scatter", NULL, 0) : st;
    expect_refusal(c, st, want, culprit, call, "the reduce-scatter");
    if (mine && strstr(coll_comm_last_error(c->comm), "9223372036854775808") == NULL) {
        check_die("the refusal does not name the count: '%s'", coll_comm_last_error(c->comm));
    }
    check_say(c, 0, "rank %d: the reduce-scatter ended after %.3f s", c->rank,
              check_now_s() - t0);
    st = coll_reduce_scatter_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
    expect_refusal(c, outcome(c, st, req, "the next reduce-scatter"), want, culprit, call,
                   "the next reduce-scatter");
    unchanged(in, all, c->rank, 1, "the input");
    unchanged(out, n, c->rank, -1, "the output");
}

/* "ranks 0,2,3" (every rank but @p but) or "rank 1" (@p but < 0: rank 1) into @p buf. */
static void ranks_text(int world, int but, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%s", but < 0 ? "rank 1" : "ranks ");

    for (int r = 0; but >= 0 && r < world && n < len; r++) {
        if (r != but) {
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n > 6 ? "," : "", r);
        }
    }
}

static void case_kinds(const check_ctx_t *c, const opts_t *o)
{
    size_t n = o->count;
    float *in = alloc(c, n), *out = alloc(c, n);
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY | COLL_OP_PARAM_COMPRESSION, .key = 9,
                          .compression = {.method = COLL_COMPRESS_FP16}};
    char others[200], one[64], want_a[256], want_b[128];
    coll_request_t *req = NULL;
    coll_status_t st;
    const char *msg;

    if (c->world < 3) {
        check_die("the kinds case needs 3 ranks or more (ranks 0 and 2 on one side)");
    }
    fill(in, n, c->rank, 1);
    fill(out, n, c->rank, -1);
    barrier(c);
    if (c->rank == 1) {
        st = coll_broadcast_async(c->comm, in, out, n, COLL_FLOAT32, 0, &p, &req);
    } else {
        p.field_mask = COLL_OP_PARAM_KEY;
        st = coll_allreduce_async(c->comm, in, out, n, COLL_FLOAT32, COLL_SUM, &p, &req);
    }
    st = outcome(c, st, req, c->rank == 1 ? "broadcast" : "allreduce");
    msg = coll_comm_last_error(c->comm);
    ranks_text(c->world, 1, others, sizeof(others));
    ranks_text(c->world, -1, one, sizeof(one));
    snprintf(want_a, sizeof(want_a), "%s: allreduce key 9, in shared memory", others);
    snprintf(want_b, sizeof(want_b), "%s: broadcast key 9, to the daemon", one);
    if (st != COLL_ERR_MISMATCH || strstr(msg, want_a) == NULL || strstr(msg, want_b) == NULL ||
        strstr(msg, "not submitted") != NULL) {
        check_die("different collectives of key 9: %s, expected COLL_ERR_MISMATCH naming '%s' "
                  "and '%s', no rank 'not submitted': '%s'", coll_err_name(st), want_a, want_b,
                  msg);
    }
    check_say(c, 0, "rank %d: different collectives of key 9: %s: %s", c->rank,
              coll_err_name(st), msg);
    unchanged(in, n, c->rank, 1, "the input");
    unchanged(out, n, c->rank, -1, "the output");
}

static void usage(const char *prog)
{
    printf("usage: %s --case overlap|keyreuse|free|root|stream|count|kinds [--count N] "
           "[--shift S]\n"
           "Run as every rank of a collective-launch job; see the comment at the top of\n"
           "tests/system/reliability/misuse_check.c for what each case checks.\n", prog);
}

static void parse(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {{"case", required_argument, NULL, 'c'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"shift", required_argument, NULL, 's'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
    long v;
    int ch;

    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        if (ch == 'c') {
            o->name = optarg;
        } else if (ch == 'n' && check_parse_int(optarg, 1, 1L << 26, &v) == 0) {
            o->count = (size_t)v;
        } else if (ch == 's' && check_parse_int(optarg, 1, 1L << 20, &v) == 0) {
            o->shift = (size_t)v;
        } else if (ch == 'h') {
            usage(argv[0]);
            exit(0);
        } else {
            check_usage_error("bad option or value");
        }
    }
    if (o->name == NULL) {
        check_usage_error("--case is required");
    }
}

int main(int argc, char **argv)
{
    opts_t o = {NULL, 100000, 17};
    check_ctx_t c;
    int world, local;

    check_set_prog(argv[0]);
    parse(argc, argv, &o);
    check_env_sizes(&world, &local);
    check_join(&c, (uint64_t)local * 8 * (o.count + o.shift + 16) * sizeof(float) + (4u << 20));
    if (strcmp(o.name, "overlap") == 0) {
        case_overlap(&c, &o);
    } else if (strcmp(o.name, "keyreuse") == 0) {
        case_keyreuse(&c, &o);
    } else if (strcmp(o.name, "free") == 0) {
        case_free(&c, &o);
    } else if (strcmp(o.name, "root") == 0) {
        case_root(&c, &o);
    } else if (strcmp(o.name, "stream") == 0) {
        case_stream(&c, &o);
    } else if (strcmp(o.name, "count") == 0) {
        case_count(&c, &o);
    } else if (strcmp(o.name, "kinds") == 0) {
        case_kinds(&c, &o);
    } else {
        check_usage_error("unknown case %s", o.name);
    }
    coll_comm_destroy(c.comm);
    return 0;
}
