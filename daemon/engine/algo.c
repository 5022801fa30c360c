#include "engine/algo.h"

#include <stdio.h>

static coll_algo_t automatic(const coll_job_t *job, coll_kind_t kind, uint64_t bytes)
{
    switch (kind) {
    case COLL_KIND_ALLREDUCE:
        return bytes <= job->params.rd_max_bytes ? COLL_ALGO_RD : COLL_ALGO_RING;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER:
    case COLL_KIND_PS_STEP:
        return COLL_ALGO_RING;
    case COLL_KIND_BROADCAST:
    case COLL_KIND_REDUCE:
        return COLL_ALGO_CHAIN;
    default:
        return COLL_ALGO_DISSEMINATION;
    }
}

/* Whether @p algo can run a @p kind operation of @p bytes. */
static int can_run(const coll_job_t *job, coll_algo_t algo, coll_kind_t kind, uint64_t bytes)
{
    switch (algo) {
    case COLL_ALGO_RING:
        return kind <= COLL_KIND_ALLGATHER || kind == COLL_KIND_PS_STEP;
    case COLL_ALGO_RD:
        /* The whole buffer and a descriptor travel in one staging half. */
        return kind == COLL_KIND_ALLREDUCE &&
               bytes + sizeof(coll_desc_t) <= job->params.segment_bytes;
    case COLL_ALGO_CHAIN:
        return kind == COLL_KIND_BROADCAST || kind == COLL_KIND_REDUCE;
    case COLL_ALGO_DISSEMINATION:
        /* The parameter service's registration, save and load: agreement of every node. */
        return kind == COLL_KIND_BARRIER || (coll_kind_is_ps(kind) && kind != COLL_KIND_PS_STEP);
    default:
        return 0;
    }
}

uint32_t coll_algo_resolve(const coll_job_t *job, coll_kind_t kind, uint64_t bytes,
                           coll_algo_t requested)
{
    coll_algo_t algo = requested == COLL_ALGO_AUTO ? automatic(job, kind, bytes) : requested;

    if (coll_kind_is_p2p(kind)) {
        return COLL_ALGO_AUTO;
    }
    return can_run(job, algo, kind, bytes) ? (uint32_t)algo : COLL_ALGO_REFUSED + (uint32_t)algo;
}

/* A forced algorithm that cannot run the operation: it fails on every rank that forced it. */
static coll_status_t refused_start(coll_op_t *op)
{
    char msg[160];
    snprintf(msg, sizeof(msg), "algorithm %s cannot run this %s of %llu bytes per rank",
             coll_algo_name((coll_algo_t)(op->desc.algo - COLL_ALGO_REFUSED)),
             coll_kind_name((coll_kind_t)op->desc.coll),
             (unsigned long long)(op->desc.count * op->esize));
    coll_op_algo_failed(op, COLL_ERR_UNSUPPORTED, msg);
    return COLL_OK;
}

static const coll_impl_t coll_impl_refused = {
    .name = "none",
    .start = refused_start,
};

const coll_impl_t *coll_algo_impl(const coll_group_t *grp, coll_kind_t kind, uint32_t algo)
{
    if (algo >= COLL_ALGO_REFUSED) {
        return &coll_impl_refused;
    }
    if (grp->nnodes == 1) {
        return &coll_impl_local;
    }
    switch (algo) {
    case COLL_ALGO_RING:
        return &coll_impl_ring;
    case COLL_ALGO_RD:
        return &coll_impl_rd;
    case COLL_ALGO_CHAIN:
        return kind == COLL_KIND_BROADCAST ? &coll_impl_chain_bcast : &coll_impl_chain_reduce;
    default:
        return &coll_impl_barrier;
    }
}
