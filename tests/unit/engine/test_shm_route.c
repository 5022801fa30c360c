/*
 * engine/shm_route.c over the fake net layer: node 0's local ranks post an allreduce that they
 * run on the direct path while node 1's daemon sends its descriptor of the same key, as the
 * daemons' path does. The job fails with COLL_ERR_MISMATCH naming both counts once the grace
 * passed, not before; a descriptor that came early is left for the daemon's own operation; a
 * direct allreduce whose rounds ended, one that not every local rank posted, or a new one of
 * the key used again are not failed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "engine/shm.h"
#include "engine/shm_route.h"
#include "engine/shm_watch.h"
#include "fake_net.h"
#include "net/transport.h"
#include "proto/tag.h"

#define KEY ((1ull << 39) | 7) /* the library's eighth collective */
#define DIRECT_COUNT 100u      /* float32: 400 bytes, on the direct path */
#define DAEMON_COUNT 2000u     /* 8000 bytes, above direct_max_bytes: through the daemons */
#define DIRECT_MAX 4096u
#define MS 1000000ull
#define T0 (1000 * MS)

static fake_world_t w;
static coll_xfer_t sent; /* node 1's descriptor send */
static coll_desc_t peer_desc;

static int setup(void **state)
{
    (void)state;
    fake_net_init(&w, 2, 2, 64 << 10, 8 << 20, FAKE_RENDEZVOUS);
    for (uint32_t n = 0; n < w.nnodes; n++) {
        w.job[n].params.direct_max_bytes = DIRECT_MAX;
        coll_shm_init(&w.job[n], 0, 0);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    fake_net_free(&w);
    return 0;
}

/* Local ranks 0 .. @p nposted - 1 of node 0 post allreduce KEY of @p count float32 sums, as
 * generation @p gen of its slot. */
static void post(uint32_t nposted, uint64_t count, uint64_t gen)
{
    coll_shm_rec_t rec = {.sub = {.key = KEY, .count = count, .coll = COLL_KIND_ALLREDUCE,
                                  .dtype = COLL_FLOAT32, .redop = COLL_SUM},
                          .post_ns = T0};

    for (uint32_t l = 0; l < nposted; l++) {
        coll_shm_post_t *p = &coll_shm_rank(&w.job[0], l)->post[coll_shm_slot_of(KEY)];
        atomic_store(&p->state, coll_shm_state(gen, COLL_SHM_FREE));
        atomic_store(&p->node, 0);
        coll_shm_write_rec(p, &rec);
        atomic_store(&p->state, coll_shm_state(gen, COLL_SHM_POSTED));
    }
}

/* Node 1's daemon sends its descriptor of KEY (DAEMON_COUNT) to node 0, as engine/xfer.c. */
static void send_desc(void)
{
    coll_submission_t sub = {.key = KEY, .count = DAEMON_COUNT, .coll = COLL_KIND_ALLREDUCE,
                             .dtype = COLL_FLOAT32, .redop = COLL_SUM};

    coll_desc_make(&sub, &(coll_desc_ctx_t){.world_size = 4, .seg_bytes = 64 << 10,
                                            .node = 1, .first_rank = 2,
                                            .algo = COLL_ALGO_RD, .epoch = 42},
                   &peer_desc);
    sent = (coll_xfer_t){.kind = COLL_TAG_DESC, .is_send = 1};
    assert_int_equal(coll_transport_send(&w.job[1], 0, coll_tag_make(0, KEY, COLL_TAG_DESC, 0, 0),
                                         &peer_desc, sizeof(peer_desc), &sent),
                     COLL_OK);
}

/* One health tick of node 0 at @p now: the route check over what waits in its area. */
static int tick(uint64_t now)
{
    coll_shm_wait_t ws[COLL_SHM_WATCH_MAX];
    size_t n = coll_shm_waiting(&w.job[0], ws, COLL_SHM_WATCH_MAX);

    return coll_shm_route_check(&w.job[0], ws, n, now);
}

static int desc_waiting(void)
{
    return coll_transport_unexpected(&w.job[0], coll_tag_make(0, KEY, COLL_TAG_DESC, 0, 0));
}

static void test_fails_after_grace(void **state)
{
    (void)state;
    post(2, DIRECT_COUNT, 1);
    send_desc();
    assert_int_equal(tick(T0), 0);
    assert_int_equal(tick(T0 + (COLL_SHM_ROUTE_GRACE_MS - 1) * MS), 0);
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
    assert_true(desc_waiting()); /* nothing taken while the job runs */
    assert_int_equal(tick(T0 + COLL_SHM_ROUTE_GRACE_MS * MS), 1);
    assert_int_equal(w.job[0].state, COLL_JOB_FAILED);
    assert_int_equal(w.job[0].error, COLL_ERR_MISMATCH);
    assert_non_null(strstr(w.job[0].errmsg, "node 1 (ranks from 2) ran it through the daemons"));
    assert_non_null(strstr(w.job[0].errmsg, "count=2000 "));
    assert_non_null(strstr(w.job[0].errmsg, "algo=rd"));
    assert_non_null(strstr(w.job[0].errmsg, "node 0 (ranks from 0) on the direct path"));
    assert_non_null(strstr(w.job[0].errmsg, "count=100 "));
    /* The cause a user can act on, before the descriptors (whose length may cut the message). */
    assert_non_null(strstr(w.job[0].errmsg, "differ in the buffers' memory (device, host)"));
    assert_non_null(strstr(w.job[0].errmsg, "allreduce #7"));
}

/* A descriptor that came before node 0's ranks posted, then a post of the key through the
 * daemons (above direct_max_bytes): never failed, the descriptor left for the daemon. */
static void test_early_descriptor_left(void **state)
{
    (void)state;
    send_desc();
    assert_int_equal(tick(T0), 0);
    post(2, DAEMON_COUNT, 1);
    for (uint64_t t = 0; t <= 4 * COLL_SHM_ROUTE_GRACE_MS; t += 250) {
        assert_int_equal(tick(T0 + t * MS), 0);
    }
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
    assert_true(desc_waiting());
}

/* The leader's rounds ended (the home post's node word of its generation): the previous node's
 * descriptor is of the key's next collective, not failed. */
static void test_rounds_ended(void **state)
{
    (void)state;
    post(2, DIRECT_COUNT, 5);
    atomic_store(&coll_shm_rank(&w.job[0], 0)->post[coll_shm_slot_of(KEY)].node,
                 coll_shm_node_word(5, COLL_OK, COLL_ALGO_DIRECT));
    send_desc();
    for (uint64_t t = 0; t <= 4 * COLL_SHM_ROUTE_GRACE_MS; t += 250) {
        assert_int_equal(tick(T0 + t * MS), 0);
    }
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
}

/* Only local rank 0 posted: the node has not agreed on the route yet. */
static void test_not_every_rank(void **state)
{
    (void)state;
    post(1, DIRECT_COUNT, 1);
    send_desc();
    for (uint64_t t = 0; t <= 4 * COLL_SHM_ROUTE_GRACE_MS; t += 250) {
        assert_int_equal(tick(T0 + t * MS), 0);
    }
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
}

/* The key used again (a new generation of the home post) starts the grace again. */
static void test_new_generation_restarts(void **state)
{
    (void)state;
    post(2, DIRECT_COUNT, 1);
    send_desc();
    assert_int_equal(tick(T0), 0);
    post(2, DIRECT_COUNT, 2);
    assert_int_equal(tick(T0 + 600 * MS), 0);
    assert_int_equal(tick(T0 + (COLL_SHM_ROUTE_GRACE_MS + 500) * MS), 0);
    assert_int_equal(w.job[0].state, COLL_JOB_READY);
    assert_int_equal(tick(T0 + (COLL_SHM_ROUTE_GRACE_MS + 600) * MS), 1);
    assert_int_equal(w.job[0].error, COLL_ERR_MISMATCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fails_after_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_descriptor_left, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rounds_ended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_every_rank, setup, teardown),
        cmocka_unit_test_setup_teardown(test_new_generation_restarts, setup, teardown),
    };
    return cmocka_run_group_tests_name("shm_route", tests, NULL, NULL);
}
