/*
 * barrier_check: one rank of an engine integration test of coll_barrier_async(), started as
 * every rank of a local cluster by collective-launch.
 *
 * In each round a rank sleeps (its place in that round's order) * --step-ms before it enters
 * the barrier, so the ranks enter one after the other. It notes CLOCK_REALTIME (shared by all
 * processes of the machine) just before submitting the barrier and just after the wait returns;
 * an all-gather then gives every rank all the times, and every rank's exit must come after the
 * last rank's entry. Rounds use different orders (by rank, reversed, rotated by half the world),
 * so the last rank to enter is on the first node, the last one or in between. Each round runs
 * with every algorithm of --algos (auto, dissemination); coll_req_algo() must name it (on one
 * node "shm" for auto, where the local ranks meet in shared memory, and "local" for a forced
 * one, which the daemon runs).
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 3

typedef struct {
    int step_ms;
    int algos[2], nalgos;
    int timeout_ms;
} opts_t;

/* This rank's place in the entry order of round @p round. */
static int place_in_round(const check_ctx_t *c, int round)
{
    switch (round % ROUNDS) {
    case 0: return c->rank;
    case 1: return c->world - 1 - c->rank;
    default: return (c->rank + c->world / 2) % c->world;
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

/* Every rank's (entry, exit) times, via an all-gather of int64 pairs. */
static void gather_times(const check_ctx_t *c, const opts_t *o, const int64_t mine[2],
                         int64_t *all)
{
    check_buf_t send, recv;
    coll_request_t *req;
    coll_status_t st;

    check_buf_alloc(c, 2 * sizeof(int64_t), 1, &send);
    check_buf_alloc(c, 2 * sizeof(int64_t) * (size_t)c->world, 0, &recv);
    memcpy(send.data, mine, 2 * sizeof(int64_t));
    st = coll_allgather_async(c->comm, send.data, recv.data, 2, COLL_INT64, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, o->timeout_ms, "all-gather of the barrier times", NULL, 0);
    }
    if (st != COLL_OK) {
        check_die("all-gather of the barrier times: %s: %s", coll_err_name(st),
                  coll_comm_last_error(c->comm));
    }
    memcpy(all, recv.data, 2 * sizeof(int64_t) * (size_t)c->world);
    check_buf_free(c, &send);
    check_buf_free(c, &recv);
}

/* Dissemination is the only barrier algorithm across nodes; on one node the local ranks meet
 * in shared memory, unless an algorithm is forced (the daemon's "local" then). */
static void check_algo(const check_ctx_t *c, const char *got, const char *what, int algo)
{
    const char *want = c->nodes > 1 ? "dissemination"
                       : algo == COLL_ALGO_AUTO && coll_comm_shm_max_bytes(c->comm) > 0 ? "shm"
                                                                                          : "local";
    if (strcmp(got, want) != 0) {
        check_die("%s: coll_req_algo() says '%s', expected '%s'", what, got, want);
    }
}

static void run_round(const check_ctx_t *c, const opts_t *o, int round, int algo)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_ALGO, .algo = (coll_algo_t)algo};
    int64_t times[2], *all = malloc(2 * sizeof(int64_t) * (size_t)c->world), last_in = 0;
    int last = 0;
    char what[160], got[32];
    coll_request_t *req;
    coll_status_t st;

    if (all == NULL) {
        check_die("out of memory");
    }
    snprintf(what, sizeof(what), "barrier round %d (algo %s, world %d = %d nodes x %d)", round,
             coll_algo_name((coll_algo_t)algo), c->world, c->nodes, c->local_size);
    sleep_ms(place_in_round(c, round) * o->step_ms);
    times[0] = check_realtime_ns();
    st = coll_barrier_async(c->comm, &p, &req);
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, o->timeout_ms, what, got, sizeof(got));
    }
    times[1] = check_realtime_ns();
    if (st != COLL_OK) {
        check_die("%s: %s: %s", what, coll_err_name(st), coll_comm_last_error(c->comm));
    }
    check_algo(c, got, what, algo);
    gather_times(c, o, times, all);
    for (int r = 0; r < c->world; r++) {
        if (all[2 * r] > last_in) {
            last_in = all[2 * r];
            last = r;
        }
    }
    for (int r = 0; r < c->world; r++) {
        if (all[2 * r + 1] < last_in) {
            check_die("%s: rank %d left the barrier %.3f ms before rank %d entered it", what, r,
                      1e-6 * (double)(last_in - all[2 * r + 1]), last);
        }
    }
    check_say(c, 1, "%s: every rank left after the last entry (rank %d); rank 0 left %.3f ms "
              "after it", what, last, 1e-6 * (double)(all[1] - last_in));
    free(all);
}

static void usage(FILE *f)
{
    fprintf(f, "usage: barrier_check [--step-ms MS] [--algos auto,dissemination] "
               "[--timeout-ms T]\n"
               "Run as every rank of a collective-launch job.\n"
               "  --step-ms MS   delay between the entries of consecutive ranks (default 100)\n"
               "  --algos LIST   auto and/or dissemination (default both)\n"
               "  --timeout-ms T bound on each wait (default 60000)\n");
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"step-ms", required_argument, NULL, 's'}, {"algos", required_argument, NULL, 'a'},
        {"timeout-ms", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int ch, bad = 0;
    long v;

    *o = (opts_t){.step_ms = 100, .algos = {COLL_ALGO_AUTO, COLL_ALGO_DISSEMINATION},
                  .nalgos = 2, .timeout_ms = 60000};
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': bad = check_parse_int(optarg, 0, 10000, &v) < 0; o->step_ms = (int)v; break;
        case 'a':
            o->nalgos = 0;
            for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t != NULL && !bad;
                 t = strtok_r(NULL, ",", &save)) {
                int a = strcmp(t, "auto") == 0            ? COLL_ALGO_AUTO
                        : strcmp(t, "dissemination") == 0 ? COLL_ALGO_DISSEMINATION
                                                          : -1;
                bad = a < 0 || o->nalgos == 2;
                o->algos[o->nalgos++ % 2] = a;
            }
            break;
        case 't': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->timeout_ms = (int)v; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
    }
    if (bad || optind != argc || o->nalgos == 0) {
        usage(stderr);
        exit(2);
    }
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;

    check_set_prog(argv[0]);
    parse_opts(argc, argv, &o);
    check_join(&c, 16u << 20);
    for (int round = 0; round < ROUNDS; round++) {
        for (int a = 0; a < o.nalgos; a++) {
            run_round(&c, &o, round, o.algos[a]);
        }
    }
    check_say(&c, 1, "all checks passed: world %d (%d nodes x %d ranks)", c.world, c.nodes,
              c.local_size);
    coll_comm_destroy(c.comm);
    return 0;
}
