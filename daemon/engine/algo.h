/**
 * @file algo.h
 * @brief Which algorithm runs an operation. The choice depends only on the operation, the node
 *        count of its group and the job parameters (decided by the root daemon), so every node
 *        chooses alike.
 */
#ifndef COLL_ALGO_H
#define COLL_ALGO_H

#include "core/job.h"
#include "engine/op.h"
#include "proto/desc.h"

/**
 * @brief Resolve @p requested (COLL_ALGO_AUTO or a forced one) for a @p kind operation whose
 *        partial result per rank has @p bytes (count x coll_partial_esize(); 0 for
 *        point-to-point, which has no algorithm).
 * @return The coll_algo_t to run (never AUTO), or COLL_ALGO_REFUSED + @p requested when the
 *         forced algorithm cannot run this operation.
 */
uint32_t coll_algo_resolve(const coll_job_t *job, coll_kind_t kind, uint64_t bytes,
                           coll_algo_t requested);

/**
 * @return The implementation of resolved algorithm @p algo for @p kind on group @p grp (the
 *         local one when the group is on one node; one that fails the operation with
 *         COLL_ERR_UNSUPPORTED for a refusal).
 */
const coll_impl_t *coll_algo_impl(const coll_group_t *grp, coll_kind_t kind, uint32_t algo);

#endif
