/**
 * @file transport.h
 * @brief UCX between the daemons of a job: one context per daemon, one worker per job (so the
 *        tags of one job never meet another's), endpoints created on first use, and the worker's
 *        event fd polled by the libuv loop (ucp_worker_get_efd + ucp_worker_arm).
 *
 * Completions never run engine code from inside UCX: a callback records the result in the
 * transfer and queues it on job->events; coll_transport_drive() empties the queue after
 * progress. This keeps engine code out of UCX's call stack and bounds recursion.
 */
#ifndef COLL_TRANSPORT_H
#define COLL_TRANSPORT_H

#include "daemon.h"
#include "job.h"
#include "op.h"

/** @brief Create the daemon's UCX context (reads UCX_* environment). */
coll_status_t coll_transport_init(coll_daemon_t *d);

/** @brief Release the UCX context. Safe when init failed. */
void coll_transport_cleanup(coll_daemon_t *d);

/**
 * @brief Create the job's worker, its address and the loop poll on its event fd.
 * @return COLL_OK or COLL_ERR_TRANSPORT (logged).
 */
coll_status_t coll_transport_job_open(coll_job_t *job);

/**
 * @brief Say goodbye to the other nodes (when the job ends cleanly), cancel what is posted,
 *        close the endpoints with a flush (an abort or our last segments still reach their
 *        node) and, once the closes and transfers finished or a deadline passed, destroy the
 *        worker and call coll_job_release(). Returns at once; the loop does the rest.
 */
void coll_transport_job_close(coll_job_t *job);

/**
 * @brief Register the job's pool with UCX once (ucp_mem_map); transfers from and to the pool
 *        then pass the handle. @return COLL_OK or COLL_ERR_TRANSPORT (logged).
 */
coll_status_t coll_transport_register_pool(coll_job_t *job);

/** @brief Undo coll_transport_register_pool(). Safe when it failed or never ran. */
void coll_transport_unregister_pool(coll_job_t *job);

/** @brief Create an endpoint to @p node of @p job. */
coll_status_t coll_transport_connect(coll_job_t *job, uint32_t node, ucp_ep_h *ep_p);

/**
 * @brief Post a tagged send of @p len bytes at @p buf to @p node; completion is queued.
 * @return COLL_OK when posted; an error (the job is failed by the caller).
 */
coll_status_t coll_transport_send(coll_job_t *job, uint32_t node, uint64_t tag, const void *buf,
                                  size_t len, coll_xfer_t *x);

/**
 * @brief Post a tagged receive of up to @p len bytes into @p buf; completion is queued.
 *        @p from is the node expected to send it (tags match any source; this names the node
 *        whose loss makes the receive hopeless).
 */
coll_status_t coll_transport_recv(coll_job_t *job, uint32_t from, uint64_t tag, void *buf,
                                  size_t len, coll_xfer_t *x);

/** @brief Cancel a posted receive; its completion still arrives (with UCS_ERR_CANCELED). */
void coll_transport_cancel(coll_job_t *job, coll_xfer_t *x);

/**
 * @brief Progress the worker and run the engine on completed transfers until nothing is left,
 *        then arm the worker's event fd. Call after posting work from outside a poll callback.
 */
void coll_transport_drive(coll_job_t *job);

#endif
