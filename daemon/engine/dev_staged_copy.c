/*
 * The staged path's copies (dev_staged_copy.h): which bytes, and in which chunks. Chunk i goes
 * on stream i % 2 so that two chunks are in flight at a time; the order within each stream is
 * the chunks' order.
 */
#include "engine/dev_staged_copy.h"

#include <stdlib.h>

#include "common/assert.h"
#include "proto/a2a.h"

void coll_dev_staged_extent(const coll_dev_staged_member_t *m, uint64_t *in_p, uint64_t *out_p)
{
    uint64_t se = 0, re = 0;
    uint32_t bad;
    int rc = 0;

    if (m->kind != COLL_KIND_ALLTOALLV) {
        coll_kind_extent(m->kind, m->count, m->world, m->rank, m->root, &se, &re);
    } else {
        rc = coll_a2a_extent(m->table, m->world, m->esize, &se, &re, &bad);
    }
    COLL_ASSERT(rc == 0); /* the submission refused a table whose blocks' ends overflow */
    (void)rc;
    *in_p = se * m->esize;
    *out_p = re * m->esize;
}

static int by_offset(const void *a, const void *b)
{
    const coll_dev_staged_range_t *x = a, *y = b;

    return x->off < y->off ? -1 : x->off > y->off;
}

/* An all-to-all's receive blocks of more than 0 elements, sorted, adjacent ones merged. */
static uint32_t a2a_blocks(const coll_dev_staged_member_t *m, coll_dev_staged_range_t *r)
{
    uint32_t n = 0, k = 0;

    for (uint32_t j = 0; j < m->world; j++) {
        uint64_t c = coll_a2a_at(m->table, m->world, COLL_A2A_RCOUNTS, j);
        if (c > 0) {
            r[n++] = (coll_dev_staged_range_t){
                coll_a2a_at(m->table, m->world, COLL_A2A_RDISPLS, j) * m->esize, c * m->esize};
        }
    }
    qsort(r, n, sizeof(*r), by_offset);
    for (uint32_t i = 1; i < n; i++) {
        if (r[k].off + r[k].len == r[i].off) {
            r[k].len += r[i].len;
        } else {
            r[++k] = r[i];
        }
    }
    return n > 0 ? k + 1 : 0;
}

uint32_t coll_dev_staged_out_ranges(const coll_dev_staged_member_t *m,
                                    coll_dev_staged_range_t *ranges)
{
    uint64_t in, out;

    if (m->kind == COLL_KIND_ALLTOALLV) {
        return a2a_blocks(m, ranges);
    }
    coll_dev_staged_extent(m, &in, &out);
    ranges[0] = (coll_dev_staged_range_t){0, out};
    return out > 0;
}

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

coll_dev_staged_batches_t coll_dev_staged_batches(const coll_plan_t *plan, size_t esize,
                                                  uint64_t target)
{
    uint64_t column = (uint64_t)plan->nnodes * plan->seg_elems * esize;
    coll_dev_staged_batches_t bt = {target / column > 0 ? target / column : 1, 0};

    COLL_ASSERT(!plan->blocked && column > 0);
    bt.nbatches = plan->nseg / bt.cols + (plan->nseg % bt.cols != 0);
    return bt;
}

coll_range_t coll_dev_staged_batch_piece(const coll_plan_t *plan,
                                         const coll_dev_staged_batches_t *bt, uint64_t b,
                                         uint32_t c)
{
    coll_range_t chunk = coll_plan_chunk(plan, c);
    uint64_t from = b * bt->cols * plan->seg_elems, to = from + bt->cols * plan->seg_elems;

    COLL_ASSERT(b < bt->nbatches && c < plan->nnodes);
    from = from < chunk.len ? from : chunk.len;
    to = to < chunk.len ? to : chunk.len;
    return (coll_range_t){chunk.off + from, to - from};
}

coll_status_t coll_dev_staged_queue(const coll_dev_ops_t *ops, coll_dev_stream_t *streams,
                                    uint64_t dst, uint64_t src, uint64_t bytes, uint64_t chunk,
                                    unsigned *turn)
{
    uint64_t n = coll_dev_staged_nchunks(bytes, chunk);
    coll_status_t st = COLL_OK;

    for (uint64_t i = 0; i < n && st == COLL_OK; i++) {
        coll_dev_staged_chunk_t c = coll_dev_staged_chunk(bytes, chunk, i);
        st = ops->copy_async(dst + c.off, src + c.off, c.len, streams[(*turn + c.stream) % 2]);
    }
    *turn = (unsigned)((*turn + n) % 2);
    return st;
}

coll_status_t coll_dev_staged_wait(const coll_dev_ops_t *ops, coll_dev_stream_t *streams)
{
    coll_status_t a = ops->stream_sync(streams[0]);
    coll_status_t b = ops->stream_sync(streams[1]);

    return a != COLL_OK ? a : b;
}
