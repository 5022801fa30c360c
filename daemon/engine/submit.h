/**
 * @file submit.h
 * @brief Checking a client's Submit: the buffers it names for its collective and role, and the
 *        descriptor every rank of the operation must agree on.
 */
#ifndef COLL_SUBMIT_H
#define COLL_SUBMIT_H

#include "core/job.h"
#include "core/session.h"
#include "proto/desc.h"

/**
 * @brief Check @p sub of a local member of @p grp: root and peer ranks of the group (another
 *        rank for a peer), its buffers inside the session's own allocations, sizes without
 *        overflow, and in place only where the collective allows it. An all-to-all's buffers
 *        are sized by its count table (proto/a2a.h), which is copied out of the pool first
 *        and checked in that copy.
 * @param [out] table_p With COLL_OK, an all-to-all's count table (the copy, the caller's to
 *        free), NULL for every other kind; NULL to keep none.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL (buffers or count table outside the rank's
 *         allocations), COLL_ERR_INVALID, COLL_ERR_UNSUPPORTED or COLL_ERR_NOMEM with a message
 *         in @p err.
 */
coll_status_t coll_submit_check(const coll_job_t *job, const coll_group_t *grp,
                                const coll_session_t *s, const Coll__Wire__Submit *sub,
                                uint64_t **table_p, char *err, size_t errlen);

/**
 * @brief Build the descriptor of @p sub on @p grp, resolving its algorithm (coll_algo_resolve();
 *        a forced algorithm that cannot run it gives the refusal marker).
 */
void coll_submit_desc(const coll_job_t *job, const coll_group_t *grp,
                      const Coll__Wire__Submit *sub, coll_desc_t *desc);

#endif
