/**
 * @file dev_staged_copy.h
 * @brief The staged path's copies between a device buffer and its host copy
 *        (engine/dev_staged.h): a copy is cut into chunks queued in order, alternately on the
 *        two streams of the device pool, so that the chunks of one copy, and the copies of
 *        several buffers, run side by side where the device has the copy engines for it; the
 *        caller then records an event on both streams and polls them (the daemon's loop)
 *        before the host copy is read or the device buffer is handed back.
 */
#ifndef COLL_ENGINE_DEV_STAGED_COPY_H
#define COLL_ENGINE_DEV_STAGED_COPY_H

#include <stdint.h>

#include "device/dev.h"

/** Bytes of one chunk of a staged copy (the last is shorter). */
#define COLL_DEV_STAGED_CHUNK_BYTES ((uint64_t)4 << 20)

/** One chunk of a copy: bytes [off, off + len) of it, queued on stream @c stream (0 or 1). */
typedef struct {
    uint64_t off;
    uint64_t len;
    unsigned stream;
} coll_dev_staged_chunk_t;

/** @return The chunks of a copy of @p bytes in chunks of @p chunk bytes (> 0): 0 for 0 bytes. */
uint64_t coll_dev_staged_nchunks(uint64_t bytes, uint64_t chunk);

/** @return Chunk @p i (below coll_dev_staged_nchunks()) of a copy of @p bytes: chunk i covers
 *          [i * chunk, min(bytes, (i + 1) * chunk)) and goes on stream i % 2. */
coll_dev_staged_chunk_t coll_dev_staged_chunk(uint64_t bytes, uint64_t chunk, uint64_t i);

/**
 * @brief Queue the copy of @p bytes from @p src to @p dst (a device address and a host
 *        pointer as uint64_t, either way) chunk by chunk on @p streams[0] and @p streams[1] of
 *        @p ops. Nothing waits: the caller polls events recorded after the copy.
 * @return COLL_OK; the device layer's error of the first chunk it refused (coll_dev_error()
 *         says why; the chunks before it are queued, so wait for the streams still).
 */
coll_status_t coll_dev_staged_queue(const coll_dev_ops_t *ops, coll_dev_stream_t *streams,
                                    uint64_t dst, uint64_t src, uint64_t bytes, uint64_t chunk);

/**
 * @brief Wait, blocking, until everything queued on both @p streams is done (both are waited
 *        for even when the first fails). Not on the normal path (the loop polls events): for
 *        host copies freed while copies into them may still run (a failed job).
 * @return COLL_OK, or the device layer's error (coll_dev_error()).
 */
coll_status_t coll_dev_staged_wait(const coll_dev_ops_t *ops, coll_dev_stream_t *streams);

#endif
