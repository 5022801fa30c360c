/**
 * @file algo.h
 * @brief Which algorithm runs an operation. The choice depends only on the operation, the node
 *        count and the job parameters (decided by the root daemon), so every node chooses alike.
 */
#ifndef COLL_ALGO_H
#define COLL_ALGO_H

#include "desc.h"
#include "job.h"
#include "op.h"

/**
 * @brief Resolve @p requested (COLL_ALGO_AUTO or a forced one) for a @p kind operation of
 *        @p bytes per rank.
 * @param [out] algo_p The algorithm (never AUTO).
 * @param [out] err    Why a forced algorithm cannot run it.
 * @return COLL_OK; COLL_ERR_UNSUPPORTED when the forced algorithm cannot run this operation.
 */
coll_status_t coll_algo_resolve(const coll_job_t *job, coll_kind_t kind, uint64_t bytes,
                                coll_algo_t requested, coll_algo_t *algo_p, char *err,
                                size_t errlen);

/** @return The implementation of @p algo for @p kind on @p job (the local one on one node). */
const coll_impl_t *coll_algo_impl(const coll_job_t *job, coll_kind_t kind, coll_algo_t algo);

#endif
