/**
 * @file dev_pools.h
 * @brief A job's device pools on this node: one per device, made at the job's first allocation
 *        there and charged to that device's budget (core/devices.h), with which of its chunks
 *        each local rank was sent; and which of the job's pools a submission names.
 *
 * Pool ids (the wire's MemFree.pool, Submit.pool and the control block's submissions): 0 is the
 * job's host pool, 1 + d the pool on device d of this daemon. Loop thread only.
 */
#ifndef COLL_CORE_DEV_POOLS_H
#define COLL_CORE_DEV_POOLS_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "device/dev.h"

/** Which pair of a device pool's streams a staged copy goes on (coll_dev_pool_streams()): the
 *  copies in (device to host) or the copies back (host to device). */
enum { COLL_DEV_POOL_IN = 0, COLL_DEV_POOL_BACK = 1 };

/** Polls a pool keeps idle for the next operations (coll_dev_pool_poll_put()). */
#define COLL_DEV_POOL_POLLS_KEPT 4

/** Streams a pool keeps idle for the next operations' device waits (coll_dev_pool_wait_put()):
 *  as many as eight local ranks' spans in place take (a pair each). */
#define COLL_DEV_POOL_WAITS_KEPT 16

/** What an operation on a pool's device polls its work with: an event on the pool's device and
 *  a timer of the loop (coll_dev_pool_poll_get()), kept by the pool between operations, as
 *  creating an event costs a driver call. */
typedef struct coll_dev_poll {
    coll_dev_event_t event;
    uv_timer_t *timer;          /**< initialized on the loop; its data the taker's */
    struct coll_dev_poll *next; /**< the pool's next idle one */
} coll_dev_poll_t;

/** A job's pool on one device. */
typedef struct coll_dev_pool {
    int device;      /**< the daemon's index of it */
    coll_pool_t *pool;
    uint32_t *sent;  /**< by local rank: chunks of the pool that rank was sent */
    coll_dev_stream_t streams[2][2]; /**< the staged path's copies, [COLL_DEV_POOL_IN or
                                          COLL_DEV_POOL_BACK][either of the pair]
                                          (coll_dev_pool_streams()), NULL until made */
    uint32_t peers;  /**< bit d: device d was granted access to the daemon's mapping of the
                          pool, now and as it grows (coll_dev_pool_join_peers()) */
    coll_dev_poll_t *idle; /**< polls kept for the next operations, at most
                                COLL_DEV_POOL_POLLS_KEPT (nidle) */
    uint32_t nidle;
    coll_dev_stream_t waits[COLL_DEV_POOL_WAITS_KEPT]; /**< idle streams for device waits on
                                                          the ranks' ready words
                                                          (coll_dev_pool_wait_get()), nwaits */
    uint32_t nwaits;
} coll_dev_pool_t;

/**
 * @brief The job's pool on @p device, made now when it has none: a range of the device's
 *        budget (device_pool_budget), growing as allocations need (core/pool_device.c).
 * @param [out] err Why not, for the rank (with the device layer's words).
 * @return COLL_OK and the pool in *dp_p; COLL_ERR_NOMEM, or the device's error.
 */
coll_status_t coll_dev_pool_get(coll_job_t *job, int device, coll_dev_pool_t **dp_p, char *err,
                                size_t errlen);

/**
 * @brief Make @p dp, a new pool, and the other pools of @p pools (a job's, by device; @p dp
 *        among them or not) peers where their devices can access each other's memory both
 *        ways (the device layer's peer_access(): P2P over NVLink or PCIe): each device is
 *        granted access to the other's pool in the daemon (coll_pool_grant()) and recorded in
 *        that pool's peers, so the one-node device algorithm reads and writes both from
 *        either device's stream (coll_devc_lane_pool()). A pair without peer access, or whose
 *        grant the driver refuses (logged as a warning, with the layer's words), is left out:
 *        its operations stay on the staged path. Loop thread only.
 * @param ops The daemon's device layer.
 */
void coll_dev_pool_join_peers(const coll_dev_ops_t *ops, coll_dev_pool_t *const *pools,
                              coll_dev_pool_t *dp);

/**
 * @brief The chunks of @p dp that local rank @p local has not been sent, marked sent.
 * @param [out] chunks At most COLL_FRAME_MAX_FDS.
 * @return How many.
 */
size_t coll_dev_pool_unsent(coll_dev_pool_t *dp, uint32_t local, coll_pool_chunk_t *chunks);

/** @brief Free everything @p owner (local rank @p local) holds in the job's device pools; a
 *         rank that joins in its place is sent every chunk again. */
void coll_dev_pools_leave(coll_job_t *job, const void *owner, uint32_t local);

/**
 * @brief The four streams the staged path copies @p dp's buffers on (engine/dev_staged.h): a
 *        pair for the copies in (device to host) and a pair for the copies back (host to
 *        device), so that a pipelined operation's copies back run beside its later copies in
 *        (a GPU has a copy engine for each direction, and only work on different streams
 *        overlaps). Those not made yet are made now with @p ops (the daemon's device layer),
 *        and live until coll_dev_pool_streams_destroy().
 * @param [out] streams_p The pairs, [COLL_DEV_POOL_IN or COLL_DEV_POOL_BACK][2], on success.
 * @param [out] err       Why not (the device layer's words).
 * @return COLL_OK; the device layer's error (a stream could not be made: those made before it
 *         are kept, and a later call makes the rest).
 */
coll_status_t coll_dev_pool_streams(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                                    coll_dev_stream_t (**streams_p)[2], char *err,
                                    size_t errlen);

/** @brief Destroy the streams of @p dp that were made (@p ops: the device layer that made
 *         them), leaving them NULL; their work is done (the staged path waits for every copy it
 *         queues). */
void coll_dev_pool_streams_destroy(const coll_dev_ops_t *ops, coll_dev_pool_t *dp);

/**
 * @brief A poll of work on @p dp's device: one the pool kept idle, or a new one (an event made
 *        with @p ops, a timer initialized on @p loop). Give it back with coll_dev_pool_poll_put().
 * @return COLL_OK and it in *@p poll_p; COLL_ERR_NOMEM; the device layer's error (no event:
 *         coll_dev_error() says why).
 */
coll_status_t coll_dev_pool_poll_get(const coll_dev_ops_t *ops, uv_loop_t *loop,
                                     coll_dev_pool_t *dp, coll_dev_poll_t **poll_p);

/**
 * @brief Give @p poll back to @p dp once the work it polled is done (its event may be recorded
 *        again): its timer is stopped and it is kept for the next operation, or destroyed
 *        (event destroyed, timer closed) where the pool keeps COLL_DEV_POOL_POLLS_KEPT already.
 *        Safe with NULL.
 */
void coll_dev_pool_poll_put(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                            coll_dev_poll_t *poll);

/** @brief Destroy the polls @p dp keeps idle (@p ops: the layer that made their events), their
 *         timers closed on their loop (freed by its next turn). */
void coll_dev_pool_polls_free(const coll_dev_ops_t *ops, coll_dev_pool_t *dp);

/**
 * @brief A stream of @p dp's device for an operation's own work behind device waits on the
 *        ranks' ready words (engine/dev_staged.c): one the pool kept idle, or one made now with
 *        @p ops, as creating a stream costs a driver call. Give it back with
 *        coll_dev_pool_wait_put() once its work is done, or destroy it. Loop thread only.
 * @return COLL_OK and it in *@p s_p; the device layer's error (coll_dev_error() says why).
 */
coll_status_t coll_dev_pool_wait_get(const coll_dev_ops_t *ops, coll_dev_pool_t *dp,
                                     coll_dev_stream_t *s_p);

/**
 * @brief Give stream @p s (coll_dev_pool_wait_get()) back to @p dp, a pool on a device of
 *        @p ds: kept for the next operation, or destroyed where the pool keeps
 *        COLL_DEV_POOL_WAITS_KEPT already, or where the device is out of service (a fault,
 *        coll_device_fault(): nothing takes its streams again, and the driver's context keeps
 *        its error), with the streams the pool kept idle. Only a stream whose waits passed
 *        (every word it waits for is stored): one still held by a wait for a word that may
 *        never come must be destroyed instead, never kept, or the next operation's work would
 *        queue behind that wait. Safe with NULL. Loop thread only.
 */
void coll_dev_pool_wait_put(const coll_devices_t *ds, coll_dev_pool_t *dp, coll_dev_stream_t s);

/** @brief Destroy the streams @p dp keeps idle for device waits (@p ops: the layer that made
 *         them). */
void coll_dev_pool_waits_free(const coll_dev_ops_t *ops, coll_dev_pool_t *dp);

/** @brief Destroy the job's device pools, giving their memory and budget back (with the polls
 *         and wait streams they keep: the polls' timers closed on the loop). */
void coll_dev_pools_destroy(coll_job_t *job);

/** @return The job's pool of id @p id (0 the host pool, 1 + d device d's), NULL when it has
 *          none such. */
coll_pool_t *coll_job_pool_by_id(const coll_job_t *job, uint32_t id);

#endif
