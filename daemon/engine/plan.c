#include "engine/plan.h"

#include <string.h>

#define LINE_BYTES 64u

static uint64_t round_up(uint64_t v, uint64_t m)
{
    return (v + m - 1) / m * m;
}

static uint64_t segment_elems(size_t esize, size_t segment_bytes)
{
    uint64_t line = esize < LINE_BYTES ? LINE_BYTES / esize : 1;
    uint64_t seg = segment_bytes / esize / line * line;
    return seg == 0 ? line : seg;
}

void coll_plan_init(coll_plan_t *plan, uint64_t count, uint32_t nnodes, size_t esize,
                    size_t segment_bytes)
{
    uint64_t line = esize < LINE_BYTES ? LINE_BYTES / esize : 1;
    uint64_t per_node = count / nnodes + (count % nnodes != 0);

    memset(plan, 0, sizeof(*plan));
    plan->count = count;
    plan->nnodes = nnodes;
    plan->chunk_elems = round_up(per_node, line);
    plan->seg_elems = segment_elems(esize, segment_bytes);
    plan->nseg = (plan->chunk_elems + plan->seg_elems - 1) / plan->seg_elems;
}

coll_range_t coll_plan_chunk(const coll_plan_t *plan, uint32_t c)
{
    uint64_t off = (uint64_t)c * plan->chunk_elems;
    coll_range_t r;

    r.off = off < plan->count ? off : plan->count;
    r.len = plan->count - r.off < plan->chunk_elems ? plan->count - r.off : plan->chunk_elems;
    return r;
}

coll_range_t coll_plan_segment(const coll_plan_t *plan, uint32_t c, uint64_t j)
{
    coll_range_t chunk = coll_plan_chunk(plan, c);
    uint64_t start = j * plan->seg_elems;
    coll_range_t r;

    if (start >= chunk.len) {
        r.off = chunk.off + chunk.len;
        r.len = 0;
    } else {
        r.off = chunk.off + start;
        r.len = chunk.len - start < plan->seg_elems ? chunk.len - start : plan->seg_elems;
    }
    return r;
}

void coll_plan_init_blocked(coll_plan_t *plan, uint64_t block_elems, uint32_t nnodes,
                            size_t esize, size_t segment_bytes, const uint32_t *const *ranks,
                            const uint32_t *nranks)
{
    uint32_t most = 0, total = 0;

    for (uint32_t c = 0; c < nnodes; c++) {
        most = nranks[c] > most ? nranks[c] : most;
        total += nranks[c];
    }
    memset(plan, 0, sizeof(*plan));
    plan->blocked = 1;
    plan->count = block_elems * total;
    plan->nnodes = nnodes;
    plan->block_elems = block_elems;
    plan->seg_elems = segment_elems(esize, segment_bytes);
    plan->seg_per_block = (block_elems + plan->seg_elems - 1) / plan->seg_elems;
    plan->nseg = plan->seg_per_block * most;
    plan->ranks = ranks;
    plan->nranks = nranks;
}

coll_piece_t coll_plan_piece(const coll_plan_t *plan, uint32_t c, uint64_t j)
{
    coll_piece_t p = {0};
    uint64_t start;

    if (!plan->blocked) {
        coll_range_t r = coll_plan_segment(plan, c, j);
        p.off = r.off;
        p.len = r.len;
        return p;
    }
    p.local = (uint32_t)(j / plan->seg_per_block);
    if (p.local >= plan->nranks[c]) {
        p.local = 0;
        return p; /* a column this node's chunk does not have */
    }
    start = (j % plan->seg_per_block) * plan->seg_elems;
    p.block_off = start;
    p.off = (uint64_t)plan->ranks[c][p.local] * plan->block_elems + start;
    p.len = plan->block_elems - start < plan->seg_elems ? plan->block_elems - start
                                                         : plan->seg_elems;
    return p;
}
