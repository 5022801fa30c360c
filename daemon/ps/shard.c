/*
 * This node's shard of the parameters (internal.h): per bucket the chunk the ring gives this
 * node, cut into spans of one layer and one pipeline segment each. The spans are fixed at
 * registration, so every step adds the partial sums of a layer in the same order (position
 * order), whatever order the segments arrive in: the same inputs give the same bits.
 */
#include <stdlib.h>

#include "common/assert.h"
#include "ps/internal.h"

_Static_assert(COLL_PS_NO_WEIGHT_DECAY == COLL_OPTIM_NO_WEIGHT_DECAY &&
                   COLL_PS_NO_TRUST == COLL_OPTIM_NO_TRUST,
               "the service's layer flags are the kernels'");

unsigned coll_ps_span_flags(const coll_ps_job_t *ps, const ps_bucket_t *b, const ps_span_t *sp)
{
    return ps->layers[b->first_layer + sp->layer].flags;
}

uint64_t coll_ps_segment_of(const ps_bucket_t *b, uint64_t off)
{
    COLL_ASSERT(off >= b->chunk.off && off < b->chunk.off + b->chunk.len);
    return (off - b->chunk.off) / b->plan.seg_elems;
}

/* Cut [from, to) of the bucket at its layers' boundaries into spans (NULL: count them). */
static uint32_t cut(const coll_ps_job_t *ps, const ps_bucket_t *b, uint64_t from, uint64_t to,
                    ps_span_t *out)
{
    uint64_t start = 0;
    uint32_t n = 0;

    for (uint32_t l = 0; l < b->nlayers && start < to; l++) {
        uint64_t end = start + ps->layers[b->first_layer + l].count;
        uint64_t a = from > start ? from : start, e = to < end ? to : end;
        if (a < e) {
            if (out != NULL) {
                out[n] = (ps_span_t){a, e - a, l};
            }
            n++;
        }
        start = end;
    }
    return n;
}

static coll_status_t bucket_spans(const coll_ps_job_t *ps, ps_bucket_t *b)
{
    uint32_t node = ps->job->node_rank, total = 0;

    b->seg_span = calloc(b->plan.nseg + 1, sizeof(*b->seg_span));
    if (b->seg_span == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (uint64_t j = 0; j < b->plan.nseg; j++) {
        coll_range_t s = coll_plan_segment(&b->plan, node, j);
        b->seg_span[j] = total;
        total += cut(ps, b, s.off, s.off + s.len, NULL);
    }
    b->seg_span[b->plan.nseg] = total;
    b->nspans = total;
    b->spans = calloc(total ? total : 1, sizeof(*b->spans));
    if (b->spans == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (uint64_t j = 0; j < b->plan.nseg; j++) {
        coll_range_t s = coll_plan_segment(&b->plan, node, j);
        cut(ps, b, s.off, s.off + s.len, b->spans + b->seg_span[j]);
    }
    return COLL_OK;
}

coll_status_t coll_ps_shard_cut(coll_ps_job_t *ps)
{
    coll_job_t *job = ps->job;
    uint64_t off = 0, state_off = 0;
    uint32_t layer = 0;

    ps->buckets = calloc(ps->reg.num_buckets, sizeof(*ps->buckets));
    if (ps->buckets == NULL) {
        return COLL_ERR_NOMEM;
    }
    for (uint32_t k = 0; k < ps->reg.num_buckets; k++) {
        ps_bucket_t *b = &ps->buckets[k];
        b->off = off;
        b->first_layer = layer;
        while (layer < ps->reg.num_layers && ps->layers[layer].bucket == k) {
            b->count += ps->layers[layer++].count;
        }
        b->nlayers = layer - b->first_layer;
        coll_plan_init(&b->plan, b->count, job->nnodes, sizeof(float), job->params.segment_bytes);
        b->chunk = coll_plan_chunk(&b->plan, job->node_rank);
        b->state_off = state_off;
        state_off += b->chunk.len;
        off += b->count;
        if (bucket_spans(ps, b) != COLL_OK) {
            return COLL_ERR_NOMEM;
        }
    }
    ps->shard_elems = state_off;
    return COLL_OK;
}

void coll_ps_shard_free(coll_ps_job_t *ps)
{
    for (uint32_t k = 0; ps->buckets != NULL && k < ps->reg.num_buckets; k++) {
        free(ps->buckets[k].spans);
        free(ps->buckets[k].seg_span);
    }
    free(ps->buckets);
    ps->buckets = NULL;
}
