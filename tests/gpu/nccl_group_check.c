/*
 * nccl_group_check: one rank of the check of NCCL in split groups (docs/gpu.md, "NCCL between
 * daemons"), started by collective-launch with the COLL_* environment of its rank, over the
 * fake device layer (COLL_DEVICE_FAKE=1) and the daemons' stand-in NCCL. The ranks are laid out
 * node by node (rank r on node r / local size), as collective-launch places them.
 *
 * The world is split four ways, one after the other, and every group keeps its communicator to
 * the end, so the groups' NCCL communicators live side by side in the job:
 *   by local rank             2x2: {0, 2} and {1, 3}, two groups on the same two nodes at once;
 *                             4x1: every rank (a group of the world's ranks);
 *   by local rank, reversed   the same ranks, group rank 0 the last rank: its node is the
 *                             group's last, so the all-gather and reduce-scatter are not NCCL's;
 *   in halves                 2x2: one group per node (no part between nodes); 4x1: {0, 1} and
 *                             {2, 3} on disjoint nodes;
 *   all but the last rank     2x2: two ranks on node 0 and one on node 1 (combined on node 0
 *                             first; the blocks are not the nodes').
 * Each group runs on device buffers an allreduce (float32 sum, out of place), an all-gather, a
 * reduce-scatter (float32 sum) and a broadcast from its last rank, each against values computed
 * here from the group's ranks, and coll_req_algo() against the choice computed here: "nccl" for
 * a group on two nodes or more (the all-gather and the reduce-scatter only where every node of
 * the group holds the same number of consecutive group ranks), "device+local" for a group on one
 * node (combined on the device by the daemon's executor), "staged+..." otherwise. Then the world's
 * allreduce and the first group's again (NCCL, the communicators already there).
 *
 * With --error the daemons' stand-in NCCL fails NCCL rank 1's collectives (FAKE_NCCL_ASYNC_ERROR=1
 * in their environment): a float32 allreduce in each group split by local rank must end on every
 * rank with an error that names NCCL and the group that failed (the job's failure aborts every
 * group's communicator).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (no device
 * layer).
 */
#include <collective.h>
#include <collective_groups.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_dev.h"

#define COUNT 1031  /* elements of each rank's block */
#define MAX_RANKS 16
#define NSPLITS 4

enum { ALLREDUCE, ALLGATHER, REDUCE_SCATTER, BROADCAST, NCASES };

static const char *const case_names[NCASES] = {"allreduce", "all-gather", "reduce-scatter",
                                               "broadcast from the last rank"};

static coll_comm_t *world;
static int rank, nranks, per_node;

/* This rank's group of one split, as computed here. */
typedef struct {
    const char *name;
    coll_comm_t *comm;        /* NULL: not in a group of this split */
    int size, rank;
    int ranks[MAX_RANKS];     /* job rank of each group rank */
} group_t;

/* Group rank @p g's input element @p i. */
static float value(int g, size_t i)
{
    return (float)(g + 1) + (float)(i % 5);
}

/* The sum over @p size group ranks of their element @p i. */
static float sum(int size, size_t i)
{
    return (float)(size * (size + 1) / 2) + (float)size * (float)(i % 5);
}

/* The color and key of job rank @p r in split @p s. */
static void color_key(int s, int r, int *color, int *key)
{
    *key = s == 1 ? -r : r;
    *color = s <= 1   ? r % per_node
             : s == 2 ? (r < nranks / 2 ? 0 : 1)
             : r == nranks - 1 ? COLL_UNDEFINED
                               : 0;
}

/* This rank's group of split @p s, computed as coll_comm_split() orders it: by key, then rank. */
static void members(int s, group_t *g)
{
    int mine, kmine, c, k;

    color_key(s, rank, &mine, &kmine);
    g->size = 0;
    for (int r = 0; r < nranks && mine != COLL_UNDEFINED; r++) {
        color_key(s, r, &c, &k);
        if (c != mine) {
            continue;
        }
        int at = g->size++;
        while (at > 0) {
            int q = g->ranks[at - 1], cq, kq;
            color_key(s, q, &cq, &kq);
            if (kq < k || (kq == k && q < r)) {
                break;
            }
            g->ranks[at] = q;
            at--;
        }
        g->ranks[at] = r;
    }
    for (int i = 0; i < g->size; i++) {
        if (g->ranks[i] == rank) {
            g->rank = i;
        }
    }
}

/* The group's nodes; in @p blocks 1 when every node holds as many consecutive group ranks, in
 * node order. */
static int group_nodes(const group_t *g, int *blocks)
{
    int first = g->ranks[0] / per_node, n = 0, seen[MAX_RANKS] = {0};

    for (int i = 0; i < g->size; i++) {
        int node = g->ranks[i] / per_node;
        n += !seen[node];
        seen[node] = 1;
        first = node < first ? node : first;
    }
    /* Consecutive in node order: group rank i on the (i / per)-th of the group's nodes. */
    *blocks = g->size % n == 0;
    for (int i = 0, per = g->size / n; i < g->size && *blocks; i++) {
        int node = g->ranks[i] / per_node, before = 0;
        for (int m = first; m < node; m++) {
            before += seen[m];
        }
        *blocks = before == i / per;
    }
    return n;
}

/* Whether case @p c of @p g must run through NCCL (else on the staged path). */
/* The name case @p c on @p g must have: "nccl", "device+local" (a group on one node, combined
 * on the device by the daemon's executor), NULL for the staged path ("staged+..."). */
static const char *by_name(const group_t *g, int c)
{
    int blocks, nodes = group_nodes(g, &blocks);

    return nodes == 1 ? "device+local"
           : c == ALLREDUCE || c == BROADCAST || blocks ? "nccl"
                                                        : NULL;
}

static coll_status_t start(const group_t *g, int c, const float *in, float *out,
                           coll_request_t **req)
{
    switch (c) {
    case ALLREDUCE:
        return coll_allreduce_async(g->comm, in, out, COUNT, COLL_FLOAT32, COLL_SUM, NULL, req);
    case ALLGATHER: return coll_allgather_async(g->comm, in, out, COUNT, COLL_FLOAT32, NULL, req);
    case REDUCE_SCATTER:
        return coll_reduce_scatter_async(g->comm, in, out, COUNT, COLL_FLOAT32, COLL_SUM, NULL,
                                         req);
    default:
        return coll_broadcast_async(g->comm, in, out, COUNT, COLL_FLOAT32, g->size - 1, NULL,
                                    req);
    }
}

/* Element @p i of case @p c's output, and the elements of its input and output. */
static float expected(const group_t *g, int c, size_t i)
{
    switch (c) {
    case ALLGATHER: return value((int)(i / COUNT), i % COUNT);
    case REDUCE_SCATTER: return sum(g->size, (size_t)g->rank * COUNT + i);
    case BROADCAST: return value(g->size - 1, i);
    default: return sum(g->size, i);
    }
}

/* Case @p c on @p g, on device buffers of @p h's size (host memory of 2 x size x COUNT). */
static int run_case(const group_t *g, int c, float *h)
{
    size_t all = (size_t)g->size * COUNT;
    size_t nin = c == REDUCE_SCATTER ? all : COUNT, nout = c == ALLGATHER ? all : COUNT;
    float *in = rank_dev_alloc(all * 4), *out = rank_dev_alloc(all * 4);
    coll_request_t *req = NULL;
    const char *algo = "";
    const char *want = by_name(g, c);
    int rc = -1;
    coll_status_t st;

    for (size_t i = 0; i < nin; i++) {
        h[i] = value(g->rank, i);
    }
    if (in == NULL || out == NULL || rank_dev_copy(in, h, nin * 4) < 0) {
        return -1;
    }
    st = start(g, c, in, out, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        algo = coll_req_algo(req);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s in group '%s': %s: %s\n", rank, case_names[c], g->name,
                coll_err_name(st), coll_comm_last_error(g->comm));
    } else if (want != NULL ? strcmp(algo, want) != 0 : strncmp(algo, "staged+", 7) != 0) {
        fprintf(stderr, "rank %d: %s in group '%s' (%d ranks) ran as '%s', not %s\n", rank,
                case_names[c], g->name, g->size, algo, want != NULL ? want : "staged+...");
    } else if (rank_dev_copy(h + all, out, nout * 4) == 0) {
        rc = 0;
        for (size_t i = 0; i < nout && rc == 0; i++) {
            if (h[all + i] != expected(g, c, i)) {
                fprintf(stderr, "rank %d: %s in group '%s': element %zu is %g, expected %g\n",
                        rank, case_names[c], g->name, i, (double)h[all + i],
                        (double)expected(g, c, i));
                rc = -1;
            }
        }
    }
    if (rc == 0) {
        printf("rank %d: %s in group '%s' (rank %d of %d) right (%s)\n", rank, case_names[c],
               g->name, g->rank, g->size, algo);
    }
    coll_req_free(req);
    coll_mem_free(world, out);
    coll_mem_free(world, in);
    return rc;
}

/* Split @p s into @p g and run every case in it. */
static int run_split(int s, group_t *g, float *h)
{
    static const char *const names[NSPLITS] = {"by local rank", "by local rank, reversed",
                                               "in halves", "all but the last rank"};
    int color, key, blocks, rc = 0;
    coll_status_t st;

    g->name = names[s];
    members(s, g);
    color_key(s, rank, &color, &key);
    if ((st = coll_comm_split(world, color, key, &g->comm)) != COLL_OK) {
        fprintf(stderr, "rank %d: split '%s': %s: %s\n", rank, g->name, coll_err_name(st),
                coll_comm_last_error(world));
        return -1;
    }
    if (g->comm == NULL) {
        return 0;
    }
    if (coll_comm_rank(g->comm) != g->rank || coll_comm_world_size(g->comm) != g->size ||
        coll_comm_node_count(g->comm) != group_nodes(g, &blocks)) {
        fprintf(stderr, "rank %d: group '%s' is rank %d of %d on %d nodes, not %d of %d on %d\n",
                rank, g->name, coll_comm_rank(g->comm), coll_comm_world_size(g->comm),
                coll_comm_node_count(g->comm), g->rank, g->size, group_nodes(g, &blocks));
        return -1;
    }
    for (int c = 0; c < NCASES && rc == 0; c++) {
        rc = run_case(g, c, h);
    }
    return rc;
}

static int run_all(void)
{
    group_t groups[NSPLITS + 1] = {{0}};
    group_t *w = &groups[NSPLITS];
    float *h = malloc(2 * (size_t)nranks * COUNT * sizeof(float));
    int rc = h == NULL ? -1 : 0;

    for (int s = 0; s < NSPLITS && rc == 0; s++) {
        rc = run_split(s, &groups[s], h);
    }
    /* The world beside the groups' communicators, and the first group's used again. */
    *w = (group_t){.name = "world", .comm = world, .size = nranks, .rank = rank};
    for (int r = 0; r < nranks; r++) {
        w->ranks[r] = r;
    }
    rc = rc == 0 ? run_case(w, ALLREDUCE, h) : rc;
    rc = rc == 0 && groups[0].comm != NULL ? run_case(&groups[0], ALLREDUCE, h) : rc;
    for (int s = 0; s < NSPLITS; s++) {
        coll_comm_destroy(groups[s].comm);
    }
    free(h);
    return rc;
}

/* --error: the group's allreduce fails on every rank with an error naming NCCL. */
static int run_error(void)
{
    group_t g = {.name = "by local rank"};
    float *d = rank_dev_alloc(COUNT * 4);
    coll_request_t *req = NULL;
    int color, key, rc = -1;
    coll_status_t st;

    color_key(0, rank, &color, &key);
    if (d == NULL || (st = coll_comm_split(world, color, key, &g.comm)) != COLL_OK) {
        fprintf(stderr, "rank %d: no buffer or split: %s\n", rank, coll_comm_last_error(world));
        return -1;
    }
    st = coll_allreduce_async(g.comm, d, d, COUNT, COLL_FLOAT32, COLL_SUM, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        coll_req_free(req);
    }
    if (st == COLL_OK ||
        strstr(coll_comm_last_error(g.comm), "NCCL between the nodes of group") == NULL) {
        fprintf(stderr, "rank %d: a group's allreduce that NCCL fails: %s: '%s'\n", rank,
                coll_err_name(st), coll_comm_last_error(g.comm));
    } else {
        printf("rank %d: the group's allreduce failed as expected: %s: %s\n", rank,
               coll_err_name(st), coll_comm_last_error(g.comm));
        rc = 0;
    }
    coll_comm_destroy(g.comm);
    return rc;
}

int main(int argc, char **argv)
{
    int error = argc == 2 && strcmp(argv[1], "--error") == 0;
    int rc;

    if (argc > 1 && !error) {
        fprintf(stderr, "usage: nccl_group_check [--error]\n");
        return 2;
    }
    if ((world = rank_dev_open("nccl_group_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(world);
    nranks = coll_comm_world_size(world);
    per_node = coll_comm_local_size(world);
    rc = nranks > MAX_RANKS ? -1 : error ? run_error() : run_all();
    if (rc == 0) {
        printf("rank %d: done\n", rank);
    }
    rank_dev_close(world);
    return rc == 0 ? 0 : 1;
}
