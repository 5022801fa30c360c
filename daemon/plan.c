#include "plan.h"

#define LINE_BYTES 64u

static uint64_t round_up(uint64_t v, uint64_t m)
{
    return (v + m - 1) / m * m;
}

void coll_plan_init(coll_plan_t *plan, uint64_t count, uint32_t nnodes, size_t esize,
                    size_t segment_bytes)
{
    uint64_t line = esize < LINE_BYTES ? LINE_BYTES / esize : 1;
    uint64_t per_node = count / nnodes + (count % nnodes != 0);

    plan->count = count;
    plan->nnodes = nnodes;
    plan->chunk_elems = round_up(per_node, line);
    plan->seg_elems = segment_bytes / esize / line * line;
    if (plan->seg_elems == 0) {
        plan->seg_elems = line;
    }
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
