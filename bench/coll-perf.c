/*
 * coll-perf: nccl-tests style bandwidth and latency sweep of one libcollective collective.
 * Run as every rank of a job, e.g.
 *
 *   tools/collective-launch --nodes 2 --ranks-per-node 2 -- build-bench/bench/coll-perf \
 *       -o allreduce -b 4K -e 256M -f 4 -d float32 -r sum -c 1
 *
 * For each size: -w warmup operations; one operation timed to choose the iteration count (at
 * most -n, fewer when -n of them would take longer than -T seconds, never fewer than 3); a
 * barrier; the batch of operations back to back, each waited before the next is submitted,
 * timed with CLOCK_MONOTONIC; the per-rank times are all-gathered. With -c 1 one more operation
 * runs on fresh data and every output element is compared with a result computed here
 * independently (coll-perf-data.h); #wrong is the number of wrong elements summed over ranks.
 *
 * Conventions (those of nccl-tests, doc/PERFORMANCE.md there):
 *   size   bytes of the whole buffer: the allreduce/broadcast/reduce buffer, the reduce-scatter
 *          input (world x the output), the all-gather output (world x the input), one message
 *          of sendrecv. count is size in elements.
 *   time   per-operation wall time of a rank, averaged over the ranks (max over ranks shown too)
 *   algbw  size / time, GB/s with 1 GB = 1e9 bytes
 *   busbw  algbw x factor, n = world size (ranks, not nodes): allreduce 2(n-1)/n,
 *          reduce_scatter and allgather (n-1)/n, broadcast, reduce and sendrecv 1. It is the
 *          rate at which the slowest link of an optimal algorithm carries data, comparable
 *          across collectives and rank counts.
 *
 * The buffers come from the job's pool (coll_mem_alloc). The pool is COLL_POOL_SIZE when set,
 * otherwise coll-perf asks for what its ranks on the node need (COLL_LOCAL_SIZE ranks x the
 * buffers of -e bytes).
 *
 * Exit status: 0 all sizes ran (and were correct with -c 1), 1 an error or a wrong result,
 * 2 a usage error.
 */
#include <collective.h>

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll-perf-data.h"

#define OP_TIMEOUT_MS (10 * 60 * 1000)
#define ALGO_NAME_MAX 32
#define MIN_ITERS 3
#define POOL_ALIGN 4096
#define POOL_SLACK (1u << 20)

typedef enum {
    PERF_ALLREDUCE,
    PERF_REDUCE_SCATTER,
    PERF_ALLGATHER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_BARRIER,
    PERF_SENDRECV,
    PERF_COLL_COUNT
} perf_coll_t;

static const struct {
    const char *name;
    int reduces;
    int rooted;
} colls[PERF_COLL_COUNT] = {
    [PERF_ALLREDUCE] = {"allreduce", 1, 0},   [PERF_REDUCE_SCATTER] = {"reduce_scatter", 1, 0},
    [PERF_ALLGATHER] = {"allgather", 0, 0},   [PERF_BROADCAST] = {"broadcast", 0, 1},
    [PERF_REDUCE] = {"reduce", 1, 1},         [PERF_BARRIER] = {"barrier", 0, 0},
    [PERF_SENDRECV] = {"sendrecv", 0, 0},
};

typedef struct {
    size_t minb, maxb;
    unsigned factor;
    int iters, warmup, check, root, inplace;
    double budget_s;
    perf_coll_t coll;
    coll_dtype_t dtype;
    coll_redop_t op;
    coll_algo_t algo;
    const char *json;
} opts_t;

typedef struct {
    coll_comm_t *comm;
    int rank, world, local_size;
    size_t esize;
    uint8_t *send, *recv;  /* -e bytes each (recv only out of place) */
    double *tsend, *trecv; /* 1 and world doubles: per-rank times */
    int64_t *wsend, *wrecv;
    char algo[ALGO_NAME_MAX]; /* of the last operation */
} ctx_t;

/* One line of the table. */
typedef struct {
    size_t bytes, count;
    int iters;
    double time_us, max_us, algbw, busbw;
    double *rank_us; /* world entries */
    char algo[ALGO_NAME_MAX];
    long long wrong; /* -1: not checked */
} row_t;

static int g_rank = -1;

static void die(const char *fmt, ...)
{
    va_list ap;
    if (g_rank >= 0) {
        fprintf(stderr, "coll-perf: rank %d: ", g_rank);
    } else { /* before joining (the library printed why it could not) */
        fprintf(stderr, "coll-perf: ");
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void die_st(const ctx_t *c, const char *what, coll_status_t st)
{
    die("%s: %s (%s)%s%s", what, coll_err_name(st), coll_strerror(st),
        c->comm != NULL ? ": " : "", c->comm != NULL ? coll_comm_last_error(c->comm) : "");
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- options ------------------------------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: coll-perf [options]   (run as every rank, e.g. under collective-launch)\n"
            "  -o, --collective NAME  allreduce (default), reduce_scatter, allgather, broadcast,\n"
            "                         reduce, barrier, sendrecv\n"
            "  -b, --minbytes SIZE    smallest size (default 4K; K, M, G are powers of 1024)\n"
            "  -e, --maxbytes SIZE    largest size (default 64M)\n"
            "  -f, --stepfactor N     multiply the size by N each step (default 4)\n"
            "  -n, --iters N          timed operations per size, at most (default 100)\n"
            "  -w, --warmup_iters N   untimed operations first (default 5)\n"
            "  -T, --time SECONDS     time budget per size: fewer iterations when -n of them\n"
            "                         would take longer, never fewer than %d (default 5)\n"
            "  -c, --check 0|1        check the result on fresh data per size (default 1)\n"
            "  -d, --datatype NAME    float32 (default), float64, float16, bfloat16, int8, uint8,\n"
            "                         int32, int64\n"
            "  -r, --op NAME          sum (default), avg, prod, min, max\n"
            "  -a, --algo NAME        auto (default), ring, rd, chain, dissemination\n"
            "  -R, --root N           root rank of broadcast and reduce (default 0)\n"
            "  -i, --inplace          in place instead of out of place (not sendrecv)\n"
            "      --json PATH        also write the results as JSON to PATH (rank 0)\n"
            "  -h, --help\n",
            MIN_ITERS);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0) {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; end++; break;
    case 'm': case 'M': v *= 1048576.0; end++; break;
    case 'g': case 'G': v *= 1073741824.0; end++; break;
    default: break;
    }
    if (*end != '\0' || v > 1e15) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > 1000000000L) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* Index of @p s among the names @p name(0..n-1), or -1. */
static int parse_name(const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(s, name(i)) == 0) {
            return i;
        }
    }
    return -1;
}

static const char *coll_name_at(int i) { return colls[i].name; }
static const char *dtype_name_at(int i) { return coll_dtype_name((coll_dtype_t)i); }
static const char *redop_name_at(int i) { return coll_redop_name((coll_redop_t)i); }
static const char *algo_name_at(int i) { return coll_algo_name((coll_algo_t)i); }

static void bad_option(const char *opt, const char *value)
{
    fprintf(stderr, "coll-perf: invalid value '%s' for %s\n", value, opt);
    usage(stderr);
    exit(2);
}

static void set_name(const char *opt, const char *v, const char *(*name)(int), int n, int *out)
{
    if ((*out = parse_name(v, name, n)) < 0) {
        bad_option(opt, v);
    }
}

static void parse_option(opts_t *o, int c, const char *v)
{
    int x;
    switch (c) {
    case 'b': if (parse_size(v, &o->minb) < 0) bad_option("-b", v); break;
    case 'e': if (parse_size(v, &o->maxb) < 0) bad_option("-e", v); break;
    case 'f': if (parse_int(v, 1, &x) < 0) bad_option("-f", v); o->factor = (unsigned)x; break;
    case 'n': if (parse_int(v, 1, &o->iters) < 0) bad_option("-n", v); break;
    case 'w': if (parse_int(v, 0, &o->warmup) < 0) bad_option("-w", v); break;
    case 'c': if (parse_int(v, 0, &o->check) < 0 || o->check > 1) bad_option("-c", v); break;
    case 'R': if (parse_int(v, 0, &o->root) < 0) bad_option("-R", v); break;
    case 'T':
        if ((o->budget_s = strtod(v, NULL)) <= 0) bad_option("-T", v);
        break;
    case 'o': set_name("-o", v, coll_name_at, PERF_COLL_COUNT, &x); o->coll = x; break;
    case 'd': set_name("-d", v, dtype_name_at, COLL_DTYPE_COUNT, &x); o->dtype = x; break;
    case 'r': set_name("-r", v, redop_name_at, COLL_REDOP_COUNT, &x); o->op = x; break;
    case 'a': set_name("-a", v, algo_name_at, COLL_ALGO_COUNT, &x); o->algo = x; break;
    case 'i': o->inplace = 1; break;
    case 'J': o->json = v; break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); exit(2);
    }
}

static void parse_options(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"collective", required_argument, NULL, 'o'}, {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},   {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},      {"warmup_iters", required_argument, NULL, 'w'},
        {"time", required_argument, NULL, 'T'},       {"check", required_argument, NULL, 'c'},
        {"datatype", required_argument, NULL, 'd'},   {"op", required_argument, NULL, 'r'},
        {"algo", required_argument, NULL, 'a'},       {"root", required_argument, NULL, 'R'},
        {"inplace", no_argument, NULL, 'i'},          {"json", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
    int c;

    *o = (opts_t){.minb = 4096, .maxb = 64u << 20, .factor = 4, .iters = 100, .warmup = 5,
                  .check = 1, .budget_s = 5.0, .coll = PERF_ALLREDUCE, .dtype = COLL_FLOAT32,
                  .op = COLL_SUM, .algo = COLL_ALGO_AUTO};
    while ((c = getopt_long(argc, argv, "o:b:e:f:n:w:T:c:d:r:a:R:ih", longs, NULL)) != -1) {
        parse_option(o, c, optarg);
    }
    if (optind < argc) {
        fprintf(stderr, "coll-perf: unexpected argument '%s'\n", argv[optind]);
        exit(2);
    }
    if (o->maxb < o->minb || (o->factor < 2 && o->maxb != o->minb)) {
        fprintf(stderr, "coll-perf: need -b <= -e and -f >= 2 (or -b = -e)\n");
        exit(2);
    }
    if (o->inplace && o->coll == PERF_SENDRECV) {
        fprintf(stderr, "coll-perf: sendrecv has no in-place form\n");
        exit(2);
    }
}

/* ---- the communicator and its buffers ----------------------------------------------------- */

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/* Without COLL_POOL_SIZE: room for every local rank's buffers. */
static void pool_params(const opts_t *o, coll_comm_params_t *p)
{
    const char *ls = getenv("COLL_LOCAL_SIZE");
    long local = ls != NULL ? strtol(ls, NULL, 10) : 1;
    size_t per_rank = round_up(o->maxb, POOL_ALIGN) * (o->inplace ? 1 : 2) + POOL_SLACK;

    memset(p, 0, sizeof(*p));
    if (getenv("COLL_POOL_SIZE") == NULL) {
        p->field_mask = COLL_COMM_PARAM_POOL_SIZE;
        p->pool_bytes = (uint64_t)(local > 0 ? local : 1) * per_rank + POOL_SLACK;
    }
}

static void *pool_alloc(ctx_t *c, size_t bytes)
{
    void *p = NULL;
    coll_status_t st = coll_mem_alloc(c->comm, bytes, &p);
    if (st != COLL_OK) {
        die("coll_mem_alloc(%zu bytes): %s: %s (set COLL_POOL_SIZE larger)", bytes,
            coll_err_name(st), coll_comm_last_error(c->comm));
    }
    return p;
}

static void ctx_open(ctx_t *c, const opts_t *o)
{
    coll_comm_params_t params;
    coll_status_t st;

    memset(c, 0, sizeof(*c));
    pool_params(o, &params);
    if ((st = coll_comm_create(&params, &c->comm)) != COLL_OK) {
        die_st(c, "coll_comm_create", st);
    }
    c->rank = g_rank = coll_comm_rank(c->comm);
    c->world = coll_comm_world_size(c->comm);
    c->local_size = coll_comm_local_size(c->comm);
    c->esize = coll_dtype_size(o->dtype);
    if (o->root >= c->world) {
        die("root %d is not a rank of this job (world size %d)", o->root, c->world);
    }
    if (o->coll == PERF_SENDRECV && c->world < 2) {
        die("sendrecv needs at least 2 ranks");
    }
    c->send = pool_alloc(c, o->maxb > 0 ? o->maxb : 1);
    c->recv = o->inplace ? c->send : pool_alloc(c, o->maxb > 0 ? o->maxb : 1);
    c->tsend = pool_alloc(c, sizeof(double));
    c->trecv = pool_alloc(c, sizeof(double) * (size_t)c->world);
    c->wsend = pool_alloc(c, sizeof(int64_t));
    c->wrecv = pool_alloc(c, sizeof(int64_t));
}

/* ---- running operations ------------------------------------------------------------------- */

static coll_status_t wait_free(ctx_t *c, coll_request_t *req, int keep_algo)
{
    coll_status_t st = coll_req_wait(req, OP_TIMEOUT_MS);
    if (keep_algo) {
        const char *a = coll_req_algo(req);
        snprintf(c->algo, sizeof(c->algo), "%s", a != NULL && a[0] != '\0' ? a : "-");
    }
    coll_req_free(req);
    return st;
}

/* Waits for a just-submitted request when there is one (@p st COLL_INPROGRESS). */
static coll_status_t finish(ctx_t *c, coll_status_t st, coll_request_t *req, int keep_algo)
{
    if (st == COLL_OK && keep_algo) {
        snprintf(c->algo, sizeof(c->algo), "-");
    }
    return st == COLL_INPROGRESS ? wait_free(c, req, keep_algo) : st;
}

/* The buffers of one operation of @p count elements (count as in the table). */
static void op_buffers(const ctx_t *c, const opts_t *o, size_t count, void **sb, void **rb)
{
    size_t block = count / (size_t)c->world * c->esize;
    *sb = c->send;
    *rb = c->recv;
    if (!o->inplace) {
        return;
    }
    if (o->coll == PERF_REDUCE_SCATTER) {
        *rb = c->send + (size_t)c->rank * block;
    } else if (o->coll == PERF_ALLGATHER) {
        *sb = c->recv + (size_t)c->rank * block;
    }
}

static coll_status_t sendrecv(ctx_t *c, const opts_t *o, size_t count,
                              const coll_op_params_t *p)
{
    int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world;
    coll_request_t *rreq = NULL, *sreq = NULL;
    coll_status_t rs, ss;

    rs = coll_recv_async(c->comm, c->recv, count, o->dtype, prev, p, &rreq);
    if (rs != COLL_INPROGRESS && rs != COLL_OK) {
        return rs;
    }
    ss = coll_send_async(c->comm, c->send, count, o->dtype, next, p, &sreq);
    ss = finish(c, ss, sreq, 0);
    rs = finish(c, rs, rreq, 1);
    return ss != COLL_OK ? ss : rs;
}

/* One operation of the benchmarked collective, waited for. */
static coll_status_t run_op(ctx_t *c, const opts_t *o, size_t count)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_ALGO, .algo = o->algo};
    coll_request_t *req = NULL;
    coll_status_t st;
    void *sb, *rb;

    op_buffers(c, o, count, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLREDUCE:
        st = coll_allreduce_async(c->comm, sb, rb, count, o->dtype, o->op, &p, &req);
        break;
    case PERF_REDUCE_SCATTER:
        st = coll_reduce_scatter_async(c->comm, sb, rb, count / (size_t)c->world, o->dtype,
                                       o->op, &p, &req);
        break;
    case PERF_ALLGATHER:
        st = coll_allgather_async(c->comm, sb, rb, count / (size_t)c->world, o->dtype, &p, &req);
        break;
    case PERF_BROADCAST:
        st = coll_broadcast_async(c->comm, sb, rb, count, o->dtype, o->root, &p, &req);
        break;
    case PERF_REDUCE:
        st = coll_reduce_async(c->comm, sb, rb, count, o->dtype, o->op, o->root, &p, &req);
        break;
    case PERF_BARRIER:
        st = coll_barrier_async(c->comm, &p, &req);
        break;
    default:
        return sendrecv(c, o, count, &p);
    }
    return finish(c, st, req, 1);
}

/* The tool's own collectives (barriers, statistics) let the daemons choose the algorithm, so
 * that -a or COLL_ALGO cannot make them unsupported. */
static const coll_op_params_t auto_algo = {.field_mask = COLL_OP_PARAM_ALGO,
                                           .algo = COLL_ALGO_AUTO};

static void barrier(ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st = coll_barrier_async(c->comm, &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        die_st(c, "barrier", st);
    }
}

static double max_over_ranks(ctx_t *c, double v)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->tsend = v;
    st = coll_allreduce_async(c->comm, c->tsend, c->trecv, 1, COLL_FLOAT64, COLL_MAX,
                              &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        die_st(c, "allreduce of the time", st);
    }
    return c->trecv[0];
}

static long long sum_over_ranks(ctx_t *c, int64_t v)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->wsend = v;
    st = coll_allreduce_async(c->comm, c->wsend, c->wrecv, 1, COLL_INT64, COLL_SUM, &auto_algo,
                              &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        die_st(c, "allreduce of #wrong", st);
    }
    return (long long)*c->wrecv;
}

/* Every rank's time, into c->trecv[0..world-1]. */
static void gather_times(ctx_t *c, double t)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->tsend = t;
    st = coll_allgather_async(c->comm, c->tsend, c->trecv, 1, COLL_FLOAT64, &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        die_st(c, "allgather of the times", st);
    }
}

/* ---- one size ------------------------------------------------------------------------------ */

static void run_checked(ctx_t *c, const opts_t *o, size_t count, const char *what)
{
    coll_status_t st = run_op(c, o, count);
    if (st != COLL_OK) {
        char msg[128];
        snprintf(msg, sizeof(msg), "%s %s of %zu elements", what, colls[o->coll].name, count);
        die_st(c, msg, st);
    }
}

/* Times a batch of operations; fills iters, times and algo of @p row. */
static void time_size(ctx_t *c, const opts_t *o, row_t *row)
{
    double t0, one, sum = 0, max = 0;
    int n = o->iters;

    for (int w = 0; w < o->warmup; w++) {
        run_checked(c, o, row->count, "warmup");
    }
    barrier(c);
    t0 = now_s();
    run_checked(c, o, row->count, "sizing");
    one = max_over_ranks(c, now_s() - t0);
    if (one > 0 && one * n > o->budget_s) {
        n = (int)(o->budget_s / one);
    }
    n = n < MIN_ITERS ? MIN_ITERS : n;
    barrier(c);
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        run_checked(c, o, row->count, "timed");
    }
    gather_times(c, (now_s() - t0) / n);
    for (int r = 0; r < c->world; r++) {
        row->rank_us[r] = c->trecv[r] * 1e6;
        sum += row->rank_us[r];
        max = row->rank_us[r] > max ? row->rank_us[r] : max;
    }
    row->iters = n;
    row->time_us = sum / c->world;
    row->max_us = max;
    snprintf(row->algo, sizeof(row->algo), "%s", c->algo);
}

/* Fresh inputs for the check operation and a sentinel in every output element it must write. */
static void prepare_check(ctx_t *c, const opts_t *o, const perf_data_t *d, size_t count)
{
    size_t blk = count / (size_t)c->world, mine = (size_t)c->rank * blk;
    void *sb, *rb;

    op_buffers(c, o, count, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLGATHER:
        perf_data_poison(d, c->recv, count);
        perf_data_fill(d, c->rank, sb, mine, blk);
        break;
    case PERF_BROADCAST:
        perf_data_poison(d, rb, count);
        if (c->rank == o->root) {
            perf_data_fill(d, c->rank, sb, 0, count);
        }
        break;
    case PERF_REDUCE_SCATTER:
        perf_data_poison(d, rb, blk);
        perf_data_fill(d, c->rank, sb, 0, count);
        break;
    default: /* allreduce, reduce, sendrecv */
        perf_data_poison(d, rb, count);
        perf_data_fill(d, c->rank, sb, 0, count);
        break;
    }
}

/* Wrong elements in this rank's output of the check operation. */
static size_t count_wrong(const ctx_t *c, const opts_t *o, const perf_data_t *d, size_t count)
{
    size_t blk = count / (size_t)c->world, wrong = 0;
    void *sb, *rb;

    op_buffers(c, o, count, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLREDUCE:
        return perf_data_check_reduced(d, rb, 0, count);
    case PERF_REDUCE:
        return c->rank == o->root ? perf_data_check_reduced(d, rb, 0, count) : 0;
    case PERF_REDUCE_SCATTER:
        return perf_data_check_reduced(d, rb, (size_t)c->rank * blk, blk);
    case PERF_ALLGATHER:
        for (int b = 0; b < c->world; b++) {
            wrong += perf_data_check_input(d, b, c->recv + (size_t)b * blk * c->esize,
                                           (size_t)b * blk, blk);
        }
        return wrong;
    case PERF_BROADCAST:
        return perf_data_check_input(d, o->root, rb, 0, count);
    case PERF_SENDRECV:
        return perf_data_check_input(d, (c->rank + c->world - 1) % c->world, rb, 0, count);
    default:
        return 0;
    }
}

static long long check_size(ctx_t *c, const opts_t *o, perf_data_t *d, size_t count,
                            uint64_t seed)
{
    perf_data_seed(d, seed);
    prepare_check(c, o, d, count);
    barrier(c);
    run_checked(c, o, count, "check");
    return sum_over_ranks(c, (int64_t)count_wrong(c, o, d, count));
}

/* Elements of a @p bytes operation: whole blocks of world elements where blocks are split. */
static size_t size_count(const ctx_t *c, const opts_t *o, size_t bytes)
{
    size_t n = bytes / c->esize;
    if (o->coll == PERF_BARRIER) {
        return 0;
    }
    if (o->coll == PERF_REDUCE_SCATTER || o->coll == PERF_ALLGATHER) {
        n = n / (size_t)c->world * (size_t)c->world;
    }
    return n;
}

static double bus_factor(perf_coll_t coll, int n)
{
    switch (coll) {
    case PERF_ALLREDUCE: return 2.0 * (n - 1) / n;
    case PERF_REDUCE_SCATTER:
    case PERF_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

static void run_size(ctx_t *c, const opts_t *o, perf_data_t *d, size_t bytes, unsigned idx,
                     row_t *row)
{
    row->count = size_count(c, o, bytes);
    row->bytes = row->count * c->esize;
    time_size(c, o, row);
    row->algbw = row->time_us > 0 ? (double)row->bytes / (row->time_us * 1e3) : 0;
    row->busbw = row->algbw * bus_factor(o->coll, c->world);
    row->wrong = -1;
    if (o->check && o->coll != PERF_BARRIER) {
        row->wrong = check_size(c, o, d, row->count, ((uint64_t)o->coll << 32) | idx);
    } else if (o->check) {
        row->wrong = 0;
    }
}

/* ---- output -------------------------------------------------------------------------------- */

static const char *op_name(const opts_t *o)
{
    return colls[o->coll].reduces ? coll_redop_name(o->op) : "none";
}

static void print_header(const ctx_t *c, const opts_t *o)
{
    const char *busdef[PERF_COLL_COUNT] = {
        [PERF_ALLREDUCE] = "algbw * 2(n-1)/n", [PERF_REDUCE_SCATTER] = "algbw * (n-1)/n",
        [PERF_ALLGATHER] = "algbw * (n-1)/n",  [PERF_BROADCAST] = "algbw",
        [PERF_REDUCE] = "algbw",               [PERF_BARRIER] = "0 (no data)",
        [PERF_SENDRECV] = "algbw"};

    printf("# coll-perf: %s, %d ranks (%d nodes x %d ranks per node), %s %s, algo %s, %s\n",
           colls[o->coll].name, c->world, c->world / c->local_size, c->local_size,
           coll_dtype_name(o->dtype), op_name(o), coll_algo_name(o->algo),
           o->inplace ? "in place" : "out of place");
    printf("# sizes %zu..%zu B x%u, warmup %d, iters <= %d, budget %g s per size (at least %d "
           "iters), check %s\n", o->minb, o->maxb, o->factor, o->warmup, o->iters, o->budget_s,
           MIN_ITERS, o->check ? "on" : "off");
    printf("# time: per-op wall time averaged over ranks (max over ranks also shown); "
           "algbw = size/time; busbw = %s, n = %d; GB = 1e9 B\n", busdef[o->coll], c->world);
    printf("#%13s %12s %9s %6s %5s %6s %12s %12s %11s %11s %10s %7s\n", "size(B)", "count",
           "type", "redop", "root", "iters", "time(us)", "maxtime(us)", "algbw(GB/s)",
           "busbw(GB/s)", "algo", "#wrong");
    fflush(stdout);
}

static void print_row(const opts_t *o, const row_t *r)
{
    char wrong[24] = "N/A";
    if (r->wrong >= 0) {
        snprintf(wrong, sizeof(wrong), "%lld", r->wrong);
    }
    printf(" %13zu %12zu %9s %6s %5d %6d %12.1f %12.1f %11.3f %11.3f %10s %7s\n", r->bytes,
           r->count, coll_dtype_name(o->dtype), op_name(o), colls[o->coll].rooted ? o->root : -1,
           r->iters, r->time_us, r->max_us, r->algbw, r->busbw, r->algo, wrong);
    fflush(stdout);
}

static void print_footer(const opts_t *o, const row_t *rows, int nrows)
{
    long long wrong = 0;
    double bus = 0;
    for (int i = 0; i < nrows; i++) {
        wrong += rows[i].wrong > 0 ? rows[i].wrong : 0;
        bus += rows[i].busbw;
    }
    printf("# #wrong total: %lld (%s)\n", wrong,
           !o->check ? "not checked" : wrong ? "WRONG RESULTS" : "all sizes correct");
    printf("# avg busbw: %.3f GB/s\n", nrows > 0 ? bus / nrows : 0.0);
    fflush(stdout);
}

static void write_json(const ctx_t *c, const opts_t *o, const row_t *rows, int nrows)
{
    FILE *f = fopen(o->json, "w");
    if (f == NULL) {
        die("cannot write %s: %s", o->json, strerror(errno));
    }
    fprintf(f, "{\"tool\": \"coll-perf\", \"collective\": \"%s\", \"world\": %d, "
            "\"nodes\": %d, \"ranks_per_node\": %d, \"dtype\": \"%s\", \"op\": \"%s\", "
            "\"algo\": \"%s\", \"root\": %d, \"inplace\": %d, \"check\": %d,\n \"rows\": [",
            colls[o->coll].name, c->world, c->world / c->local_size, c->local_size,
            coll_dtype_name(o->dtype), op_name(o), coll_algo_name(o->algo), o->root, o->inplace,
            o->check);
    for (int i = 0; i < nrows; i++) {
        const row_t *r = &rows[i];
        fprintf(f, "%s\n  {\"bytes\": %zu, \"count\": %zu, \"iters\": %d, \"time_us\": %.3f, "
                "\"max_time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, \"algo\": \"%s\", "
                "\"wrong\": %lld, \"rank_time_us\": [", i ? "," : "", r->bytes, r->count,
                r->iters, r->time_us, r->max_us, r->algbw, r->busbw, r->algo, r->wrong);
        for (int k = 0; k < c->world; k++) {
            fprintf(f, "%s%.3f", k ? ", " : "", r->rank_us[k]);
        }
        fprintf(f, "]}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        die("cannot write %s: %s", o->json, strerror(errno));
    }
}

/* ---- main ---------------------------------------------------------------------------------- */

static int count_sizes(const opts_t *o)
{
    int n = 0;
    for (size_t b = o->minb; b <= o->maxb; b *= o->factor) {
        n++;
        if (o->factor < 2 || b == 0) {
            break;
        }
    }
    return n;
}

static row_t *alloc_rows(int nrows, int world)
{
    row_t *rows = calloc((size_t)nrows, sizeof(*rows));
    for (int i = 0; rows != NULL && i < nrows; i++) {
        if ((rows[i].rank_us = calloc((size_t)world, sizeof(double))) == NULL) {
            rows = NULL; /* exiting right away; nothing to free */
        }
    }
    if (rows == NULL) {
        die("out of memory");
    }
    return rows;
}

static void free_rows(row_t *rows, int nrows)
{
    for (int i = 0; i < nrows; i++) {
        free(rows[i].rank_us);
    }
    free(rows);
}

int main(int argc, char **argv)
{
    opts_t o;
    ctx_t c;
    perf_data_t data;
    row_t *rows;
    int nrows = 0, max_rows;
    long long wrong = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    parse_options(argc, argv, &o);
    ctx_open(&c, &o);
    max_rows = o.coll == PERF_BARRIER ? 1 : count_sizes(&o);
    rows = alloc_rows(max_rows, c.world);
    if (perf_data_init(&data, o.dtype, o.op, c.world, colls[o.coll].reduces) < 0) {
        die("out of memory");
    }
    if (c.rank == 0) {
        print_header(&c, &o);
    }
    for (size_t b = o.minb; nrows < max_rows; b *= o.factor, nrows++) {
        run_size(&c, &o, &data, b, (unsigned)nrows, &rows[nrows]);
        wrong += rows[nrows].wrong > 0 ? rows[nrows].wrong : 0;
        if (c.rank == 0) {
            print_row(&o, &rows[nrows]);
        }
    }
    if (c.rank == 0) {
        print_footer(&o, rows, nrows);
        if (o.json != NULL) {
            write_json(&c, &o, rows, nrows);
        }
    }
    barrier(&c);
    perf_data_free(&data);
    free_rows(rows, max_rows);
    coll_comm_destroy(c.comm);
    return wrong > 0 ? 1 : 0;
}
