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
 *        overflow, and in place only where the collective allows it.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL or COLL_ERR_INVALID with a message in @p err.
 */
coll_status_t coll_submit_check(const coll_job_t *job, const coll_group_t *grp,
                                const coll_session_t *s, const Coll__Wire__Submit *sub,
                                char *err, size_t errlen);

/**
 * @brief Build the descriptor of @p sub on @p grp, resolving its algorithm (coll_algo_resolve();
 *        a forced algorithm that cannot run it gives the refusal marker).
 */
void coll_submit_desc(const coll_job_t *job, const coll_group_t *grp,
                      const Coll__Wire__Submit *sub, coll_desc_t *desc);

#endif
