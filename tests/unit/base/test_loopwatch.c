/* Unit tests of the loop watch (daemon/base/loopwatch.h) on a real libuv loop: a callback that
 * holds the loop past the bound is one stall whose length /metrics sees, logged as one
 * callback's; a loop that turns quickly for many periods is none, and the maximum stays 0 with
 * the count (a wrapped age read as a stall of 2^64 ns once failed CI; the maximum once counted
 * holds below the bound); the whole process stopped (SIGSTOP from a child) is one stall too,
 * logged as the process's, never blamed on one callback. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/loopwatch.h"
#include "capture.h"

typedef struct {
    uv_timer_t tick;
    int ticks_done, ticks;
    long hold_ms;                      /* the tenth tick holds the loop this long; 0: none */
} busy_t;

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void tick_cb(uv_timer_t *t)
{
    busy_t *b = (busy_t *)t->data;

    if (b->hold_ms > 0 && b->ticks_done == 10) {
        sleep_ms(b->hold_ms);
    }
    if (++b->ticks_done == b->ticks) {
        uv_timer_stop(t);
        uv_close((uv_handle_t *)t, NULL);
    }
}

/* A child that stops this process for @p stop_ms after @p after_ms, then lets it go on. */
static pid_t stopper(long after_ms, long stop_ms)
{
    pid_t parent = getpid(), pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        sleep_ms(after_ms);
        kill(parent, SIGSTOP);
        sleep_ms(stop_ms);
        kill(parent, SIGCONT);
        _exit(0);
    }
    return pid;
}

/* Runs a loop of @p ticks 1 ms ticks under a watch of @p stall_ms; returns the stalls seen.
 * With @p stop_ms the whole process is stopped that long after 100 ms. */
static uint64_t run_stopped(int ticks, long hold_ms, uint64_t stall_ms, long stop_ms)
{
    uv_loop_t loop;
    busy_t b = {.ticks = ticks, .hold_ms = hold_ms};
    uint64_t before = coll_loopwatch_stalls();
    pid_t child = stop_ms > 0 ? stopper(100, stop_ms) : -1;
    int status;

    assert_int_equal(uv_loop_init(&loop), 0);
    assert_int_equal(coll_loopwatch_start(&loop, stall_ms), COLL_OK);
    uv_timer_init(&loop, &b.tick);
    b.tick.data = &b;
    uv_timer_start(&b.tick, tick_cb, 1, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    coll_loopwatch_stop();
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    if (child > 0) {
        assert_int_equal(waitpid(child, &status, 0), child);
    }
    return coll_loopwatch_stalls() - before;
}

static uint64_t run_watched(int ticks, long hold_ms, uint64_t stall_ms)
{
    return run_stopped(ticks, hold_ms, stall_ms, 0);
}

static void test_quick_loop_is_no_stall(void **state)
{
    (void)state;
    /* 1,000 ticks against a 200 ms bound, far above a loaded machine's scheduling delays (the
     * monitor looks every 50 ms: 20 looks or more). */
    assert_int_equal(run_watched(1000, 0, 200), 0);
    assert_true(coll_loopwatch_longest_s() == 0.0); /* the maximum is a stall's, as the count */
}

static void test_held_loop_is_one_stall(void **state)
{
    const char *log;

    (void)state;
    capture_start(STDERR_FILENO);
    assert_int_equal(run_watched(400, 800, 200), 1);
    log = capture_end();
    /* The gap between two pulses: the 800 ms held and up to a period (50 ms) before it. */
    assert_true(coll_loopwatch_longest_s() >= 0.800);
    assert_true(coll_loopwatch_longest_s() < 5.0);
    assert_contains(log, "event loop stalled: one callback has held it for ");
    assert_contains(log, "event loop runs again after a stall of ");
    assert_null(strstr(log, "the whole process was held"));
}

/* The whole process stopped for 800 ms (the loop thread and the watch's alike, as under a
 * loaded host): one stall, logged as the process's, not one callback's. */
static void test_stopped_process_is_not_a_callback(void **state)
{
    const char *log;

    (void)state;
    capture_start(STDERR_FILENO);
    assert_int_equal(run_stopped(1500, 0, 200, 800), 1);
    log = capture_end();
    assert_true(coll_loopwatch_longest_s() >= 0.700);
    assert_contains(log, "event loop runs again after a stall of ");
    assert_contains(log, "the whole process was held (not scheduled: a loaded host, a stopped "
                         "process or a suspended machine), not one callback");
    assert_null(strstr(log, "one callback has held it"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quick_loop_is_no_stall),
        cmocka_unit_test(test_held_loop_is_one_stall),
        cmocka_unit_test(test_stopped_process_is_not_a_callback),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
