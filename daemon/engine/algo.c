/*
 * The algorithm choice over the table of registered algorithms (algo.h): the entry of the
 * operation's collective and memory kind that a forced algorithm names, or the one the root's
 * cost model chose for the size (crossover.h), or the one with the highest score that can run
 * it.
 */
#include "engine/algo.h"

#include <stdio.h>

#include "common/assert.h"
#include "core/dev_pools.h"
#include "core/pool.h"
#include "engine/algos/algos.h"
#include "engine/algos/dev_combine.h"
#include "engine/crossover.h"
#include "engine/exec.h"

static int entry_runs(const coll_algo_entry_t *e, const coll_job_t *job, uint32_t nnodes,
                      uint64_t bytes)
{
    return e->runs == NULL || e->runs(job, nnodes, bytes);
}

static double entry_score(const coll_algo_entry_t *e, const coll_job_t *job, uint64_t bytes)
{
    return e->score == NULL ? 1.0 : e->score(job, bytes);
}

/* The entry of @p algo for (@p kind, @p mem), or NULL. */
static const coll_algo_entry_t *find(coll_kind_t kind, coll_mem_kind_t mem, uint32_t algo)
{
    size_t n;
    const coll_algo_entry_t *t = coll_algo_table(&n);

    for (size_t i = 0; i < n; i++) {
        if (t[i].kind == kind && t[i].mem == mem && (uint32_t)t[i].algo == algo) {
            return &t[i];
        }
    }
    return NULL;
}

/* The automatic choice: the entry of (@p kind, @p mem) that runs with the highest score. */
static const coll_algo_entry_t *best(const coll_job_t *job, coll_kind_t kind,
                                     coll_mem_kind_t mem, uint32_t nnodes, uint64_t bytes)
{
    size_t n;
    const coll_algo_entry_t *t = coll_algo_table(&n), *b = NULL;
    double top = 0.0;

    for (size_t i = 0; i < n; i++) {
        double s;
        if (t[i].kind != kind || t[i].mem != mem || !entry_runs(&t[i], job, nnodes, bytes)) {
            continue;
        }
        if ((s = entry_score(&t[i], job, bytes)) > top) {
            top = s;
            b = &t[i];
        }
    }
    return b;
}

/* The automatic choice: the root's size ranges by the cost model (engine/crossover.h) on host
 * memory, where they name an entry that runs the size; otherwise the highest score. */
static const coll_algo_entry_t *chosen(const coll_job_t *job, coll_kind_t kind,
                                       coll_mem_kind_t mem, uint32_t nnodes, uint64_t bytes)
{
    const coll_algo_entry_t *e = NULL;

    if (mem == COLL_MEM_HOST) {
        e = find(kind, mem, coll_crossover_algo(&job->params, kind, bytes));
    }
    return e != NULL && entry_runs(e, job, nnodes, bytes) ? e
                                                          : best(job, kind, mem, nnodes, bytes);
}

/* The entry of (@p kind, @p mem) for @p requested (or the automatic choice), or NULL. */
static const coll_algo_entry_t *choose(const coll_job_t *job, coll_mem_kind_t mem,
                                       coll_kind_t kind, uint32_t nnodes, uint64_t bytes,
                                       coll_algo_t requested)
{
    const coll_algo_entry_t *e;

    if (requested == COLL_ALGO_AUTO) {
        return chosen(job, kind, mem, nnodes, bytes);
    }
    e = find(kind, mem, (uint32_t)requested);
    return e != NULL && entry_runs(e, job, nnodes, bytes) ? e : NULL;
}

uint32_t coll_algo_resolve(const coll_job_t *job, coll_mem_kind_t mem, coll_kind_t kind,
                           uint32_t nnodes, uint64_t bytes, coll_algo_t requested)
{
    const coll_algo_entry_t *e;

    if (coll_kind_is_p2p(kind)) {
        return COLL_ALGO_AUTO;
    }
    e = choose(job, mem, kind, nnodes, bytes, requested);
    if (e == NULL && mem != COLL_MEM_HOST) {
        e = choose(job, COLL_MEM_HOST, kind, nnodes, bytes, requested);
    }
    return e != NULL ? (uint32_t)e->algo : COLL_ALGO_REFUSED + (uint32_t)requested;
}

/* The memory kind of @p op's buffers: its first local member's pool's. */
static coll_mem_kind_t buffers_kind(const coll_op_t *op)
{
    const coll_pool_t *pool = coll_job_pool_by_id(op->job, op->members[0].pool);

    return pool != NULL ? coll_pool_kind(pool) : coll_op_mem_kind(op);
}

/* The memory kind that has an entry of @p algo for @p kind where @p mem has none (an
 * algorithm of device memory only, as NCCL and the device's own), else COLL_MEM_KINDS. */
static coll_mem_kind_t other_kind(coll_kind_t kind, coll_mem_kind_t mem, uint32_t algo)
{
    for (int m = 0; m < COLL_MEM_KINDS && find(kind, mem, algo) == NULL; m++) {
        if (find(kind, (coll_mem_kind_t)m, algo) != NULL) {
            return (coll_mem_kind_t)m;
        }
    }
    return COLL_MEM_KINDS;
}

void coll_algo_refusal(const coll_op_t *op, char *buf, size_t len)
{
    uint32_t algo = op->desc.algo - COLL_ALGO_REFUSED;
    coll_kind_t kind = (coll_kind_t)op->desc.coll;
    coll_mem_kind_t mem = buffers_kind(op), needs = other_kind(kind, mem, algo);

    if (needs != COLL_MEM_KINDS) {
        snprintf(buf, len, "algorithm %s runs only on %s memory (buffers from "
                 "coll_mem_alloc_on()), and this %s's buffers are %s memory: force it only for "
                 "such buffers, or leave the choice to auto", coll_algo_name((coll_algo_t)algo),
                 coll_mem_kind_name(needs), coll_kind_name(kind), coll_mem_kind_name(mem));
    } else {
        snprintf(buf, len, "algorithm %s cannot run this %s of %llu bytes per rank",
                 coll_algo_name((coll_algo_t)algo), coll_kind_name(kind),
                 (unsigned long long)(op->desc.count * op->esize));
    }
}

/* A forced algorithm that cannot run the operation: it fails on every rank that forced it. */
static coll_status_t refused_start(coll_op_t *op)
{
    char msg[sizeof(op->algo_error)];

    coll_algo_refusal(op, msg, sizeof(msg));
    coll_op_algo_failed(op, COLL_ERR_UNSUPPORTED, msg);
    return COLL_OK;
}

static const coll_impl_t coll_impl_refused = {
    .name = "none",
    .start = refused_start,
};

const coll_impl_t *coll_algo_impl(const coll_op_t *op)
{
    const coll_algo_entry_t *e;

    if (op->desc.algo >= COLL_ALGO_REFUSED) {
        return &coll_impl_refused;
    }
    /* This node resolved the descriptor's algorithm itself (coll_algo_resolve()), on its
     * first member's memory kind or, where that kind has no such entry, the host's. */
    e = find((coll_kind_t)op->desc.coll, buffers_kind(op), op->desc.algo);
    if (e == NULL) {
        e = find((coll_kind_t)op->desc.coll, COLL_MEM_HOST, op->desc.algo);
    }
    COLL_ASSERT(e != NULL);
    if (e == NULL) {
        return &coll_impl_refused;
    }
    /* The device's own on one node needs every member in one device pool, or in pools of
     * several devices that the first member's device reaches (peers, "device+peers": split
     * across the devices where every pair are peers and the operation is large enough,
     * coll_dev_peers_splits()); members elsewhere take the host's local algorithm on the staged
     * path's copies. The members' pools are all known here, when the operation starts. */
    if (e->algo == COLL_ALGO_DEVICE && coll_devc_one_pool(op) == 0) {
        if (coll_devc_lane_pool(op) == 0) {
            return &coll_impl_local;
        }
        return coll_dev_peers_splits(op) ? &coll_impl_dev_peers_split : &coll_impl_dev_peers;
    }
    return op->grp->nnodes == 1 ? e->local : e->impl;
}
