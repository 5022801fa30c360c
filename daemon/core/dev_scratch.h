/**
 * @file dev_scratch.h
 * @brief Scratch memory on a device for the daemon's own use while one operation runs (the
 *        NCCL path's reduce-scatter of several local ranks): a physical allocation of the
 *        device layer mapped into a range of its own, charged to the device's budget
 *        (device_pool_budget) while it lives. Never shared with the ranks. Loop thread only.
 */
#ifndef COLL_CORE_DEV_SCRATCH_H
#define COLL_CORE_DEV_SCRATCH_H

#include <stddef.h>
#include <stdint.h>

#include "core/pool.h"
#include "device/dev.h"

/** One scratch allocation; all zero is none. */
typedef struct {
    const coll_dev_ops_t *ops;
    coll_pool_budget_t *budget; /* charged bytes while it lives */
    coll_dev_mem_t mem;
    uint64_t va;                /* its device address; 0: none */
    size_t bytes;               /* mapped and charged: the request rounded to the granularity */
} coll_dev_scratch_t;

/**
 * @brief Allocate @p bytes (> 0) of device memory on device @p dev of @p ops, charged to
 *        @p budget.
 * @param [out] s Set on success only; free with coll_dev_scratch_free().
 * @return COLL_OK; COLL_ERR_NOMEM when @p budget has no room for it (coll_dev_error() says so)
 *         or the device none; the device layer's error (coll_dev_error() has its words);
 *         nothing is left allocated on an error.
 */
coll_status_t coll_dev_scratch_alloc(const coll_dev_ops_t *ops, int dev,
                                     coll_pool_budget_t *budget, size_t bytes,
                                     coll_dev_scratch_t *s);

/** @brief Unmap and release @p s and give its charge back; the device's work on it must be
 *         complete. Safe with none (all zero), and twice. */
void coll_dev_scratch_free(coll_dev_scratch_t *s);

#endif
