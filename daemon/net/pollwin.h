/**
 * @file pollwin.h
 * @brief The polling window: while a job waits for a UCX receive it posted, the loop, after
 *        its turn, progresses the job's worker in a tight loop for at most poll_window_us
 *        instead of sleeping on the worker's event fd, so a message that arrives within the
 *        window costs no wake-up of the daemon.
 *
 * A job asks for a window (coll_pollwin_want(), called by the transport) when a drive handed
 * completions to the engine while receives stay posted (between the rounds of an operation,
 * not at its start, when the peers may not have submitted yet). The window runs from a
 * uv_idle handle, active only while a window is wanted: the loop then polls its sockets and
 * timers with a zero timeout between two windows. It progresses the workers of
 * the jobs that want one until a transfer completed (or a failure was recorded) or the window
 * ended, then drives those jobs (completions to the engine, workers armed) and returns to the
 * loop. A window that ended with nothing is not asked for again until a completion came
 * through the event fd: a job that waits for a slow peer spins at most one window per message
 * it received, and never while it has no receive posted. poll_window_us = 0 (the
 * default): no window, the loop always sleeps on the event fd.
 *
 * Loop thread only. Counted in collectived_poll_window_entries_total and
 * collectived_poll_window_completions_total (core/stats.h).
 */
#ifndef COLL_NET_POLLWIN_H
#define COLL_NET_POLLWIN_H

#include "core/daemon.h"
#include "core/job.h"

/** @brief Create the window's idle handle on the daemon's loop (not started). */
void coll_pollwin_start(coll_daemon_t *d);

/** @brief Close the handle (shutdown). Safe when never started and when called twice. */
void coll_pollwin_stop(coll_daemon_t *d);

/** @brief @p job wants a window after this turn of the loop; ignored when poll_window_us is 0,
 *         the job has no worker or no receive posted, or it is closing. */
void coll_pollwin_want(coll_job_t *job);

#endif
