/*
 * Unit tests of the fake device layer's waits across streams (device/dev_fake_events.c) through
 * its table: a stream that waits for an event of another device's stream held by a wait for a
 * word holds its own later copies and events (not the caller) until that stream passed the word
 * and did the work before the event, whatever the event is recorded for later; two streams that
 * wait for each other's earlier events, each held by a word, both go on once the words come
 * (no recursion without end, no deadlock); a stream destroyed while another waits for its event:
 * the wait passes where the work was done, else never (the waiting stream's sync times out,
 * saying why); a word write behind such a wait is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "device/dev.h"
#include "fake_page.h"

static const coll_dev_ops_t *ops = &coll_dev_fake;

static int setup(void **state)
{
    (void)state;
    return coll__dev_fake_init(2) == COLL_OK ? 0 : -1;
}

static void copy(void *dst, const void *src, size_t n, coll_dev_stream_t s)
{
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n, s),
                     COLL_OK);
}

static void test_a_wait_for_an_event_held_by_a_word_holds_the_stream(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    uint32_t src[16], mid[16] = {0}, dst[16] = {0}, zero[16] = {0};
    coll_dev_stream_t a = NULL, b = NULL;
    coll_dev_event_t ea = NULL, eb = NULL;

    (void)state;
    for (int i = 0; i < 16; i++) {
        src[i] = 0x3000u + (uint32_t)i;
    }
    assert_int_equal(ops->stream_create(0, &a), COLL_OK);
    assert_int_equal(ops->stream_create(1, &b), COLL_OK);
    assert_int_equal(ops->event_create(0, &ea), COLL_OK);
    assert_int_equal(ops->event_create(1, &eb), COLL_OK);
    assert_int_equal(ops->stream_wait_word(a, dev, 1), COLL_OK);
    copy(mid, src, sizeof(src), a);
    assert_int_equal(ops->event_record(ea, a), COLL_OK);
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK); /* the caller goes on */
    copy(dst, mid, sizeof(mid), b);
    assert_int_equal(ops->event_record(eb, b), COLL_OK);
    assert_int_equal(ops->event_record(ea, a), COLL_OK); /* a later record changes nothing */
    assert_int_equal(ops->event_query(eb), COLL_INPROGRESS);
    assert_memory_equal(dst, zero, sizeof(zero)); /* held: not the stale bytes copied on */
    assert_memory_equal(mid, zero, sizeof(zero));
    __atomic_store_n(&page[0], 1, __ATOMIC_RELEASE);
    assert_int_equal(ops->event_query(eb), COLL_OK); /* device 0's work landed first */
    assert_memory_equal(dst, src, sizeof(src));
    /* Done already: nothing held. */
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK);
    assert_int_equal(ops->event_record(eb, b), COLL_OK);
    assert_int_equal(ops->event_query(eb), COLL_OK);
    ops->event_destroy(ea);
    ops->event_destroy(eb);
    ops->stream_destroy(a);
    ops->stream_destroy(b);
    unregister_page(page);
}

static void test_streams_that_wait_for_each_others_events_both_go_on(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    uint32_t x[8], y[8], xa[8] = {0}, yb[8] = {0}, zero[8] = {0};
    coll_dev_stream_t a = NULL, b = NULL;
    coll_dev_event_t ea = NULL, eb = NULL, da = NULL, db = NULL;

    (void)state;
    for (int i = 0; i < 8; i++) {
        x[i] = 10u + (uint32_t)i;
        y[i] = 20u + (uint32_t)i;
    }
    assert_int_equal(ops->stream_create(0, &a), COLL_OK);
    assert_int_equal(ops->stream_create(1, &b), COLL_OK);
    assert_int_equal(ops->event_create(0, &ea), COLL_OK);
    assert_int_equal(ops->event_create(1, &eb), COLL_OK);
    assert_int_equal(ops->event_create(0, &da), COLL_OK);
    assert_int_equal(ops->event_create(1, &db), COLL_OK);
    /* Each held by a word of its own, then each waits for the other's event: the split's
     * reductions and all-gather. */
    assert_int_equal(ops->stream_wait_word(a, dev, 1), COLL_OK);
    assert_int_equal(ops->stream_wait_word(b, dev + 8, 1), COLL_OK);
    assert_int_equal(ops->event_record(ea, a), COLL_OK);
    assert_int_equal(ops->event_record(eb, b), COLL_OK);
    assert_int_equal(ops->stream_wait(a, eb), COLL_OK);
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK);
    copy(xa, y, sizeof(y), a);
    copy(yb, x, sizeof(x), b);
    assert_int_equal(ops->event_record(da, a), COLL_OK);
    assert_int_equal(ops->event_record(db, b), COLL_OK);
    __atomic_store_n(&page[0], 1, __ATOMIC_RELEASE);
    assert_int_equal(ops->event_query(da), COLL_INPROGRESS); /* b's word not there */
    assert_int_equal(ops->event_query(db), COLL_INPROGRESS);
    assert_memory_equal(xa, zero, sizeof(zero));
    __atomic_store_n(&page[1], 1, __ATOMIC_RELEASE);
    assert_int_equal(ops->event_query(da), COLL_OK);
    assert_int_equal(ops->event_query(db), COLL_OK);
    assert_memory_equal(xa, y, sizeof(y));
    assert_memory_equal(yb, x, sizeof(x));
    ops->event_destroy(ea);
    ops->event_destroy(eb);
    ops->event_destroy(da);
    ops->event_destroy(db);
    ops->stream_destroy(a);
    ops->stream_destroy(b);
    unregister_page(page);
}

static void test_a_destroyed_streams_event_passes_if_done_else_never(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    coll_dev_stream_t a = NULL, b = NULL, c = NULL;
    coll_dev_event_t ea = NULL;

    (void)state;
    setenv("COLL_DEVICE_FAKE_WAIT_MS", "1", 1);
    assert_int_equal(ops->stream_create(0, &a), COLL_OK);
    assert_int_equal(ops->stream_create(1, &b), COLL_OK);
    assert_int_equal(ops->event_create(0, &ea), COLL_OK);
    /* Its work done before it went: the wait passes. */
    assert_int_equal(ops->stream_wait_word(a, dev, 1), COLL_OK);
    assert_int_equal(ops->event_record(ea, a), COLL_OK);
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK);
    __atomic_store_n(&page[0], 1, __ATOMIC_RELEASE);
    ops->stream_destroy(a);
    assert_int_equal(ops->stream_sync(b), COLL_OK);
    /* Its work dropped (a word that never came): never; a word write behind it refused. */
    assert_int_equal(ops->stream_create(0, &c), COLL_OK);
    assert_int_equal(ops->stream_wait_word(c, dev + 8, 1), COLL_OK);
    assert_int_equal(ops->event_record(ea, c), COLL_OK);
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK);
    assert_int_equal(ops->stream_write_word(b, dev + 16, 1), COLL_ERR_UNSUPPORTED);
    ops->stream_destroy(c);
    assert_int_equal(ops->stream_sync(b), COLL_ERR_TIMEDOUT);
    assert_string_equal(coll_dev_error(), "stream sync: the stream waits for another stream's "
                                          "event, not reached after 1 ms "
                                          "(COLL_DEVICE_FAKE_WAIT_MS)");
    ops->stream_destroy(b); /* drops what the wait holds */
    unsetenv("COLL_DEVICE_FAKE_WAIT_MS");
    assert_int_equal(page[2], 0);
    ops->event_destroy(ea);
    unregister_page(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_wait_for_an_event_held_by_a_word_holds_the_stream),
        cmocka_unit_test(test_streams_that_wait_for_each_others_events_both_go_on),
        cmocka_unit_test(test_a_destroyed_streams_event_passes_if_done_else_never),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
