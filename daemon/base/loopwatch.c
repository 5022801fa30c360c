#include "base/loopwatch.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/log.h"

static struct {
    uv_timer_t pulse;
    int timer_open;
    pthread_t thread;
    int thread_running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop;                          /* under lock */
    uint64_t stall_ns, period_ns;
    _Atomic uint64_t pulse_ns;         /* last run of the pulse timer */
    _Atomic uint64_t look_ns;          /* last look of the monitor */
    _Atomic uint64_t held_ns, held_end_ns; /* the monitor's latest lateness and its end */
    pthread_mutex_t doing_lock;        /* what the loop does: coll_loopwatch_enter() */
    char doing[128];                   /* "" when nothing was named */
    _Atomic uint64_t stalls;
    _Atomic uint64_t longest_ns;
} w = {.lock = PTHREAD_MUTEX_INITIALIZER, .doing_lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* How long within [@p since, @p now] the whole process was held (not scheduled: a loaded
 * host, a stopped process, a suspended machine), as the monitor's own lateness shows: it looks
 * every period, so a look later than two periods (or none since) means its thread was not run
 * either, whatever the loop thread did. */
static uint64_t process_held(uint64_t since, uint64_t now)
{
    uint64_t look = atomic_load_explicit(&w.look_ns, memory_order_acquire), held = 0;

    if (now - look > 2 * w.period_ns && now > look) {
        held = now - look - w.period_ns;
    }
    if (atomic_load_explicit(&w.held_end_ns, memory_order_acquire) > since &&
        atomic_load_explicit(&w.held_ns, memory_order_relaxed) > held) {
        held = atomic_load_explicit(&w.held_ns, memory_order_relaxed);
    }
    return held < now - since ? held : now - since;
}

/* Whether the loop's @p age at @p now (since the pulse at @p since) is the whole process held,
 * not the loop thread: what is left of it beside the hold is within the bound. */
static int whole_process(uint64_t since, uint64_t now)
{
    uint64_t held = process_held(since, now);

    return held > 0 && now - since - held <= w.stall_ns;
}

#define HELD_TEXT "the whole process was held (not scheduled: a loaded host, a stopped process or " \
                  "a suspended machine), not one callback"

/* The loop turned: a gap since the last pulse longer than the bound was a stall (also one the
 * monitor did not see, the whole process stopped): counted, its length the maximum's candidate,
 * and logged with that length and, where the monitor was held too, as the whole process's. */
static void pulse_cb(uv_timer_t *t)
{
    uint64_t now = now_ns(), last = atomic_load_explicit(&w.pulse_ns, memory_order_relaxed);
    uint64_t gap = now - last;

    (void)t;
    atomic_store_explicit(&w.pulse_ns, now, memory_order_release);
    if (gap <= w.stall_ns) {
        return;
    }
    atomic_fetch_add_explicit(&w.stalls, 1, memory_order_relaxed);
    if (gap > atomic_load_explicit(&w.longest_ns, memory_order_relaxed)) {
        atomic_store_explicit(&w.longest_ns, gap, memory_order_relaxed);
    }
    coll_warn(COLL_SUB_CORE, "event loop runs again after a stall of %llu ms%s",
              (unsigned long long)(gap / 1000000), whole_process(last, now) ? ": " HELD_TEXT : "");
}

/* The monitor looks at @p now: a look later than two periods after its last one means it was
 * not run meanwhile (process_held()); kept for the loop's pulse_cb(). */
static void note_look(uint64_t now)
{
    uint64_t last = atomic_load_explicit(&w.look_ns, memory_order_relaxed);

    if (now - last > 2 * w.period_ns) {
        atomic_store_explicit(&w.held_ns, now - last - w.period_ns, memory_order_relaxed);
        atomic_store_explicit(&w.held_end_ns, now, memory_order_release);
    }
    atomic_store_explicit(&w.look_ns, now, memory_order_release);
}

/* One look at the pulse, while the loop may be held; @p reported is the pulse of the stall
 * already logged (0: none). The loop's own pulse_cb() counts the stall when it ends. */
static uint64_t look(uint64_t reported)
{
    /* The pulse first, then the clock: read the other way round, a pulse that lands between
     * the two is newer than "now", and the unsigned age wraps to a stall of 2^64 ns. */
    uint64_t pulse = atomic_load_explicit(&w.pulse_ns, memory_order_acquire), now = now_ns();
    char doing[sizeof(w.doing)];

    note_look(now);
    if (pulse == reported || now - pulse <= w.stall_ns) {
        return pulse == reported ? reported : 0;
    }
    if (whole_process(pulse, now)) {
        coll_warn(COLL_SUB_CORE, "event loop stalled: not run for %llu ms so far, as this watch "
                  "was not: " HELD_TEXT, (unsigned long long)((now - pulse) / 1000000));
        return pulse;
    }
    pthread_mutex_lock(&w.doing_lock);
    snprintf(doing, sizeof(doing), "%s", w.doing[0] ? w.doing : "unnamed work");
    pthread_mutex_unlock(&w.doing_lock);
    coll_error(COLL_SUB_CORE, "event loop stalled: one callback has held it for %llu ms so far "
               "(%s); timers, sockets and signals wait meanwhile",
               (unsigned long long)((now - pulse) / 1000000), doing);
    return pulse;
}

static void *monitor_main(void *arg)
{
    uint64_t reported = 0;
    struct timespec until;

    pthread_mutex_lock(&w.lock);
    while (!w.stop) {
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_nsec += (long)w.period_ns;
        until.tv_sec += until.tv_nsec / 1000000000;
        until.tv_nsec %= 1000000000;
        if (pthread_cond_timedwait(&w.wake, &w.lock, &until) == ETIMEDOUT && !w.stop) {
            pthread_mutex_unlock(&w.lock);
            reported = look(reported);
            pthread_mutex_lock(&w.lock);
        }
    }
    pthread_mutex_unlock(&w.lock);
    return NULL;
}

static int start_thread(void)
{
    pthread_condattr_t ca;
    int rc;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w.wake, &ca);
    pthread_condattr_destroy(&ca);
    w.stop = 0;
    rc = pthread_create(&w.thread, NULL, monitor_main, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&w.wake);
        return rc;
    }
    w.thread_running = 1;
    return 0;
}

coll_status_t coll_loopwatch_start(uv_loop_t *loop, uint64_t stall_ms)
{
    uint64_t period_ms = stall_ms / 4 > 0 ? stall_ms / 4 : 1;
    int rc;

    w.stall_ns = stall_ms * 1000000u;
    w.period_ns = period_ms * 1000000u;
    atomic_store(&w.pulse_ns, now_ns());
    atomic_store(&w.look_ns, atomic_load(&w.pulse_ns));
    atomic_store(&w.held_end_ns, 0);
    if ((rc = start_thread()) != 0) {
        coll_error(COLL_SUB_CORE, "loop watch thread: %s", strerror(rc));
        return COLL_ERR_NOMEM;
    }
    uv_timer_init(loop, &w.pulse);
    w.timer_open = 1;
    /* The pulse never keeps the loop alive on its own. */
    uv_unref((uv_handle_t *)&w.pulse);
    uv_timer_start(&w.pulse, pulse_cb, period_ms, period_ms);
    return COLL_OK;
}

void coll_loopwatch_stop(void)
{
    if (w.thread_running) {
        pthread_mutex_lock(&w.lock);
        w.stop = 1;
        pthread_cond_signal(&w.wake);
        pthread_mutex_unlock(&w.lock);
        pthread_join(w.thread, NULL);
        pthread_cond_destroy(&w.wake);
        w.thread_running = 0;
    }
    if (w.timer_open) {
        uv_close((uv_handle_t *)&w.pulse, NULL);
        w.timer_open = 0;
    }
}

void coll_loopwatch_enter(const char *what, const char *detail)
{
    pthread_mutex_lock(&w.doing_lock);
    snprintf(w.doing, sizeof(w.doing), "%s %s", what, detail);
    pthread_mutex_unlock(&w.doing_lock);
}

void coll_loopwatch_leave(void)
{
    pthread_mutex_lock(&w.doing_lock);
    w.doing[0] = '\0';
    pthread_mutex_unlock(&w.doing_lock);
}

uint64_t coll_loopwatch_stalls(void)
{
    return atomic_load_explicit(&w.stalls, memory_order_relaxed);
}

double coll_loopwatch_longest_s(void)
{
    return (double)atomic_load_explicit(&w.longest_ns, memory_order_relaxed) / 1e9;
}
