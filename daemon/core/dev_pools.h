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

/** A job's pool on one device. */
typedef struct coll_dev_pool {
    int device;      /**< the daemon's index of it */
    coll_pool_t *pool;
    uint32_t *sent;  /**< by local rank: chunks of the pool that rank was sent */
    coll_dev_stream_t streams[2]; /**< the staged path's copies (coll_dev_pool_streams()), NULL
                                       until the first */
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
 * @brief The chunks of @p dp that local rank @p local has not been sent, marked sent.
 * @param [out] chunks At most COLL_FRAME_MAX_FDS.
 * @return How many.
 */
size_t coll_dev_pool_unsent(coll_dev_pool_t *dp, uint32_t local, coll_pool_chunk_t *chunks);

/** @brief Free everything @p owner (local rank @p local) holds in the job's device pools; a
 *         rank that joins in its place is sent every chunk again. */
void coll_dev_pools_leave(coll_job_t *job, const void *owner, uint32_t local);

/**
 * @brief The two streams the staged path copies @p dp's buffers on (engine/dev_staged.h),
 *        made at the first call and destroyed with the pool.
 * @param [out] streams_p The pair, on success.
 * @param [out] err       Why not (the device layer's words).
 * @return COLL_OK; the device layer's error (its stream could not be made).
 */
coll_status_t coll_dev_pool_streams(coll_dev_pool_t *dp, coll_dev_stream_t **streams_p, char *err,
                                    size_t errlen);

/** @brief Destroy the job's device pools, giving their memory and budget back. */
void coll_dev_pools_destroy(coll_job_t *job);

/** @return The job's pool of id @p id (0 the host pool, 1 + d device d's), NULL when it has
 *          none such. */
coll_pool_t *coll_job_pool_by_id(const coll_job_t *job, uint32_t id);

#endif
