/**
 * @file algo.h
 * @brief Which algorithm runs an operation: a table of registered algorithms, one entry per
 *        (collective, memory kind, algorithm) with a predicate (can it run this size) and a
 *        score (how much the automatic choice wants it), as UCC scores its algorithms per
 *        collective, memory type and size range. The table is engine/algos/table.c; a new
 *        algorithm, or an existing one on a new memory kind (a GPU's, through its library),
 *        is one more entry there and touches nothing else of the engine.
 *
 * The choice depends only on the operation, the memory kind of its buffers, the node count of
 * its group and the job parameters (decided by the root daemon), so every node chooses alike.
 * It is made when a submission is described (coll_algo_resolve(), the descriptor's algorithm,
 * which the nodes then check against each other) and turned into an implementation when the
 * operation starts (coll_algo_impl()).
 */
#ifndef COLL_ALGO_H
#define COLL_ALGO_H

#include "core/job.h"
#include "engine/op.h"
#include "kernels/mem_kind.h"
#include "proto/desc.h"

/** One registered algorithm of one collective on one memory kind. */
typedef struct coll_algo_entry {
    coll_kind_t kind;       /**< the collective it runs */
    coll_mem_kind_t mem;    /**< the memory kind of the buffers it works on */
    coll_algo_t algo;       /**< its name in descriptors (COLL_ALGO_*) */
    /** Whether it can run a @c kind operation of a group of @p nnodes nodes whose partial
     *  result per rank has @p bytes (NULL: always); a forced algorithm that cannot is
     *  refused. */
    int (*runs)(const coll_job_t *job, uint32_t nnodes, uint64_t bytes);
    /** Its claim in the automatic choice (NULL: 1): the highest claim among the entries that
     *  run wins, the first in table order on a tie; 0 is never chosen automatically. */
    double (*score)(const coll_job_t *job, uint64_t bytes);
    const coll_impl_t *impl;  /**< its implementation on several nodes */
    const coll_impl_t *local; /**< and with every rank of the group on one node */
} coll_algo_entry_t;

/**
 * @return The registered algorithms (engine/algos/table.c), their count in @p n_p.
 */
const coll_algo_entry_t *coll_algo_table(size_t *n_p);

/**
 * @brief Resolve @p requested (COLL_ALGO_AUTO or a forced one) for a @p kind operation of
 *        @p job in a group of @p nnodes nodes whose partial result per rank has @p bytes
 *        (count x coll_partial_esize(); 0 for point-to-point, which has no algorithm), on memory of
 *        kind @p mem (the submission's pool's, engine/submit.c): among the entries of that kind,
 *        then, where none of them runs it, among the host's (the staged path runs them on host
 *        copies).
 * @return The coll_algo_t to run (never AUTO but for point-to-point), or COLL_ALGO_REFUSED +
 *         @p requested when the forced algorithm cannot run this operation (or, for AUTO, no
 *         entry can).
 */
uint32_t coll_algo_resolve(const coll_job_t *job, coll_mem_kind_t mem, coll_kind_t kind,
                           uint32_t nnodes, uint64_t bytes, coll_algo_t requested);

/**
 * @return The implementation of @p op's resolved algorithm (op->desc.algo) on the memory kind
 *         of its buffers (its first local member's pool), or the host's entry where that kind
 *         has none (the staged path): the entry's local one when the group is on one node (the
 *         host's local one for the device's own, COLL_ALGO_DEVICE, whose members are in several
 *         device pools: the staged path runs it); one that fails
 *         the operation with COLL_ERR_UNSUPPORTED for a refusal.
 */
const coll_impl_t *coll_algo_impl(const coll_op_t *op);

/**
 * @brief Why @p op's forced algorithm was refused (op->desc.algo is COLL_ALGO_REFUSED + it),
 *        the message of its COLL_ERR_UNSUPPORTED, in @p buf (truncated to @p len): for an
 *        algorithm that has an entry for the collective on another memory kind only (NCCL and
 *        the device's own on host buffers), the memory kind it needs and the buffers' kind;
 *        otherwise that it cannot run the operation's size.
 */
void coll_algo_refusal(const coll_op_t *op, char *buf, size_t len);

#endif
