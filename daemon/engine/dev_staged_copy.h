/**
 * @file dev_staged_copy.h
 * @brief The staged path's copies between a device buffer and its host copy
 *        (engine/dev_staged.h): which bytes of a local member's buffers are copied (its
 *        extents: what it reads is copied in, what it writes is copied back, and nothing
 *        else), and how: a copy is cut into chunks queued in order, alternately on the two
 *        streams of the device pool for its direction (coll_dev_pool_streams(): a pair in, a
 *        pair back), so that the chunks of one copy, and the copies of several buffers, run
 *        side by side where the device has the copy engines for it; the caller
 *        then records an event on both streams and polls them (the daemon's loop) before the
 *        host copy is read or the device buffer is handed back. A pipelined operation (a large
 *        ring allreduce; a large allreduce, reduce or broadcast on one node) copies its buffers
 *        in batches of its algorithm's pipeline columns, in the order the algorithm starts them,
 *        with events after each batch.
 */
#ifndef COLL_ENGINE_DEV_STAGED_COPY_H
#define COLL_ENGINE_DEV_STAGED_COPY_H

#include <stddef.h>
#include <stdint.h>

#include "device/dev.h"
#include "engine/plan.h"
#include "proto/desc.h"

/** One local member's part in an operation, as its copies depend on it. */
typedef struct {
    coll_kind_t kind;
    uint64_t count;        /**< elements, as the API counts them (coll_kind_extent()) */
    size_t esize;          /**< bytes of an element */
    uint32_t world;        /**< ranks of the communicator */
    uint32_t rank;         /**< the member's rank in it */
    uint32_t root;         /**< the root of a rooted collective */
    const uint64_t *table; /**< an all-to-all's count table (proto/a2a.h, checked at
                                submission); NULL for every other kind */
} coll_dev_staged_member_t;

/** Bytes [off, off + len) of a buffer. */
typedef struct {
    uint64_t off;
    uint64_t len;
} coll_dev_staged_range_t;

/**
 * @brief The bytes of @p m's send buffer copied in (from its start) and of its receive buffer
 *        that its host copy holds: its extents (coll_kind_extent()) in bytes; a send's input
 *        only, a receive's output only; an all-to-all's the end of its furthest send and
 *        receive block of its count table (coll_a2a_extent(); the table was checked).
 */
void coll_dev_staged_extent(const coll_dev_staged_member_t *m, uint64_t *in_p, uint64_t *out_p);

/**
 * @brief The ranges of @p m's receive buffer copied back: its whole receive extent, but an
 *        all-to-all's receive blocks of more than 0 elements only, in the order of their
 *        displacements, adjacent blocks merged (the all-to-all of equal counts gives one
 *        range): the bytes between the blocks are the rank's, not the operation's, and its
 *        host copy holds nothing the device should get there.
 * @param [out] ranges Room for m->world ranges (one for every other kind).
 * @return How many ranges (0: nothing comes back).
 */
uint32_t coll_dev_staged_out_ranges(const coll_dev_staged_member_t *m,
                                    coll_dev_staged_range_t *ranges);

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

/** Bytes of one buffer that a batch of a pipelined staged operation copies at least (one
 *  column at least; the last batch may be shorter). */
#define COLL_DEV_STAGED_BATCH_BYTES ((uint64_t)4 << 20)

/** A pipelined staged operation's batches: runs of @c cols consecutive pipeline columns of its
 *  plan (engine/plan.h), copied in, and back, one after the other. */
typedef struct {
    uint64_t cols;     /**< columns of a batch (the last may have fewer) */
    uint64_t nbatches; /**< batches: every column of the plan in one (0 when it has none) */
} coll_dev_staged_batches_t;

/**
 * @brief The batches of even plan @p plan (an allreduce's, coll_plan_init()) over a buffer of
 *        elements of @p esize bytes: as many whole columns as fit in @p target bytes of the
 *        buffer (a column has a segment of every chunk: nnodes x seg_elems elements), one at
 *        least. Depends on nothing but its arguments.
 */
coll_dev_staged_batches_t coll_dev_staged_batches(const coll_plan_t *plan, size_t esize,
                                                  uint64_t target);

/**
 * @return The elements of chunk @p c (below plan->nnodes) in batch @p b (below bt->nbatches):
 *         the segments of the batch's columns in that chunk, which are adjacent; length 0 where
 *         the chunk ends before the batch's first column.
 */
coll_range_t coll_dev_staged_batch_piece(const coll_plan_t *plan,
                                         const coll_dev_staged_batches_t *bt, uint64_t b,
                                         uint32_t c);

/**
 * @brief Queue the copy of @p bytes from @p src to @p dst (a device address and a host
 *        pointer as uint64_t, either way) chunk by chunk on @p streams[0] and @p streams[1] of
 *        @p ops, alternately from stream *@p turn (0 or 1) on: chunk i on stream
 *        (*@p turn + i) % 2 (coll_dev_staged_chunk()). On return *@p turn is the stream of the
 *        chunk after the last, so that the pieces of a pipelined copy, each shorter than a
 *        chunk, alternate as one copy's chunks do. Nothing waits: the caller polls events
 *        recorded after the copy.
 * @return COLL_OK; the device layer's error of the first chunk it refused (coll_dev_error()
 *         says why; the chunks before it are queued, so wait for the streams still).
 */
coll_status_t coll_dev_staged_queue(const coll_dev_ops_t *ops, coll_dev_stream_t *streams,
                                    uint64_t dst, uint64_t src, uint64_t bytes, uint64_t chunk,
                                    unsigned *turn);

/**
 * @brief Wait, blocking, until everything queued on both @p streams is done (both are waited
 *        for even when the first fails). Not on the normal path (the loop polls events): for
 *        host copies freed while copies into them may still run (a failed job).
 * @return COLL_OK, or the device layer's error (coll_dev_error()).
 */
coll_status_t coll_dev_staged_wait(const coll_dev_ops_t *ops, coll_dev_stream_t *streams);

#endif
