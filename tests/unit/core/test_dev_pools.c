/*
 * Unit tests of a device pool's streams (core/dev_pools.h, coll_dev_pool_streams()) over the
 * fake device layer, wrapped so that stream creations and destructions are counted and one
 * creation can be refused:
 *
 *   the first call makes four distinct streams, a pair in (device to host) and a pair back
 *   (host to device), on the pool's device; a second call makes none and gives the same ones;
 *   destroying them destroys each once and leaves them NULL;
 *   a refused creation (the first stream of the back pair) gives the device layer's error and
 *   the clear message "device D: no stream for the staged copies: <the layer's words>"; the
 *   streams made before it are kept, a later call makes only the missing ones, and destroying
 *   the pool's streams after a refusal destroys exactly those made;
 *   the polls of operations on the device (coll_dev_pool_poll_get(), events counted): one given
 *   back is taken again, its event and timer the same, no event made; the pool keeps at most
 *   COLL_DEV_POOL_POLLS_KEPT, destroying the one beyond; taking that many again makes none;
 *   freeing the pool's polls destroys every event and closes every timer (the loop then closes
 *   with no handle left);
 *   the streams for device waits (coll_dev_pool_wait_get()): one given back is taken again, no
 *   stream made; the pool keeps at most COLL_DEV_POOL_WAITS_KEPT, destroying the one beyond;
 *   taking that many again makes none; a refused creation gives the layer's error; freeing the
 *   pool's waits destroys every stream made; on a device out of service (its fault set) a
 *   stream given back is destroyed, with those kept idle.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/dev_pools.h"

static coll_dev_ops_t counting; /* the fake layer, its streams counted */
static int attempts, created, destroyed;
static int refuse_at = -1; /* the creation asked (0-based) refused, -1: none */
static int events_made, events_destroyed;

static coll_status_t count_event_create(int dev, coll_dev_event_t *e_p)
{
    events_made++;
    return coll_dev_fake.event_create(dev, e_p);
}

static void count_event_destroy(coll_dev_event_t e)
{
    events_destroyed++;
    coll_dev_fake.event_destroy(e);
}

static coll_status_t count_create(int dev, coll_dev_stream_t *s_p)
{
    if (attempts++ == refuse_at) {
        return coll__dev_fail(COLL_ERR_NOMEM, "cuStreamCreate: CUDA_ERROR_OUT_OF_MEMORY (test)");
    }
    created++;
    return coll_dev_fake.stream_create(dev, s_p);
}

static void count_destroy(coll_dev_stream_t s)
{
    destroyed++;
    coll_dev_fake.stream_destroy(s);
}

static int setup(void **state)
{
    const coll_dev_ops_t *ops;
    (void)state;

    /* COLL_DEVICE_FAKE=1 in the environment: the fake layer with one device. */
    if (coll_dev_open(&ops) != COLL_OK || ops != &coll_dev_fake || ops->count() != 1) {
        return -1;
    }
    counting = coll_dev_fake;
    counting.stream_create = count_create;
    counting.stream_destroy = count_destroy;
    counting.event_create = count_event_create;
    counting.event_destroy = count_event_destroy;
    return 0;
}

static void reset(void)
{
    attempts = created = destroyed = 0;
    refuse_at = -1;
}

static void test_two_pairs(void **state)
{
    coll_dev_pool_t dp = {.device = 0};
    coll_dev_stream_t (*s)[2] = NULL, (*again)[2] = NULL;
    coll_dev_stream_t all[4];
    char err[200];
    (void)state;

    reset();
    assert_int_equal(coll_dev_pool_streams(&counting, &dp, &s, err, sizeof(err)), COLL_OK);
    assert_int_equal(created, 4);
    all[0] = s[COLL_DEV_POOL_IN][0];
    all[1] = s[COLL_DEV_POOL_IN][1];
    all[2] = s[COLL_DEV_POOL_BACK][0];
    all[3] = s[COLL_DEV_POOL_BACK][1];
    for (int i = 0; i < 4; i++) {
        assert_non_null(all[i]);
        for (int j = 0; j < i; j++) {
            assert_ptr_not_equal(all[i], all[j]);
        }
    }
    assert_int_equal(coll_dev_pool_streams(&counting, &dp, &again, err, sizeof(err)), COLL_OK);
    assert_int_equal(created, 4);
    assert_ptr_equal(again, s);
    assert_ptr_equal(again[COLL_DEV_POOL_BACK][1], all[3]);
    coll_dev_pool_streams_destroy(&counting, &dp);
    assert_int_equal(destroyed, 4);
    for (int i = 0; i < 4; i++) {
        assert_null(dp.streams[i / 2][i % 2]);
    }
    coll_dev_pool_streams_destroy(&counting, &dp); /* nothing left to destroy */
    assert_int_equal(destroyed, 4);
}

static void test_refused(void **state)
{
    coll_dev_pool_t dp = {.device = 0};
    coll_dev_stream_t (*s)[2] = NULL;
    char err[200];
    (void)state;

    reset();
    refuse_at = 2; /* the in pair made, the first of the back pair refused */
    assert_int_equal(coll_dev_pool_streams(&counting, &dp, &s, err, sizeof(err)),
                     COLL_ERR_NOMEM);
    assert_null(s);
    assert_string_equal(err, "device 0: no stream for the staged copies: cuStreamCreate: "
                             "CUDA_ERROR_OUT_OF_MEMORY (test)");
    assert_int_equal(created, 2);
    assert_non_null(dp.streams[COLL_DEV_POOL_IN][0]);
    assert_non_null(dp.streams[COLL_DEV_POOL_IN][1]);
    assert_null(dp.streams[COLL_DEV_POOL_BACK][0]);
    assert_null(dp.streams[COLL_DEV_POOL_BACK][1]);
    assert_int_equal(coll_dev_pool_streams(&counting, &dp, &s, err, sizeof(err)), COLL_OK);
    assert_int_equal(created, 4); /* only the back pair made now */
    assert_non_null(s[COLL_DEV_POOL_BACK][0]);
    assert_non_null(s[COLL_DEV_POOL_BACK][1]);
    coll_dev_pool_streams_destroy(&counting, &dp);
    assert_int_equal(destroyed, 4);

    reset();
    refuse_at = 3; /* the last one: three made, destroyed with the pool */
    assert_int_equal(coll_dev_pool_streams(&counting, &dp, &s, err, sizeof(err)),
                     COLL_ERR_NOMEM);
    assert_int_equal(created, 3);
    coll_dev_pool_streams_destroy(&counting, &dp);
    assert_int_equal(destroyed, 3);
}

/* A timer callback the loop must never run (stopped before it is due). */
static void never(uv_timer_t *t)
{
    (void)t;
    fail();
}

static void test_polls_are_reused(void **state)
{
    enum { KEPT = COLL_DEV_POOL_POLLS_KEPT };
    coll_dev_pool_t dp = {.device = 0};
    coll_dev_poll_t *p[KEPT + 1], *first, *again;
    uv_loop_t loop;
    (void)state;

    assert_int_equal(uv_loop_init(&loop), 0);
    events_made = events_destroyed = 0;
    assert_int_equal(coll_dev_pool_poll_get(&counting, &loop, &dp, &first), COLL_OK);
    coll_dev_event_t ev = first->event;
    uv_timer_t *timer = first->timer;
    uv_timer_start(timer, never, 1000, 1000);
    coll_dev_pool_poll_put(&counting, &dp, first);
    assert_false(uv_is_active((uv_handle_t *)timer));
    assert_int_equal(coll_dev_pool_poll_get(&counting, &loop, &dp, &again), COLL_OK);
    assert_true(again == first && again->event == ev && again->timer == timer);
    assert_int_equal(events_made, 1);
    p[0] = again;
    for (int i = 1; i <= KEPT; i++) {
        assert_int_equal(coll_dev_pool_poll_get(&counting, &loop, &dp, &p[i]), COLL_OK);
    }
    assert_int_equal(events_made, KEPT + 1);
    for (int i = 0; i <= KEPT; i++) {
        coll_dev_pool_poll_put(&counting, &dp, p[i]);
    }
    assert_int_equal(dp.nidle, KEPT);
    assert_int_equal(events_destroyed, 1); /* the one beyond what the pool keeps */
    for (int i = 0; i < KEPT; i++) {
        assert_int_equal(coll_dev_pool_poll_get(&counting, &loop, &dp, &p[i]), COLL_OK);
    }
    assert_int_equal(events_made, KEPT + 1);
    for (int i = 0; i < KEPT; i++) {
        coll_dev_pool_poll_put(&counting, &dp, p[i]);
    }
    coll_dev_pool_polls_free(&counting, &dp);
    assert_true(dp.idle == NULL && dp.nidle == 0);
    assert_int_equal(events_destroyed, KEPT + 1);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0); /* the closes done */
    assert_int_equal(uv_loop_close(&loop), 0);           /* no handle left */
}

static void test_wait_streams_are_reused(void **state)
{
    enum { KEPT = COLL_DEV_POOL_WAITS_KEPT };
    coll_devices_t ds = {.ops = &counting, .n = 1};
    coll_dev_pool_t dp = {.device = 0};
    coll_dev_stream_t s[KEPT + 1], first, again;
    (void)state;

    reset();
    assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &first), COLL_OK);
    coll_dev_pool_wait_put(&ds, &dp, first);
    coll_dev_pool_wait_put(&ds, &dp, NULL); /* nothing */
    assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &again), COLL_OK);
    assert_true(again == first);
    assert_int_equal(created, 1);
    s[0] = again;
    for (int i = 1; i <= KEPT; i++) {
        assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &s[i]), COLL_OK);
    }
    assert_int_equal(created, KEPT + 1);
    for (int i = 0; i <= KEPT; i++) {
        coll_dev_pool_wait_put(&ds, &dp, s[i]);
    }
    assert_int_equal(dp.nwaits, KEPT);
    assert_int_equal(destroyed, 1); /* the one beyond what the pool keeps */
    for (int i = 0; i < KEPT; i++) {
        assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &s[i]), COLL_OK);
    }
    assert_int_equal(created, KEPT + 1);
    refuse_at = attempts; /* none idle: the next is made, and refused */
    assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &first), COLL_ERR_NOMEM);
    assert_non_null(strstr(coll_dev_error(), "CUDA_ERROR_OUT_OF_MEMORY"));
    for (int i = 0; i < KEPT; i++) {
        coll_dev_pool_wait_put(&ds, &dp, s[i]);
    }
    coll_dev_pool_waits_free(&counting, &dp);
    assert_int_equal(dp.nwaits, 0);
    assert_int_equal(destroyed, KEPT + 1);
}

/* A device out of service (a fault): a stream given back is destroyed, not kept, and so are
 * the ones the pool kept idle; nothing is kept after. */
static void test_wait_streams_of_a_faulted_device(void **state)
{
    coll_devices_t ds = {.ops = &counting, .n = 1};
    coll_dev_pool_t dp = {.device = 0};
    coll_dev_stream_t s[3];
    (void)state;

    reset();
    for (int i = 0; i < 3; i++) {
        assert_int_equal(coll_dev_pool_wait_get(&counting, &dp, &s[i]), COLL_OK);
    }
    coll_dev_pool_wait_put(&ds, &dp, s[0]);
    coll_dev_pool_wait_put(&ds, &dp, s[1]);
    assert_int_equal(dp.nwaits, 2);
    snprintf(ds.dev[0].fault, sizeof(ds.dev[0].fault), "event query: CUDA_ERROR_ILLEGAL_ADDRESS");
    coll_dev_pool_wait_put(&ds, &dp, s[2]);
    assert_int_equal(dp.nwaits, 0);
    assert_int_equal(destroyed, 3);
    assert_int_equal(created, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_pairs),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_polls_are_reused),
        cmocka_unit_test(test_wait_streams_are_reused),
        cmocka_unit_test(test_wait_streams_of_a_faulted_device),
    };
    return cmocka_run_group_tests_name("dev_pools", tests, setup, NULL);
}
