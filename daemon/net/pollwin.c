#include "net/pollwin.h"

#include <sched.h>

#include "base/loopwatch.h"
#include "common/assert.h"
#include "net/transport.h"

void coll_pollwin_start(coll_daemon_t *d)
{
    uv_idle_init(d->loop, &d->pollwin);
    d->pollwin.data = d;
}

void coll_pollwin_stop(coll_daemon_t *d)
{
    if (d->pollwin.loop != NULL && !uv_is_closing((uv_handle_t *)&d->pollwin)) {
        uv_close((uv_handle_t *)&d->pollwin, NULL);
    }
}

/* Whether @p job may spin now: a window wanted, a receive posted, its worker not being driven. */
static int may_spin(const coll_job_t *job)
{
    return job->net.window && job->net.worker != NULL && job->net.recvs > 0 &&
           !job->net.driving && !job->closing;
}

/* Marks the jobs that spin in this window (job->net.driving keeps the transport's own drive
 * out meanwhile), forgets the wishes of the others. Returns how many spin. */
static unsigned enter(coll_daemon_t *d)
{
    coll_job_t *job, *tmp;
    unsigned n = 0;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (may_spin(job)) {
            job->net.driving = 1;
            n++;
        } else {
            job->net.window = 0;
        }
    }
    return n;
}

/* Progress every spinning job's worker in turn until a transfer completed or a failure was
 * recorded (1) or uv_hrtime() passed @p deadline (0): the clock bounds the loop. Each turn
 * yields the CPU to whatever else is runnable on it: the ranks and the peer daemon that make
 * the awaited message may share this core. */
static int spin(coll_daemon_t *d, uint64_t deadline)
{
    coll_job_t *job, *tmp;

    for (;;) {
        coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
        {
            if (!job->net.window) {
                continue;
            }
            COLL_ASSERT(job->net.recvs > 0);
            ucp_worker_progress(job->net.worker);
            if (!coll_list_empty(&job->net.events) || job->net.pending_status != COLL_OK) {
                return 1;
            }
        }
        if (uv_hrtime() >= deadline) {
            return 0;
        }
        sched_yield();
    }
}

/* The window ended: each job that spun is driven as after a wake-up (what arrived to the
 * engine, its worker armed); a drive that handed completions may want the next window. */
static int leave(coll_daemon_t *d)
{
    coll_job_t *job, *tmp;
    int again = 0;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (job->net.window && job->net.driving) {
            job->net.window = 0;
            job->net.driving = 0;
            coll_transport_drive(job);
        }
    }
    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        again |= job->net.window;
    }
    return again;
}

static void idle_cb(uv_idle_t *h)
{
    coll_daemon_t *d = h->data;
    int arrived;

    if (enter(d) == 0) {
        uv_idle_stop(h);
        return;
    }
    coll_loopwatch_enter("polling UCX for a window", "");
    arrived = spin(d, uv_hrtime() + d->cfg.poll_window_us * 1000u);
    coll_loopwatch_leave();
    coll_stats_poll_window(&d->stats, arrived);
    if (!leave(d)) {
        uv_idle_stop(h);
    }
}

void coll_pollwin_want(coll_job_t *job)
{
    coll_daemon_t *d = job->d;

    if (d->cfg.poll_window_us == 0 || job->net.worker == NULL || job->net.recvs == 0 ||
        job->closing || d->pollwin.loop == NULL || uv_is_closing((uv_handle_t *)&d->pollwin)) {
        return;
    }
    job->net.window = 1;
    uv_idle_start(&d->pollwin, idle_cb);
}
