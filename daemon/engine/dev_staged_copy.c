/*
 * The staged path's chunked copies (dev_staged_copy.h). Chunk i goes on stream i % 2 so that two
 * chunks are in flight at a time; the order within each stream is the chunks' order.
 */
#include "engine/dev_staged_copy.h"

#include "common/assert.h"

uint64_t coll_dev_staged_nchunks(uint64_t bytes, uint64_t chunk)
{
    COLL_ASSERT(chunk > 0);
    return bytes / chunk + (bytes % chunk != 0);
}

coll_dev_staged_chunk_t coll_dev_staged_chunk(uint64_t bytes, uint64_t chunk, uint64_t i)
{
    uint64_t off = i * chunk;

    COLL_ASSERT(i < coll_dev_staged_nchunks(bytes, chunk));
    return (coll_dev_staged_chunk_t){off, bytes - off < chunk ? bytes - off : chunk,
                                     (unsigned)(i % 2)};
}

coll_status_t coll_dev_staged_queue(const coll_dev_ops_t *ops, coll_dev_stream_t *streams,
                                    uint64_t dst, uint64_t src, uint64_t bytes, uint64_t chunk)
{
    uint64_t n = coll_dev_staged_nchunks(bytes, chunk);
    coll_status_t st = COLL_OK;

    for (uint64_t i = 0; i < n && st == COLL_OK; i++) {
        coll_dev_staged_chunk_t c = coll_dev_staged_chunk(bytes, chunk, i);
        st = ops->copy_async(dst + c.off, src + c.off, c.len, streams[c.stream]);
    }
    return st;
}

coll_status_t coll_dev_staged_wait(const coll_dev_ops_t *ops, coll_dev_stream_t *streams)
{
    coll_status_t a = ops->stream_sync(streams[0]);
    coll_status_t b = ops->stream_sync(streams[1]);

    return a != COLL_OK ? a : b;
}
