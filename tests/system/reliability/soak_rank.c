/*
 * soak_rank: one trainer rank of the soak test (soak_test.py). It runs random allreduces until
 * --seconds pass or --max-ops completed: batches of 1..--window operations in flight, each with
 * a random datatype (all eight), reduction (all five), size (0 to --max-bytes, log-uniform, so
 * that most are small and some are several MiB) and placement (in or out of place, chosen per
 * rank). The choice is a function of --seed and the operation's number, the same on every rank;
 * the data come from coll_data.c (tests/system/lib), which makes every documented result exact,
 * and every element of every result is compared with the value computed here from the inputs of
 * all ranks, as are the guard bytes around each buffer and an out-of-place input afterwards.
 * Buffers are allocated in the pool for each operation and freed after it, so the pool's
 * allocator is soaked too.
 *
 * The ranks agree when to stop: every --sync batches they allreduce (MAX) a flag that a rank
 * raises when its own time or count is up.
 *
 * Output: "soak_rank: rank R: OPS N bytes B ops/s X" at the end. Exit status: 0 when every
 * result was right, 1 on a failed check (the message names the operation, the element, got and
 * expected), 2 on a usage error.
 */
#include "coll_data.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WINDOW 8
#define SENTINEL 0xa7

typedef struct {
    uint64_t seed;
    double seconds;
    long max_ops;
    size_t max_bytes;
    int window;
    int sync;
} opts_t;

/* One operation in flight. */
typedef struct {
    case_t k;
    int inplace;
    check_buf_t send, recv;
    coll_request_t *req;
    coll_status_t st;
} slot_t;

/* ---- choosing operations --------------------------------------------------------------------- */

static uint64_t rnd(const opts_t *o, uint64_t n, uint64_t what)
{
    return check_mix(check_mix(o->seed ^ (n << 8) ^ what));
}

/* Bytes in [0, max]: zero now and then, otherwise log-uniform from 1 byte to max. */
static size_t pick_bytes(const opts_t *o, uint64_t n)
{
    uint64_t h = rnd(o, n, 1);
    double u = (double)(h >> 11) / 9007199254740992.0;
    if (h % 16 == 0 || o->max_bytes == 0) {
        return 0;
    }
    return (size_t)floor(exp(u * log((double)o->max_bytes + 1)));
}

static void pick_case(const opts_t *o, uint64_t n, int rank, slot_t *s)
{
    memset(s, 0, sizeof(*s));
    s->k.kind = K_ALLREDUCE;
    s->k.dt = (coll_dtype_t)(rnd(o, n, 2) % COLL_DTYPE_COUNT);
    /* The bitwise reductions (after COLL_MAX) of the integers only. */
    s->k.op = (coll_redop_t)(rnd(o, n, 3) %
                             (check_dtype_is_float(s->k.dt) ? COLL_MAX + 1 : COLL_REDOP_COUNT));
    s->k.count = pick_bytes(o, n) / coll_dtype_size(s->k.dt);
    s->k.algo = COLL_ALGO_AUTO;
    s->k.seq = (uint32_t)n;
    s->k.iter = (int)(n >> 32);
    s->inplace = (int)(rnd(o, n, 4 + (uint64_t)rank) & 1);
    s->k.place = s->inplace ? PLACE_IN : PLACE_OUT;
}

/* ---- one operation ----------------------------------------------------------------------------- */

static void describe(const slot_t *s, char *buf, size_t len)
{
    snprintf(buf, len, "allreduce #%u %s %s count %zu %s", s->k.seq, coll_dtype_name(s->k.dt),
             coll_redop_name(s->k.op), s->k.count, s->inplace ? "in place" : "out of place");
}

static void slot_start(const check_ctx_t *c, slot_t *s)
{
    size_t bytes = s->k.count * coll_dtype_size(s->k.dt);
    char what[128];

    check_buf_alloc(c, bytes, 0, &s->recv);
    coll_data_fill(&s->k, c->world, c->rank, s->recv.data, s->k.count);
    if (!s->inplace) {
        check_buf_alloc(c, bytes, 1, &s->send);
        memcpy(s->send.data, s->recv.data, bytes);
        memset(s->recv.data, SENTINEL, bytes);
    }
    s->req = NULL;
    s->st = coll_allreduce_async(c->comm, s->inplace ? s->recv.data : s->send.data,
                                 s->recv.data, s->k.count, s->k.dt, s->k.op, NULL, &s->req);
    if (s->st != COLL_OK && s->st != COLL_INPROGRESS) {
        describe(s, what, sizeof(what));
        check_die("%s: submit: %s: %s", what, coll_err_name(s->st),
                  coll_comm_last_error(c->comm));
    }
}

static void check_values(const check_ctx_t *c, const slot_t *s, const char *what)
{
    char g[64], w[64];
    for (size_t i = 0; i < s->k.count; i++) {
        check_val_t got = check_load(s->k.dt, s->recv.data, i);
        check_val_t want = coll_data_expected(&s->k, c->world, i);
        if (!check_val_equal(s->k.dt, got, want)) {
            check_die("%s: element %zu: got %s, expected %s", what, i,
                      check_val_str(s->k.dt, got, g, sizeof(g)),
                      check_val_str(s->k.dt, want, w, sizeof(w)));
        }
    }
    if (!s->inplace) {
        for (size_t i = 0; i < s->k.count; i++) {
            check_val_t got = check_load(s->k.dt, s->send.data, i);
            check_val_t want = coll_data_input(&s->k, c->world, c->rank, i);
            if (!check_val_equal(s->k.dt, got, want)) {
                check_die("%s: input element %zu changed: %s, was %s", what, i,
                          check_val_str(s->k.dt, got, g, sizeof(g)),
                          check_val_str(s->k.dt, want, w, sizeof(w)));
            }
        }
    }
}

static void slot_finish(const check_ctx_t *c, slot_t *s)
{
    char what[128];

    describe(s, what, sizeof(what));
    if (s->st == COLL_INPROGRESS) {
        s->st = check_wait(c, s->req, 60000, what, NULL, 0);
    }
    if (s->st != COLL_OK) {
        check_die("%s: %s (%s): %s", what, coll_err_name(s->st), coll_strerror(s->st),
                  coll_comm_last_error(c->comm));
    }
    check_values(c, s, what);
    check_buf_guards(c, &s->recv, what);
    check_buf_free(c, &s->recv);
    if (!s->inplace) {
        check_buf_guards(c, &s->send, what);
        check_buf_free(c, &s->send);
    }
}

/* ---- the run ----------------------------------------------------------------------------------- */

/* Every rank's vote to stop, combined with MAX: everyone stops after the same batch. */
static int agree_stop(const check_ctx_t *c, int32_t *flag, int mine)
{
    coll_status_t st;
    *flag = mine;
    st = coll_allreduce(c->comm, flag, flag, 1, COLL_INT32, COLL_MAX);
    if (st != COLL_OK) {
        check_die("stop vote: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
    return *flag != 0;
}

static void run(const check_ctx_t *c, const opts_t *o)
{
    slot_t s[MAX_WINDOW];
    double t0 = check_now_s();
    uint64_t n = 0, bytes = 0;
    int32_t *flag;
    coll_status_t st = coll_mem_alloc(c->comm, 64, (void **)&flag);

    if (st != COLL_OK) {
        check_die("coll_mem_alloc: %s", coll_err_name(st));
    }
    for (long batch = 1;; batch++) {
        int w = 1 + (int)(rnd(o, n, 0) % (uint64_t)o->window);
        for (int i = 0; i < w; i++) {
            pick_case(o, n + (uint64_t)i, c->rank, &s[i]);
            slot_start(c, &s[i]);
            bytes += s[i].k.count * coll_dtype_size(s[i].k.dt);
        }
        for (int i = 0; i < w; i++) {
            slot_finish(c, &s[i]);
        }
        n += (uint64_t)w;
        if (batch % o->sync == 0 &&
            agree_stop(c, flag, check_now_s() - t0 >= o->seconds || (long)n >= o->max_ops)) {
            break;
        }
    }
    coll_mem_free(c->comm, flag);
    check_say(c, 0, "rank %d: OPS %llu bytes %llu ops/s %.1f", c->rank, (unsigned long long)n,
              (unsigned long long)bytes, (double)n / (check_now_s() - t0));
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: soak_rank [--seed S] [--seconds D] [--max-ops N] [--max-bytes B]\n"
            "                 [--window W] [--sync K]\n"
            "One rank of the soak test (COLL_* environment): random allreduces (every dtype\n"
            "and reduction, 0..B bytes, in or out of place, 1..W in flight), every result\n"
            "checked, until D seconds (default 30) or N operations (default unbounded); the\n"
            "ranks vote to stop every K batches (default 8). S (default 1) must be the same\n"
            "on every rank of the job; B defaults to 2 MiB, W to 3.\n");
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"seed", required_argument, NULL, 's'},      {"seconds", required_argument, NULL, 'd'},
        {"max-ops", required_argument, NULL, 'n'},   {"max-bytes", required_argument, NULL, 'b'},
        {"window", required_argument, NULL, 'w'},    {"sync", required_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
    long v;
    int ch;

    *o = (opts_t){.seed = 1, .seconds = 30, .max_ops = 1L << 40, .max_bytes = 2u << 20,
                  .window = 3, .sync = 8};
    while ((ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        int bad = 0;
        switch (ch) {
        case 's': bad = check_parse_int(optarg, 0, 1L << 40, &v); o->seed = (uint64_t)v; break;
        case 'd': bad = check_parse_int(optarg, 1, 86400, &v); o->seconds = (double)v; break;
        case 'n': bad = check_parse_int(optarg, 1, 1L << 40, &v); o->max_ops = v; break;
        case 'b': bad = check_parse_int(optarg, 0, 1L << 30, &v); o->max_bytes = (size_t)v; break;
        case 'w': bad = check_parse_int(optarg, 1, MAX_WINDOW, &v); o->window = (int)v; break;
        case 'k': bad = check_parse_int(optarg, 1, 1 << 20, &v); o->sync = (int)v; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
        if (bad) {
            usage(stderr);
            exit(2);
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;
    int world, local;
    /* Both buffers of every operation of a batch for each local rank, with room for the
     * allocator's rounding and fragmentation. */
    uint64_t per_rank;

    check_set_prog(argv[0]);
    parse_opts(argc, argv, &o);
    check_env_sizes(&world, &local);
    per_rank = 2 * (uint64_t)o.window * (o.max_bytes + 2 * CHECK_GUARD_BYTES + 4096);
    check_join(&c, 2 * per_rank * (uint64_t)local + (4u << 20));
    run(&c, &o);
    coll_comm_destroy(c.comm);
    return 0;
}
