/*
 * allreduce_check: one rank of an integration test of coll_allreduce_async(), started as every
 * rank of a local cluster by collective-launch (the COLL_* environment names the job).
 *
 * Correctness mode: for each count, every rank fills its input with integer-valued floats that
 * depend on (rank, index, iteration), runs the allreduce and compares every element with the
 * reduction computed here independently. Sums stay far below 2^24, so they are exact in float32
 * whatever the order of additions; for AVG every input is a multiple of the world size, so the
 * average is an integer and exact too (division, or multiplication by a rounded reciprocal for
 * the world sizes tested). Guard bytes before and after each buffer must survive, and an
 * out-of-place input must be unchanged. With --window W, W operations are in flight at once;
 * with --keyed they carry explicit keys and every rank submits them in another order; with
 * --reuse-keys too, operation w of every round and count has key w, which comes back as soon
 * as the one before completed, on a count that may take another path.
 *
 * Mismatch mode (--mismatch-rank R, or --mismatch-node N for every rank of a node): rank R
 * submits a different count for the same operation
 * (with --mismatch-layout: the same count but another tensor layout fingerprint,
 * coll_op_params_t.layout). Every rank must see COLL_ERR_MISMATCH within MISMATCH_DEADLINE_MS
 * (--mismatch-ms), with both counts (both layouts) and every --mismatch-text in the message of
 * coll_comm_last_error(), its output (and
 * input) untouched, and a next operation must fail as well (the job is failed) instead of hanging.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check (with a message naming rank,
 * count, index, got and expected), 2 on a usage error.
 */
#include <collective.h>

#include "allreduce_check.h"
#include "check_common.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    coll_comm_t *comm;
    int rank, world, local_size, nodes;
} ctx_t;

/* One rank's buffers for one count: allocations with guards on both sides. */
typedef struct {
    uint8_t *send_alloc, *recv_alloc; /* send_alloc is NULL in place */
    float *send, *recv;               /* equal in place */
    size_t count;
    int inplace;
    uint64_t layout; /* coll_op_params_t.layout; 0: none */
} bufs_t;

static int g_rank = -1;

static void die(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "allreduce_check: rank %d: FAIL: ", g_rank);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- data --------------------------------------------------------------------------------- */

/* A bijective 32-bit mix (lowbias32), so that a misplaced block never looks like the right one. */
static uint32_t mix(uint64_t i)
{
    uint32_t x = (uint32_t)(i ^ (i >> 32));
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

/* Integer in -500..499 from (rank, element hash h in 1..97, iteration). */
static int base_value(int rank, uint32_t h, int iter)
{
    return (int)(((uint32_t)(rank + 1) * h + 13u * (uint32_t)iter) % 1000u) - 500;
}

static uint32_t elem_hash(size_t i)
{
    return 1u + mix(i) % 97u;
}

/* Rank's input: for AVG scaled by the world size so that the average is an integer. */
static float input_value(const ctx_t *c, coll_redop_t op, size_t i, int iter)
{
    int scale = op == COLL_AVG ? c->world : 1;
    return (float)(scale * base_value(c->rank, elem_hash(i), iter));
}

static float expected_value(const ctx_t *c, size_t i, int iter)
{
    uint32_t h = elem_hash(i);
    int sum = 0;
    for (int r = 0; r < c->world; r++) {
        sum += base_value(r, h, iter);
    }
    /* SUM: the sum itself; AVG: (world * sum) / world. */
    return (float)sum;
}

static void fill_input(const ctx_t *c, coll_redop_t op, float *p, size_t count, int iter)
{
    for (size_t i = 0; i < count; i++) {
        p[i] = input_value(c, op, i, iter);
    }
}

/* ---- buffers ------------------------------------------------------------------------------ */

/* Guard byte @p k (0..2*GUARD_BYTES-1) of buffer @p which (0 output, 1 input) of this rank:
 * different for every rank, buffer and position, so that bytes copied from another rank's
 * buffer (or shifted within one) do not look intact. */
static uint8_t guard_byte(size_t k, int which)
{
    return (uint8_t)(0xa5u + 29u * (unsigned)g_rank + 101u * (unsigned)which + 7u * (unsigned)k);
}

static uint8_t *alloc_guarded(const ctx_t *c, size_t bytes, int which)
{
    void *p = NULL;
    uint8_t *tail;
    coll_status_t st = coll_mem_alloc(c->comm, bytes + 2 * GUARD_BYTES, &p);
    if (st != COLL_OK) {
        die("coll_mem_alloc(%zu bytes): %s: %s", bytes + 2 * GUARD_BYTES, coll_err_name(st),
            coll_comm_last_error(c->comm));
    }
    tail = (uint8_t *)p + GUARD_BYTES + bytes;
    for (size_t k = 0; k < GUARD_BYTES; k++) {
        ((uint8_t *)p)[k] = guard_byte(k, which);
        tail[k] = guard_byte(GUARD_BYTES + k, which);
    }
    return p;
}

static void bufs_alloc(const ctx_t *c, size_t count, int inplace, bufs_t *b)
{
    memset(b, 0, sizeof(*b));
    b->count = count;
    b->inplace = inplace;
    b->recv_alloc = alloc_guarded(c, count * sizeof(float), 0);
    b->recv = (float *)(b->recv_alloc + GUARD_BYTES);
    b->send = b->recv;
    if (!inplace) {
        b->send_alloc = alloc_guarded(c, count * sizeof(float), 1);
        b->send = (float *)(b->send_alloc + GUARD_BYTES);
    }
}

static void bufs_free(const ctx_t *c, bufs_t *b)
{
    coll_mem_free(c->comm, b->recv_alloc);
    if (b->send_alloc != NULL) {
        coll_mem_free(c->comm, b->send_alloc);
    }
}

static void check_guards(const uint8_t *alloc, size_t bytes, int which, const char *name,
                         size_t count, int iter)
{
    const uint8_t *tail = alloc + GUARD_BYTES + bytes;
    for (size_t k = 0; k < GUARD_BYTES; k++) {
        if (alloc[k] != guard_byte(k, which)) {
            die("count %zu iter %d: %s buffer: guard byte %zu before the buffer is 0x%02x, "
                "expected 0x%02x", count, iter, name, GUARD_BYTES - k, alloc[k],
                guard_byte(k, which));
        }
        if (tail[k] != guard_byte(GUARD_BYTES + k, which)) {
            die("count %zu iter %d: %s buffer: guard byte %zu after the buffer (element %zu) is "
                "0x%02x, expected 0x%02x", count, iter, name, k, count + k / sizeof(float),
                tail[k], guard_byte(GUARD_BYTES + k, which));
        }
    }
}

static void check_all_guards(const bufs_t *b, size_t bytes, int iter)
{
    check_guards(b->recv_alloc, bytes, 0, b->inplace ? "in-place" : "output", b->count, iter);
    if (b->send_alloc != NULL) {
        check_guards(b->send_alloc, bytes, 1, "input", b->count, iter);
    }
}

/* ---- checks ------------------------------------------------------------------------------- */

static void report_bad(const char *what, size_t count, int iter, size_t first, float got,
                       float want, size_t nbad)
{
    uint32_t gbits, wbits;
    memcpy(&gbits, &got, sizeof(gbits));
    memcpy(&wbits, &want, sizeof(wbits));
    die("count %zu iter %d: %s: first bad index %zu: got %.9g (0x%08x), expected %.9g "
        "(0x%08x); %zu of %zu elements wrong", count, iter, what, first, got, gbits, want, wbits,
        nbad, count);
}

static void check_result(const ctx_t *c, const bufs_t *b, int iter)
{
    size_t nbad = 0, first = 0;
    float got = 0, want = 0;
    for (size_t i = 0; i < b->count; i++) {
        float e = expected_value(c, i, iter);
        if (b->recv[i] != e && nbad++ == 0) { /* also catches NaN */
            first = i;
            got = b->recv[i];
            want = e;
        }
    }
    if (nbad > 0) {
        report_bad("result", b->count, iter, first, got, want, nbad);
    }
}

/* @p p must still hold this rank's input of @p iter (an out-of-place input, or any buffer of a
 * failed operation). */
static void check_input_kept(const ctx_t *c, coll_redop_t op, const float *p, size_t count,
                             int iter, const char *what)
{
    size_t nbad = 0, first = 0;
    float got = 0, want = 0;
    for (size_t i = 0; i < count; i++) {
        float e = input_value(c, op, i, iter);
        if (memcmp(&p[i], &e, sizeof(e)) != 0 && nbad++ == 0) {
            first = i;
            got = p[i];
            want = e;
        }
    }
    if (nbad > 0) {
        report_bad(what, count, iter, first, got, want, nbad);
    }
}

static void check_sentinel_kept(const float *p, size_t count, int iter, const char *what)
{
    const uint8_t *q = (const uint8_t *)p;
    for (size_t k = 0; k < count * sizeof(float); k++) {
        if (q[k] != SENTINEL_BYTE) {
            float got;
            memcpy(&got, q + (k - k % sizeof(float)), sizeof(got));
            die("count %zu iter %d: %s: index %zu was written (got %.9g, expected the sentinel "
                "0x%02x bytes untouched)", count, iter, what, k / sizeof(float), got,
                SENTINEL_BYTE);
        }
    }
}

/* ---- running one operation ---------------------------------------------------------------- */

/* Start one allreduce, with an explicit key when @p key >= 0. Returns COLL_INPROGRESS with
 * *req_p set, COLL_OK when it completed at once (*req_p NULL), or an error. */
static coll_status_t submit_op(const ctx_t *c, const bufs_t *b, coll_redop_t op, int64_t key,
                               coll_request_t **req_p)
{
    coll_op_params_t params = {.field_mask = (key >= 0 ? COLL_OP_PARAM_KEY : 0) |
                                             (b->layout != 0 ? COLL_OP_PARAM_LAYOUT : 0),
                               .key = (uint64_t)key, .layout = b->layout};
    *req_p = NULL;
    return coll_allreduce_async(c->comm, b->send, b->recv, b->count, COLL_FLOAT32, op,
                                params.field_mask != 0 ? &params : NULL, req_p);
}

/* Records of phase @p phase from *i on, which must be steps 0, 1, ... in order; returns how
 * many there were. */
static uint32_t phase_records(const coll_req_step_t *st, uint32_t n, uint32_t *i,
                              uint32_t phase)
{
    uint32_t k = 0;
    for (; *i < n && st[*i].phase == phase; (*i)++, k++) {
        if (st[*i].first != k || st[*i].last != k) {
            die("step record %u (phase %u) covers steps %u-%u, expected %u", *i, phase,
                st[*i].first, st[*i].last, k);
        }
    }
    return k;
}

/* The algorithm's steps of a completed allreduce (coll_req_steps()): the ring's N-1
 * reduce-scatter then N-1 all-gather steps; recursive doubling's log2(p) rounds, preceded by a
 * fold and followed by an unfold on the nodes beyond the power of two p and their partners;
 * none on one node. The same for an allreduce the local ranks reduced around the daemons'
 * algorithm ("shm+rd", "shm+ring"). End times rise and lie between ready and done. */
static void check_steps(const ctx_t *c, coll_request_t *req, size_t count)
{
    coll_req_step_t st[COLL_MAX_STEPS];
    coll_req_timing_t t;
    uint32_t n = 0, i = 0, p = 1, rounds = 0, want_rs = 0, folds, unfolds;
    const char *algo = coll_req_algo(req);

    if (strncmp(algo, "shm+", 4) == 0) {
        algo += 4;
    }

    if (coll_req_steps(req, st, &n) != COLL_OK || coll_req_timing(req, &t) != COLL_OK) {
        die("count %zu: no steps or timing for a completed request", count);
    }
    for (; p * 2 <= (uint32_t)c->nodes; p *= 2, rounds++) {
    }
    if (strcmp(algo, "ring") == 0 && count > 0) {
        want_rs = (uint32_t)c->nodes - 1;
        if (phase_records(st, n, &i, COLL_STEP_REDUCE_SCATTER) != want_rs ||
            phase_records(st, n, &i, COLL_STEP_ALLGATHER) != want_rs) {
            die("count %zu: ring on %d nodes: %u step records, expected %u reduce-scatter then "
                "%u all-gather", count, c->nodes, n, want_rs, want_rs);
        }
    } else if (strcmp(algo, "rd") == 0) {
        folds = phase_records(st, n, &i, COLL_STEP_RD_FOLD);
        want_rs = phase_records(st, n, &i, COLL_STEP_RD_ROUND);
        unfolds = phase_records(st, n, &i, COLL_STEP_RD_UNFOLD);
        int plain = folds == 0 && unfolds == 0 && want_rs == rounds;
        int folded = folds == 1 && unfolds == 1 && (want_rs == rounds || want_rs == 0) &&
                     p < (uint32_t)c->nodes;
        if (!plain && !folded) {
            die("count %zu: recursive doubling on %d nodes: %u fold, %u rounds, %u unfold "
                "(expected %u rounds, with a fold and an unfold only beyond %u nodes)", count,
                c->nodes, folds, want_rs, unfolds, rounds, p);
        }
    }
    if (i != n) {
        die("count %zu: algorithm %s: %u step records, %u of them as expected", count, algo, n, i);
    }
    for (i = 0; i < n; i++) {
        if (st[i].end_ns + 1000 < t.ready_ns || st[i].end_ns > t.done_ns + 1000 ||
            (i > 0 && st[i].end_ns < st[i - 1].end_ns)) {
            die("count %zu: step record %u ends at %llu, outside ready %llu .. done %llu or "
                "before the previous one", count, i, (unsigned long long)st[i].end_ns,
                (unsigned long long)t.ready_ns, (unsigned long long)t.done_ns);
        }
    }
}

/* Wait for and free a request from submit_op(), checking its steps when it succeeded;
 * COLL_ERR_TIMEDOUT when the wait timed out. */
static coll_status_t wait_op(const ctx_t *c, coll_request_t *req, size_t count, int timeout_ms)
{
    coll_status_t st;
    if (req == NULL) {
        return COLL_OK;
    }
    st = coll_req_wait(req, timeout_ms);
    if (st == COLL_OK) {
        check_steps(c, req, count);
    }
    coll_req_free(req); /* detaches it when timed out: we exit right after */
    return st;
}

static coll_status_t run_allreduce(const ctx_t *c, const bufs_t *b, coll_redop_t op,
                                   int timeout_ms)
{
    coll_request_t *req;
    coll_status_t st = submit_op(c, b, op, -1, &req);
    return st == COLL_INPROGRESS ? wait_op(c, req, b->count, timeout_ms) : st;
}

static void prepare_iter(const ctx_t *c, const bufs_t *b, coll_redop_t op, int iter)
{
    fill_input(c, op, b->send, b->count, iter);
    if (!b->inplace) {
        memset(b->recv, SENTINEL_BYTE, b->count * sizeof(float));
    }
}

static int is_inplace(const opts_t *o, int rank)
{
    return o->place == PLACE_IN || (o->place == PLACE_MIXED && rank % 2 == 0);
}

static const char *place_name(place_t p)
{
    return p == PLACE_IN ? "inplace" : p == PLACE_OUT ? "outofplace" : "mixed";
}

static void check_done(const ctx_t *c, const opts_t *o, const bufs_t *b, coll_status_t st,
                       const char *token, int iter)
{
    if (st != COLL_OK) {
        die("count %zu (%s) iter %d: allreduce returned %s (%s): %s", b->count, token, iter,
            coll_err_name(st), coll_strerror(st), coll_comm_last_error(c->comm));
    }
    check_result(c, b, iter);
    if (!b->inplace) {
        check_input_kept(c, o->op, b->send, b->count, iter, "input buffer changed");
    }
    check_all_guards(b, b->count * sizeof(float), iter);
}

/* One round: o->window operations in flight at once, operation w of round r has data of
 * iteration r * window + w. Without keys every rank submits in the same order (operations are
 * matched by call order); with --keyed each rank starts at another one, so the daemon must
 * match by key. Waits go in reverse order. */
static void run_round(const ctx_t *c, const opts_t *o, bufs_t *b, int round, int kidx,
                      const char *token)
{
    coll_request_t *req[MAX_WINDOW];
    coll_status_t st[MAX_WINDOW];
    int W = o->window;

    for (int w = 0; w < W; w++) {
        prepare_iter(c, &b[w], o->op, round * W + w);
    }
    for (int k = 0; k < W; k++) {
        int w = o->keyed ? (k + c->rank) % W : k;
        int64_t key = !o->keyed     ? -1
                      : o->reuse_keys ? w
                                      : ((int64_t)kidx << 24) | (round * W + w);
        st[w] = submit_op(c, &b[w], o->op, key, &req[w]);
        if (st[w] != COLL_INPROGRESS && st[w] != COLL_OK) {
            check_done(c, o, &b[w], st[w], token, round * W + w);
        }
    }
    for (int w = W - 1; w >= 0; w--) {
        st[w] = st[w] == COLL_INPROGRESS ? wait_op(c, req[w], b[w].count, o->timeout_ms)
                                         : st[w];
    }
    for (int w = 0; w < W; w++) {
        check_done(c, o, &b[w], st[w], token, round * W + w);
    }
}

static void check_count(const ctx_t *c, const opts_t *o, size_t count, int kidx)
{
    const char *token = o->tokens[kidx];
    bufs_t b[MAX_WINDOW];
    double t0, busy = 0;
    int nops = o->iters * o->window;

    for (int w = 0; w < o->window; w++) {
        bufs_alloc(c, count, is_inplace(o, c->rank), &b[w]);
    }
    for (int r = 0; r < o->iters; r++) {
        t0 = now_s();
        run_round(c, o, b, r, kidx, token);
        busy += now_s() - t0; /* includes checking the results */
    }
    for (int w = 0; w < o->window; w++) {
        bufs_free(c, &b[w]);
    }
    if (c->rank == 0) {
        printf("allreduce_check: count %zu (%s) op=%s %s ops=%d (window %d%s) world=%d nodes=%d: "
               "ok, %.3f ms/op\n", count, token, coll_redop_name(o->op), place_name(o->place),
               nops, o->window, o->keyed ? ", keyed" : "", c->world, c->nodes, 1e3 * busy / nops);
        fflush(stdout);
    }
}

/* ---- mismatch mode ------------------------------------------------------------------------ */

/* Whether @p text contains @p n as a whole decimal number (not part of a longer one). */
static int mentions_number(const char *text, size_t n)
{
    char want[32];
    size_t len = (size_t)snprintf(want, sizeof(want), "%zu", n);
    for (const char *p = strstr(text, want); p != NULL; p = strstr(p + 1, want)) {
        int before = p > text && p[-1] >= '0' && p[-1] <= '9';
        int after = p[len] >= '0' && p[len] <= '9';
        if (!before && !after) {
            return 1;
        }
    }
    return 0;
}

static void check_failed_op_untouched(const ctx_t *c, const opts_t *o, const bufs_t *b)
{
    if (b->inplace) {
        check_input_kept(c, o->op, b->recv, b->count, 0, "in-place buffer of the failed "
                         "operation was written");
    } else {
        check_sentinel_kept(b->recv, b->count, 0, "output buffer of the failed operation");
        check_input_kept(c, o->op, b->send, b->count, 0, "input buffer of the failed operation "
                         "changed");
    }
    check_all_guards(b, b->count * sizeof(float), 0);
}

/* After the mismatch the job is failed: a next operation must fail too, not hang, and so must
 * an allocation, saying why (the mismatch itself, with both descriptions). */
static void check_job_failed_after(const ctx_t *c, const opts_t *o, const bufs_t *b)
{
    coll_status_t st = run_allreduce(c, b, o->op, MISMATCH_DEADLINE_MS);
    void *p = NULL;

    if (st != COLL_ERR_JOB && st != COLL_ERR_MISMATCH) {
        die("after the mismatch, a next allreduce returned %s (%s), expected COLL_ERR_JOB: %s",
            coll_err_name(st), coll_strerror(st), coll_comm_last_error(c->comm));
    }
    st = coll_mem_alloc(c->comm, 4096, &p);
    if (st != COLL_ERR_MISMATCH || strstr(coll_comm_last_error(c->comm), "failed earlier") == NULL) {
        die("after the mismatch, coll_mem_alloc returned %s (%s), expected COLL_ERR_MISMATCH "
            "saying the job failed earlier", coll_err_name(st), coll_comm_last_error(c->comm));
    }
}

static void barrier(const ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, MISMATCH_DEADLINE_MS);
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        die("barrier before the mismatch: %s: %s", coll_err_name(st),
            coll_comm_last_error(c->comm));
    }
}

/* Layouts of the mismatch mode: the odd rank's, everyone else's. */
#define LAYOUT_ODD 0xbadc0ffee0ddf00dull
#define LAYOUT_REST 0x0123456789abcdefull

/* Both layouts, as the daemon prints them, in @p msg. */
static void check_layouts_named(const char *msg)
{
    char a[32], b[32];
    snprintf(a, sizeof(a), "layout=%016llx", LAYOUT_ODD);
    snprintf(b, sizeof(b), "layout=%016llx", LAYOUT_REST);
    if (strstr(msg, a) == NULL || strstr(msg, b) == NULL) {
        die("mismatch message does not name both layouts %s and %s: '%s'", a, b, msg);
    }
}

static void run_mismatch(const ctx_t *c, const opts_t *o, size_t count)
{
    size_t other = o->mismatch_layout ? count : count + 1 + count / 2;
    int odd = c->rank == o->mismatch_rank || c->rank / c->local_size == o->mismatch_node;
    size_t mine = odd ? other : count;
    bufs_t b;
    char msg[1024];

    bufs_alloc(c, mine, is_inplace(o, c->rank), &b);
    if (o->mismatch_layout) {
        b.layout = odd ? LAYOUT_ODD : LAYOUT_REST;
    }
    /* Every rank holds its buffers before anyone submits: a mismatch among the local ranks of
     * one node fails the job at once, after which the others could not allocate. */
    barrier(c);
    prepare_iter(c, &b, o->op, 0);
    if (c->rank == o->late_rank) {
        usleep((useconds_t)o->late_ms * 1000u);
    }
    double t0 = now_s();
    coll_status_t st = run_allreduce(c, &b, o->op, o->mismatch_ms);
    double dt = now_s() - t0;
    snprintf(msg, sizeof(msg), "%s", coll_comm_last_error(c->comm));
    if (st != COLL_ERR_MISMATCH || dt * 1000.0 > o->mismatch_ms) {
        die("rank %d (or node %d) submitted count %zu, the others %zu: expected "
            "COLL_ERR_MISMATCH within %d ms, got %s (%s) after %.3f s; last error: '%s'",
            o->mismatch_rank, o->mismatch_node, other, count,
            o->mismatch_ms, coll_err_name(st), coll_strerror(st), dt, msg);
    }
    for (int i = 0; i < o->ntexts; i++) {
        if (strstr(msg, o->texts[i]) == NULL) {
            die("mismatch message does not say '%s': '%s'", o->texts[i], msg);
        }
    }
    if (o->mismatch_layout) {
        check_layouts_named(msg);
    } else if (!mentions_number(msg, count) || !mentions_number(msg, other)) {
        die("mismatch message does not name both counts %zu and %zu: '%s'", count, other, msg);
    }
    check_failed_op_untouched(c, o, &b);
    check_job_failed_after(c, o, &b);
    printf("allreduce_check: rank %d (%s, count %zu): COLL_ERR_MISMATCH after %.3f s: %s\n",
           c->rank, b.inplace ? "inplace" : "outofplace", mine, dt, msg);
    fflush(stdout);
    bufs_free(c, &b);
}

/* ---- main --------------------------------------------------------------------------------- */

/* Pool per node: the largest count's buffers of every local rank, with guards and slack. */
static uint64_t pool_bytes_for(size_t max_count, int local_size)
{
    uint64_t per_buf = (uint64_t)max_count * sizeof(float) + 2 * GUARD_BYTES + 4096;
    uint64_t need = 2 * per_buf * (uint64_t)local_size + (16u << 20);
    return need < (64u << 20) ? (64u << 20) : need;
}

static void resolve_all(const opts_t *o, int nodes, size_t *counts)
{
    for (int k = 0; k < o->ncounts; k++) {
        long long v = check_parse_count(o->tokens[k], nodes);
        if (v < 0) {
            fprintf(stderr, "allreduce_check: bad count '%s' (nodes=%d)\n", o->tokens[k], nodes);
            allreduce_check_usage(stderr);
            exit(2);
        }
        counts[k] = (size_t)v;
    }
}

/* The world and local sizes before joining, to size the pool from the counts. */
static void env_sizes(int *world, int *local)
{
    const char *w = getenv("COLL_WORLD_SIZE"), *l = getenv("COLL_LOCAL_SIZE");
    long v;
    if (w == NULL || l == NULL || check_parse_int(w, 1, 1 << 20, &v) < 0) {
        fprintf(stderr, "allreduce_check: run me under collective-launch (COLL_WORLD_SIZE and "
                        "COLL_LOCAL_SIZE must be set)\n");
        exit(2);
    }
    *world = (int)v;
    if (check_parse_int(l, 1, *world, &v) < 0 || *world % v != 0) {
        fprintf(stderr, "allreduce_check: COLL_LOCAL_SIZE=%s does not divide COLL_WORLD_SIZE=%s\n",
                l, w);
        exit(2);
    }
    *local = (int)v;
}

int main(int argc, char **argv)
{
    coll_comm_params_t params = {.field_mask = COLL_COMM_PARAM_POOL_SIZE};
    opts_t o;
    ctx_t c = {0};
    size_t counts[MAX_COUNTS], max_count = 0;
    coll_status_t st;

    allreduce_check_parse_opts(argc, argv, &o);
    env_sizes(&c.world, &c.local_size);
    c.nodes = c.world / c.local_size;
    resolve_all(&o, c.nodes, counts);
    for (int k = 0; k < o.ncounts; k++) {
        max_count = counts[k] > max_count ? counts[k] : max_count;
    }
    if (o.mismatch_rank >= c.world || o.mismatch_node >= c.nodes) {
        fprintf(stderr, "allreduce_check: --mismatch-rank %d or --mismatch-node %d beyond the "
                "world (%d ranks, %d nodes)\n", o.mismatch_rank, o.mismatch_node, c.world, c.nodes);
        return 2;
    }
    params.pool_bytes = pool_bytes_for(max_count + max_count / 2 + 1, c.local_size) * o.window;
    st = coll_comm_create(&params, &c.comm);
    if (st != COLL_OK) {
        die("coll_comm_create: %s: %s", coll_err_name(st), coll_comm_last_error(NULL));
    }
    c.rank = g_rank = coll_comm_rank(c.comm);
    if (coll_comm_world_size(c.comm) != c.world || coll_comm_local_size(c.comm) != c.local_size) {
        die("communicator has world %d local %d, environment said %d and %d",
            coll_comm_world_size(c.comm), coll_comm_local_size(c.comm), c.world, c.local_size);
    }
    if (o.mismatch_rank >= 0 || o.mismatch_node >= 0) {
        run_mismatch(&c, &o, counts[0]);
    } else {
        for (int k = 0; k < o.ncounts; k++) {
            check_count(&c, &o, counts[k], k);
        }
    }
    coll_comm_destroy(c.comm);
    return 0;
}
