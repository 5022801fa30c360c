#include "engine/submit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dev_pools.h"
#include "engine/algo.h"
#include "engine/algos/dev_combine.h"
#include "engine/algos/nccl.h"
#include "engine/codec/codec.h"
#include "engine/combine.h"
#include "engine/stage.h"
#include "engine/dev_staged.h"
#include "engine/dev_sync.h"
#include "kernels/reduce.h"
#include "proto/a2a.h"
#include "proto/tag.h"

/* The parameter service's submissions: the layer above checks what only it knows. */
static coll_status_t ps_check(const coll_job_t *job, const coll_group_t *grp,
                              const coll_session_t *s, const Coll__Wire__Submit *sub,
                              char *err, size_t errlen)
{
    if (grp->id != 0) {
        snprintf(err, errlen, "rank %u: the parameter service runs on the world communicator, "
                 "not on group %u", s->rank, grp->id);
        return COLL_ERR_UNSUPPORTED;
    }
    if (job->d->stage_hooks == NULL) {
        snprintf(err, errlen, "rank %u: this daemon runs no parameter service", s->rank);
        return COLL_ERR_UNSUPPORTED;
    }
    return job->d->stage_hooks->check(job, s, sub, err, errlen);
}

/* The root or peer of @p sub on @p grp; returns the reason when it is not a usable rank. */
static const char *bad_rank(const coll_group_t *grp, uint32_t me, const Coll__Wire__Submit *sub)
{
    coll_kind_t kind = (coll_kind_t)sub->coll;

    if (sub->root >= grp->size) {
        return "root";
    }
    if (sub->peer >= grp->size ||
        ((kind == COLL_KIND_SEND || kind == COLL_KIND_RECV) && sub->peer == me)) {
        return "peer"; /* a collective's peer is 0; a message's the other rank */
    }
    return NULL;
}

/* The buffers lie inside this rank's allocations in the pool the submission names; in a device
 * pool, the collective must be one the staged path runs (engine/dev_staged.h), refused here
 * otherwise, after the check that they are the rank's own. */
static coll_status_t check_pool(const coll_job_t *job, const coll_session_t *s,
                                const Coll__Wire__Submit *sub, uint64_t send_bytes,
                                uint64_t recv_bytes, char *err, size_t errlen)
{
    const coll_pool_t *pool = coll_job_pool_by_id(job, sub->pool);

    if (pool == NULL ||
        (send_bytes > 0 && !coll_pool_range_owned(pool, sub->send_offset, send_bytes, s)) ||
        (recv_bytes > 0 && !coll_pool_range_owned(pool, sub->recv_offset, recv_bytes, s))) {
        snprintf(err, errlen,
                 "rank %u: buffers [%" PRIu64 ", +%" PRIu64 ") / [%" PRIu64 ", +%" PRIu64
                 ") are not inside this rank's allocations in the %s of job %s", s->rank,
                 sub->send_offset, send_bytes, sub->recv_offset, recv_bytes,
                 sub->pool == 0 ? "pool" : "device pool", job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    if (coll_pool_kind(pool) != COLL_MEM_HOST &&
        !coll_dev_staged_runs(sub->coll, sub->compression)) {
        snprintf(err, errlen, "rank %u: the buffers are in job %s's pool on device %u (%s "
                 "memory); the staged path runs allreduce (compressed or not), reduce-scatter, "
                 "all-gather, broadcast, reduce, gather, scatter, send, recv and alltoall(v) "
                 "uncompressed, and the parameter service's steps, on device memory; not the "
                 "service's registration, save or load, whose records are in the host pool "
                 "(this is %s%s)",
                 s->rank, job->id, sub->pool - 1, coll_mem_kind_name(coll_pool_kind(pool)),
                 coll_kind_name((coll_kind_t)sub->coll),
                 sub->compression != 0 ? " with compression" : "");
        return COLL_ERR_UNSUPPORTED;
    }
    return COLL_OK;
}

/* @p t (of @p world ranks) into @p table_p when its receive blocks are apart; freed and refused
 * otherwise. */
static coll_status_t a2a_apart(const coll_session_t *s, uint32_t world, uint64_t *t,
                               uint64_t **table_p, char *err, size_t errlen)
{
    uint32_t a = 0, b = 0;
    int apart = coll_a2a_recv_apart(t, world, &a, &b);

    if (apart == 1) {
        *table_p = t;
        return COLL_OK;
    }
    free(t);
    if (apart < 0) {
        snprintf(err, errlen, "daemon out of memory");
        return COLL_ERR_NOMEM;
    }
    snprintf(err, errlen, "rank %u: the alltoallv's receive blocks from ranks %u and %u overlap: "
             "the blocks of a receive buffer must be apart", s->rank, a, b);
    return COLL_ERR_INVALID;
}

/* An all-to-all's count table: in this rank's allocations of the host pool, copied out of the
 * pool before it is read (the rank may write the pool meanwhile), its blocks' ends without
 * overflow. Their extents in elements go to @p se and @p re, the copy to @p table_p. */
static coll_status_t a2a_table(const coll_job_t *job, const coll_group_t *grp,
                               const coll_session_t *s, const Coll__Wire__Submit *sub,
                               uint64_t **table_p, uint64_t *se, uint64_t *re, char *err,
                               size_t errlen)
{
    size_t bytes = coll_a2a_table_bytes(grp->size);
    uint64_t *t;
    uint32_t bad;

    /* Its messages' tags carry the sending rank where a ring's carry its step. On a device
     * pool the staged path runs it (the table stays in the host pool). */
    if (sub->compression != 0 || grp->size > COLL_TAG_MAX_NODES) {
        snprintf(err, errlen, "rank %u: an alltoallv runs uncompressed, on at most %u ranks "
                 "(this one: %u ranks%s)", s->rank, COLL_TAG_MAX_NODES, grp->size,
                 sub->compression != 0 ? ", compressed" : "");
        return COLL_ERR_UNSUPPORTED;
    }
    if (!coll_pool_range_owned(job->pool, sub->layout, bytes, s)) {
        snprintf(err, errlen, "rank %u: the alltoallv's count table [%" PRIu64 ", +%zu) is not "
                 "inside this rank's allocations in the host pool of job %s", s->rank,
                 sub->layout, bytes, job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    if ((t = malloc(bytes)) == NULL) {
        snprintf(err, errlen, "daemon out of memory");
        return COLL_ERR_NOMEM;
    }
    memcpy(t, coll_pool_base(job->pool) + sub->layout, bytes);
    if (coll_a2a_extent(t, grp->size, coll_dtype_size((coll_dtype_t)sub->dtype), se, re,
                        &bad) != 0) {
        snprintf(err, errlen, "rank %u: the alltoallv's block of rank %u overflows", s->rank,
                 bad);
        free(t);
        return COLL_ERR_INVALID;
    }
    return a2a_apart(s, grp->size, t, table_p, err, errlen);
}

/* The elements @p sub reads and writes: an all-to-all's from its count table (in @p table_p,
 * which the caller then owns), every other kind's from its count. */
static coll_status_t extents(const coll_job_t *job, const coll_group_t *grp,
                             const coll_session_t *s, const Coll__Wire__Submit *sub,
                             uint64_t **table_p, uint64_t *se, uint64_t *re, char *err,
                             size_t errlen)
{
    uint32_t me = coll_group_rank_of_local(grp, grp->local_of[s->local_rank]);

    *table_p = NULL;
    if ((coll_kind_t)sub->coll == COLL_KIND_ALLTOALLV) {
        return a2a_table(job, grp, s, sub, table_p, se, re, err, errlen);
    }
    coll_kind_extent((coll_kind_t)sub->coll, sub->count, grp->size, me, sub->root, se, re);
    return COLL_OK;
}

/* The buffers of @p sub: in the rank's allocations, apart unless in place as its kind allows. */
static coll_status_t check_buffers(const coll_job_t *job, const coll_group_t *grp,
                                   const coll_session_t *s, const Coll__Wire__Submit *sub,
                                   uint64_t **table_p, char *err, size_t errlen)
{
    size_t es = coll_dtype_size((coll_dtype_t)sub->dtype);
    uint32_t me = coll_group_rank_of_local(grp, grp->local_of[s->local_rank]);
    uint64_t se, re;
    coll_status_t st = extents(job, grp, s, sub, table_p, &se, &re, err, errlen);

    if (st == COLL_OK) {
        st = check_pool(job, s, sub, se * es, re * es, err, errlen);
    }
    if (st == COLL_OK && !coll_kind_overlap_ok((coll_kind_t)sub->coll, me, sub->send_offset,
                                              se * es, sub->recv_offset, re * es)) {
        int a2a = (coll_kind_t)sub->coll == COLL_KIND_ALLTOALLV;
        snprintf(err, errlen, "rank %u: send and receive buffers overlap (%s)", s->rank,
                 a2a ? "an alltoallv has no in-place form"
                     : "only the in-place layouts of this collective may");
        st = COLL_ERR_INVALID;
    }
    if (st != COLL_OK) {
        free(*table_p);
        *table_p = NULL;
    }
    return st;
}

coll_status_t coll_submit_check(const coll_job_t *job, const coll_group_t *grp,
                                const coll_session_t *s, const Coll__Wire__Submit *sub,
                                uint64_t **table_p, char *err, size_t errlen)
{
    size_t es = coll_dtype_size((coll_dtype_t)sub->dtype);
    uint32_t me = coll_group_rank_of_local(grp, grp->local_of[s->local_rank]);
    const char *bad = coll_kind_is_ps(sub->coll) ? NULL : bad_rank(grp, me, sub);
    uint64_t *table = NULL;
    coll_status_t st;

    if (coll_kind_is_ps(sub->coll) && (st = ps_check(job, grp, s, sub, err, errlen)) != COLL_OK) {
        return st;
    }
    if (sub->compression != 0 && grp->id != 0) {
        snprintf(err, errlen, "rank %u: compression runs on the world communicator only, not on "
                 "group %u", s->rank, grp->id);
        return COLL_ERR_UNSUPPORTED;
    }
    if (bad != NULL) {
        snprintf(err, errlen, "rank %u: %s %u is not %s rank of %s %u of job %s (%u ranks)",
                 s->rank, bad, bad[0] == 'r' ? sub->root : sub->peer,
                 bad[0] == 'r' ? "a" : "another", grp->id ? "group" : "communicator", grp->id,
                 job->id, grp->size);
        return COLL_ERR_INVALID;
    }
    if (!coll_reduce_op_fits((coll_dtype_t)sub->dtype, (coll_redop_t)sub->op)) {
        snprintf(err, errlen, "rank %u: reduction %s does not apply to %s (the bitwise "
                 "reductions take integer dtypes)", s->rank,
                 coll_redop_name((coll_redop_t)sub->op), coll_dtype_name((coll_dtype_t)sub->dtype));
        return COLL_ERR_INVALID;
    }
    if (sub->count > UINT64_MAX / es / grp->size) {
        snprintf(err, errlen, "rank %u: count %" PRIu64 " overflows", s->rank, sub->count);
        return COLL_ERR_INVALID;
    }
    if ((st = check_buffers(job, grp, s, sub, &table, err, errlen)) != COLL_OK) {
        return st;
    }
    if ((st = coll_dev_sync_check(job, s, sub, err, errlen)) != COLL_OK) {
        free(table);
        return st;
    }
    if (table_p != NULL) {
        *table_p = table;
    } else {
        free(table);
    }
    return COLL_OK;
}

/* The memory kind the algorithm is chosen for: the pool's of @p sub, but the host's where the
 * device entries (NCCL, algos/nccl.h; on one node the executor, algos/dev_local.c) cannot take
 * it: compression, a collective, dtype, reduction or rank layout of the group NCCL does not take
 * (coll_nccl_fits()), on one node a collective, dtype or reduction the executor does not
 * (coll_devc_fits()); the table's predicates then ask for NCCL or the executor. A split group's
 * operations take NCCL as the world's do, on the group's own communicator. Every node decides from
 * the submission alone; a node whose ranks hold the buffers in host memory chooses otherwise than
 * one whose ranks hold them on a device, which the descriptor check between the nodes (the
 * algorithm is in it) turns into COLL_ERR_MISMATCH on every rank. */
static coll_mem_kind_t choice_kind(const coll_job_t *job, const coll_group_t *grp,
                                   const Coll__Wire__Submit *sub)
{
    const coll_pool_t *pool = coll_job_pool_by_id(job, sub->pool);

    if (pool == NULL || sub->compression != 0 ||
        !(coll_nccl_fits(grp, sub->coll, sub->dtype, sub->op) ||
          (grp->nnodes == 1 && coll_devc_fits(sub->coll, sub->dtype, sub->op)))) {
        return COLL_MEM_HOST;
    }
    return coll_pool_kind(pool);
}

void coll_submit_desc(const coll_job_t *job, const coll_group_t *grp,
                      const Coll__Wire__Submit *sub, coll_desc_t *d)
{
    /* Recursive doubling must fit a partial result (float32 for 16-bit sums) in a segment. */
    uint64_t bytes = sub->count * coll_partial_esize((coll_dtype_t)sub->dtype,
                                                     (coll_redop_t)sub->op);
    coll_kind_t kind = (coll_kind_t)sub->coll;
    coll_submission_t rec;

    coll_submission_from_wire(sub, &rec);
    coll_desc_make(&rec, &(coll_desc_ctx_t){
        .world_size = grp->size,
        .seg_bytes = (uint32_t)job->params.segment_bytes,
        .node = job->node_rank,
        .first_rank = job->ranks[grp->locals[0]],
        .algo = coll_algo_resolve(job, choice_kind(job, grp, sub), kind, grp->nnodes, bytes,
                                  (coll_algo_t)sub->algo),
        .epoch = job->epoch,
        /* A parameter-service step's layout field is its step number (no shapes). */
        .shapes = sub->compression == 0 || kind == COLL_KIND_PS_STEP
                      ? 0
                      : coll_codec_shapes(job, sub->layout),
    }, d);
}
