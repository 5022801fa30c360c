/**
 * @file workers.h
 * @brief A few kernel threads for reductions too large for one core: a 256 MiB local reduce
 *        is memory bound, and one core reaches only about half the machine's memory bandwidth.
 *
 * The loop thread hands out the pieces of one reduction and goes back to serving sockets and
 * UCX; the workers sleep on a condition variable when idle (no spinning: on a machine with more
 * busy threads than cores a spinning thread steals the core of the one it waits for). Each
 * finished piece is counted; the last one wakes the loop with uv_async_send, which runs the
 * task's completion on the loop thread. Small reductions never come here: a hand-off costs
 * tens of microseconds.
 */
#ifndef COLL_WORKERS_H
#define COLL_WORKERS_H

#include <stdint.h>
#include <uv.h>

#include "base/list.h"
#include "core/daemon.h"

struct coll_task;

/** A reduction split into @c nparts pieces. Owned by its submitter until @c done runs. */
typedef struct coll_task {
    coll_list_t link;            /**< queued, then finished (loop-owned lists) */
    uint32_t nparts;             /**< pieces; run(task, 0 .. nparts-1) */
    uint32_t next_part;          /**< next piece to hand out (under the pool lock) */
    uint32_t parts_done;         /**< finished pieces (under the pool lock) */
    /** Do piece @p part. Runs on a worker thread: touch only the task's own memory. */
    void (*run)(struct coll_task *task, uint32_t part);
    /** Every piece finished. Runs on the loop thread. */
    void (*done)(struct coll_task *task);
} coll_task_t;

/**
 * @brief Start @p nthreads workers (0: none; coll_workers_submit() then runs tasks inline).
 * @return COLL_OK; COLL_ERR_NOMEM when a thread cannot be created (logged).
 */
coll_status_t coll_workers_start(coll_daemon_t *d, unsigned nthreads);

/** @brief Stop and join the workers; queued tasks are finished first. Loop thread only. */
void coll_workers_stop(coll_daemon_t *d);

/** @return The number of workers (0 when none). */
unsigned coll_workers_count(const coll_daemon_t *d);

/**
 * @brief Run @p task's pieces on the workers (the loop thread takes no piece); @c done follows
 *        on the loop thread. Without workers the pieces run inline and @c done is called before
 *        this returns. Loop thread only.
 */
void coll_workers_submit(coll_daemon_t *d, coll_task_t *task);

#endif
