/**
 * @file loopwatch.h
 * @brief Finds event-loop stalls: a callback that keeps the loop thread longer than a bound.
 *
 * The loop runs a timer every bound / 4 that records the time (the loop's pulse). A monitor
 * thread looks at the pulse as often; a pulse older than the bound means one callback has held
 * the loop that long (a blocked loop still runs its timers, so sleeping in epoll never looks
 * like a stall). The monitor logs the stall once while it lasts, with what the loop was doing
 * (set by coll_loopwatch_enter() around the work that may take long). When the loop turns, its
 * pulse timer finds the gap since the last pulse: one longer than the bound is a stall, counted
 * and logged with its whole length, the longest kept for /metrics. So the count, the maximum
 * and the logs agree, and a stall the monitor could not see (the whole process stopped) counts.
 * The monitor's own lateness tells the two apart: where it was not run either (a look later
 * than two periods) for all of the stall but the bound, the whole process was held (a loaded
 * host, a stop, a suspended machine), and both messages say so instead of blaming a callback.
 *
 * One watch per process (the daemon has one loop). enter/leave cost an uncontended lock and a
 * short copy, and may be called when no watch runs (unit tests).
 */
#ifndef COLL_LOOPWATCH_H
#define COLL_LOOPWATCH_H

#include <stdint.h>
#include <uv.h>

#include <collective.h>

/**
 * @brief Start watching @p loop: the pulse timer on the loop and the monitor thread.
 * @param stall_ms Bound of one callback, ms (10 .. 60000).
 * @return COLL_OK, or COLL_ERR_NOMEM when the thread cannot start (logged).
 *         Call from the loop thread; at most once until coll_loopwatch_stop().
 */
coll_status_t coll_loopwatch_start(uv_loop_t *loop, uint64_t stall_ms);

/** @brief Stop the monitor thread (joined) and close the timer. Safe when not started. */
void coll_loopwatch_stop(void);

/**
 * @brief Say what the loop thread is about to do, for a stall message: "@p what @p detail"
 *        (copied; cut at 127 bytes). Loop thread only.
 */
void coll_loopwatch_enter(const char *what, const char *detail);

/** @brief The work named by coll_loopwatch_enter() ended. */
void coll_loopwatch_leave(void);

/** @return Stalls seen since start (each counted once, however long it lasted). */
uint64_t coll_loopwatch_stalls(void);

/** @return The longest stall since start, seconds: the gap between two turns of the loop's
 *          pulse (a callback's hold plus at most bound / 4); 0 while no stall was counted. */
double coll_loopwatch_longest_s(void);

#endif
