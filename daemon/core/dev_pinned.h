/**
 * @file dev_pinned.h
 * @brief The daemon's cache of page-locked host buffers per device, for the staged path's host
 *        copies (engine/dev_staged.h): locking host memory with the driver (the device
 *        layer's host_alloc, cuMemHostAlloc) takes milliseconds a call, so a buffer an
 *        operation gives back stays locked, idle, for the next operation of any job on the same
 *        device. Sizes are rounded up to a power of two (at least COLL_PINNED_MIN_BYTES), and a
 *        take reuses an idle buffer of exactly that size. The idle buffers of a device hold at
 *        most staged_pinned_cache_bytes together and COLL_PINNED_SLOTS of them (the oldest is
 *        freed first); one idle longer than staged_pinned_idle_ms is freed by a timer of the
 *        loop, and all of them at shutdown. Buffers in use are the operations', counted apart
 *        (used). Loop thread only.
 */
#ifndef COLL_CORE_DEV_PINNED_H
#define COLL_CORE_DEV_PINNED_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "device/dev.h"

/** Idle buffers one device's cache keeps at most. */
#define COLL_PINNED_SLOTS 32
/** The smallest buffer the cache hands out, bytes. */
#define COLL_PINNED_MIN_BYTES ((size_t)64 << 10)

/** One idle buffer. */
typedef struct {
    void *p;
    size_t bytes;
    uint64_t since_ms; /**< the loop's time (uv_now) it went idle */
} coll_pinned_slot_t;

/** One device's idle buffers and counters. */
typedef struct {
    coll_pinned_slot_t slot[COLL_PINNED_SLOTS]; /**< slot[0 .. n), oldest first */
    uint32_t n;
    uint64_t held;   /**< bytes of the idle buffers */
    uint64_t used;   /**< bytes of the buffers taken and not given back (the operations') */
    uint64_t hits;   /**< takes served by an idle buffer */
    uint64_t misses; /**< takes that asked the device layer (whether it locked or refused) */
} coll_pinned_dev_t;

/** The caches of a daemon's devices. */
typedef struct {
    const coll_dev_ops_t *ops; /**< the device layer (NULL: none, nothing is cached) */
    uv_loop_t *loop;           /**< the loop of the idle timer; NULL until configured */
    uint64_t limit;            /**< staged_pinned_cache_bytes: idle bytes kept per device */
    uint64_t idle_ms;          /**< staged_pinned_idle_ms */
    uv_timer_t *timer;         /**< frees buffers idle too long; NULL until one went idle,
                                    freed by its close callback */
    coll_pinned_dev_t dev[COLL_DEV_MAX];
} coll_pinned_t;

/**
 * @brief Set the bounds (start-up and reload): @p limit idle bytes per device (0: nothing is
 *        kept, every buffer is freed when given back), idle buffers freed after @p idle_ms on
 *        @p loop. Idle buffers beyond the new limit are freed now.
 */
void coll_pinned_configure(coll_pinned_t *pc, uv_loop_t *loop, uint64_t limit,
                           uint64_t idle_ms);

/** @return The size a take of @p bytes (> 0) hands out: a power of two of at least
 *          COLL_PINNED_MIN_BYTES, or @p bytes rounded up to 64 where that is beyond the limit
 *          (never kept). */
size_t coll_pinned_size(const coll_pinned_t *pc, size_t bytes);

/**
 * @brief A page-locked buffer of at least @p bytes (> 0) on device @p dev: an idle one of the
 *        cache (a hit), else one from the device layer's host_alloc (a miss; when it refuses
 *        for want of memory while the device has idle buffers, they are freed and it is asked
 *        again).
 * @param [out] p_p   The buffer, the caller's until coll_pinned_give().
 * @param [out] cap_p Its size (coll_pinned_size()), to give back with it.
 * @return COLL_OK; host_alloc's error (COLL_ERR_NOMEM when the driver locks no more: the
 *         caller may use ordinary memory; coll_dev_error() says why).
 */
coll_status_t coll_pinned_take(coll_pinned_t *pc, int dev, size_t bytes, void **p_p,
                               size_t *cap_p);

/**
 * @brief Give back a buffer of coll_pinned_take() (@p p of @p cap bytes, device @p dev): kept
 *        idle within the bounds (older idle buffers freed to make room), else freed. The
 *        device layer must be done with it (no copy into or out of it in flight).
 */
void coll_pinned_give(coll_pinned_t *pc, int dev, void *p, size_t cap);

/** @brief Free every idle buffer and close the timer (daemon shutdown); buffers given back
 *         later are freed at once. Safe to call more than once. */
void coll_pinned_close(coll_pinned_t *pc);

#endif
