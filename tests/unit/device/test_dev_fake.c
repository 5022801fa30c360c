/*
 * Unit tests of the fake device layer (device/dev_fake.c) through its table, as the pools use
 * it: devices and their facts, physical allocations exported as file descriptors and imported in
 * a second process that shares the memory through its own mapping, memory that outlives its
 * handle while mapped, reservations that stay after an unmap, streams, copies and events;
 * "pinned" host memory and its refusal (COLL_DEVICE_FAKE_PIN_FAIL); events held back by
 * COLL_DEVICE_FAKE_COPY_DELAY_MS; registered host memory and words on it: a stream's wait
 * that holds the stream's later copies, events and word writes (not the caller) until another
 * thread stores the word, a sync on one that times out (COLL_DEVICE_FAKE_WAIT_MS) without
 * spinning, a write held back by COLL_DEVICE_FAKE_COPY_DELAY_MS, the refusals; copies at
 * COLL_DEVICE_FAKE_COPY_MBPS: one after the other on a stream, side by side on two, their data
 * landing only when they would have ended; peer access (COLL_DEVICE_FAKE_PEER=0: none) and
 * grants, counted; streams that run their work only when looked at (COLL_DEVICE_FAKE_LAZY): a
 * copy on one device's stream from what another's writes reads the old data unless it waits
 * for that stream's event, and the executor's launches held in their stream's order.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/dev.h"
#include "fake_page.h"

#define GRAN ((size_t)2 << 20)

static const coll_dev_ops_t *ops = &coll_dev_fake;

static int setup(void **state)
{
    (void)state;
    return coll__dev_fake_init(2) == COLL_OK ? 0 : -1;
}

static void *at(uint64_t va)
{
    return (void *)(uintptr_t)va;
}

static void test_devices_and_their_facts(void **state)
{
    coll_dev_info_t a, b;
    size_t gran = 0;

    assert_int_equal(ops->count(), 2);
    assert_int_equal(ops->info(0, &a), COLL_OK);
    assert_int_equal(ops->info(1, &b), COLL_OK);
    assert_string_equal(a.name, "fake device 0 (host memory)");
    assert_int_equal(a.mem_bytes, 8ull << 30);
    assert_int_equal(a.shareable, 1);
    assert_memory_not_equal(a.uuid, b.uuid, COLL_DEV_UUID_BYTES);
    assert_int_equal(ops->granularity(1, &gran), COLL_OK);
    assert_int_equal(gran, GRAN);
    assert_int_equal(ops->info(2, &a), COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "device info: no fake device 2 (2 present)");
    assert_int_equal(coll__dev_fake_init(0), COLL_ERR_INVALID);
    assert_int_equal(coll__dev_fake_init(COLL_DEV_MAX + 1), COLL_ERR_INVALID);
}

static void test_create_refuses_sizes_off_the_granularity(void **state)
{
    coll_dev_mem_t m = 0;

    assert_int_equal(ops->mem_create(0, GRAN + 4096, &m), COLL_ERR_INVALID);
    assert_int_equal(ops->mem_create(0, 0, &m), COLL_ERR_INVALID);
    assert_int_equal(m, 0);
}

/* A reservation of @p bytes on device 0 with @p m mapped at its start. */
static uint64_t reserve_map(coll_dev_mem_t m, size_t bytes)
{
    uint64_t va = 0;

    assert_int_equal(ops->va_reserve(0, bytes, GRAN, &va), COLL_OK);
    assert_int_equal(va % GRAN, 0);
    assert_int_equal(ops->map(0, va, bytes, m), COLL_OK);
    return va;
}

/* The child: import @p fd, map it in a reservation of its own, check the parent's first half
 * and write the second. Exit status 0 when all went right. */
static int child_side(int fd, size_t bytes)
{
    coll_dev_mem_t m = 0;
    uint64_t va = 0;
    uint8_t *p;

    if (ops->mem_import(0, fd, &m) != COLL_OK || ops->va_reserve(0, bytes, GRAN, &va) != COLL_OK ||
        ops->map(0, va, bytes, m) != COLL_OK) {
        return 2;
    }
    ops->mem_release(m);
    p = at(va);
    for (size_t i = 0; i < bytes / 2; i++) {
        if (p[i] != (uint8_t)(i * 7 + 1)) {
            return 3;
        }
    }
    for (size_t i = bytes / 2; i < bytes; i++) {
        p[i] = (uint8_t)(i * 13 + 5);
    }
    return 0;
}

static void test_export_import_shares_memory_with_another_process(void **state)
{
    size_t bytes = 2 * GRAN;
    coll_dev_mem_t m = 0;
    uint64_t va;
    uint8_t *p;
    int fd = -1, status = -1;
    pid_t pid;

    assert_int_equal(ops->mem_create(0, bytes, &m), COLL_OK);
    assert_int_equal(ops->mem_export(m, &fd), COLL_OK);
    va = reserve_map(m, bytes);
    p = at(va);
    for (size_t i = 0; i < bytes / 2; i++) {
        p[i] = (uint8_t)(i * 7 + 1);
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(child_side(fd, bytes));
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    for (size_t i = bytes / 2; i < bytes; i++) {
        assert_int_equal(p[i], (uint8_t)(i * 13 + 5));
    }
    close(fd);
    ops->mem_release(m);
    ops->unmap(va, bytes);
    ops->va_free(va, bytes);
}

static void test_memory_outlives_its_handle_and_an_unmap_keeps_the_range(void **state)
{
    coll_dev_mem_t m = 0, again = 0;
    uint64_t va;
    int fd = -1;

    assert_int_equal(ops->mem_create(1, GRAN, &m), COLL_OK);
    assert_int_equal(ops->mem_export(m, &fd), COLL_OK);
    va = reserve_map(m, GRAN);
    ops->mem_release(m);
    memset(at(va), 0x5a, GRAN);
    assert_int_equal(((uint8_t *)at(va))[GRAN - 1], 0x5a);
    /* Unmapped, the range stays reserved: the same memory maps there again, unchanged. */
    ops->unmap(va, GRAN);
    assert_int_equal(ops->mem_import(0, fd, &again), COLL_OK);
    assert_int_equal(ops->map(0, va, GRAN, again), COLL_OK);
    assert_int_equal(((uint8_t *)at(va))[12345], 0x5a);
    /* A mapping must cover the allocation exactly, as the driver's does. */
    ops->unmap(va, GRAN);
    assert_int_equal(ops->map(0, va, GRAN / 2, again), COLL_ERR_INVALID);
    ops->mem_release(again);
    ops->va_free(va, GRAN);
    close(fd);
}

/* Every pair of devices are peers unless COLL_DEVICE_FAKE_PEER=0 (a device is its own peer
 * always); a grant is counted for its device, refused without peer access. */
static void test_peer_access_and_grants(void **state)
{
    uint64_t before = coll__dev_fake_granted(1), va = 0x10000;
    int can = -1;

    assert_int_equal(ops->peer_access(0, 1, &can), COLL_OK);
    assert_int_equal(can, 1);
    assert_int_equal(ops->grant(1, va, GRAN), COLL_OK);
    assert_int_equal(coll__dev_fake_granted(1), before + GRAN);
    setenv("COLL_DEVICE_FAKE_PEER", "0", 1);
    assert_int_equal(ops->peer_access(1, 0, &can), COLL_OK);
    assert_int_equal(can, 0);
    assert_int_equal(ops->peer_access(1, 1, &can), COLL_OK);
    assert_int_equal(can, 1);
    assert_int_equal(ops->grant(1, va, GRAN), COLL_ERR_UNSUPPORTED);
    assert_string_equal(coll_dev_error(), "grant of 2097152 bytes at 0x10000 to device 1: no "
                                          "peer access (COLL_DEVICE_FAKE_PEER=0)");
    assert_int_equal(coll__dev_fake_granted(1), before + GRAN);
    unsetenv("COLL_DEVICE_FAKE_PEER");
    assert_int_equal(ops->peer_access(0, 2, &can), COLL_ERR_INVALID); /* 2 devices */
    assert_int_equal(ops->grant(2, va, GRAN), COLL_ERR_INVALID);
}

static void test_streams_copy_and_events_order_work(void **state)
{
    coll_dev_stream_t s = NULL, s1 = NULL;
    coll_dev_event_t e = NULL, e1 = NULL;
    uint32_t src[64], dst[64];

    for (int i = 0; i < 64; i++) {
        src[i] = 0x1000u + (uint32_t)i;
    }
    memset(dst, 0, sizeof(dst));
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->stream_create(1, &s1), COLL_OK);
    assert_int_equal(ops->event_create(0, &e), COLL_OK);
    assert_int_equal(ops->event_create(1, &e1), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_OK); /* never recorded */
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                     sizeof(src), s), COLL_OK);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_OK);
    assert_int_equal(ops->stream_wait(s1, e), COLL_OK);
    assert_int_equal(ops->stream_sync(s), COLL_OK);
    assert_memory_equal(dst, src, sizeof(src));
    assert_int_equal(ops->event_record(e1, s), COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "event of device 1 recorded on a stream of device 0");
    ops->event_destroy(e);
    ops->event_destroy(e1);
    ops->stream_destroy(s);
    ops->stream_destroy(s1);
    ops->stream_destroy(NULL);
    ops->event_destroy(NULL);
}

static void test_pinned_host_memory_and_its_refusal(void **state)
{
    uint8_t *p = NULL;
    void *q = NULL;

    assert_int_equal(ops->host_alloc(1, 100, (void **)&p), COLL_OK);
    assert_int_equal((uintptr_t)p % 64, 0);
    memset(p, 7, 100);
    ops->host_free(1, p);
    ops->host_free(1, NULL);
    assert_int_equal(ops->host_alloc(0, 0, &q), COLL_ERR_INVALID);
    assert_int_equal(ops->host_alloc(COLL_DEV_MAX, 64, &q), COLL_ERR_INVALID);
    setenv("COLL_DEVICE_FAKE_PIN_FAIL", "1", 1);
    assert_int_equal(ops->host_alloc(0, 64, &q), COLL_ERR_NOMEM);
    assert_string_equal(coll_dev_error(), "host alloc of 64 bytes: refused "
                                          "(COLL_DEVICE_FAKE_PIN_FAIL, test only)");
    unsetenv("COLL_DEVICE_FAKE_PIN_FAIL");
    assert_null(q);
}

/* With a copy delay an event completes only that long after its record, polled; a stream that
 * waits for it does not (the fake's work is done). */
static void test_copy_delay_holds_events_back(void **state)
{
    coll_dev_stream_t s = NULL;
    coll_dev_event_t e = NULL;
    uint32_t src = 42, dst = 0;
    struct timespec t0, t1;
    int polls = 0;

    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "50", 1);
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->event_create(0, &e), COLL_OK);
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)&dst, (uint64_t)(uintptr_t)&src,
                                     sizeof(src), s), COLL_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS);
    assert_int_equal(ops->stream_wait(s, e), COLL_OK);
    while (ops->event_query(e) == COLL_INPROGRESS && polls++ < 1000) {
        usleep(1000);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    assert_int_equal(ops->event_query(e), COLL_OK);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 50);
    assert_int_equal(dst, 42);
    ops->event_destroy(e);
    ops->stream_destroy(s);
}

/* Milliseconds of @p clock since @p t0 (which it set). */
static long ms_since(clockid_t clock, const struct timespec *t0)
{
    struct timespec t;

    clock_gettime(clock, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* At COLL_DEVICE_FAKE_COPY_MBPS=100, two copies of 2 MB on one stream take 40 ms, one after
 * the other: the event after the first completes at 20 ms, the one after the second at 40, and
 * a copy's data is not there before (a third copy of 2 MB on another stream ends with the
 * first); a stream sync lands everything. */
static void test_copy_bandwidth_lands_data_late(void **state)
{
    enum { MB2 = 2000000 };
    coll_dev_stream_t s[2] = {NULL, NULL};
    coll_dev_event_t e[3] = {NULL, NULL, NULL};
    uint8_t *src = malloc(MB2), *dst = calloc(3, MB2);
    struct timespec t0;
    int polls = 0;

    (void)state;
    assert_non_null(src);
    assert_non_null(dst);
    memset(src, 7, MB2);
    setenv("COLL_DEVICE_FAKE_COPY_MBPS", "100", 1);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ops->event_create(0, &e[k]), COLL_OK);
    }
    assert_int_equal(ops->stream_create(0, &s[0]), COLL_OK);
    assert_int_equal(ops->stream_create(0, &s[1]), COLL_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int k = 0; k < 3; k++) { /* copies 0 and 1 on stream 0, copy 2 on stream 1 */
        assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)(dst + (size_t)k * MB2),
                                         (uint64_t)(uintptr_t)src, MB2, s[k / 2]), COLL_OK);
        assert_int_equal(ops->event_record(e[k], s[k / 2]), COLL_OK);
    }
    assert_int_equal(dst[0], 0); /* nothing landed yet */
    assert_int_equal(dst[2 * MB2], 0);
    while (ops->event_query(e[0]) == COLL_INPROGRESS && polls++ < 1000) {
        usleep(1000);
    }
    assert_true(ms_since(CLOCK_MONOTONIC, &t0) >= 20);
    assert_int_equal(dst[MB2 - 1], 7); /* the first copy landed with its event */
    if (ms_since(CLOCK_MONOTONIC, &t0) < 35) { /* not a slow machine's late poll */
        assert_int_equal(ops->event_query(e[1]), COLL_INPROGRESS);
        assert_int_equal(dst[MB2], 0);
    }
    while (ops->event_query(e[2]) == COLL_INPROGRESS && polls++ < 1000) {
        usleep(1000);
    }
    assert_true(ms_since(CLOCK_MONOTONIC, &t0) < 1000);
    assert_int_equal(dst[3 * MB2 - 1], 7);
    assert_int_equal(ops->stream_sync(s[0]), COLL_OK); /* lands the second at once */
    assert_int_equal(dst[2 * MB2 - 1], 7);
    unsetenv("COLL_DEVICE_FAKE_COPY_MBPS");
    for (int k = 0; k < 3; k++) {
        ops->event_destroy(e[k]);
    }
    ops->stream_destroy(s[0]);
    ops->stream_destroy(s[1]);
    free(dst);
    free(src);
}

static void test_host_register_and_the_refusals(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    coll_dev_stream_t s = NULL;
    char want[COLL_DEV_TEXT_MAX];

    assert_int_equal(dev, (uint64_t)(uintptr_t)page);
    assert_int_equal(ops->host_register(NULL, 4096, &dev), COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "host register: NULL memory");
    assert_int_equal(ops->host_register(page, 4096, NULL), COLL_ERR_INVALID);
    assert_int_equal(ops->host_register(page, 0, &dev), COLL_ERR_INVALID);
    assert_int_equal(ops->host_register(page + 8, 64, &dev), COLL_ERR_INVALID);
    snprintf(want, sizeof(want), "host register of 64 bytes at %p: not aligned to the page size "
             "(%ld bytes)", (void *)(page + 8), sysconf(_SC_PAGESIZE));
    assert_string_equal(coll_dev_error(), want);
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->stream_write_word(s, dev + 4, 1), COLL_ERR_INVALID);
    assert_int_equal(ops->stream_wait_word(s, 0, 1), COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "stream wait: the word at 0 is not an 8-byte aligned "
                                          "address");
    assert_int_equal(page[0], 0);
    ops->stream_destroy(s);
    ops->host_unregister(NULL);
    unregister_page(page);
}

struct writer {
    uint64_t word;
    pthread_t thread;
};

/* Another thread's stream writes 2 after 20 ms, then 3 after 20 more. */
static void *writer_main(void *arg)
{
    struct writer *w = arg;
    coll_dev_stream_t s = NULL;

    if (ops->stream_create(1, &s) != COLL_OK) {
        return "stream_create";
    }
    usleep(20000);
    if (ops->stream_write_word(s, w->word, 2) != COLL_OK) {
        return "first write";
    }
    usleep(20000);
    if (ops->stream_write_word(s, w->word, 3) != COLL_OK) {
        return "second write";
    }
    ops->stream_destroy(s);
    return NULL;
}

/* A wait for a word holds the stream's later work, not the caller: the copy behind it has not
 * landed and the event after it has not completed until another thread's stream stored the word
 * (>= the value, unsigned); a sync waits for that. */
static void test_wait_holds_the_streams_later_work(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    struct writer w = {dev + 8, 0};
    coll_dev_stream_t s = NULL;
    coll_dev_event_t e = NULL;
    uint32_t src[64], dst[64] = {0};
    struct timespec t0;
    void *err = "not joined";

    for (int i = 0; i < 64; i++) {
        src[i] = 7u + (uint32_t)i;
    }
    setenv("COLL_DEVICE_FAKE_WAIT_MS", "5000", 1);
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->event_create(0, &e), COLL_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(ops->stream_wait_word(s, dev + 8, 3), COLL_OK);
    assert_true(ms_since(CLOCK_MONOTONIC, &t0) < 20); /* the caller goes on */
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS); /* the wait itself is work */
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                     sizeof(src), s), COLL_OK);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(pthread_create(&w.thread, NULL, writer_main, &w), 0);
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS);
    assert_int_equal(dst[5], 0); /* stale: the copy waits for the word */
    assert_int_equal(ops->stream_wait(NULL, e), COLL_OK); /* held too (dev_fake_events.c) */
    assert_int_equal(ops->stream_sync(s), COLL_OK);
    assert_int_equal(__atomic_load_n(&page[1], __ATOMIC_ACQUIRE), 3);
    assert_true(ms_since(CLOCK_MONOTONIC, &t0) >= 40);
    assert_memory_equal(dst, src, sizeof(src));
    assert_int_equal(ops->event_query(e), COLL_OK);
    assert_int_equal(pthread_join(w.thread, &err), 0);
    assert_null(err);
    /* Already there: nothing held; a word with its top bit set is above 1 (unsigned). */
    page[2] = (uint64_t)1 << 63;
    assert_int_equal(ops->stream_wait_word(s, dev + 8, 2), COLL_OK);
    assert_int_equal(ops->stream_wait_word(s, dev + 16, 1), COLL_OK);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_OK);
    unsetenv("COLL_DEVICE_FAKE_WAIT_MS");
    ops->event_destroy(e);
    ops->stream_destroy(s);
    unregister_page(page);
}

/* A word write behind a wait lands once the word waited for is there, from a thread: the
 * stream's owner need not look at the stream again (a rank's ready word behind its wait for a
 * done word). */
static void test_write_behind_a_wait_lands_when_the_word_comes(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    coll_dev_stream_t s = NULL;

    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->stream_wait_word(s, dev, 4), COLL_OK);
    assert_int_equal(ops->stream_write_word(s, dev + 8, 6), COLL_OK);
    usleep(20000);
    assert_int_equal(__atomic_load_n(&page[1], __ATOMIC_ACQUIRE), 0);
    __atomic_store_n(&page[0], 4, __ATOMIC_RELEASE);
    for (int i = 0; i < 5000 && __atomic_load_n(&page[1], __ATOMIC_ACQUIRE) != 6; i++) {
        usleep(1000);
    }
    assert_int_equal(__atomic_load_n(&page[1], __ATOMIC_ACQUIRE), 6);
    ops->stream_destroy(s);
    unregister_page(page);
}

/* A word that stays below: the stream's sync fails with COLL_ERR_TIMEDOUT after
 * COLL_DEVICE_FAKE_WAIT_MS, having slept, not spun, meanwhile; a destroy then drops the work. */
static void test_sync_on_a_word_that_stays_below_times_out_without_spinning(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    coll_dev_stream_t s = NULL;
    struct timespec t0, cpu0;
    char want[COLL_DEV_TEXT_MAX];
    long wall, cpu;

    page[0] = 4;
    setenv("COLL_DEVICE_FAKE_WAIT_MS", "200", 1);
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->stream_wait_word(s, dev, 5), COLL_OK);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    assert_int_equal(ops->stream_sync(s), COLL_ERR_TIMEDOUT);
    cpu = ms_since(CLOCK_THREAD_CPUTIME_ID, &cpu0);
    wall = ms_since(CLOCK_MONOTONIC, &t0);
    snprintf(want, sizeof(want), "stream sync: the stream waits for the word at %#llx, which "
             "stayed at 4, below 5, for 200 ms (COLL_DEVICE_FAKE_WAIT_MS)",
             (unsigned long long)dev);
    assert_string_equal(coll_dev_error(), want);
    assert_in_range(wall, 200, 5000);
    assert_true(cpu < wall / 4);
    ops->stream_destroy(s);
    unsetenv("COLL_DEVICE_FAKE_WAIT_MS");
    unregister_page(page);
}

/* With a copy delay, the stream is behind: its write is not there at once, lands after the
 * delay (a wait sees it then), in its order, and a stream sync waits for it. */
static void test_copy_delay_holds_a_write_back(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    coll_dev_stream_t s = NULL, s1 = NULL;
    struct timespec t0;

    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->stream_create(0, &s1), COLL_OK);
    setenv("COLL_DEVICE_FAKE_WAIT_MS", "5000", 1);
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "100", 1);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(ops->stream_write_word(s, dev, 9), COLL_OK);
    assert_int_equal(__atomic_load_n(&page[0], __ATOMIC_ACQUIRE), 0);
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    assert_int_equal(ops->stream_wait_word(s1, dev, 9), COLL_OK);
    assert_int_equal(ops->stream_sync(s1), COLL_OK);
    unsetenv("COLL_DEVICE_FAKE_WAIT_MS");
    assert_true(ms_since(CLOCK_MONOTONIC, &t0) >= 100);
    assert_int_equal(__atomic_load_n(&page[0], __ATOMIC_ACQUIRE), 9);
    /* Two late writes and one at once after them: they land in the stream's order. */
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", "50", 1);
    assert_int_equal(ops->stream_write_word(s, dev + 8, 1), COLL_OK);
    assert_int_equal(ops->stream_write_word(s, dev + 8, 2), COLL_OK);
    unsetenv("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    assert_int_equal(ops->stream_write_word(s, dev + 8, 3), COLL_OK);
    assert_int_equal(__atomic_load_n(&page[1], __ATOMIC_ACQUIRE), 0);
    assert_int_equal(ops->stream_sync(s), COLL_OK);
    assert_int_equal(__atomic_load_n(&page[1], __ATOMIC_ACQUIRE), 3);
    ops->stream_destroy(s);
    ops->stream_destroy(s1);
    unregister_page(page);
}

/* A held executor launch (coll__dev_fake_exec_defer()): counts its runs into *arg. */
static void count_run(void *arg, int go)
{
    *(int *)arg += go ? 1 : 100;
}

static void test_lazy_streams_need_a_wait_across_devices(void **state)
{
    coll_dev_stream_t a = NULL, b = NULL;
    coll_dev_event_t ea = NULL, eb = NULL;
    uint32_t src[16], mid[16], stale[16], fresh[16], zero[16] = {0};
    int runs = 0;

    (void)state;
    for (int i = 0; i < 16; i++) {
        src[i] = 0x2000u + (uint32_t)i;
    }
    memset(mid, 0, sizeof(mid));
    setenv("COLL_DEVICE_FAKE_LAZY", "1", 1);
    assert_int_equal(ops->stream_create(0, &a), COLL_OK);
    assert_int_equal(ops->stream_create(1, &b), COLL_OK);
    assert_int_equal(ops->event_create(0, &ea), COLL_OK);
    assert_int_equal(ops->event_create(1, &eb), COLL_OK);
    /* Device 0 writes mid, device 1 copies it on without waiting: the old bytes. */
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)mid, (uint64_t)(uintptr_t)src,
                                     sizeof(src), a), COLL_OK);
    assert_int_equal(coll__dev_fake_exec_defer(a, count_run, &runs), 1);
    assert_int_equal(ops->event_record(ea, a), COLL_OK);
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)stale, (uint64_t)(uintptr_t)mid,
                                     sizeof(mid), b), COLL_OK);
    assert_int_equal(ops->event_record(eb, b), COLL_OK);
    assert_int_equal(ops->event_query(eb), COLL_OK);
    assert_memory_equal(stale, zero, sizeof(zero));
    assert_memory_equal(mid, zero, sizeof(zero)); /* nothing looked at device 0's stream */
    assert_int_equal(runs, 0);
    /* Waiting for device 0's event: its work done first, in its order. */
    assert_int_equal(ops->stream_wait(b, ea), COLL_OK);
    assert_int_equal(runs, 1);
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)fresh, (uint64_t)(uintptr_t)mid,
                                     sizeof(mid), b), COLL_OK);
    assert_int_equal(ops->event_record(eb, b), COLL_OK);
    assert_int_equal(ops->event_query(eb), COLL_OK);
    assert_memory_equal(fresh, src, sizeof(src));
    /* Unheld (not lazy, nothing pending), a launch runs at once: the caller runs it. */
    unsetenv("COLL_DEVICE_FAKE_LAZY");
    assert_int_equal(coll__dev_fake_exec_defer(a, count_run, &runs), 0);
    assert_int_equal(runs, 1);
    ops->event_destroy(ea);
    ops->event_destroy(eb);
    ops->stream_destroy(a);
    ops->stream_destroy(b);
}

/* A held stand-in NCCL collective (coll__dev_fake_hold()): *arg counts its starts (a drop
 * adds 100); it runs while *(arg + 1) is set. */
static int collective_busy(void *arg)
{
    return ((int *)arg)[1];
}

static void test_a_held_collective_holds_the_stream_until_it_ends(void **state)
{
    uint64_t dev = 0, *page = registered_page(&dev);
    uint32_t src[16], dst[16], zero[16] = {0};
    coll_dev_stream_t s = NULL;
    coll_dev_event_t e = NULL;
    int run[2] = {0, 1};

    (void)state;
    memset(src, 0x5a, sizeof(src));
    memset(dst, 0, sizeof(dst));
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->event_create(0, &e), COLL_OK);
    /* Nothing held: the caller issues it now. */
    assert_int_equal(coll__dev_fake_hold(s, count_run, collective_busy, run), 0);
    assert_int_equal(ops->stream_wait_word(s, dev, 1), COLL_OK);
    assert_int_equal(coll__dev_fake_hold(s, count_run, collective_busy, run), 1);
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                     sizeof(src), s), COLL_OK);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS);
    assert_int_equal(run[0], 0); /* behind the wait */
    __atomic_store_n(&page[0], 1, __ATOMIC_RELEASE);
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS);
    assert_int_equal(run[0], 1); /* started, still running: the copy after it waits */
    assert_memory_equal(dst, zero, sizeof(zero));
    assert_int_equal(ops->event_query(e), COLL_INPROGRESS);
    assert_int_equal(run[0], 1); /* started once */
    run[1] = 0;                  /* it ended */
    assert_int_equal(ops->event_query(e), COLL_OK);
    assert_memory_equal(dst, src, sizeof(src));
    /* Held behind a wait that never passes: dropped when the stream goes. */
    setenv("COLL_DEVICE_FAKE_WAIT_MS", "1", 1);
    assert_int_equal(ops->stream_wait_word(s, dev, 2), COLL_OK);
    assert_int_equal(coll__dev_fake_hold(s, count_run, collective_busy, run), 1);
    ops->stream_destroy(s);
    unsetenv("COLL_DEVICE_FAKE_WAIT_MS");
    assert_int_equal(run[0], 101);
    ops->event_destroy(e);
    unregister_page(page);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices_and_their_facts),
        cmocka_unit_test(test_create_refuses_sizes_off_the_granularity),
        cmocka_unit_test(test_export_import_shares_memory_with_another_process),
        cmocka_unit_test(test_memory_outlives_its_handle_and_an_unmap_keeps_the_range),
        cmocka_unit_test(test_peer_access_and_grants),
        cmocka_unit_test(test_streams_copy_and_events_order_work),
        cmocka_unit_test(test_pinned_host_memory_and_its_refusal),
        cmocka_unit_test(test_copy_delay_holds_events_back),
        cmocka_unit_test(test_host_register_and_the_refusals),
        cmocka_unit_test(test_wait_holds_the_streams_later_work),
        cmocka_unit_test(test_write_behind_a_wait_lands_when_the_word_comes),
        cmocka_unit_test(test_sync_on_a_word_that_stays_below_times_out_without_spinning),
        cmocka_unit_test(test_copy_delay_holds_a_write_back),
        cmocka_unit_test(test_copy_bandwidth_lands_data_late),
        cmocka_unit_test(test_lazy_streams_need_a_wait_across_devices),
        cmocka_unit_test(test_a_held_collective_holds_the_stream_until_it_ends),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
