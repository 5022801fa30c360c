/*
 * Unit tests of device pools made peers (core/dev_pools.h, coll_dev_pool_join_peers(); the
 * device backend's grant, core/pool_device.c, coll_pool_grant()) over the fake device layer
 * with three devices (COLL_DEVICE_FAKE=3 from ctest), whose grants are counted
 * (coll__dev_fake_granted()):
 *
 *   a pool alone has no peers; a second pool on another device and the first become peers,
 *   each device granted the whole of what the other's pool holds; a third joins both;
 *   a pool that grows after it was granted grants the new chunk to each of its peers, and a
 *   growth whose grant the layer refuses fails and leaves the pool as it was;
 *   devices without peer access (COLL_DEVICE_FAKE_PEER=0) are not made peers, nothing granted;
 *   a grant the layer refuses although the devices say they are peers leaves them out (a
 *   warning), nothing recorded;
 *   a host pool has nothing to grant (COLL_ERR_UNSUPPORTED), a device that is none is refused
 *   (COLL_ERR_INVALID).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dev_pools.h"

#define MiB ((size_t)1 << 20)

static const int owner;
static const coll_dev_ops_t *ops;
static coll_dev_ops_t all_peers; /* the fake, whose devices say they are peers whatever the env */
static coll_pool_budget_t budget = {.limit = 1024 * MiB, .used = 0};

static coll_status_t say_peers(int dev, int peer, int *can_p)
{
    (void)dev;
    (void)peer;
    *can_p = 1;
    return COLL_OK;
}

static int setup(void **state)
{
    (void)state;
    if (coll_dev_open(&ops) != COLL_OK || ops != &coll_dev_fake || ops->count() != 3) {
        return -1;
    }
    all_peers = coll_dev_fake;
    all_peers.peer_access = say_peers;
    return 0;
}

/* A pool on @p device holding @p bytes of allocations. */
static coll_dev_pool_t *make(int device, size_t bytes)
{
    coll_dev_pool_t *dp = calloc(1, sizeof(*dp));
    size_t off;

    assert_non_null(dp);
    dp->device = device;
    assert_int_equal(coll_pool_create_on(&coll_pool_device, device, "unit-peers", 256 * MiB,
                                         &dp->pool),
                     COLL_OK);
    coll_pool_set_budget(dp->pool, &budget, 1);
    assert_int_equal(coll_pool_alloc(dp->pool, bytes, &owner, &off), COLL_OK);
    return dp;
}

static void destroy(coll_dev_pool_t **pools)
{
    for (int i = 0; i < COLL_DEV_MAX; i++) {
        if (pools[i] != NULL) {
            coll_pool_destroy(pools[i]->pool);
            free(pools[i]);
            pools[i] = NULL;
        }
    }
}

/* Bytes the pool holds (the chunks the backend mapped). */
static uint64_t held(const coll_dev_pool_t *dp)
{
    return coll_pool_charged(dp->pool);
}

static void test_peers_granted_both_ways(void **state)
{
    coll_dev_pool_t *pools[COLL_DEV_MAX] = {NULL};
    uint64_t g0 = coll__dev_fake_granted(0), g1 = coll__dev_fake_granted(1),
             g2 = coll__dev_fake_granted(2), before;
    size_t off;
    (void)state;

    unsetenv("COLL_DEVICE_FAKE_PEER");
    pools[0] = make(0, 3 * MiB);
    coll_dev_pool_join_peers(ops, pools, pools[0]);
    assert_int_equal(pools[0]->peers, 0);
    pools[1] = make(1, 5 * MiB);
    coll_dev_pool_join_peers(ops, pools, pools[1]);
    assert_int_equal(pools[0]->peers, 1u << 1);
    assert_int_equal(pools[1]->peers, 1u << 0);
    assert_int_equal(coll__dev_fake_granted(1) - g1, held(pools[0]));
    assert_int_equal(coll__dev_fake_granted(0) - g0, held(pools[1]));
    pools[2] = make(2, 2 * MiB);
    coll_dev_pool_join_peers(ops, pools, pools[2]);
    assert_int_equal(pools[0]->peers, (1u << 1) | (1u << 2));
    assert_int_equal(pools[1]->peers, (1u << 0) | (1u << 2));
    assert_int_equal(pools[2]->peers, (1u << 0) | (1u << 1));
    assert_int_equal(coll__dev_fake_granted(2) - g2, held(pools[0]) + held(pools[1]));
    assert_int_equal(coll__dev_fake_granted(0) - g0, held(pools[1]) + held(pools[2]));

    /* Growth: the new chunk goes to both peers of pool 0 and to no one else. */
    g0 = coll__dev_fake_granted(0);
    g1 = coll__dev_fake_granted(1);
    g2 = coll__dev_fake_granted(2);
    before = held(pools[0]);
    assert_int_equal(coll_pool_alloc(pools[0]->pool, 40 * MiB, &owner, &off), COLL_OK);
    assert_true(held(pools[0]) > before);
    assert_int_equal(coll__dev_fake_granted(1) - g1, held(pools[0]) - before);
    assert_int_equal(coll__dev_fake_granted(2) - g2, held(pools[0]) - before);
    assert_int_equal(coll__dev_fake_granted(0), g0);

    /* A growth whose grant is refused fails and changes nothing. */
    before = held(pools[1]);
    setenv("COLL_DEVICE_FAKE_PEER", "0", 1);
    assert_int_equal(coll_pool_alloc(pools[1]->pool, 60 * MiB, &owner, &off),
                     COLL_ERR_UNSUPPORTED);
    assert_int_equal(held(pools[1]), before);
    unsetenv("COLL_DEVICE_FAKE_PEER");
    assert_int_equal(coll_pool_alloc(pools[1]->pool, 60 * MiB, &owner, &off), COLL_OK);
    destroy(pools);
}

static void test_no_peer_access(void **state)
{
    coll_dev_pool_t *pools[COLL_DEV_MAX] = {NULL};
    uint64_t g0 = coll__dev_fake_granted(0), g1 = coll__dev_fake_granted(1);
    (void)state;

    setenv("COLL_DEVICE_FAKE_PEER", "0", 1);
    pools[0] = make(0, 3 * MiB);
    coll_dev_pool_join_peers(ops, pools, pools[0]);
    pools[1] = make(1, 3 * MiB);
    coll_dev_pool_join_peers(ops, pools, pools[1]);
    assert_int_equal(pools[0]->peers, 0);
    assert_int_equal(pools[1]->peers, 0);
    assert_int_equal(coll__dev_fake_granted(0), g0);
    assert_int_equal(coll__dev_fake_granted(1), g1);

    /* The devices say they are peers, the grant is refused: left out, nothing recorded. */
    pools[2] = make(2, 3 * MiB);
    coll_dev_pool_join_peers(&all_peers, pools, pools[2]);
    assert_int_equal(pools[0]->peers, 0);
    assert_int_equal(pools[1]->peers, 0);
    assert_int_equal(pools[2]->peers, 0);
    unsetenv("COLL_DEVICE_FAKE_PEER");
    destroy(pools);
}

static void test_grant_refused(void **state)
{
    coll_pool_t *host = NULL;
    coll_dev_pool_t *pools[COLL_DEV_MAX] = {NULL};
    (void)state;

    assert_int_equal(coll_pool_create("unit-host", 4 * MiB, &host), COLL_OK);
    assert_int_equal(coll_pool_grant(host, 1), COLL_ERR_UNSUPPORTED);
    coll_pool_destroy(host);
    pools[0] = make(0, 3 * MiB);
    assert_int_equal(coll_pool_grant(pools[0]->pool, COLL_DEV_MAX), COLL_ERR_INVALID);
    assert_int_equal(coll_pool_grant(pools[0]->pool, 5), COLL_ERR_INVALID); /* 3 devices */
    destroy(pools);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peers_granted_both_ways),
        cmocka_unit_test(test_no_peer_access),
        cmocka_unit_test(test_grant_refused),
    };

    return cmocka_run_group_tests(tests, setup, NULL);
}
