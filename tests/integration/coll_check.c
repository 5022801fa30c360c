/*
 * coll_check: one rank of an engine integration test, started as every rank of a local cluster
 * by collective-launch. It runs every combination of the collectives, datatypes, reductions,
 * counts, algorithms, placements and roots given on the command line, in the same order on every
 * rank (operations are matched by call order), and checks each one against values computed here
 * from the inputs of all ranks (coll_data.h says how they are chosen).
 *
 * For every operation: the output equals the expected values, an out-of-place input is
 * unchanged, the guard bytes around every buffer are intact, and coll_req_algo() names the
 * forced algorithm ("local" on one node; one that auto may choose otherwise). With --window W,
 * W operations are in flight at once; --shuffle mixes the order (the same on every rank), so
 * that different collectives, datatypes and sizes run concurrently.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check (a message names the case,
 * the first wrong element, got and expected, and the inputs of every rank there), 2 on a usage
 * error.
 */
#include "coll_data.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 32
#define TOKEN_MAX 32
#define MAX_WINDOW 16
/* A forced rd runs only when the whole buffer and a descriptor fit in one staging segment
 * (256 KiB by default). Below this the test forces rd; above it rd is skipped (not failed). */
#define RD_FORCE_MAX_BYTES (248u << 10)

typedef struct {
    int kinds[K_COUNT], nkinds;
    int dtypes[COLL_DTYPE_COUNT], ndtypes;
    int ops[COLL_REDOP_COUNT], nops;
    char counts[MAX_LIST][TOKEN_MAX];
    int ncounts;
    int algos[MAX_LIST], nalgos; /* COLL_ALGO_* or ALGO_ENV */
    int places[3], nplaces;      /* place_t */
    char roots[MAX_LIST][TOKEN_MAX];
    int nroots;
    int iters;
    int window;
    int shuffle;
    int timeout_ms;
    coll_status_t expect; /* COLL_OK, or the error every operation must fail with */
} opts_t;

/* Counts and roots resolved for this job. */
typedef struct {
    long long counts[MAX_LIST];
    int ncounts;
    long long roots[MAX_LIST];
    int nroots;
} resolved_t;

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

static void check_algo(const check_ctx_t *c, const slot_t *s)
{
    int forced = forced_algo(&s->k);
    const char *want = c->nodes == 1                ? "local"
                       : forced != COLL_ALGO_AUTO ? coll_algo_name((coll_algo_t)forced)
                                                    : NULL;
    if (want != NULL ? strcmp(s->algo, want) != 0 : !auto_allows(s->k.kind, s->algo)) {
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
    check_say(c, 0, "%s: %s as expected: %s", s->what, coll_err_name(s->st),
              coll_comm_last_error(c->comm));
}

/* ---- running -------------------------------------------------------------------------------- */

static coll_status_t submit(const check_ctx_t *c, const case_t *k, const bufs_t *b,
                            coll_request_t **req)
{
    coll_op_params_t p = {0};
    if (k->algo != ALGO_ENV) {
        p.field_mask = COLL_OP_PARAM_ALGO;
        p.algo = (coll_algo_t)k->algo;
    }
    switch (k->kind) {
    case K_ALLREDUCE:
        return coll_allreduce_async(c->comm, b->sendp, b->recvp, k->count, k->dt, k->op, &p, req);
    case K_REDUCE_SCATTER:
        return coll_reduce_scatter_async(c->comm, b->sendp, b->recvp, k->count, k->dt, k->op, &p,
                                         req);
    case K_ALLGATHER:
        return coll_allgather_async(c->comm, b->sendp, b->recvp, k->count, k->dt, &p, req);
    case K_BROADCAST:
        return coll_broadcast_async(c->comm, b->sendp, b->recvp, k->count, k->dt, k->root, &p,
                                    req);
    default:
        return coll_reduce_async(c->comm, b->sendp, b->recvp, k->count, k->dt, k->op, k->root,
                                 &p, req);
    }
}

/* Before an operation that must fail. A faster rank's failure may reach this rank's daemon
 * before the barrier's last message and fail the barrier with the same status: the job failed,
 * as expected; the operation is submitted all the same and must report that status. */
static void barrier(const check_ctx_t *c, const opts_t *o)
{
    coll_request_t *req;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, req, o->timeout_ms, "barrier", NULL, 0);
    }
    if (st != COLL_OK && st != o->expect) {
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
    s->st = submit(c, &s->k, &s->b, &s->req);
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
        check_algo(c, s);
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
                    add_group(o, rv, k, list, &n);
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

static void usage(FILE *f)
{
    fprintf(f,
        "usage: coll_check [--colls LIST] [--dtypes LIST] [--ops LIST] [--counts LIST]\n"
        "                  [--algos LIST] [--place LIST] [--roots LIST] [--iters K]\n"
        "                  [--window W] [--shuffle] [--timeout-ms T] [--expect-error NAME]\n"
        "Run as every rank of a collective-launch job; checks every combination of:\n"
        "  --colls LIST   allreduce,reduce_scatter,allgather,broadcast,reduce or all (default)\n"
        "  --dtypes LIST  datatype names as coll_dtype_name() spells them, or all (default)\n"
        "  --ops LIST     sum,avg,prod,min,max or all (default); reductions only\n"
        "  --counts LIST  elements per rank (recvcount, sendcount): integers with optional\n"
        "                 Ki/Mi suffix, or N, N-k, N+k with N the number of nodes\n"
        "                 (default 0,1,N-1,N+1,1009)\n"
        "  --algos LIST   auto, ring, rd, chain, env (COLL_ALGO of the environment) or all\n"
        "                 (auto and every forced one); each collective runs those that apply;\n"
        "                 a forced rd above %u bytes per rank is skipped (default auto)\n"
        "  --place LIST   out, in, mixed (default all three): in place is send == recv,\n"
        "                 reduce-scatter's recvbuf = block r of sendbuf, all-gather's sendbuf =\n"
        "                 block r of recvbuf, broadcast and reduce send == recv at the root;\n"
        "                 mixed: even ranks in place, odd ranks out of place\n"
        "  --roots LIST   broadcast and reduce roots: ranks, last, mid (default 0,last)\n"
        "  --iters K      repetitions of each case with other data (default 1)\n"
        "  --window W     operations in flight at once, 1..%d (default 1)\n"
        "  --shuffle      run the cases in a shuffled order (the same on every rank)\n"
        "  --timeout-ms T bound on each wait (default 60000)\n"
        "  --expect-error NAME  every operation must fail with this status (e.g.\n"
        "                 COLL_ERR_UNSUPPORTED) and leave its buffers untouched\n",
        RD_FORCE_MAX_BYTES, MAX_WINDOW);
}

/* Split @p list at commas into @p out (at most @p max tokens); -1 when it does not fit. */
static int split(const char *list, char out[][TOKEN_MAX], int max)
{
    char buf[MAX_LIST * TOKEN_MAX], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == max || strlen(t) >= TOKEN_MAX) {
            return -1;
        }
        snprintf(out[n++], TOKEN_MAX, "%s", t);
    }
    return n > 0 ? n : -1;
}

/* Parse a list of names with @p parse (or "all": 0..count-1) into @p out. */
static int parse_names(const char *list, int (*parse)(const char *), int count, int *out)
{
    char tok[MAX_LIST][TOKEN_MAX];
    int n = split(list, tok, MAX_LIST);
    if (n == 1 && strcmp(tok[0], "all") == 0) {
        for (int i = 0; i < count; i++) {
            out[i] = i;
        }
        return count;
    }
    for (int i = 0; i < n; i++) {
        if (n > count || (out[i] = parse(tok[i])) < 0) {
            return -1;
        }
    }
    return n;
}

static int parse_kind(const char *s)
{
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(s, coll_kind_names[k]) == 0) {
            return k;
        }
    }
    return -1;
}

/* An algorithm name, "env" (ALGO_ENV) or "all"; -2 when unknown. */
static int parse_algos(const char *list, opts_t *o)
{
    char tok[MAX_LIST][TOKEN_MAX];
    int n = split(list, tok, MAX_LIST);
    o->nalgos = 0;
    for (int i = 0; i < n; i++) {
        int found = strcmp(tok[i], "env") == 0 ? ALGO_ENV : -2;
        for (int a = 0; a < COLL_ALGO_COUNT; a++) {
            if (strcmp(tok[i], "all") == 0 || strcmp(tok[i], coll_algo_name((coll_algo_t)a)) == 0) {
                o->algos[o->nalgos++] = found = a;
            }
        }
        if (found == ALGO_ENV) {
            o->algos[o->nalgos++] = ALGO_ENV;
        } else if (found == -2 || o->nalgos > MAX_LIST - COLL_ALGO_COUNT) {
            return -1;
        }
    }
    return n > 0 ? 0 : -1;
}

static int parse_place(const char *s)
{
    return strcmp(s, "out") == 0 ? PLACE_OUT
           : strcmp(s, "in") == 0 ? PLACE_IN
           : strcmp(s, "mixed") == 0 ? PLACE_MIXED
                                     : -1;
}

/* A negative status by its symbolic name, e.g. COLL_ERR_UNSUPPORTED. */
static int parse_status(const char *s, coll_status_t *st)
{
#define STATUS_MATCH(name, value, text)                                                            \
    if (strcmp(s, "COLL_" #name) == 0 && (value) < 0) {                                           \
        *st = (coll_status_t)(value);                                                              \
        return 0;                                                                                  \
    }
    COLL_STATUS_MAP(STATUS_MATCH)
#undef STATUS_MATCH
    return -1;
}

static void set_defaults(opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->iters = 1;
    o->window = 1;
    o->timeout_ms = 60000;
    o->nkinds = parse_names("all", parse_kind, K_COUNT, o->kinds);
    o->ndtypes = parse_names("all", check_dtype_parse, COLL_DTYPE_COUNT, o->dtypes);
    o->nops = parse_names("all", check_redop_parse, COLL_REDOP_COUNT, o->ops);
    o->ncounts = split("0,1,N-1,N+1,1009", o->counts, MAX_LIST);
    parse_algos("auto", o);
    o->nplaces = parse_names("out,in,mixed", parse_place, 3, o->places);
    o->nroots = split("0,last", o->roots, MAX_LIST);
}

static int parse_opt(int ch, const char *arg, opts_t *o)
{
    long v;
    switch (ch) {
    case 'C': return (o->nkinds = parse_names(arg, parse_kind, K_COUNT, o->kinds)) < 0;
    case 'd':
        return (o->ndtypes = parse_names(arg, check_dtype_parse, COLL_DTYPE_COUNT, o->dtypes)) < 0;
    case 'o': return (o->nops = parse_names(arg, check_redop_parse, COLL_REDOP_COUNT, o->ops)) < 0;
    case 'c': return (o->ncounts = split(arg, o->counts, MAX_LIST)) < 0;
    case 'a': return parse_algos(arg, o) < 0;
    case 'p': return (o->nplaces = parse_names(arg, parse_place, 3, o->places)) < 0;
    case 'r': return (o->nroots = split(arg, o->roots, MAX_LIST)) < 0;
    case 'i': return check_parse_int(arg, 1, 1000, &v) < 0 || (o->iters = (int)v) < 0;
    case 'w': return check_parse_int(arg, 1, MAX_WINDOW, &v) < 0 || (o->window = (int)v) < 0;
    case 's': o->shuffle = 1; return 0;
    case 't': return check_parse_int(arg, 1, 3600000, &v) < 0 || (o->timeout_ms = (int)v) < 0;
    case 'e': return parse_status(arg, &o->expect) < 0;
    case 'h': usage(stdout); exit(0);
    default: return 1;
    }
}

static void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"colls", required_argument, NULL, 'C'},      {"dtypes", required_argument, NULL, 'd'},
        {"ops", required_argument, NULL, 'o'},        {"counts", required_argument, NULL, 'c'},
        {"algos", required_argument, NULL, 'a'},      {"place", required_argument, NULL, 'p'},
        {"roots", required_argument, NULL, 'r'},      {"iters", required_argument, NULL, 'i'},
        {"window", required_argument, NULL, 'w'},     {"shuffle", no_argument, NULL, 's'},
        {"timeout-ms", required_argument, NULL, 't'}, {"expect-error", required_argument, NULL, 'e'},
        {"help", no_argument, NULL, 'h'},             {NULL, 0, NULL, 0}};
    int ch, bad = 0;

    set_defaults(o);
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        bad = parse_opt(ch, optarg, o);
    }
    if (bad || optind != argc || (o->expect != COLL_OK && o->window != 1)) {
        usage(stderr);
        exit(2);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

/* Distinct values of @p n, in order; returns how many. */
static int dedupe(long long *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < m; j++) {
            seen |= v[j] == v[i];
        }
        if (!seen) {
            v[m++] = v[i];
        }
    }
    return m;
}

static void resolve_counts(const opts_t *o, int nodes, resolved_t *rv)
{
    for (int i = 0; i < o->ncounts; i++) {
        if ((rv->counts[i] = check_parse_count(o->counts[i], nodes)) < 0) {
            check_usage_error("bad count '%s' (nodes=%d)", o->counts[i], nodes);
        }
    }
    rv->ncounts = dedupe(rv->counts, o->ncounts);
}

static void resolve_roots(const check_ctx_t *c, const opts_t *o, resolved_t *rv)
{
    for (int i = 0; i < o->nroots; i++) {
        const char *t = o->roots[i];
        long v = strcmp(t, "last") == 0 ? c->world - 1 : c->world / 2;
        if (strcmp(t, "last") != 0 && strcmp(t, "mid") != 0 &&
            check_parse_int(t, 0, c->world - 1, &v) < 0) {
            check_usage_error("bad root '%s' (world size %d)", t, c->world);
        }
        rv->roots[i] = v;
    }
    rv->nroots = dedupe(rv->roots, o->nroots);
}

/* Pool per node: the largest case's buffers of every local rank (the world-sized buffer of
 * reduce-scatter or all-gather and the other one, 8-byte elements) per operation in flight,
 * guards and slack. */
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
