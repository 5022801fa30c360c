/*
 * Unit tests of the choice of NCCL for split groups (engine/submit.c, coll_nccl_fits()) over the
 * fake net layer (fake_net.h) and the fake device layer (COLL_DEVICE_FAKE=1 in this test's
 * environment): 2 nodes of 2 local ranks (rank = 2 node + local), groups built on every node
 * with a member as job/groups.c does, submissions described as the engine describes them
 * (coll_submit_desc()) with their buffers in the job's pool on device 0 and the job's nccl on:
 *
 *   a group of one rank per node ({0, 2}) takes NCCL for allreduce, all-gather, reduce-scatter,
 *   broadcast and reduce, as the world does; compression or host buffers take the host's;
 *   the same ranks reversed ({2, 0}: group rank 0 on the group's second node) take NCCL for the
 *   allreduce and the broadcast, the host's ring for the all-gather and the reduce-scatter,
 *   whose blocks would not be the nodes';
 *   a group of three ({0, 1, 2}: two ranks on node 0, one on node 1) likewise;
 *   a group on one node ({0, 1}) never takes NCCL (nothing between nodes): the device's own
 *   algorithm (the daemon has the fake's executor), the host's entries (which the staged path
 *   runs locally) for host buffers, compression, or a daemon without the executor;
 *   every node with a member chooses alike.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/dev_pools.h"
#include "core/devices.h"
#include "engine/algos/nccl.h"
#include "engine/submit.h"
#include "fake_net.h"

#define N 2
#define L 2

static fake_world_t w;

static int setup(void **state)
{
    (void)state;
    fake_net_init(&w, N, L, 4096, 1 << 20, FAKE_EAGER);
    for (uint32_t n = 0; n < N; n++) {
        coll_dev_pool_t *dp;
        char err[256];
        w.job[n].params.nccl = 1;
        coll_devices_open(&w.d[n].devices, 64 << 20);
        if (w.d[n].devices.n != 1 || coll_dev_pool_get(&w.job[n], 0, &dp, err, sizeof(err))) {
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_net_free(&w);
    for (uint32_t n = 0; n < N; n++) {
        coll_dev_pools_destroy(&w.job[n]);
    }
    return 0;
}

/* Group @p id of @p ranks on node @p node, or NULL where it has no member. */
static coll_group_t *group_on(uint32_t node, uint32_t id, const uint32_t *ranks, uint32_t n)
{
    coll_group_t *g;
    char err[128];
    coll_status_t st = coll_group_build(&w.job[node], id, ranks, n, &g, err, sizeof(err));

    if (st == COLL_ERR_INVALID) {
        return NULL;
    }
    assert_int_equal(st, COLL_OK);
    coll_list_push(&w.job[node].groups, &g->link);
    return g;
}

/* The algorithm every node with a member of @p g (@p gs, per node) chooses for a @p coll of
 * float32 sums in pool @p pool; asserted alike on each. */
static uint32_t choice(coll_group_t *const *gs, Coll__Wire__Collective coll, uint32_t pool,
                       int compressed)
{
    Coll__Wire__Submit s = COLL__WIRE__SUBMIT__INIT;
    uint32_t algo = COLL_ALGO_AUTO, seen = 0;

    s.coll = coll;
    s.dtype = COLL_FLOAT32;
    s.op = COLL_SUM;
    s.count = 64;
    s.algo = COLL_ALGO_AUTO;
    s.pool = pool;
    s.compression = (uint32_t)compressed;
    for (uint32_t n = 0; n < N; n++) {
        coll_desc_t d;
        if (gs[n] == NULL) {
            continue;
        }
        coll_submit_desc(&w.job[n], gs[n], &s, &d);
        assert_true(seen == 0 || d.algo == algo);
        algo = d.algo;
        seen++;
    }
    assert_true(seen > 0);
    return algo;
}

static void build(uint32_t id, const uint32_t *ranks, uint32_t n, coll_group_t **gs)
{
    for (uint32_t node = 0; node < N; node++) {
        gs[node] = group_on(node, id, ranks, n);
    }
}

/* One rank per node: NCCL for each of its collectives, as the world. */
static void test_one_rank_per_node(void **state)
{
    static const uint32_t ranks[] = {0, 2};
    coll_group_t *gs[N], *world[N] = {w.job[0].world, w.job[1].world};

    (void)state;
    build(1, ranks, 2, gs);
    assert_non_null(gs[0]);
    assert_non_null(gs[1]);
    assert_int_equal(choice(world, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLGATHER, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__BROADCAST, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__REDUCE, 1, 0), COLL_ALGO_NCCL);
    /* Host buffers, or compression: the host's (recursive doubling for this size). */
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 0, 0), COLL_ALGO_RD);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 1), COLL_ALGO_RD);
}

/* Group ranks whose blocks are not the nodes': the all-gather and reduce-scatter on the ring. */
static void test_blocks_per_group(void **state)
{
    static const uint32_t reversed[] = {2, 0}, three[] = {0, 1, 2};
    coll_group_t *r[N], *t[N];

    (void)state;
    build(1, reversed, 2, r);
    build(2, three, 3, t);
    assert_int_equal(choice(r, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(r, COLL__WIRE__COLLECTIVE__BROADCAST, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(r, COLL__WIRE__COLLECTIVE__ALLGATHER, 1, 0), COLL_ALGO_RING);
    assert_int_equal(choice(r, COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, 1, 0), COLL_ALGO_RING);
    assert_int_equal(choice(t, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(t, COLL__WIRE__COLLECTIVE__REDUCE, 1, 0), COLL_ALGO_NCCL);
    assert_int_equal(choice(t, COLL__WIRE__COLLECTIVE__ALLGATHER, 1, 0), COLL_ALGO_RING);
    assert_int_equal(choice(t, COLL__WIRE__COLLECTIVE__REDUCE_SCATTER, 1, 0), COLL_ALGO_RING);
}

/* A group on one node: nothing between nodes, never NCCL; the device's own with the executor. */
static void test_group_on_one_node(void **state)
{
    static const uint32_t ranks[] = {0, 1};
    coll_devices_t *ds = &w.job[0].d->devices;
    const coll_exec_t *exec = ds->exec;
    coll_group_t *gs[N];

    (void)state;
    assert_non_null(exec); /* the fake's */
    build(1, ranks, 2, gs);
    assert_non_null(gs[0]);
    assert_null(gs[1]);
    assert_int_equal(gs[0]->nnodes, 1);
    assert_false(coll_nccl_fits(gs[0], COLL_KIND_ALLREDUCE, COLL_FLOAT32, COLL_SUM));
    assert_false(coll_nccl_fits(gs[0], COLL_KIND_BROADCAST, COLL_FLOAT32, COLL_SUM));
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_DEVICE);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLGATHER, 1, 0), COLL_ALGO_DEVICE);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__BROADCAST, 1, 0), COLL_ALGO_DEVICE);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 0, 0), COLL_ALGO_RD);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 1), COLL_ALGO_RD);
    ds->exec = NULL;
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLREDUCE, 1, 0), COLL_ALGO_RD);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__ALLGATHER, 1, 0), COLL_ALGO_RING);
    assert_int_equal(choice(gs, COLL__WIRE__COLLECTIVE__BROADCAST, 1, 0), COLL_ALGO_CHAIN);
    ds->exec = exec;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_one_rank_per_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blocks_per_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_on_one_node, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
