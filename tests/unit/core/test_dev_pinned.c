/*
 * Unit tests of the cache of page-locked host buffers (daemon/core/dev_pinned.c) over a counting
 * wrapper of the fake device layer (COLL_DEVICE_FAKE=2 from ctest):
 *
 *   a buffer given back is handed out again for a take of the same size class (a hit, the
 *   same pointer), on its own device only; a take of another class is a miss;
 *   the idle bytes of a device stay within the limit, the oldest freed first; a buffer larger
 *   than the limit is never kept; a limit lowered by a reload frees what is beyond it;
 *   a refusal to lock memory while idle buffers of another size are held frees them and asks
 *   again; a refusal with none held is the caller's (COLL_ERR_NOMEM), counted as a miss;
 *   buffers idle longer than staged_pinned_idle_ms are freed by the loop's timer;
 *   closing frees every idle buffer, and a buffer given back afterwards is freed at once:
 *   every lock has its unlock.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <uv.h>

#include "core/dev_pinned.h"

#define KiB ((size_t)1 << 10)

static const coll_dev_ops_t *fake;
static coll_dev_ops_t counting;
static int allocs, frees, refuse; /* host_alloc calls that locked, host_free calls; refusals
                                     left to make */
static uv_loop_t loop;

static coll_status_t counting_alloc(int dev, size_t bytes, void **p_p)
{
    if (refuse > 0) {
        refuse--;
        return coll__dev_fail(COLL_ERR_NOMEM, "host alloc of %zu bytes: refused (test)", bytes);
    }
    allocs++;
    return fake->host_alloc(dev, bytes, p_p);
}

static void counting_free(int dev, void *p)
{
    frees += p != NULL;
    fake->host_free(dev, p);
}

static int setup(void **state)
{
    (void)state;
    if (coll_dev_open(&fake) != COLL_OK || strcmp(fake->name, "fake") != 0) {
        return -1;
    }
    counting = *fake;
    counting.host_alloc = counting_alloc;
    counting.host_free = counting_free;
    return uv_loop_init(&loop);
}

static int teardown(void **state)
{
    (void)state;
    return uv_loop_close(&loop) == 0 ? 0 : -1;
}

/* A cache of @p limit idle bytes per device over the counting layer. */
static void open_cache(coll_pinned_t *pc, uint64_t limit, uint64_t idle_ms)
{
    memset(pc, 0, sizeof(*pc));
    pc->ops = &counting;
    coll_pinned_configure(pc, &loop, limit, idle_ms);
    allocs = frees = refuse = 0;
}

/* Close @p pc and run its timer's close: every buffer locked was unlocked. */
static void close_cache(coll_pinned_t *pc)
{
    coll_pinned_close(pc);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(allocs, frees);
}

static void test_reuse(void **state)
{
    coll_pinned_t pc;
    void *a, *b, *c;
    size_t ca, cb, cc;
    (void)state;

    open_cache(&pc, 1 << 20, 60000);
    assert_int_equal(coll_pinned_take(&pc, 0, 100 * KiB, &a, &ca), COLL_OK);
    assert_int_equal(ca, 128 * KiB);
    memset(a, 7, 100 * KiB); /* as large as asked */
    assert_int_equal(pc.dev[0].used, 128 * KiB);
    coll_pinned_give(&pc, 0, a, ca);
    assert_int_equal(pc.dev[0].held, 128 * KiB);
    assert_int_equal(pc.dev[0].used, 0);
    assert_int_equal(coll_pinned_take(&pc, 1, 100 * KiB, &c, &cc), COLL_OK); /* other device */
    assert_int_equal(coll_pinned_take(&pc, 0, 70 * KiB, &b, &cb), COLL_OK);  /* same class */
    assert_ptr_equal(b, a);
    assert_int_equal(pc.dev[0].hits, 1);
    assert_int_equal(pc.dev[0].misses, 1);
    assert_int_equal(pc.dev[1].misses, 1);
    assert_int_equal(pc.dev[0].held, 0);
    coll_pinned_give(&pc, 0, b, cb);
    coll_pinned_give(&pc, 1, c, cc);
    assert_int_equal(coll_pinned_take(&pc, 0, 200 * KiB, &a, &ca), COLL_OK); /* 256 KiB */
    assert_int_equal(pc.dev[0].misses, 2);
    coll_pinned_give(&pc, 0, a, ca);
    assert_int_equal(allocs, 3);
    assert_int_equal(frees, 0);
    close_cache(&pc);
}

static void test_bounded(void **state)
{
    coll_pinned_t pc;
    void *p[4];
    size_t cap[4];
    (void)state;

    open_cache(&pc, 256 * KiB, 60000);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(coll_pinned_take(&pc, 0, 128 * KiB, &p[i], &cap[i]), COLL_OK);
    }
    for (int i = 0; i < 4; i++) {
        coll_pinned_give(&pc, 0, p[i], cap[i]);
        assert_true(pc.dev[0].held <= 256 * KiB);
    }
    assert_int_equal(frees, 2);
    assert_int_equal(pc.dev[0].n, 2);
    assert_ptr_equal(pc.dev[0].slot[0].p, p[2]); /* the oldest went first */
    /* Beyond the limit: a size of its own, never kept. */
    assert_int_equal(coll_pinned_take(&pc, 0, 300 * KiB, &p[0], &cap[0]), COLL_OK);
    assert_int_equal(cap[0], 300 * KiB);
    coll_pinned_give(&pc, 0, p[0], cap[0]);
    assert_int_equal(frees, 3);
    assert_int_equal(pc.dev[0].held, 256 * KiB);
    coll_pinned_configure(&pc, &loop, 128 * KiB, 60000); /* a reload lowers the limit */
    assert_int_equal(pc.dev[0].held, 128 * KiB);
    assert_ptr_equal(pc.dev[0].slot[0].p, p[3]);
    close_cache(&pc);
}

static void test_refused(void **state)
{
    coll_pinned_t pc;
    void *a, *b;
    size_t ca, cb;
    (void)state;

    open_cache(&pc, 1 << 20, 60000);
    assert_int_equal(coll_pinned_take(&pc, 0, 64 * KiB, &a, &ca), COLL_OK);
    coll_pinned_give(&pc, 0, a, ca);
    refuse = 1; /* the driver locks no more until the idle buffer is unlocked */
    assert_int_equal(coll_pinned_take(&pc, 0, 512 * KiB, &b, &cb), COLL_OK);
    assert_int_equal(pc.dev[0].held, 0);
    assert_int_equal(frees, 1);
    refuse = 1; /* nothing idle to give up: the caller's */
    assert_int_equal(coll_pinned_take(&pc, 0, 64 * KiB, &a, &ca), COLL_ERR_NOMEM);
    assert_non_null(strstr(coll_dev_error(), "refused (test)"));
    assert_int_equal(pc.dev[0].misses, 3);
    assert_int_equal(pc.dev[0].used, 512 * KiB);
    coll_pinned_give(&pc, 0, b, cb);
    close_cache(&pc);
}

static void test_idle_freed(void **state)
{
    coll_pinned_t pc;
    void *a;
    size_t ca;
    (void)state;

    open_cache(&pc, 1 << 20, 5);
    assert_int_equal(coll_pinned_take(&pc, 1, 64 * KiB, &a, &ca), COLL_OK);
    coll_pinned_give(&pc, 1, a, ca);
    assert_int_equal(pc.dev[1].held, 64 * KiB);
    uv_run(&loop, UV_RUN_DEFAULT); /* the timer runs until nothing is idle, then stops */
    assert_int_equal(pc.dev[1].held, 0);
    assert_int_equal(frees, 1);
    close_cache(&pc);
}

static void test_closed(void **state)
{
    coll_pinned_t pc;
    void *a, *b;
    size_t ca, cb;
    (void)state;

    open_cache(&pc, 1 << 20, 60000);
    assert_int_equal(coll_pinned_take(&pc, 0, 64 * KiB, &a, &ca), COLL_OK);
    assert_int_equal(coll_pinned_take(&pc, 0, 64 * KiB, &b, &cb), COLL_OK);
    coll_pinned_give(&pc, 0, a, ca);
    coll_pinned_close(&pc); /* shutdown while an operation still holds b */
    assert_int_equal(frees, 1);
    coll_pinned_give(&pc, 0, b, cb);
    assert_int_equal(frees, 2);
    assert_int_equal(pc.dev[0].held, 0);
    close_cache(&pc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reuse),    cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_refused),  cmocka_unit_test(test_idle_freed),
        cmocka_unit_test(test_closed),
    };
    return cmocka_run_group_tests_name("dev_pinned", tests, setup, teardown);
}
