#include "proto/ctl.h"

#include <collective.h>

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Shared (not private) futexes: the word lives in memory mapped by two processes. */
static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    return syscall(SYS_futex, (uint32_t *)word, op, val, timeout, NULL, 0);
}

void coll_ctl_notify(coll_ctl_t *ctl)
{
    atomic_fetch_add(&ctl->events, 1);
    if (atomic_load(&ctl->waiting)) {
        futex(&ctl->events, FUTEX_WAKE, INT_MAX, NULL);
    }
}

void coll_ctl_notify_sleeper(coll_ctl_t *ctl)
{
    if (atomic_load(&ctl->waiting)) {
        coll_ctl_notify(ctl);
    }
}

void coll_ctl_wait_unless(coll_ctl_t *ctl, uint32_t seen, int timeout_ms,
                          int (*moved)(const void *arg), const void *arg)
{
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000};

    atomic_store(&ctl->waiting, 1);
    if (atomic_load(&ctl->events) == seen && (moved == NULL || !moved(arg))) {
        futex(&ctl->events, FUTEX_WAIT, seen, timeout_ms < 0 ? NULL : &ts);
    }
    atomic_store(&ctl->waiting, 0);
}

void coll_ctl_wait(coll_ctl_t *ctl, uint32_t seen, int timeout_ms)
{
    coll_ctl_wait_unless(ctl, seen, timeout_ms, NULL, NULL);
}

int coll_ctl_submit(coll_ctl_job_t *job, coll_ctl_t *ctl, const coll_submission_t *rec,
                    int *ring_p)
{
    uint32_t head = atomic_load_explicit(&ctl->sub_head, memory_order_relaxed);

    if (head - atomic_load_explicit(&ctl->sub_tail, memory_order_acquire) >= COLL_CTL_SUB_SLOTS) {
        return 0;
    }
    ctl->sub[head % COLL_CTL_SUB_SLOTS] = *rec;
    atomic_store(&ctl->sub_head, head + 1);
    *ring_p = atomic_load(&job->daemon_asleep) != 0;
    return 1;
}

uint32_t coll_ctl_queued(coll_ctl_t *ctl)
{
    uint32_t n = atomic_load(&ctl->sub_head) -
                 atomic_load_explicit(&ctl->sub_tail, memory_order_relaxed);
    return n < COLL_CTL_SUB_SLOTS ? n : COLL_CTL_SUB_SLOTS;
}

int coll_ctl_take(coll_ctl_t *ctl, coll_submission_t *rec)
{
    uint32_t tail = atomic_load_explicit(&ctl->sub_tail, memory_order_relaxed);
    uint32_t head = atomic_load(&ctl->sub_head);

    if (tail == head) {
        return 0;
    }
    if (head - tail > COLL_CTL_SUB_SLOTS) {
        return -1; /* the client wrote a head no ring can have */
    }
    *rec = ctl->sub[tail % COLL_CTL_SUB_SLOTS];
    atomic_store_explicit(&ctl->sub_tail, tail + 1, memory_order_release);
    return 1;
}

int coll_ctl_steps_valid(const uint64_t *steps, size_t n)
{
    uint32_t phase = 0, last = 0, end = 0;

    if (n > COLL_CTL_MAX_STEPS) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        uint32_t p = coll_ctl_step_phase(steps[i]), l = coll_ctl_step_last(steps[i]);
        uint32_t e = coll_ctl_step_end_us(steps[i]);
        if (p < COLL_STEP_REDUCE_SCATTER || p > COLL_STEP_RD_UNFOLD || p < phase ||
            (p == phase && l <= last) || e < end) {
            return 0;
        }
        phase = p;
        last = l;
        end = e;
    }
    return 1;
}
