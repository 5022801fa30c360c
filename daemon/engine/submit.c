#include "engine/submit.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/algo.h"
#include "engine/codec/codec.h"
#include "engine/combine.h"

void coll_submit_extent(coll_kind_t kind, uint64_t count, uint32_t world_size, uint32_t rank,
                        uint32_t root, uint64_t *send_p, uint64_t *recv_p)
{
    uint64_t send = count, recv = count;

    switch (kind) {
    case COLL_KIND_REDUCE_SCATTER: send = count * world_size; break;
    case COLL_KIND_ALLGATHER: recv = count * world_size; break;
    case COLL_KIND_BROADCAST: send = rank == root ? count : 0; break;
    case COLL_KIND_REDUCE: recv = rank == root ? count : 0; break;
    case COLL_KIND_BARRIER: send = recv = 0; break;
    case COLL_KIND_SEND: recv = 0; break;
    case COLL_KIND_RECV: send = 0; break;
    default: break;
    }
    *send_p = send;
    *recv_p = recv;
}

/* In place: the same buffer, or for reduce-scatter / all-gather the rank's own block of the
 * larger one. Anything else must not overlap. */
static int overlap_allowed(const Coll__Wire__Submit *sub, uint32_t rank, uint64_t sbytes,
                           uint64_t rbytes)
{
    uint64_t so = sub->send_offset, ro = sub->recv_offset;

    if (sbytes == 0 || rbytes == 0 || so + sbytes <= ro || ro + rbytes <= so) {
        return 1;
    }
    switch ((coll_kind_t)sub->coll) {
    case COLL_KIND_REDUCE_SCATTER: return ro == so + rank * rbytes;
    case COLL_KIND_ALLGATHER: return so == ro + rank * sbytes;
    default: return so == ro && sbytes == rbytes;
    }
}

coll_status_t coll_submit_check(const coll_job_t *job, const coll_session_t *s,
                                const Coll__Wire__Submit *sub, char *err, size_t errlen)
{
    size_t es = coll_dtype_size((coll_dtype_t)sub->dtype);
    uint64_t se, re;

    if (sub->root >= job->world_size || sub->peer >= job->world_size) {
        snprintf(err, errlen, "rank %u: root %u or peer %u is not a rank of job %s (world %u)",
                 s->rank, sub->root, sub->peer, job->id, job->world_size);
        return COLL_ERR_INVALID;
    }
    if (sub->count > UINT64_MAX / es / job->world_size) {
        snprintf(err, errlen, "rank %u: count %" PRIu64 " overflows", s->rank, sub->count);
        return COLL_ERR_INVALID;
    }
    coll_submit_extent((coll_kind_t)sub->coll, sub->count, job->world_size, s->rank, sub->root,
                       &se, &re);
    if ((se > 0 && !coll_pool_range_owned(job->pool, sub->send_offset, se * es, s)) ||
        (re > 0 && !coll_pool_range_owned(job->pool, sub->recv_offset, re * es, s))) {
        snprintf(err, errlen,
                 "rank %u: buffers [%" PRIu64 ", +%" PRIu64 ") / [%" PRIu64 ", +%" PRIu64
                 ") are not inside this rank's allocations in the pool of job %s",
                 s->rank, sub->send_offset, se * es, sub->recv_offset, re * es, job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    if (!overlap_allowed(sub, s->rank, se * es, re * es)) {
        snprintf(err, errlen, "rank %u: send and receive buffers overlap (only the in-place "
                 "layouts of this collective may)", s->rank);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

void coll_submit_desc(const coll_job_t *job, const Coll__Wire__Submit *sub, coll_desc_t *d)
{
    /* Recursive doubling must fit a partial result (float32 for 16-bit sums) in a segment. */
    uint64_t bytes = sub->count * coll_partial_esize((coll_dtype_t)sub->dtype,
                                                     (coll_redop_t)sub->op);
    uint32_t algo = coll_algo_resolve(job, (coll_kind_t)sub->coll, bytes, (coll_algo_t)sub->algo);

    memset(d, 0, sizeof(*d));
    d->magic = COLL_DESC_MAGIC;
    d->version = COLL_WIRE_VERSION;
    d->coll = (uint16_t)sub->coll;
    d->key = sub->key;
    d->count = sub->count;
    d->dtype = sub->dtype;
    d->op = sub->op;
    d->seg_bytes = (uint32_t)job->params.segment_bytes;
    d->world_size = job->world_size;
    d->node = job->node_rank;
    d->first_rank = job->ranks[0];
    d->root = (coll_kind_t)sub->coll == COLL_KIND_BROADCAST || (coll_kind_t)sub->coll == COLL_KIND_REDUCE
                  ? sub->root
                  : 0;
    d->algo = algo;
    d->epoch = job->epoch;
    d->layout = sub->layout;
    if (sub->compression != 0) {
        d->compression = sub->compression;
        d->bucket = sub->bucket;
        d->warmup = sub->warmup;
        d->shapes = coll_codec_shapes(job, sub->layout);
    }
}
