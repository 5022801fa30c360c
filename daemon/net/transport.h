/**
 * @file transport.h
 * @brief UCX between the daemons of a job: one context per daemon, one worker per job (so the
 *        tags of one job never meet another's), endpoints created on first use, the job's pool
 *        registered once, and the worker's event fd polled by the libuv loop
 *        (ucp_worker_get_efd + ucp_worker_arm).
 *
 * Completions never run engine code from inside UCX: a callback records the result in the
 * transfer and queues it on job->net.events; coll_transport_drive() empties the queue after
 * progress, handing each transfer to the callback the engine gave coll_transport_job_open().
 * Every drive is bounded, so no callback holds the loop.
 */
#ifndef COLL_NET_TRANSPORT_H
#define COLL_NET_TRANSPORT_H

#include <ucp/api/ucp.h>

#include "base/list.h"
#include "core/daemon.h"
#include "core/job.h"

struct coll_op;

/** A message in flight on UCX. Embedded in the engine's algorithm state; no allocation per
 *  message. The transport fills job, req, completed, status and length; the rest is the
 *  engine's. */
typedef struct coll_xfer {
    coll_list_t link;     /**< the transport's: in job->net.posted while UCX has it, then in
                               job->net.events once completed (free for the engine after) */
    coll_list_t posted;   /**< the engine's: in its operation's list while in flight */
    struct coll_op *op;   /**< the engine's operation (never looked into here) */
    coll_job_t *job;      /**< set when posted */
    void *req;            /**< UCX request while in flight, else NULL */
    uint8_t kind;         /**< COLL_TAG_* */
    uint8_t is_send;
    uint8_t completed;    /**< UCX reported completion (it may still wait in job->net.events) */
    uint8_t suspect;      /**< a receive from a gone node seen pending by one check already */
    uint8_t feature;      /**< the engine's: 1 + the index of the operation's feature that
                               posted it (engine/feature.h), 0 for the others */
    uint16_t slot;        /**< algorithm's own index (buffer, column) */
    uint32_t step;
    uint32_t peer;        /**< node sent to, or expected to send */
    size_t expect;        /**< bytes a receive must bring */
    ucs_status_t status;
    size_t length;        /**< bytes received */
} coll_xfer_t;

/** What the engine wants called. */
typedef struct coll_transport_hooks {
    /** A transfer completed (or failed, or was cancelled: x->status). Outside UCX's stack. */
    void (*on_xfer)(coll_xfer_t *x);
    /** A peer node's goodbye named the rank whose leaving ended that node's part of the job
     *  (@p who, "rank R (pid P) on node N", NUL-terminated, the caller's): no collective of
     *  the job that includes it can run any more. From the job messages' handler (UCX's
     *  stack). */
    void (*on_node_left)(coll_job_t *job, const char *who);
} coll_transport_hooks_t;

/** @brief Create the daemon's UCX context (reads UCX_* environment). */
coll_status_t coll_transport_init(coll_daemon_t *d);

/** @brief Release the UCX context. Safe when init failed. */
void coll_transport_cleanup(coll_daemon_t *d);

/** @brief The transport's part of every job, with or without other nodes: its timer (one uv
 *         handle more in job->handles). Call once, when the job is created. */
void coll_transport_job_init(coll_job_t *job);

/**
 * @brief Create the job's worker, its address, the loop poll on its event fd and the job
 *        messages' handler (net/control.h), and register the job's pool (ucp_mem_map);
 *        completions go to @p hooks. For a job with other nodes, after coll_transport_job_init().
 * @return COLL_OK or COLL_ERR_TRANSPORT (logged).
 */
coll_status_t coll_transport_job_open(coll_job_t *job, const coll_transport_hooks_t *hooks);

/**
 * @brief Say goodbye to the other nodes (when the job ends cleanly), close the endpoints with a
 *        flush (an abort or our last segments still reach their node) and, once the closes and
 *        transfers finished (or a deadline passed) and nothing holds the job's memory
 *        (job->holds), cancel and release every UCX request still out, hand each transfer
 *        still in flight to the engine (cancelled), destroy the worker and call the closed
 *        hook (net/teardown.h). Returns at once; the loop does the rest, in at most 2.3 s plus
 *        the wait for job->holds. Without a worker the hook runs once nothing holds the job's
 *        memory. The engine has cancelled its receives before.
 */
void coll_transport_job_close(coll_job_t *job);

/** @return The job's endpoint to @p node, created on first use; NULL when that failed (the job
 *          failed, logged). */
ucp_ep_h coll_transport_ep(coll_job_t *job, uint32_t node);

/**
 * @brief Create the endpoints to every other node now, while the rendezvous has just shown
 *        them reachable. UCX's TCP transport connect()s inside ucp_ep_create(), blocking the
 *        loop on an unreachable peer, so a job's messages after a failure (aborts, blame) go
 *        only to endpoints that exist (net/control.c) and never create one.
 * @return COLL_OK, or COLL_ERR_TRANSPORT (the job failed, logged).
 */
coll_status_t coll_transport_connect_all(coll_job_t *job);

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
 * @brief Whether a message of exactly @p tag waits in the job's worker with no receive posted
 *        for it (it arrived before, or without, the operation that would take it). Leaves it
 *        there; sees what the last progress (coll_transport_drive()) brought in.
 * @return 1 when one waits, 0 otherwise (or without a worker).
 */
int coll_transport_unexpected(coll_job_t *job, uint64_t tag);

/**
 * @brief Take a message of exactly @p tag that waits unexpected (coll_transport_unexpected())
 *        into @p buf (at most @p len bytes), for a job that fails: it is no longer there for a
 *        receive. @p buf must stay valid as long as the job's worker: a message UCX does not
 *        hand over at once is written there later.
 * @return The bytes received now; 0 when none waits, it was longer than @p len, or it did not
 *         arrive at once.
 */
size_t coll_transport_take(coll_job_t *job, uint64_t tag, void *buf, size_t len);

/**
 * @brief Progress the worker and hand completed transfers to the engine, boundedly, then arm
 *        the worker's event fd (or drive again from the loop when it stays busy). Call after
 *        posting work from outside a poll callback. No-op without a worker.
 */
void coll_transport_drive(coll_job_t *job);

#endif
