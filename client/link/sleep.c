/*
 * A waiter's sleep: a bounded poll of the words it watches (a completion by a local rank on
 * another core comes within microseconds, sooner than a wake-up), then the control block's
 * futex (proto/ctl.h), which every notifier of this rank increments.
 */
#include <poll.h>
#include <sched.h>

#include "client/link/link.h"

/* A cheap pause between two polls of a word another core will write. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int watched_moved(const void *arg)
{
    const coll__link_watch_t *w = arg;

    for (unsigned i = 0; i < w->n; i++) {
        if (atomic_load_explicit(w->word[i], memory_order_acquire) != w->seen[i]) {
            return 1;
        }
    }
    return 0;
}

/* Poll the watched fd for one slice, unless the event word moved already. */
static void poll_fd(coll_ctl_t *ctl, const coll__link_watch_t *w, uint32_t seen, int timeout_ms)
{
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int slice = w->n > 0 ? 1 : COLL_LINK_FD_SLICE_MS;

    if (w->n == 0 && coll__now_ns() - w->fd_since_ns > COLL_LINK_FD_IDLE_MS * 1000000ull) {
        slice = COLL_LINK_FD_IDLE_SLICE_MS;
    }

    if (atomic_load_explicit(&ctl->events, memory_order_acquire) != seen || watched_moved(w)) {
        return;
    }
    (void)poll(&p, 1, timeout_ms >= 0 && timeout_ms < slice ? timeout_ms : slice);
}

void coll__link_sleep(coll_ctl_t *ctl, const coll__link_watch_t *w, uint32_t seen,
                      int timeout_ms)
{
    uint64_t end = timeout_ms != 0 && w->n > 0 && w->spin_ns > 0 ? coll__now_ns() + w->spin_ns
                                                                 : 0;

    for (unsigned i = 1; end != 0; i++) {
        if (atomic_load_explicit(&ctl->events, memory_order_acquire) != seen ||
            watched_moved(w)) {
            return;
        }
        if (w->yield) {
            sched_yield(); /* the rank we wait for may be runnable on this CPU */
        } else {
            cpu_relax();
        }
        if ((w->yield || i % 64 == 0) && coll__now_ns() >= end) {
            break;
        }
    }
    if (w->fd < -1) {
        return; /* an event is pending already */
    }
    if (w->fd >= 0) {
        poll_fd(ctl, w, seen, timeout_ms);
        return;
    }
    coll_ctl_wait_unless(ctl, seen, timeout_ms, watched_moved, w);
}
