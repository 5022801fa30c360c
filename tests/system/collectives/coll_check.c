/*
 * coll_check: one rank of an engine integration test, started as every rank of a local cluster
 * by collective-launch. It runs every combination of the collectives, datatypes, reductions,
 * counts, algorithms, placements and roots given on the command line, in the same order on every
 * rank (operations are matched by call order), and checks each one against values computed here
 * from the inputs of all ranks (coll_data.h says how they are chosen).
 *
 * For every operation: the output equals the expected values, an out-of-place input is
 * unchanged, the guard bytes around every buffer are intact, and coll_req_algo() names the
 * forced algorithm (on one node "shm" up to coll_comm_shm_max_bytes() under auto, on several
 * nodes "shm+rd" or "shm+ring" for the allreduces up to coll_comm_shm_node_max_bytes(), else
 * "local"; one that auto may choose otherwise, as for every allreduce with --node-whole).
 * With --window W,
 * W operations are in flight at once; --shuffle mixes the order (the same on every rank), so
 * that different collectives, datatypes and sizes run concurrently.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check (a message names the case,
 * the first wrong element, got and expected, and the inputs of every rank there), 2 on a usage
 * error.
 */
#include "coll_check.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One rank's buffers of a case; sendp and recvp are what the call gets (may be NULL). */
typedef struct {
    check_buf_t send, recv;
    uint8_t *sendp, *recvp;
    size_t in_elems;  /* elements of this rank's input at sendp */
    uint8_t *in_copy; /* a private copy of the input as submitted */
} bufs_t;

/* A case in flight. */
typedef struct {
    case_t k;
    int inplace; /* this rank's placement */
    bufs_t b;
    coll_request_t *req;
    coll_status_t st;
    char algo[32];
    char what[256];
} slot_t;

/* What ran per (collective, dtype, reduction), for the summary. */
typedef struct {
    int ops, skipped;
    double seconds;
    char auto_algos[64];
} stat_t;

static stat_t g_stats[K_COUNT][COLL_DTYPE_COUNT][COLL_REDOP_COUNT];

/* ---- buffers -------------------------------------------------------------------------------- */

static uint8_t sentinel(const case_t *k)
{
    return k->iter % 2 == 0 ? 0xff : 0x5a;
}

/* Elements of the send and receive buffers of this rank for case @p k (0: none). */
static void extents(const check_ctx_t *c, const case_t *k, size_t *send, size_t *recv)
{
    size_t n = k->count, all = n * (size_t)c->world;
    int root = c->rank == k->root;
    switch (k->kind) {
    case K_REDUCE_SCATTER: *send = all; *recv = n; break;
    case K_ALLGATHER: *send = n; *recv = all; break;
    case K_BROADCAST: *send = root ? n : 0; *recv = n; break;
    case K_REDUCE: *send = n; *recv = root ? n : 0; break;
    default: *send = n; *recv = n; break;
    }
}

/* In place: one buffer, the smaller extent inside the larger one at the documented place. */
static void bufs_setup_inplace(const check_ctx_t *c, const case_t *k, size_t send, size_t recv,
                               bufs_t *b)
{
    size_t es = coll_dtype_size(k->dt), block = k->count * es * (size_t)c->rank;
    if (k->kind == K_REDUCE_SCATTER) {
        check_buf_alloc(c, send * es, 1, &b->send);
        b->sendp = b->send.data;
        b->recvp = b->sendp + block;
    } else if (recv == 0 || send == 0) {
        /* Reduce or broadcast off the root: nothing to share, as out of place. */
        check_buf_t *only = recv == 0 ? &b->send : &b->recv;
        check_buf_alloc(c, (recv == 0 ? send : recv) * es, recv == 0, only);
        b->sendp = recv == 0 ? only->data : NULL;
        b->recvp = recv == 0 ? NULL : only->data;
    } else {
        check_buf_alloc(c, recv * es, 0, &b->recv);
        b->recvp = b->recv.data;
        b->sendp = k->kind == K_ALLGATHER ? b->recvp + block : b->recvp;
    }
}

static void bufs_setup(const check_ctx_t *c, const case_t *k, int inplace, bufs_t *b)
{
    size_t es = coll_dtype_size(k->dt), send, recv;

    memset(b, 0, sizeof(*b));
    extents(c, k, &send, &recv);
    b->in_elems = send;
    if (inplace) {
        bufs_setup_inplace(c, k, send, recv, b);
    } else {
        if (send > 0) {
            check_buf_alloc(c, send * es, 1, &b->send);
            b->sendp = b->send.data;
        }
        if (recv > 0) {
            check_buf_alloc(c, recv * es, 0, &b->recv);
            b->recvp = b->recv.data;
        }
    }
    if (b->recv.alloc != NULL) {
        memset(b->recv.data, sentinel(k), b->recv.bytes);
    }
    if (send > 0) {
        if ((b->in_copy = malloc(send * es)) == NULL) {
            check_die("out of memory");
        }
        coll_data_fill(k, c->world, c->rank, b->in_copy, send);
        memcpy(b->sendp, b->in_copy, send * es);
    }
}

static void bufs_free(const check_ctx_t *c, bufs_t *b)
{
    check_buf_free(c, &b->send);
    check_buf_free(c, &b->recv);
    free(b->in_copy);
}

/* ---- checks --------------------------------------------------------------------------------- */

static const char *place_name(place_t p)
{
    return p == PLACE_OUT ? "out of place" : p == PLACE_IN ? "in place" : "mixed placement";
}

static void describe(const check_ctx_t *c, const slot_t *s, char *buf, size_t len)
{
    const case_t *k = &s->k;
    char root[24] = "";
    if (coll_kind_rooted(k->kind)) {
        snprintf(root, sizeof(root), " root %d", k->root);
    }
    snprintf(buf, len, "%s %s%s%s count %zu algo %s %s%s%s iter %d (world %d = %d nodes x %d)",
             coll_kind_names[k->kind], coll_dtype_name(k->dt),
             coll_kind_reduces(k->kind) ? " " : "",
             coll_kind_reduces(k->kind) ? coll_redop_name(k->op) : "", k->count,
             k->algo == ALGO_ENV ? "env" : coll_algo_name((coll_algo_t)k->algo),
             place_name(k->place),
             k->place == PLACE_MIXED ? (s->inplace ? " (this rank in place)" : " (this rank out)")
                                     : "",
             root, k->iter, c->world, c->nodes, c->local_size);
}

/* The algorithms coll_algo_resolve() may pick for @p kind under auto. */
static int auto_allows(kind_t kind, const char *algo)
{
    switch (kind) {
    case K_ALLREDUCE: return strcmp(algo, "rd") == 0 || strcmp(algo, "ring") == 0;
    case K_REDUCE_SCATTER:
    case K_ALLGATHER: return strcmp(algo, "ring") == 0;
    default: return strcmp(algo, "chain") == 0;
    }
}

/* The algorithm a case forces: its own, or COLL_ALGO's for ALGO_ENV; COLL_ALGO_AUTO if none. */
static int forced_algo(const case_t *k)
{
    const char *env = getenv("COLL_ALGO");
    int forced = k->algo == ALGO_ENV ? COLL_ALGO_AUTO : k->algo;
    for (int a = 1; k->algo == ALGO_ENV && env != NULL && a < COLL_ALGO_COUNT; a++) {
        forced = strcmp(env, coll_algo_name((coll_algo_t)a)) == 0 ? a : forced;
    }
    return forced;
}

/* Whether the local ranks run the case among themselves (coll_comm_shm_max_bytes()). */
static int runs_in_shm(const check_ctx_t *c, const case_t *k, int forced)
{
    uint64_t bytes = (uint64_t)k->count * coll_dtype_size(k->dt);

    if (k->kind == K_REDUCE_SCATTER || k->kind == K_ALLGATHER) {
        bytes *= (uint64_t)c->world;
    }
    return c->nodes == 1 && forced == COLL_ALGO_AUTO &&
           bytes <= coll_comm_shm_max_bytes(c->comm);
}

/* Whether the case is an allreduce under auto of at most @p max bytes whose partial results
 * keep the dtype (not 16-bit floats summed, averaged or multiplied) on several nodes: with
 * coll_comm_shm_node_max_bytes(), the local ranks reduce it and distribute its result around
 * the daemons' algorithm; with coll_comm_direct_max_bytes(), its inter-node rounds run between
 * the nodes' leaders (coll_req_algo() "shm+direct", or "direct" with one rank per node). */
static int node_path(const check_ctx_t *c, const case_t *k, int forced, uint64_t max)
{
    int half = k->dt == COLL_FLOAT16 || k->dt == COLL_BFLOAT16;
    int accumulates = k->op == COLL_SUM || k->op == COLL_AVG || k->op == COLL_PROD;

    return max > 0 && c->nodes > 1 && k->kind == K_ALLREDUCE && forced == COLL_ALGO_AUTO &&
           !(half && accumulates) && (uint64_t)k->count * coll_dtype_size(k->dt) <= max;
}

/* Node-reduced: "shm+" and an algorithm auto may choose; with more operations in flight than
 * local rank 0's node buffers (4), some run in the daemon whole. */
static int node_algo_ok(const opts_t *o, const slot_t *s)
{
    return strncmp(s->algo, "shm+", 4) == 0 ? auto_allows(s->k.kind, s->algo + 4)
                                            : o->window > 4 && auto_allows(s->k.kind, s->algo);
}

static void check_algo(const check_ctx_t *c, const opts_t *o, const slot_t *s)
{
    int forced = forced_algo(&s->k);
    int direct = node_path(c, &s->k, forced, coll_comm_direct_max_bytes(c->comm));
    int node = !direct && !o->node_whole &&
               node_path(c, &s->k, forced, coll_comm_shm_node_max_bytes(c->comm));
    const char *want = direct ? (c->local_size > 1 ? "shm+direct" : "direct")
                       : runs_in_shm(c, &s->k, forced) ? "shm"
                       : c->nodes == 1                ? "local"
                       : forced != COLL_ALGO_AUTO ? coll_algo_name((coll_algo_t)forced)
                                                    : NULL;
    if (node && !node_algo_ok(o, s)) {
        check_die("%s: coll_req_algo() says '%s', expected 'shm+' and one that auto may choose "
                  "(reduced in shared memory around the daemons%s)", s->what, s->algo,
                  o->window > 4 ? ", or in the daemon whole beyond the 4 node buffers" : "");
    }
    if (!node && (want != NULL ? strcmp(s->algo, want) != 0 : !auto_allows(s->k.kind, s->algo))) {
        check_die("%s: coll_req_algo() says '%s', expected %s%s%s", s->what, s->algo,
                  want != NULL ? "'" : "one that auto may choose", want != NULL ? want : "",
                  want != NULL ? "'" : "");
    }
}

/* Die with the first wrong element and the inputs of every rank there. */
static void report_value(const check_ctx_t *c, const slot_t *s, size_t j, size_t src,
                         check_val_t got, check_val_t want, size_t nbad)
{
    char g[48], w[48], ins[512], one[48];
    size_t len = 0;

    ins[0] = '\0';
    for (int r = 0; r < c->world && len < sizeof(ins) - 64; r++) {
        check_val_t v = coll_data_input(&s->k, c->world, r, src);
        len += (size_t)snprintf(ins + len, sizeof(ins) - len, "%s%s", r ? ", " : "",
                                check_val_str(s->k.dt, v, one, sizeof(one)));
    }
    check_die("%s: output element %zu (%zu wrong in all): got %s, expected %s; inputs of ranks "
              "0..%d there: %s", s->what, j, nbad, check_val_str(s->k.dt, got, g, sizeof(g)),
              check_val_str(s->k.dt, want, w, sizeof(w)), c->world - 1, ins);
}

/* A reduction's output: @p n elements equal to the expected ones from input index @p first. */
static void check_reduced(const check_ctx_t *c, const slot_t *s, const uint8_t *out, size_t n,
                          size_t first)
{
    size_t bad = 0, first_bad = 0;
    check_val_t g0 = {0, 0}, w0 = {0, 0};
    uint8_t tmp[8];

    for (size_t j = 0; j < n; j++) {
        check_val_t want = coll_data_expected(&s->k, c->world, first + j);
        check_val_t got = check_load(s->k.dt, out, j);
        /* Through the type, as the output is (dies if the test chose an inexact value). */
        check_store(s->k.dt, tmp, 0, want);
        want = check_load(s->k.dt, tmp, 0);
        if (!check_val_equal(s->k.dt, got, want) && bad++ == 0) {
            first_bad = j;
            g0 = got;
            w0 = want;
        }
    }
    if (bad > 0) {
        report_value(c, s, first_bad, first + first_bad, g0, w0, bad);
    }
}

/* A copy collective's output: @p n elements equal, bit for bit, to rank @p src's input. */
static void check_copied(const check_ctx_t *c, const slot_t *s, const uint8_t *out, size_t n,
                         int src)
{
    size_t es = coll_dtype_size(s->k.dt);
    uint8_t *want = malloc(n * es + 1);

    if (want == NULL) {
        check_die("out of memory");
    }
    coll_data_fill(&s->k, c->world, src, want, n);
    for (size_t j = 0; j < n; j++) {
        if (memcmp(out + j * es, want + j * es, es) != 0) {
            uint64_t g = 0, w = 0;
            memcpy(&g, out + j * es, es);
            memcpy(&w, want + j * es, es);
            check_die("%s: element %zu of rank %d's block: got bytes 0x%0*llx, expected 0x%0*llx",
                      s->what, j, src, (int)(2 * es), (unsigned long long)g, (int)(2 * es),
                      (unsigned long long)w);
        }
    }
    free(want);
}

static void check_output(const check_ctx_t *c, const slot_t *s)
{
    size_t n = s->k.count, es = coll_dtype_size(s->k.dt);
    const uint8_t *out = s->b.recvp;
    switch (s->k.kind) {
    case K_ALLREDUCE: check_reduced(c, s, out, n, 0); break;
    case K_REDUCE_SCATTER: check_reduced(c, s, out, n, n * (size_t)c->rank); break;
    case K_ALLGATHER:
        for (int r = 0; r < c->world; r++) {
            check_copied(c, s, out + (size_t)r * n * es, n, r);
        }
        break;
    case K_BROADCAST: check_copied(c, s, out, n, s->k.root); break;
    default:
        if (c->rank == s->k.root) {
            check_reduced(c, s, out, n, 0);
        }
        break;
    }
}

/* Out of place the input must be as submitted. In place, the part of a reduce-scatter buffer
 * outside the rank's block is unspecified afterwards; an all-gather's is output. */
static void check_input_kept(const check_ctx_t *c, const slot_t *s)
{
    const bufs_t *b = &s->b;
    size_t es = coll_dtype_size(s->k.dt);
    (void)c;
    if (b->in_elems == 0 || b->sendp == NULL || b->sendp == b->recvp ||
        (s->inplace && (s->k.kind == K_REDUCE_SCATTER || s->k.kind == K_ALLGATHER))) {
        return;
    }
    for (size_t j = 0; j < b->in_elems; j++) {
        if (memcmp(b->sendp + j * es, b->in_copy + j * es, es) != 0) {
            check_die("%s: input element %zu was changed (out of place, the input is const)",
                      s->what, j);
        }
    }
}

static void check_guards(const check_ctx_t *c, const slot_t *s)
{
    if (s->b.send.alloc != NULL) {
        check_buf_guards(c, &s->b.send, s->what);
    }
    if (s->b.recv.alloc != NULL) {
        check_buf_guards(c, &s->b.recv, s->what);
    }
}

/* A bitwise reduction of a float is refused naming both; ranks that named different reductions
 * (--mismatch-op) are told both. */
static void check_refusal_named(const check_ctx_t *c, const opts_t *o, const slot_t *s)
{
    const char *msg = coll_comm_last_error(c->comm);
    char a[96] = "", b[32] = "";

    if (o->mismatch_rank >= 0) {
        snprintf(a, sizeof(a), "op=%s", coll_redop_name(s->k.op));
        snprintf(b, sizeof(b), "op=%s", coll_redop_name(o->mismatch_op));
    } else if (coll_kind_reduces(s->k.kind) && !op_applies(s->k.dt, s->k.op)) {
        snprintf(a, sizeof(a), "reduction %s does not apply to %s", coll_redop_name(s->k.op),
                 coll_dtype_name(s->k.dt));
    }
    if (strstr(msg, a) == NULL || strstr(msg, b) == NULL) {
        check_die("%s: the message does not say '%s' and '%s': '%s'", s->what, a, b, msg);
    }
}

/* --expect-error: the operation must fail with o->expect and write no output: an out-of-place
 * output still holds the sentinel, the input (in place: the shared buffer) is as submitted. */
static void check_failed(const check_ctx_t *c, const opts_t *o, const slot_t *s)
{
    const bufs_t *b = &s->b;
    size_t es = coll_dtype_size(s->k.dt);

    if (s->st != o->expect) {
        check_die("%s: expected %s, got %s (%s)", s->what, coll_err_name(o->expect),
                  coll_err_name(s->st), coll_comm_last_error(c->comm));
    }
    for (size_t j = 0; !s->inplace && b->recv.alloc != NULL && j < b->recv.bytes; j++) {
        if (b->recv.data[j] != sentinel(&s->k)) {
            check_die("%s: the failed operation wrote output byte %zu", s->what, j);
        }
    }
    if (b->in_elems > 0 && memcmp(b->sendp, b->in_copy, b->in_elems * es) != 0) {
        check_die("%s: the failed operation changed the input", s->what);
    }
    check_refusal_named(c, o, s);
    check_say(c, 0, "%s: %s as expected: %s", s->what, coll_err_name(s->st),
              coll_comm_last_error(c->comm));
}

/* ---- running -------------------------------------------------------------------------------- */

static coll_status_t submit(const check_ctx_t *c, const case_t *k, coll_redop_t op,
                            const bufs_t *b, coll_request_t **req)
{
    coll_op_params_t p = {0};
    if (k->algo != ALGO_ENV) {
        p.field_mask = COLL_OP_PARAM_ALGO;
        p.algo = (coll_algo_t)k->algo;
    }
    switch (k->kind) {
    case K_ALLREDUCE:
        return coll_allreduce_async(c->comm, b->sendp, b->recvp, k->count, k->dt, op, &p, req);
    case K_REDUCE_SCATTER:
        return coll_reduce_scatter_async(c->comm, b->sendp, b->recvp, k->count, k->dt, op, &p,
                                         req);
    case K_ALLGATHER:
        return coll_allgather_async(c->comm, b->sendp, b->recvp, k->count, k->dt, &p, req);
    case K_BROADCAST:
        return coll_broadcast_async(c->comm, b->sendp, b->recvp, k->count, k->dt, k->root, &p,
                                    req);
    default:
        return coll_reduce_async(c->comm, b->sendp, b->recvp, k->count, k->dt, op, k->root, &p,
                                 req);
    }
}

/* Before an operation that must fail. A faster rank's failure may reach this rank's daemon
 * before the barrier's last message and fail the barrier: the job failed, as expected; the
 * operation is submitted all the same and must report the expected status. The barrier gets
 * that status for a mismatch, which is every rank's, and COLL_ERR_JOB for another rank's
 * refused call (this rank's library refuses its own call all the same). */
static void barrier(const check_ctx_t *c, const opts_t *o)
{
    coll_request_t *req;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, o->timeout_ms, "barrier", NULL, 0);
    }
    if (st != COLL_OK && st != o->expect && (o->expect == COLL_OK || st != COLL_ERR_JOB)) {
        check_die("barrier: %s: %s", coll_err_name(st), coll_comm_last_error(c->comm));
    }
}

static void slot_start(const check_ctx_t *c, const opts_t *o, slot_t *s)
{
    s->inplace = s->k.place == PLACE_IN || (s->k.place == PLACE_MIXED && c->rank % 2 == 0);
    s->algo[0] = '\0';
    s->req = NULL;
    describe(c, s, s->what, sizeof(s->what));
    bufs_setup(c, &s->k, s->inplace, &s->b);
    if (o->expect != COLL_OK) {
        /* The failure fails the job: every rank must have its buffers before anyone submits. */
        barrier(c, o);
    }
    s->st = submit(c, &s->k, c->rank == o->mismatch_rank ? o->mismatch_op : s->k.op, &s->b,
                   &s->req);
    if (s->st != COLL_INPROGRESS && o->expect == COLL_OK) {
        check_die("%s: submitting returned %s (%s): %s", s->what, coll_err_name(s->st),
                  coll_strerror(s->st), coll_comm_last_error(c->comm));
    }
}

static void slot_wait(const check_ctx_t *c, const opts_t *o, slot_t *s)
{
    if (s->st == COLL_INPROGRESS) {
        s->st = check_wait(c, s->req, o->timeout_ms, s->what, s->algo, sizeof(s->algo));
    }
}

static void note_auto_algo(const slot_t *s)
{
    stat_t *st = &g_stats[s->k.kind][s->k.dt][s->k.op];
    if (s->k.algo == COLL_ALGO_AUTO && strstr(st->auto_algos, s->algo) == NULL &&
        strlen(st->auto_algos) + strlen(s->algo) + 2 < sizeof(st->auto_algos)) {
        strcat(strcat(st->auto_algos, st->auto_algos[0] ? "," : ""), s->algo);
    }
}

static void slot_finish(const check_ctx_t *c, const opts_t *o, slot_t *s, double seconds)
{
    if (o->expect != COLL_OK) {
        check_failed(c, o, s);
    } else if (s->st != COLL_OK) {
        check_die("%s: %s (%s): %s", s->what, coll_err_name(s->st), coll_strerror(s->st),
                  coll_comm_last_error(c->comm));
    } else {
        check_algo(c, o, s);
        check_output(c, s);
        check_input_kept(c, s);
        note_auto_algo(s);
    }
    check_guards(c, s);
    bufs_free(c, &s->b);
    g_stats[s->k.kind][s->k.dt][s->k.op].ops++;
    g_stats[s->k.kind][s->k.dt][s->k.op].seconds += seconds;
}

/* @p n cases in flight at once: submitted in order, waited for in reverse, then checked. */
static void run_batch(const check_ctx_t *c, const opts_t *o, const case_t *cases, int n)
{
    slot_t s[MAX_WINDOW];
    double t0 = check_now_s(), per;

    for (int i = 0; i < n; i++) {
        s[i].k = cases[i];
        slot_start(c, o, &s[i]);
    }
    for (int i = n - 1; i >= 0; i--) {
        slot_wait(c, o, &s[i]);
    }
    per = (check_now_s() - t0) / n; /* the checks' time is added to each below */
    for (int i = 0; i < n; i++) {
        double t1 = check_now_s();
        slot_finish(c, o, &s[i], per);
        g_stats[s[i].k.kind][s[i].k.dt][s[i].k.op].seconds += check_now_s() - t1;
    }
}

/* ---- the matrix ----------------------------------------------------------------------------- */

static int algo_applies(kind_t kind, int algo)
{
    switch (algo) {
    case ALGO_ENV:
    case COLL_ALGO_AUTO: return 1;
    case COLL_ALGO_RING: return kind <= K_ALLGATHER;
    case COLL_ALGO_RD: return kind == K_ALLREDUCE;
    case COLL_ALGO_CHAIN: return coll_kind_rooted(kind);
    default: return 0;
    }
}

/* Whether case @p k is run; counts forced-rd cases that are too large for rd as skipped. */
static int case_runs(const opts_t *o, const case_t *k)
{
    if (o->expect != COLL_OK) {
        return 1; /* run whatever was asked: it must fail */
    }
    if (!algo_applies(k->kind, k->algo)) {
        return 0;
    }
    if (k->algo == COLL_ALGO_RD && k->count * coll_dtype_size(k->dt) > RD_FORCE_MAX_BYTES) {
        g_stats[k->kind][k->dt][k->op].skipped++;
        return 0;
    }
    return 1;
}

/* Append every case of one (collective, dtype, reduction) to @p list. */
static void add_group(const opts_t *o, const resolved_t *rv, case_t k, case_t *list, int *n)
{
    int nroots = coll_kind_rooted(k.kind) ? rv->nroots : 1;
    for (int ci = 0; ci < rv->ncounts; ci++) {
        k.count = (size_t)rv->counts[ci];
        for (int a = 0; a < o->nalgos; a++) {
            k.algo = o->algos[a];
            for (int p = 0; p < o->nplaces && case_runs(o, &k); p++) {
                k.place = (place_t)o->places[p];
                for (int r = 0; r < nroots; r++) {
                    k.root = coll_kind_rooted(k.kind) ? (int)rv->roots[r] : 0;
                    for (k.iter = 0; k.iter < o->iters; k.iter++) {
                        if (list != NULL) {
                            list[*n] = k;
                        }
                        ++*n;
                    }
                }
            }
        }
    }
}

/* Every case of the command line, in matrix order; *n_p cases. */
static case_t *build_cases(const opts_t *o, const resolved_t *rv, int *n_p)
{
    case_t *list = NULL;
    for (int pass = 0; pass < 2; pass++) {
        int n = 0;
        for (int ki = 0; ki < o->nkinds; ki++) {
            case_t k = {.kind = (kind_t)o->kinds[ki]};
            int nops = coll_kind_reduces(k.kind) ? o->nops : 1;
            for (int d = 0; d < o->ndtypes; d++) {
                k.dt = (coll_dtype_t)o->dtypes[d];
                for (int op = 0; op < nops; op++) {
                    k.op = coll_kind_reduces(k.kind) ? (coll_redop_t)o->ops[op] : COLL_SUM;
                    if (o->expect != COLL_OK || op_applies(k.dt, k.op)) {
                        add_group(o, rv, k, list, &n);
                    }
                }
            }
        }
        if (pass == 0) {
            memset(g_stats, 0, sizeof(g_stats)); /* the first pass only counts */
            if ((list = calloc((size_t)n + 1, sizeof(*list))) == NULL) {
                check_die("out of memory");
            }
        }
        *n_p = n;
    }
    for (int i = 0; i < *n_p; i++) {
        list[i].seq = (uint32_t)i;
    }
    return list;
}

/* A Fisher-Yates shuffle with a fixed seed: the same order on every rank. */
static void shuffle(case_t *list, int n)
{
    uint64_t x = 0x2545f4914f6cdd1dull;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)((x = check_mix(x)) % (uint64_t)(i + 1));
        case_t t = list[i];
        list[i] = list[j];
        list[j] = t;
    }
}

static void print_summary(const check_ctx_t *c, const opts_t *o)
{
    for (int ki = 0; ki < o->nkinds; ki++) {
        kind_t kind = (kind_t)o->kinds[ki];
        for (int d = 0; d < o->ndtypes; d++) {
            for (int op = 0; op < (coll_kind_reduces(kind) ? o->nops : 1); op++) {
                coll_redop_t rop = coll_kind_reduces(kind) ? (coll_redop_t)o->ops[op] : COLL_SUM;
                const stat_t *st = &g_stats[kind][o->dtypes[d]][rop];
                if (st->ops == 0 && st->skipped == 0) {
                    continue;
                }
                char skipped[80] = "";
                if (st->skipped > 0) {
                    snprintf(skipped, sizeof(skipped), "; %d forced-rd skipped (over %u bytes "
                             "per rank)", st->skipped, RD_FORCE_MAX_BYTES);
                }
                check_say(c, 1, "%s %s%s%s: %d operations ok%s%s%s, %.1f ms%s",
                          coll_kind_names[kind], coll_dtype_name((coll_dtype_t)o->dtypes[d]),
                          coll_kind_reduces(kind) ? " " : "",
                          coll_kind_reduces(kind) ? coll_redop_name(rop) : "", st->ops,
                          st->auto_algos[0] ? " (auto chose " : "", st->auto_algos,
                          st->auto_algos[0] ? ")" : "", 1e3 * st->seconds, skipped);
            }
        }
    }
}

static void run_all(const check_ctx_t *c, const opts_t *o, const resolved_t *rv)
{
    int n;
    case_t *list = build_cases(o, rv, &n);

    if (o->shuffle) {
        shuffle(list, n);
    }
    for (int i = 0; i < n; i += o->window) {
        run_batch(c, o, list + i, n - i < o->window ? n - i : o->window);
    }
    free(list);
    print_summary(c, o);
}

/* ---- options -------------------------------------------------------------------------------- */

static uint64_t pool_bytes_for(const opts_t *o, const resolved_t *rv, int world, int local_size)
{
    uint64_t most = 0, per_rank, need;
    for (int i = 0; i < rv->ncounts; i++) {
        most = (uint64_t)rv->counts[i] > most ? (uint64_t)rv->counts[i] : most;
    }
    per_rank = (most * 8 * (uint64_t)(world + 1) + 4 * CHECK_GUARD_BYTES + 2 * 4096) *
               (uint64_t)o->window;
    need = per_rank * (uint64_t)local_size + (16u << 20);
    return need < (64u << 20) ? (64u << 20) : need;
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;
    resolved_t rv = {0};
    int world, local;
    double t0 = check_now_s();

    check_set_prog(argv[0]);
    parse_opts(argc, argv, &o);
    check_env_sizes(&world, &local);
    resolve_counts(&o, world / local, &rv);
    check_join(&c, pool_bytes_for(&o, &rv, world, local));
    resolve_roots(&c, &o, &rv);
    run_all(&c, &o, &rv);
    check_say(&c, 1, "all checks passed: world %d (%d nodes x %d ranks), %.2f s", c.world, c.nodes,
              c.local_size, check_now_s() - t0);
    coll_comm_destroy(c.comm);
    return 0;
}
