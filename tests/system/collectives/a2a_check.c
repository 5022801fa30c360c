/*
 * a2a_check: one rank of an engine integration test of coll_alltoallv_async() and
 * coll_alltoall_async(), started as every rank of a local cluster by collective-launch.
 *
 * Default mode: for each scale of --scales and each datatype (4, 1, 8 and 2 bytes per element),
 * two alltoallvs in flight together whose counts differ per pair of ranks (some 0, so some
 * ranks send nothing to some others), then one equal-block alltoall. Blocks lie at awkward
 * displacements: the send buffer holds them in reverse rank order with a gap element after
 * each, the receive buffer in rank order with two gap elements after each. Every byte is
 * computed from (sender, receiver, round, position), so the test knows the whole receive
 * buffer: each block where it belongs, the gaps untouched, the send buffer unchanged, guards
 * intact. coll_req_algo() must say "direct". Then the same on the communicators split by rank
 * parity, in reverse rank order (group ranks, its nodes and its tags), two dtypes.
 *
 * --mismatch count: rank --odd-rank expects one element more from rank 0 than rank 0
 * sends it (and rank 0 sends it at least one): every rank must get COLL_ERR_MISMATCH naming that
 * pair, and no receive buffer may change.
 * --mismatch dtype: rank --odd-rank submits int32 where the others submit float32 (the
 * same width): COLL_ERR_MISMATCH on every rank naming both, no receive buffer changed.
 * --mismatch allreduce: rank --odd-rank submits an allreduce where the others submit an
 * alltoallv (the same key): COLL_ERR_MISMATCH on every rank naming both, at once, not at the
 * timeout, also on one node, where the allreduce waits in the shared-memory area and the
 * alltoallvs in the daemon; no receive buffer changed.
 * --null-counts: rank --odd-rank passes no recvcounts: its call returns COLL_ERR_INVALID at
 * once naming them, and every rank's operation fails (the job with it), no output written.
 * --overlap: rank --odd-rank places its blocks from rank 0 and from itself (both non-empty) at
 * the same displacement: as --null-counts, COLL_ERR_INVALID at once naming the overlap, the job
 * failed for all, no output written.
 * --abort: rank --odd-rank aborts the job where the others submit an alltoallv: every
 * other rank's request fails (not at the timeout) with the reason, no receive buffer changed.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <collective_groups.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCALES 8
#define SENTINEL 0xa5
#define FAIL_DEADLINE_MS 30000
#define ABORT_REASON "a2a_check aborts on purpose"

enum { NONE = 0, COUNT = 1, DTYPE = 2, ABORT = 3, ALLREDUCE = 4, NULL_COUNTS = 5, OVERLAP = 6 };

typedef struct {
    long scales[MAX_SCALES];
    int nscales;
    int mode;
    int odd_rank;
    int timeout_ms;
} opts_t;

static const coll_dtype_t dtypes[] = {COLL_FLOAT32, COLL_INT8, COLL_FLOAT64, COLL_BFLOAT16};
#define NDTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

/* One alltoallv of this rank: its count table (in elements) and its buffers. */
typedef struct {
    int world;
    size_t es;
    size_t *sc, *sd, *rc, *rd; /* world entries each */
    size_t send_elems, recv_elems;
    check_buf_t send, recv;
    coll_request_t *req;
    coll_status_t st;
} a2a_t;

/* Elements rank @p i sends rank @p j in round @p round at @p scale: 0 for about one pair in
 * five, otherwise between 1 and 4 x scale + 2 (all ranks compute the same). */
static size_t pair_count(int i, int j, uint64_t round, long scale, int equal)
{
    uint64_t h = check_mix(((uint64_t)i << 40) ^ ((uint64_t)j << 20) ^ (round * 0x9e37u));

    if (equal) {
        return (size_t)scale;
    }
    return h % 5 == 0 ? 0 : (size_t)((h >> 8) % 4 + 1) * (size_t)scale + (size_t)((h >> 16) % 3);
}

/* Byte @p k of the block rank @p i sends rank @p j in round @p round. */
static uint8_t data_byte(int i, int j, uint64_t round, size_t k)
{
    return (uint8_t)(check_mix(round * 0x9e3779b97f4a7c15ull + ((uint64_t)i << 48) +
                               ((uint64_t)j << 32) + k / 8) >> (8 * (k % 8)));
}

/* The table of rank @p me: send blocks in reverse rank order with a gap element after each,
 * receive blocks in rank order with two gap elements after each; with @p equal blocks, both
 * packed in rank order (coll_alltoall_async()). */
static void layout(a2a_t *a, int me, uint64_t round, long scale, int equal)
{
    int w = a->world;
    size_t off = 0;

    for (int k = 0; k < w; k++) {
        int j = equal ? k : w - 1 - k;
        a->sc[j] = pair_count(me, j, round, scale, equal);
        a->sd[j] = off;
        off += a->sc[j] + (equal ? 0 : 1);
    }
    a->send_elems = off;
    off = 0;
    for (int i = 0; i < w; i++) {
        a->rc[i] = pair_count(i, me, round, scale, equal);
        a->rd[i] = off;
        off += a->rc[i] + (equal ? 0 : 2);
    }
    a->recv_elems = off;
}

static void prepare(const check_ctx_t *c, a2a_t *a, coll_dtype_t dt, uint64_t round,
                    long scale, int equal)
{
    *a = (a2a_t){.world = c->world, .es = coll_dtype_size(dt)};
    a->sc = calloc(4 * (size_t)c->world, sizeof(size_t));
    if (a->sc == NULL) {
        check_die("no memory");
    }
    a->sd = a->sc + c->world;
    a->rc = a->sd + c->world;
    a->rd = a->rc + c->world;
    layout(a, c->rank, round, scale, equal);
    check_buf_alloc(c, a->send_elems * a->es, 0, &a->send);
    check_buf_alloc(c, a->recv_elems * a->es, 1, &a->recv);
    memset(a->send.data, SENTINEL, a->send.bytes);
    memset(a->recv.data, SENTINEL, a->recv.bytes);
    for (int j = 0; j < c->world; j++) {
        for (size_t k = 0; k < a->sc[j] * a->es; k++) {
            a->send.data[a->sd[j] * a->es + k] = data_byte(c->rank, j, round, k);
        }
    }
}

static coll_status_t submit(const check_ctx_t *c, a2a_t *a, coll_dtype_t dt, int equal)
{
    if (equal) {
        return a->st = coll_alltoall_async(c->comm, a->send.data, a->recv.data, a->sc[0], dt,
                                           NULL, &a->req);
    }
    return a->st = coll_alltoallv_async(c->comm, a->send.data, a->sc, a->sd, a->recv.data, a->rc,
                                        a->rd, dt, NULL, &a->req);
}

/* The byte the receive buffer must hold at @p k: a block's, or the sentinel in a gap. */
static uint8_t want_recv(const a2a_t *a, int me, uint64_t round, size_t k)
{
    for (int i = 0; i < a->world; i++) {
        size_t lo = a->rd[i] * a->es, n = a->rc[i] * a->es;
        if (k >= lo && k < lo + n) {
            return data_byte(i, me, round, k - lo);
        }
    }
    return SENTINEL;
}

static void verify(const check_ctx_t *c, const a2a_t *a, uint64_t round, const char *what)
{
    for (size_t k = 0; k < a->recv.bytes; k++) {
        uint8_t want = want_recv(a, c->rank, round, k);
        if (a->recv.data[k] != want) {
            check_die("%s: receive byte %zu is 0x%02x, expected 0x%02x", what, k,
                      a->recv.data[k], want);
        }
    }
    for (int j = 0; j < c->world; j++) {
        for (size_t k = 0; k < a->sc[j] * a->es; k++) {
            if (a->send.data[a->sd[j] * a->es + k] != data_byte(c->rank, j, round, k)) {
                check_die("%s: send block for rank %d changed at byte %zu", what, j, k);
            }
        }
    }
}

static void release(const check_ctx_t *c, a2a_t *a, const char *what)
{
    check_buf_guards(c, &a->send, what);
    check_buf_guards(c, &a->recv, what);
    check_buf_free(c, &a->send);
    check_buf_free(c, &a->recv);
    free(a->sc);
}

/* Two alltoallvs in flight together (or one equal-block alltoall), checked. */
static void run_round(const check_ctx_t *c, const opts_t *o, coll_dtype_t dt, long scale,
                      int equal, uint64_t round)
{
    int n = equal ? 1 : 2;
    a2a_t ops[2];
    char what[2][160], algo[32];

    for (int i = 0; i < n; i++) {
        snprintf(what[i], sizeof(what[i]), "%s %d of %s at scale %ld (world %d = %d x %d)",
                 equal ? "alltoall" : "alltoallv", i, coll_dtype_name(dt), scale, c->world,
                 c->nodes, c->local_size);
        prepare(c, &ops[i], dt, round + (uint64_t)i, scale, equal);
        if (submit(c, &ops[i], dt, equal) != COLL_INPROGRESS) {
            check_die("%s: submitting: %s: %s", what[i], coll_err_name(ops[i].st),
                      coll_comm_last_error(c->comm));
        }
    }
    for (int i = 0; i < n; i++) {
        coll_status_t st = check_wait(c, ops[i].req, o->timeout_ms, what[i], algo, sizeof(algo));
        if (st != COLL_OK) {
            check_die("%s: %s: %s", what[i], coll_err_name(st), coll_comm_last_error(c->comm));
        }
        if (strcmp(algo, "direct") != 0) {
            check_die("%s ran '%s', expected 'direct'", what[i], algo);
        }
        verify(c, &ops[i], round + (uint64_t)i, what[i]);
        release(c, &ops[i], what[i]);
    }
}

static void run_all(const check_ctx_t *c, const opts_t *o)
{
    uint64_t round = 0;
    double t0 = check_now_s();

    for (int s = 0; s < o->nscales; s++) {
        for (size_t d = 0; d < NDTYPES; d++) {
            run_round(c, o, dtypes[d], o->scales[s], 0, round);
            run_round(c, o, dtypes[d], o->scales[s], 1, round + 2);
            round += 3;
        }
    }
    check_say(c, 1, "alltoallv and alltoall: %llu operations ok, %.1f ms",
              (unsigned long long)round, 1e3 * (check_now_s() - t0));
}

/* The rounds again on the group of this rank's parity, its ranks in reverse order. */
static void run_split(const check_ctx_t *c, const opts_t *o)
{
    check_ctx_t g = *c;
    coll_status_t st = coll_comm_split(c->comm, c->rank % 2, -c->rank, &g.comm);

    if (st != COLL_OK) {
        check_die("split: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
    g.rank = coll_comm_rank(g.comm);
    g.world = coll_comm_world_size(g.comm);
    g.nodes = coll_comm_node_count(g.comm);
    g.local_size = g.world / g.nodes;
    for (size_t d = 0; d < 2; d++) {
        run_round(&g, o, dtypes[d], o->scales[o->nscales - 1], 0, 100 + 3 * d);
        run_round(&g, o, dtypes[d], 7, 1, 102 + 3 * d);
    }
    check_say(c, 1, "alltoallv and alltoall on the parity groups ok");
    coll_comm_destroy(g.comm);
}

/* ---- failures -------------------------------------------------------------------------------- */

static void barrier(const check_ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);

    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, FAIL_DEADLINE_MS, "barrier before the failure", NULL, 0);
    }
    if (st != COLL_OK) {
        check_die("barrier before the failure: %s: %s", coll_err_name(st),
                  coll_comm_last_error(c->comm));
    }
}

/* The round's counts with rank 0 sending the odd rank at least one element, which the odd rank
 * (mode COUNT) expects one more of. */
static void prepare_failure(const check_ctx_t *c, const opts_t *o, a2a_t *a, uint64_t *round_p)
{
    uint64_t round = 0;

    while (pair_count(0, o->odd_rank, round, 3, 0) == 0 ||
           (o->mode == OVERLAP && pair_count(o->odd_rank, o->odd_rank, round, 3, 0) == 0)) {
        round++; /* about one round in five has 0: bounded by the hash's spread */
    }
    prepare(c, a, COLL_FLOAT32, round, 3, 0);
    if (o->mode == COUNT && c->rank == o->odd_rank) {
        a->rc[0]++;
    }
    if (o->mode == OVERLAP && c->rank == o->odd_rank) {
        a->rd[o->odd_rank] = a->rd[0];
    }
    *round_p = round;
}

/* Whether @p msg names the difference: the pair and both counts, both dtypes, the reason. */
static int names_failure(const opts_t *o, const char *msg, uint64_t round)
{
    size_t n = pair_count(0, o->odd_rank, round, 3, 0);
    char want[96];

    if (o->mode == DTYPE) {
        return strstr(msg, "float32") != NULL && strstr(msg, "int32") != NULL;
    }
    if (o->mode == ABORT) {
        return strstr(msg, ABORT_REASON) != NULL;
    }
    if (o->mode == ALLREDUCE) {
        return strstr(msg, "allreduce") != NULL && strstr(msg, "alltoallv") != NULL;
    }
    if (o->mode == NULL_COUNTS) {
        return strstr(msg, "recvcounts must not be NULL") != NULL;
    }
    if (o->mode == OVERLAP) {
        return strstr(msg, "overlap") != NULL;
    }
    snprintf(want, sizeof(want), "rank 0 sends %zu elements to rank %d, which expects %zu", n,
             o->odd_rank, n + 1);
    return strstr(msg, want) != NULL;
}

static void run_failure(const check_ctx_t *c, const opts_t *o)
{
    static const char *const names[] = {"", "expects one element more from rank 0",
                                        "submits int32 where the others submit float32",
                                        "aborts the job", "submits an allreduce",
                                        "passes no recvcounts",
                                        "overlaps two of its receive blocks"};
    a2a_t a;
    uint64_t round;
    char what[160];
    coll_status_t st;

    prepare_failure(c, o, &a, &round);
    snprintf(what, sizeof(what), "alltoallv where rank %d %s", o->odd_rank, names[o->mode]);
    barrier(c);
    if (o->mode == ABORT && c->rank == o->odd_rank) {
        coll_comm_abort(c->comm, ABORT_REASON);
        release(c, &a, what);
        check_say(c, 0, "%s: aborted", what);
        return;
    }
    if (o->mode == NULL_COUNTS && c->rank == o->odd_rank) {
        st = coll_alltoallv_async(c->comm, a.send.data, a.sc, a.sd, a.recv.data, NULL, a.rd,
                                  COLL_FLOAT32, NULL, &a.req);
    } else if (o->mode == ALLREDUCE && c->rank == o->odd_rank) {
        st = coll_allreduce_async(c->comm, a.recv.data, a.recv.data, a.recv_elems, COLL_FLOAT32,
                                  COLL_SUM, NULL, &a.req);
    } else {
        st = submit(c, &a, o->mode == DTYPE && c->rank == o->odd_rank ? COLL_INT32
                                                                      : COLL_FLOAT32, 0);
    }
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, a.req, FAIL_DEADLINE_MS, what, NULL, 0);
    }
    const char *msg = coll_comm_last_error(c->comm);
    int refused = o->mode == NULL_COUNTS || o->mode == OVERLAP;
    coll_status_t want = o->mode == ABORT || (refused && c->rank != o->odd_rank) ? st
                         : refused                                             ? COLL_ERR_INVALID
                                                                               : COLL_ERR_MISMATCH;
    if (st == COLL_OK || st != want || !names_failure(o, msg, round)) {
        check_die("%s: %s, expected %s naming the difference: '%s'", what, coll_err_name(st),
                  want == st ? "a failure" : coll_err_name(want), msg);
    }
    for (size_t k = 0; k < a.recv.bytes; k++) {
        if (a.recv.data[k] != SENTINEL) {
            check_die("%s: receive byte %zu written (0x%02x)", what, k, a.recv.data[k]);
        }
    }
    release(c, &a, what);
    check_say(c, 0, "%s: %s, no output written: %s", what, coll_err_name(st), msg);
}

/* ---- main ----------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: a2a_check [--scales LIST] [--mismatch count|dtype|allreduce --odd-rank R] "
               "[--abort|--null-counts|--overlap --odd-rank R] [--timeout-ms T]\n"
               "Run as every rank of a collective-launch job.\n"
               "  --scales LIST      block sizes in elements, up to %d (default 1,1009)\n"
               "  --mismatch KIND    count: rank R expects one element more from rank 0;\n"
               "                     dtype: it submits int32 where the others submit float32;\n"
               "                     allreduce: it submits an allreduce of the same key\n"
               "  --abort            rank R aborts the job where the others submit\n"
               "  --null-counts      rank R passes no recvcounts\n"
               "  --overlap          rank R overlaps two of its receive blocks\n"
               "  --timeout-ms T     bound on each wait (default 60000)\n", MAX_SCALES);
}

static void parse_scales(opts_t *o, const char *list)
{
    char buf[256], *save = NULL;
    long v;

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (o->nscales == MAX_SCALES || check_parse_int(t, 1, 1 << 20, &v) < 0) {
            check_usage_error("bad or too many scales in '%s'", list);
        }
        o->scales[o->nscales++] = v;
    }
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"scales", required_argument, NULL, 's'}, {"mismatch", required_argument, NULL, 'm'},
        {"abort", no_argument, NULL, 'a'},        {"odd-rank", required_argument, NULL, 'r'},
        {"null-counts", no_argument, NULL, 'n'},  {"overlap", no_argument, NULL, 'o'},
        {"timeout-ms", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *scales = "1,1009";
    int ch, bad = 0;
    long v;

    *o = (opts_t){.timeout_ms = 60000, .odd_rank = -1};
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's': scales = optarg; break;
        case 'm':
            o->mode = strcmp(optarg, "count") == 0       ? COUNT
                      : strcmp(optarg, "dtype") == 0     ? DTYPE
                      : strcmp(optarg, "allreduce") == 0 ? ALLREDUCE : -1;
            bad = o->mode < 0;
            break;
        case 'a': o->mode = ABORT; break;
        case 'n': o->mode = NULL_COUNTS; break;
        case 'o': o->mode = OVERLAP; break;
        case 'r':
            bad = check_parse_int(optarg, 1, 1 << 20, &v) < 0;
            o->odd_rank = (int)v;
            break;
        case 't': bad = check_parse_int(optarg, 1, 3600000, &v) < 0; o->timeout_ms = (int)v; break;
        case 'h': usage(stdout); exit(0);
        default: bad = 1;
        }
    }
    if (bad || optind != argc || (o->mode != NONE) != (o->odd_rank >= 1)) {
        usage(stderr);
        exit(2);
    }
    parse_scales(o, scales);
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;
    int world, local;

    check_set_prog(argv[0]);
    parse_opts(argc, argv, &o);
    check_env_sizes(&world, &local);
    if (o.odd_rank >= world) {
        check_usage_error("--odd-rank %d beyond the world of %d", o.odd_rank, world);
    }
    /* The largest buffers: two operations of world blocks of 4 x 1009 + 2 8-byte elements. */
    check_join(&c, (uint64_t)local * (8u << 20) + (16u << 20));
    if (o.mode != NONE) {
        run_failure(&c, &o);
    } else {
        run_all(&c, &o);
        run_split(&c, &o);
    }
    check_say(&c, 1, "all checks passed: world %d (%d nodes x %d ranks)", c.world, c.nodes,
              c.local_size);
    coll_comm_destroy(c.comm);
    return 0;
}
