/*
 * split_check: one rank of a live test of coll_comm_split() and coll_comm_groups(), started as
 * every rank of a local cluster by collective-launch (ranks fill the nodes in order).
 *
 * - Layouts: for every (tp, pp, dp) with tp x pp x dp = the world size, in every rank order of
 *   --orders, the tp, pp and dp groups of each rank: their size, this rank's place, the job
 *   rank of each member and the intra-node flags must be those of coll_layout_group() and of
 *   the placement (rank r on node r / ranks per node); one allreduce in each of the three
 *   groups at once, all with the same key, must give the sum over the members of a value only
 *   they hold.
 * - Concurrent collectives on overlapping groups (the tp, pp and dp groups of the first layout
 *   with three dimensions above 1, or of 2 x 2 x (world / 4), and the world, all with the same
 *   key): a multi-segment allreduce in each, and in the tp group a reduce-scatter, an
 *   all-gather, a broadcast from its last rank, a reduce to it and a barrier, all submitted
 *   before any is waited for; every output element is checked against values computed here.
 * - COLL_UNDEFINED: odd ranks join no group (their communicator is NULL), the even ones form
 *   one and allreduce in it.
 * - Nested splits, at the same time on disjoint nodes: the world split in two halves (by node),
 *   each half split by rank parity; allreduces in the inner groups.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WAIT_MS 60000
#define BIG_COUNT 300007u /* over four 256 KiB segments of int32 */
#define SAME_KEY 77u      /* every concurrent operation uses it: only (group, key) matches */

static const char *const dim_names[COLL_DIM_COUNT] = {"tp", "pp", "dp"};

/* A value only rank @p r holds at element @p k (exact in int32 sums over 8 ranks). */
static int32_t val(int r, size_t k, int salt)
{
    return (int32_t)(check_mix(((uint64_t)salt << 40) + ((uint64_t)r << 32) + k) % 100000) - 50000;
}

static int32_t *pool_i32(const check_ctx_t *c, size_t n)
{
    void *p = NULL;
    coll_status_t st = coll_mem_alloc(c->comm, (n ? n : 1) * sizeof(int32_t), &p);

    if (st != COLL_OK) {
        check_die("coll_mem_alloc(%zu int32): %s", n, coll_err_name(st));
    }
    return p;
}

static void wait_ok(const check_ctx_t *c, coll_request_t *r, coll_status_t st, const char *what)
{
    if (st == COLL_INPROGRESS) {
        st = check_wait(c, r, WAIT_MS, what, NULL, 0);
    }
    if (st != COLL_OK) {
        check_die("%s: %s: %s", what, coll_err_name(st), coll_comm_last_error(c->comm));
    }
}

/* The group of dimension @p d of @p l holding this rank, as coll_comm_groups() made it. */
static void check_group(const check_ctx_t *c, const coll_layout_t *l, const coll_groups_t *g,
                        int d, const char *name)
{
    int ranks[64], color, n = l->size[d], rpn = c->local_size, same_node = 1;
    coll_comm_t *gc = g->comm[d];

    coll_layout_group(l, (coll_dim_t)d, c->rank, ranks, &color);
    if (coll_comm_world_size(gc) != n || coll_comm_rank(gc) != g->coords[d]) {
        check_die("%s: %s group of %d ranks, rank %d in it; expected %d, %d", name, dim_names[d],
                  coll_comm_world_size(gc), coll_comm_rank(gc), n, g->coords[d]);
    }
    for (int k = 0; k < n; k++) {
        if (coll_comm_job_rank(gc, k) != ranks[k]) {
            check_die("%s: member %d of the %s group is job rank %d, expected %d", name, k,
                      dim_names[d], coll_comm_job_rank(gc, k), ranks[k]);
        }
        same_node &= ranks[k] / rpn == c->rank / rpn;
    }
    if (g->intra_node[d] != same_node || coll_comm_node_count(gc) < 1) {
        check_die("%s: %s group intra_node %d, its ranks are %son one node", name, dim_names[d],
                  g->intra_node[d], same_node ? "" : "not ");
    }
}

/* One allreduce in each group of @p g at once, all with the same key. */
static void allreduce_groups(const check_ctx_t *c, const coll_layout_t *l, const coll_groups_t *g,
                             const char *name)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY, .key = SAME_KEY};
    coll_request_t *req[COLL_DIM_COUNT];
    coll_status_t st[COLL_DIM_COUNT];
    int32_t *buf[COLL_DIM_COUNT];

    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        buf[d] = pool_i32(c, 3);
        for (int k = 0; k < 3; k++) {
            buf[d][k] = val(c->rank, (size_t)k, d);
        }
        st[d] = coll_allreduce_async(g->comm[d], buf[d], buf[d], 3, COLL_INT32, COLL_SUM, &p,
                                     &req[d]);
    }
    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        int ranks[64];
        char what[96];
        snprintf(what, sizeof(what), "%s: allreduce in the %s group", name, dim_names[d]);
        wait_ok(c, req[d], st[d], what);
        coll_layout_group(l, (coll_dim_t)d, c->rank, ranks, NULL);
        for (int k = 0; k < 3; k++) {
            int32_t want = 0;
            for (int m = 0; m < l->size[d]; m++) {
                want += val(ranks[m], (size_t)k, d);
            }
            if (buf[d][k] != want) {
                check_die("%s: element %d is %d, expected %d", what, k, buf[d][k], want);
            }
        }
        coll_mem_free(c->comm, buf[d]);
    }
}

static void check_layouts(const check_ctx_t *c, const char *orders)
{
    char list[256], *save = NULL;
    int tested = 0;

    snprintf(list, sizeof(list), "%s", orders);
    for (char *o = strtok_r(list, ",", &save); o != NULL; o = strtok_r(NULL, ",", &save)) {
        for (int tp = 1; tp <= c->world; tp++) {
            for (int pp = 1; pp <= c->world / tp; pp++) {
                coll_layout_t l;
                coll_groups_t g;
                char name[64];
                coll_status_t st;
                if (c->world % (tp * pp) != 0) {
                    continue;
                }
                if (coll_layout_init(&l, tp, pp, c->world / (tp * pp), o) != COLL_OK) {
                    check_usage_error("bad order '%s'", o);
                }
                snprintf(name, sizeof(name), "tp%d pp%d dp%d %s", tp, pp, c->world / tp / pp, o);
                if ((st = coll_comm_groups(c->comm, &l, &g)) != COLL_OK) {
                    check_die("%s: coll_comm_groups: %s: %s", name, coll_err_name(st),
                              coll_comm_last_error(c->comm));
                }
                for (int d = 0; d < COLL_DIM_COUNT; d++) {
                    check_group(c, &l, &g, d, name);
                }
                allreduce_groups(c, &l, &g, name);
                coll_groups_destroy(&g);
                tested++;
            }
        }
    }
    check_say(c, 1, "%d layouts of %d ranks: groups, placement and allreduces as computed",
              tested, c->world);
}

/* One concurrent operation: its communicator, kind and buffers. */
typedef struct {
    const char *what;
    coll_comm_t *comm;
    int kind; /* 0 allreduce, 1 reduce-scatter, 2 all-gather, 3 broadcast, 4 reduce, 5 barrier */
    int salt;
    size_t n;
    int32_t *in, *out;
    coll_request_t *req;
    coll_status_t st;
} cop_t;

static coll_status_t cop_submit(cop_t *o, uint64_t key)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY, .key = key};
    int last = coll_comm_world_size(o->comm) - 1;

    switch (o->kind) {
    case 0: return coll_allreduce_async(o->comm, o->in, o->out, o->n, COLL_INT32, COLL_SUM, &p,
                                        &o->req);
    case 1: return coll_reduce_scatter_async(o->comm, o->in, o->out, o->n, COLL_INT32, COLL_SUM,
                                             &p, &o->req);
    case 2: return coll_allgather_async(o->comm, o->in, o->out, o->n, COLL_INT32, &p, &o->req);
    case 3: return coll_broadcast_async(o->comm, o->in, o->out, o->n, COLL_INT32, last, &p,
                                        &o->req);
    case 4: return coll_reduce_async(o->comm, o->in, o->out, o->n, COLL_INT32, COLL_SUM, last, &p,
                                     &o->req);
    default: return coll_barrier_async(o->comm, &p, &o->req);
    }
}

/* Element @p k of @p o's output on this rank, computed from the members' values. */
static int64_t cop_expect(const cop_t *o, size_t k)
{
    int size = coll_comm_world_size(o->comm), me = coll_comm_rank(o->comm);
    int64_t sum = 0;

    switch (o->kind) {
    case 1:
        for (int m = 0; m < size; m++) {
            sum += val(coll_comm_job_rank(o->comm, m), (size_t)me * o->n + k, o->salt);
        }
        return sum;
    case 2: return val(coll_comm_job_rank(o->comm, (int)(k / o->n)), k % o->n, o->salt);
    case 3: return val(coll_comm_job_rank(o->comm, size - 1), k, o->salt);
    default:
        for (int m = 0; m < size; m++) {
            sum += val(coll_comm_job_rank(o->comm, m), k, o->salt);
        }
        return sum;
    }
}

static void cop_prepare(const check_ctx_t *c, cop_t *o)
{
    int size = coll_comm_world_size(o->comm), root = coll_comm_rank(o->comm) == size - 1;
    size_t nin = o->kind == 1 ? o->n * (size_t)size : o->n;
    size_t nout = o->kind == 2 ? o->n * (size_t)size : o->kind == 4 && !root ? 0 : o->n;

    o->in = pool_i32(c, nin);
    o->out = pool_i32(c, nout);
    for (size_t k = 0; k < nin; k++) {
        o->in[k] = val(c->rank, k, o->salt);
    }
    memset(o->out, 0, (nout ? nout : 1) * sizeof(int32_t));
}

static void cop_check(const check_ctx_t *c, const cop_t *o)
{
    int size = coll_comm_world_size(o->comm), root = coll_comm_rank(o->comm) == size - 1;
    size_t nout = o->kind == 2 ? o->n * (size_t)size : o->n;

    if (o->kind == 5 || (o->kind == 4 && !root)) {
        return;
    }
    for (size_t k = 0; k < nout; k++) {
        if (o->out[k] != cop_expect(o, k)) {
            check_die("%s: element %zu is %d, expected %lld", o->what, k, o->out[k],
                      (long long)cop_expect(o, k));
        }
    }
}

static void check_concurrent(const check_ctx_t *c)
{
    int tp = c->world % 2 == 0 ? 2 : 1, pp = c->world % 4 == 0 ? 2 : 1;
    coll_layout_t l;
    coll_groups_t g;
#define COP(w, k, s, count) {.what = (w), .kind = (k), .salt = (s), .n = (count)}
    cop_t ops[] = {
        COP("allreduce of tp", 0, 1, BIG_COUNT),   COP("allreduce of pp", 0, 2, BIG_COUNT),
        COP("allreduce of dp", 0, 3, BIG_COUNT),   COP("allreduce of the world", 0, 4, 999),
        COP("reduce-scatter of tp", 1, 5, 65537), COP("all-gather of tp", 2, 6, 65537),
        COP("broadcast of tp", 3, 7, 100003),     COP("reduce of tp", 4, 8, 100003),
        COP("barrier of tp", 5, 9, 0),
    };
#undef COP
    int n = (int)(sizeof(ops) / sizeof(ops[0]));

    if (coll_layout_init(&l, tp, pp, c->world / (tp * pp), NULL) != COLL_OK ||
        coll_comm_groups(c->comm, &l, &g) != COLL_OK) {
        check_die("concurrent: coll_comm_groups: %s", coll_comm_last_error(c->comm));
    }
    for (int i = 0; i < n; i++) {
        ops[i].comm = i == 3 ? c->comm : g.comm[i < 3 ? i : COLL_DIM_TP];
        cop_prepare(c, &ops[i]);
    }
    /* Same key in every communicator; distinct ones inside the tp group. */
    for (int i = 0; i < n; i++) {
        ops[i].st = cop_submit(&ops[i], SAME_KEY + (i > 3 ? (uint64_t)i : 0));
    }
    for (int i = n - 1; i >= 0; i--) {
        wait_ok(c, ops[i].req, ops[i].st, ops[i].what);
        cop_check(c, &ops[i]);
        coll_mem_free(c->comm, ops[i].in);
        coll_mem_free(c->comm, ops[i].out);
    }
    coll_groups_destroy(&g);
    check_say(c, 1, "%d operations in flight at once on tp%d pp%d dp%d and the world, one key: "
              "every element as computed", n, tp, pp, c->world / tp / pp);
}

/* An allreduce of each member's job rank in @p g: their sum, as computed from @p members. */
static void check_sum(const check_ctx_t *c, coll_comm_t *g, const int *members, int n,
                      const char *what)
{
    int32_t *b = pool_i32(c, 1);
    coll_request_t *r = NULL;
    coll_status_t st;
    int32_t want = 0;

    if (coll_comm_world_size(g) != n) {
        check_die("%s: %d ranks, expected %d", what, coll_comm_world_size(g), n);
    }
    for (int m = 0; m < n; m++) {
        want += members[m] + 1;
        if (coll_comm_job_rank(g, m) != members[m]) {
            check_die("%s: member %d is job rank %d, expected %d", what, m,
                      coll_comm_job_rank(g, m), members[m]);
        }
    }
    b[0] = c->rank + 1;
    st = coll_allreduce_async(g, b, b, 1, COLL_INT32, COLL_SUM, NULL, &r);
    wait_ok(c, r, st, what);
    if (b[0] != want) {
        check_die("%s: allreduce gave %d, expected %d", what, b[0], want);
    }
    coll_mem_free(c->comm, b);
}

static void split_or_die(const check_ctx_t *c, coll_comm_t *parent, int color, int key,
                         coll_comm_t **g, const char *what)
{
    coll_status_t st = coll_comm_split(parent, color, key, g);

    if (st != COLL_OK) {
        check_die("%s: coll_comm_split: %s: %s", what, coll_err_name(st),
                  coll_comm_last_error(c->comm));
    }
}

/* Odd ranks join no group; the even ones form one, ordered by descending rank. */
static void check_undefined(const check_ctx_t *c)
{
    int members[64], n = 0;
    coll_comm_t *g = NULL;

    split_or_die(c, c->comm, c->rank % 2 ? COLL_UNDEFINED : 5, -c->rank, &g, "undefined");
    for (int r = (c->world - 1) / 2 * 2; r >= 0; r -= 2) {
        members[n++] = r;
    }
    if ((c->rank % 2) != (g == NULL)) {
        check_die("undefined: rank %d got %s communicator", c->rank, g ? "a" : "no");
    }
    if (g != NULL) {
        check_sum(c, g, members, n, "undefined: the even ranks' group");
        coll_comm_destroy(g);
    }
    check_say(c, 1, "COLL_UNDEFINED: no communicator for the odd ranks, a group of the even");
}

/* Halves by node, then each half by parity: the two inner splits run at the same time on
 * disjoint nodes. */
static void check_nested(const check_ctx_t *c)
{
    int half_nodes = c->nodes / 2, half = c->rank / c->local_size >= half_nodes;
    int lo = half ? half_nodes * c->local_size : 0, hi = half ? c->world : lo + half_nodes *
                                                                                    c->local_size;
    int members[64], n = 0;
    coll_comm_t *outer, *inner;

    split_or_die(c, c->comm, half, c->rank, &outer, "nested: halves");
    split_or_die(c, outer, c->rank % 2, c->rank, &inner, "nested: parity");
    for (int r = lo; r < hi; r++) {
        if (r % 2 == c->rank % 2) {
            members[n++] = r;
        }
    }
    check_sum(c, inner, members, n, "nested: inner group");
    coll_comm_destroy(outer); /* the inner group outlives its parent */
    check_sum(c, inner, members, n, "nested: inner group after its parent went");
    coll_comm_destroy(inner);
    check_say(c, 1, "nested splits, at the same time on disjoint nodes: groups as computed");
}

int main(int argc, char **argv)
{
    const char *orders = "tp-dp-pp,pp-tp-dp";
    check_ctx_t c;
    int opt;

    check_set_prog(argv[0]);
    while ((opt = getopt(argc, argv, "o:h")) != -1) {
        if (opt == 'o') {
            orders = optarg;
        } else {
            printf("usage: %s [-o ORDER,...]   (ranks of orders like tp-dp-pp)\n", argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    check_join(&c, 64u << 20);
    if (c.world > 64) {
        check_usage_error("at most 64 ranks");
    }
    check_layouts(&c, orders);
    check_concurrent(&c);
    check_undefined(&c);
    if (c.nodes >= 2) {
        check_nested(&c);
    }
    coll_comm_destroy(c.comm);
    return 0;
}
