/*
 * fault_rank: one trainer rank of the fault-injection tests (fault_test.py), joined to its job
 * through the COLL_* environment. It allreduces float32 sums of --count elements in a loop (or,
 * with --op, runs another collective over blocks of --count / world elements: all-to-alls, and
 * all-to-alls with per-pair sizes, gathers and scatters whose root moves to the next rank with
 * every operation), with --window operations in flight, and checks every element of every
 * result, until --iters have completed or one fails. It tells the test what happens on stdout,
 * one line per event:
 *
 *   JOINED rank=R world=W nodes=N t_mono=S
 *   HOLDING t_mono=S                           (--hold-start: buffers allocated, waiting)
 *   JOINFAIL status=NAME t_mono=S              (the reason printed on stderr before it)
 *   PROGRESS seq=K algo=A                      (every --progress completions; A: the
 *                                              algorithm that ran it, coll_req_algo())
 *   STALL seq=K t_mono=S t_real=S              (--stall-rank: stops submitting at seq K)
 *   ABORTED seq=K t_mono=S                     (--abort: the stall rank ended the job)
 *   LEFT seq=K t_mono=S                        (--leave: the stall rank leaves instead)
 *   FAILED seq=K status=NAME t_mono=S msg=TEXT (the first failed operation)
 *   ALSO seq=K status=NAME                     (each other operation that was in flight)
 *   DONE ops=K                                 (every operation succeeded)
 *
 * t_mono is CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic(), so the test
 * measures detection times without the delay of its pipes. After a failure (or a stall) the rank
 * keeps its communicator until its standard input closes (at most --hold-ms): the test reads the
 * daemons' /status while the failed job still exists, then closes the pipe.
 *
 * An operation in flight at a failure must fail too, or complete with the right data: a result
 * reported as success with partial data fails the test. --seed S changes every rank's data (the
 * ranks of one job share it: ranks of two jobs with different seeds that end up in one job see
 * wrong sums); --hold-start makes the rank wait, once JOINED, until its standard input closes
 * before the first operation.
 *
 * Exit status: 0 DONE, 3 FAILED (the test decides whether that was expected), 4 JOINFAIL,
 * 1 a wrong result or another broken promise, 2 a usage error.
 */
#include <collective.h>

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_WINDOW 16
#define EXIT_FAILED 3
#define EXIT_JOINFAIL 4
#define LEAVE_WAIT_MS 500 /* --leave: the others wait this long before operation K */
#define ABORT_WAIT_MS 200 /* --abort: the stall rank waits this long before it aborts */

typedef struct {
    size_t count;
    int window;
    long iters;
    int progress;
    int stall_rank;
    long stall_after;
    int leave; /* the stall rank leaves (coll_comm_destroy) instead of holding */
    int linger; /* --leave: the others go on at once, the leaving process stays (hold_ms) */
    int abort; /* the stall rank ends the job (coll_comm_abort) before holding */
    int hold_ms;
    int hold_start; /* wait for stdin to close before the first operation */
    uint32_t seed;  /* mixed into every input */
    int op;         /* the collective (op_t): blocks of count / world elements but allreduce */
} opts_t;

/* The collectives of --op. */
typedef enum { OP_ALLREDUCE, OP_ALLTOALL, OP_ALLTOALLV, OP_GATHER, OP_SCATTER, OP_COUNT } op_t;

static const char *const op_names[OP_COUNT] = {"allreduce", "alltoall", "alltoallv", "gather",
                                               "scatter"};

/* One operation slot: its buffers stay allocated for the whole run. */
typedef struct {
    float *send, *recv;
    coll_request_t *req;
    char algo[32]; /* of its last completion */
    long seq;     /* the operation it runs, -1 when idle */
    coll_status_t st; /* the submission's status when it did not return COLL_INPROGRESS */
} slot_t;

typedef struct {
    coll_comm_t *comm;
    int rank, world, nodes;
    const opts_t *o;
    size_t block; /* elements of one rank's block (but for allreduces): count / world */
    size_t *scounts, *rcounts, *displs; /* [world] each: an all-to-all's counts to and from
                                           each rank, and its block's displacement (j x block) */
    slot_t slots[MAX_WINDOW];
} run_t;

static int g_rank = -1;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "fault_rank: rank %d: FAIL: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* ---- data: small integers, so that float32 sums are exact in any order -------------------- */

static int input_value(int rank, size_t i, long seq, uint32_t seed)
{
    uint32_t h = (uint32_t)i * 2654435761u ^ (uint32_t)seq * 40503u ^ seed * 2246822519u;
    return (int)(((uint32_t)(rank + 1) * (1u + h % 97u)) % 512u) - 256;
}

static void fill(const run_t *r, slot_t *s)
{
    for (size_t i = 0; i < r->o->count; i++) {
        s->send[i] = (float)input_value(r->rank, i, s->seq, r->o->seed);
        s->recv[i] = -1e30f;
    }
}

/* Elements rank @p from sends rank @p to in an all-to-all: a whole block, or with per-pair
 * sizes 0 to 2 fewer (none when the block is that small). */
static size_t pair_count(const run_t *r, int from, int to)
{
    size_t less = (size_t)(from + 2 * to) % 3;
    if (r->o->op == OP_ALLTOALL) {
        return r->block;
    }
    return r->block > less ? r->block - less : 0;
}

/* What element @p i of this rank's output must hold after operation @p seq (a gather's or
 * scatter's root: rank seq mod world): the allreduce's sum, an element of some rank's input,
 * or -1e30 where nothing may be written. */
static float expected(const run_t *r, size_t i, long seq)
{
    const size_t b = r->block;
    const int root = (int)(seq % r->world), W = r->world;
    size_t q = b > 0 ? i / b : (size_t)W, j = b > 0 ? i % b : 0;
    uint32_t seed = r->o->seed;

    switch (r->o->op) {
    case OP_ALLREDUCE: {
        int sum = 0;
        for (int p = 0; p < W; p++) {
            sum += input_value(p, i, seq, seed);
        }
        return (float)sum;
    }
    case OP_GATHER: /* rank q's first b elements in block q of the root's buffer */
        return r->rank == root && q < (size_t)W ? (float)input_value((int)q, j, seq, seed) : -1e30f;
    case OP_SCATTER: /* block r of the root's buffer */
        return i < b ? (float)input_value(root, (size_t)r->rank * b + i, seq, seed) : -1e30f;
    default: /* block q: rank q's block for this rank, pair_count() elements of it */
        return q < (size_t)W && j < pair_count(r, (int)q, r->rank)
                   ? (float)input_value((int)q, (size_t)r->rank * b + j, seq, seed)
                   : -1e30f;
    }
}

static void check(const run_t *r, const slot_t *s)
{
    for (size_t i = 0; i < r->o->count; i++) {
        float want = expected(r, i, s->seq);
        if (s->recv[i] != want) {
            die("%s %ld completed with COLL_OK but element %zu of %zu is %.9g, expected %.9g",
                op_names[r->o->op], s->seq, i, r->o->count, s->recv[i], want);
        }
    }
}

/* ---- the loop ----------------------------------------------------------------------------- */

/* Keep the communicator (and the failed job) until the test closes our standard input. */
static void hold(int ms)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    char buf[256];
    double end = clock_s(CLOCK_MONOTONIC) + ms / 1e3;

    for (;;) {
        int left = (int)((end - clock_s(CLOCK_MONOTONIC)) * 1e3);
        if (left <= 0 || poll(&p, 1, left) < 0 || read(STDIN_FILENO, buf, sizeof(buf)) <= 0) {
            return;
        }
    }
}

static void submit(run_t *r, slot_t *s, long seq)
{
    s->seq = seq;
    s->req = NULL;
    fill(r, s);
    switch (r->o->op) {
    case OP_ALLREDUCE:
        s->st = coll_allreduce_async(r->comm, s->send, s->recv, r->o->count, COLL_FLOAT32,
                                     COLL_SUM, NULL, &s->req);
        break;
    case OP_ALLTOALL:
        s->st = coll_alltoall_async(r->comm, s->send, s->recv, r->block, COLL_FLOAT32, NULL,
                                    &s->req);
        break;
    case OP_ALLTOALLV:
        s->st = coll_alltoallv_async(r->comm, s->send, r->scounts, r->displs, s->recv,
                                     r->rcounts, r->displs, COLL_FLOAT32, NULL, &s->req);
        break;
    case OP_GATHER: /* the root of operation K is rank K mod world; others pass no output */
        s->st = coll_gather_async(r->comm, s->send, seq % r->world == r->rank ? s->recv : NULL,
                                  r->block, COLL_FLOAT32, (int)(seq % r->world), NULL, &s->req);
        break;
    default:
        s->st = coll_scatter_async(r->comm, s->send, s->recv, r->block, COLL_FLOAT32,
                                   (int)(seq % r->world), NULL, &s->req);
        break;
    }
}

static coll_status_t finish(slot_t *s)
{
    coll_status_t st = s->st;
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(s->req, -1); /* the library bounds it by the job's timeout + 2 s */
        snprintf(s->algo, sizeof(s->algo), "%s", coll_req_algo(s->req));
        coll_req_free(s->req);
        s->req = NULL;
    }
    s->st = COLL_OK;
    return st;
}

/* The first failure: report it, then settle every other operation in flight. */
static int report_failure(run_t *r, long first, coll_status_t st)
{
    double t = clock_s(CLOCK_MONOTONIC);
    const int W = r->o->window;

    say("FAILED seq=%ld status=%s t_mono=%.6f msg=%s", first, coll_err_name(st), t,
        coll_comm_last_error(r->comm));
    for (long k = first + 1; k < first + W; k++) {
        slot_t *s = &r->slots[k % W];
        if (s->seq != k) {
            continue;
        }
        coll_status_t other = finish(s);
        say("ALSO seq=%ld status=%s", k, coll_err_name(other));
        if (other == COLL_OK) {
            check(r, s);
        }
        s->seq = -1;
    }
    hold(r->o->hold_ms);
    return EXIT_FAILED;
}

static int stall(const run_t *r, long seq)
{
    say("STALL seq=%ld t_mono=%.6f t_real=%.6f", seq, clock_s(CLOCK_MONOTONIC),
        clock_s(CLOCK_REALTIME));
    if (r->o->abort) {
        usleep(ABORT_WAIT_MS * 1000); /* the others wait in their next collective by then */
        coll_status_t st = coll_comm_abort(r->comm, "fault_rank --abort");
        say("ABORTED seq=%ld status=%s t_mono=%.6f", seq, coll_err_name(st),
            clock_s(CLOCK_MONOTONIC));
    }
    hold(r->o->hold_ms);
    return 0;
}

/* --leave: the stall rank ends its part between operations, nothing pending; main() destroys
 * its communicator right after this line. */
static int leave(long seq)
{
    say("LEFT seq=%ld t_mono=%.6f", seq, clock_s(CLOCK_MONOTONIC));
    return 0;
}

static int run_loop(run_t *r)
{
    const opts_t *o = r->o;
    const int W = o->window;
    long next = 0;

    for (; next < W && next < o->iters; next++) {
        if (r->rank == o->stall_rank && next == o->stall_after) {
            /* --stall-after below the window: operation K never submitted */
            return o->leave ? leave(next) : stall(r, next);
        }
        submit(r, &r->slots[next % W], next);
    }
    for (long done = 0; done < o->iters; done++) {
        slot_t *s = &r->slots[done % W];
        coll_status_t st = finish(s);
        if (st != COLL_OK) {
            return report_failure(r, done, st);
        }
        check(r, s);
        s->seq = -1;
        if (o->progress > 0 && (done + 1) % o->progress == 0) {
            say("PROGRESS seq=%ld algo=%s", done, s->algo);
        }
        if (next < o->iters) {
            if (r->rank == o->stall_rank && next == o->stall_after) {
                return o->leave ? leave(next) : stall(r, next);
            }
            if (o->leave && !o->linger && next == o->stall_after) {
                usleep(LEAVE_WAIT_MS * 1000); /* its daemon has seen it leave by then */
            }
            submit(r, s, next++);
        }
    }
    say("DONE ops=%ld", o->iters);
    return 0;
}

/* ---- setup -------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fault_rank [--count N] [--window W] [--iters K] [--progress P]\n"
            "                  [--stall-rank R --stall-after K [--leave|--abort]] [--hold-ms T]\n"
            "                  [--seed S] [--hold-start] [--op OP]\n"
            "One rank of a fault-injection test (COLL_* environment): float32 sum allreduces of\n"
            "N elements (default 262144), W in flight (default 2), K of them (default: until\n"
            "one fails), every result checked. Prints JOINED, PROGRESS (every P completions,\n"
            "default 1), STALL, FAILED, ALSO and DONE lines; after a failure or stall it keeps\n"
            "the job until stdin closes, at most T ms (default 60000).\n"
            "  --stall-rank R --stall-after K  rank R stops submitting before operation K\n"
            "                                 (K = 0: it submits none)\n"
            "  --leave  rank R then leaves the job (LEFT, exit 0) instead of holding it; the\n"
            "           others wait 500 ms before operation K (needs --window 1)\n"
            "  --linger  with --leave: the others submit at once, and rank R's process stays\n"
            "           (LINGER) after it left, until stdin closes (at most T ms)\n"
            "  --abort  rank R ends the job (coll_comm_abort, ABORTED) 200 ms after it\n"
            "           stopped submitting, and then holds it\n"
            "  --seed S       mix S into every input (default 0)\n"
            "  --hold-start   once joined, wait until stdin closes before operating\n"
            "  --op OP        the collective: allreduce (default), or over blocks of\n"
            "                 N / world_size elements alltoall, alltoallv (0 to 2 elements\n"
            "                 fewer for some pairs), gather or scatter (the root of\n"
            "                 operation K: rank K mod world_size)\n"
            "exit: 0 done, 3 an operation failed, 4 the join failed, 1 a wrong result, 2 usage\n");
}

static long parse_long(const char *s, long lo, long hi)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        usage(stderr);
        exit(2);
    }
    return v;
}

static int parse_op(const char *s)
{
    for (int k = 0; k < OP_COUNT; k++) {
        if (strcmp(s, op_names[k]) == 0) {
            return k;
        }
    }
    usage(stderr);
    exit(2);
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"count", required_argument, NULL, 'c'},       {"window", required_argument, NULL, 'w'},
        {"iters", required_argument, NULL, 'i'},       {"progress", required_argument, NULL, 'p'},
        {"stall-rank", required_argument, NULL, 'r'},  {"stall-after", required_argument, NULL, 'a'},
        {"hold-ms", required_argument, NULL, 't'},     {"help", no_argument, NULL, 'h'},
        {"leave", no_argument, NULL, 'l'},    {"linger", no_argument, NULL, 'g'},    {"abort", no_argument, NULL, 'x'},
        {"seed", required_argument, NULL, 's'}, {"hold-start", no_argument, NULL, 'H'},
        {"op", required_argument, NULL, 'o'},   {NULL, 0, NULL, 0}};
    int ch;

    *o = (opts_t){.count = 262144, .window = 2, .iters = 1L << 40, .progress = 1,
                  .stall_rank = -1, .stall_after = -1, .hold_ms = 60000};
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 'c': o->count = (size_t)parse_long(optarg, 0, 1L << 28); break;
        case 'w': o->window = (int)parse_long(optarg, 1, MAX_WINDOW); break;
        case 'i': o->iters = parse_long(optarg, 1, 1L << 40); break;
        case 'p': o->progress = (int)parse_long(optarg, 0, 1 << 20); break;
        case 'r': o->stall_rank = (int)parse_long(optarg, 0, 1 << 20); break;
        case 'a': o->stall_after = parse_long(optarg, 0, 1L << 40); break;
        case 't': o->hold_ms = (int)parse_long(optarg, 0, 3600000); break;
        case 'l': o->leave = 1; break;
        case 'g': o->linger = 1; break;
        case 'x': o->abort = 1; break;
        case 's': o->seed = (uint32_t)parse_long(optarg, 0, 0x7fffffff); break;
        case 'H': o->hold_start = 1; break;
        case 'o': o->op = parse_op(optarg); break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); exit(2);
        }
    }
    if (optind != argc || (o->leave && (o->window != 1 || o->stall_rank < 0)) ||
        (o->linger && !o->leave) ||
        (o->abort && (o->leave || o->stall_rank < 0))) {
        usage(stderr);
        exit(2);
    }
}

static void alloc_slots(run_t *r)
{
    size_t bytes = r->o->count * sizeof(float) + 64;
    for (int w = 0; w < r->o->window; w++) {
        slot_t *s = &r->slots[w];
        coll_status_t st = coll_mem_alloc(r->comm, bytes, (void **)&s->send);
        if (st == COLL_OK) {
            st = coll_mem_alloc(r->comm, bytes, (void **)&s->recv);
        }
        if (st != COLL_OK) {
            die("coll_mem_alloc(%zu bytes): %s: %s", bytes, coll_err_name(st),
                coll_comm_last_error(r->comm));
        }
        s->seq = -1;
    }
}

/* Blocks of count / world elements; an all-to-all's counts and displacements by rank. */
static void plan_blocks(run_t *r)
{
    r->block = r->o->count / (size_t)r->world;
    r->scounts = calloc((size_t)r->world, sizeof(size_t));
    r->rcounts = calloc((size_t)r->world, sizeof(size_t));
    r->displs = calloc((size_t)r->world, sizeof(size_t));
    if (r->scounts == NULL || r->rcounts == NULL || r->displs == NULL) {
        die("out of memory for %d ranks' counts", r->world);
    }
    for (int j = 0; j < r->world; j++) {
        r->scounts[j] = pair_count(r, r->rank, j);
        r->rcounts[j] = pair_count(r, j, r->rank);
        r->displs[j] = (size_t)j * r->block;
    }
}

int main(int argc, char **argv)
{
    coll_comm_params_t params = {.field_mask = COLL_COMM_PARAM_POOL_SIZE};
    opts_t o;
    run_t r = {.o = &o};
    coll_status_t st;
    int rc;

    parse_opts(argc, argv, &o);
    /* Unless COLL_POOL_SIZE asks otherwise: both buffers of every slot, with room to spare. */
    params.field_mask = getenv("COLL_POOL_SIZE") != NULL ? 0 : COLL_COMM_PARAM_POOL_SIZE;
    params.pool_bytes = 2 * (uint64_t)o.window * (o.count * sizeof(float) + 4096) * 4 + (8u << 20);
    st = coll_comm_create(&params, &r.comm);
    if (st != COLL_OK) {
        /* The library returns the reason and no longer prints it (COLL_DEBUG): the tests read it
         * here. */
        fprintf(stderr, "fault_rank: coll_comm_create: %s\n", coll_comm_last_error(NULL));
        say("JOINFAIL status=%s t_mono=%.6f", coll_err_name(st), clock_s(CLOCK_MONOTONIC));
        return EXIT_JOINFAIL;
    }
    r.rank = g_rank = coll_comm_rank(r.comm);
    r.world = coll_comm_world_size(r.comm);
    r.nodes = r.world / coll_comm_local_size(r.comm);
    say("JOINED rank=%d world=%d nodes=%d t_mono=%.6f", r.rank, r.world, r.nodes,
        clock_s(CLOCK_MONOTONIC));
    alloc_slots(&r);
    plan_blocks(&r);
    if (o.hold_start) {
        say("HOLDING t_mono=%.6f", clock_s(CLOCK_MONOTONIC));
        hold(o.hold_ms);
    }
    rc = run_loop(&r);
    coll_comm_destroy(r.comm);
    if (o.linger && r.rank == o.stall_rank) {
        say("LINGER t_mono=%.6f", clock_s(CLOCK_MONOTONIC));
        hold(o.hold_ms);
    }
    free(r.scounts);
    free(r.rcounts);
    free(r.displs);
    return rc;
}
