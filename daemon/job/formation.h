/**
 * @file formation.h
 * @brief Which job a rank's JoinJob belongs to, and the rule that keeps two launches apart.
 *
 * Names. A job on a node is named by its id and its digest (base/auth.h): the digest of its job
 * token, or, for a job without one, of its first rank's uid. Jobs of the same id and another
 * digest never meet: a rank of another user, with another token or none, forms a job of its
 * own, which cannot see this one's pool, hold its ranks out or fail it. A rank of the same uid
 * as the job's first rank whose digest differs (a wrong token, or none for a job that has one)
 * is refused with COLL_ERR_DENIED: that user's own mistake, told at once. The root daemon keys
 * its rendezvous by id and digest too (net/rdv.c), so nodes behave alike.
 *
 * One formation per name. A join whose rank or local rank is already in the job of its name,
 * gathering or formed, proves that a second launch with the same id and token started: the
 * daemon cannot tell which of the job's ranks came from which launch, so that job fails on
 * every rank with COLL_ERR_RENDEZVOUS and a message saying so, the join is refused with it, and
 * so is every join of that name for the job's timeout (the other ranks of both launches): two
 * launches never form one job with data from both. Other disagreements (world or local size,
 * root) refuse only the join, since no rank of it can enter the job. Launchers avoid all of it
 * by giving each launch its own token (collective-launch does).
 *
 * Loop thread only.
 */
#ifndef COLL_JOB_FORMATION_H
#define COLL_JOB_FORMATION_H

#include "core/job.h"

/**
 * @brief Find the job that @p j (from session @p s, whose name has @p digest) joins.
 * @param [out] job_p The job; NULL when a new one is to be created.
 * @return COLL_OK (with or without a job); COLL_ERR_DENIED (a job of that id and this uid
 *         has another digest); COLL_ERR_RENDEZVOUS (the job disagrees with @p j, failed, or
 *         its name is barred: a second formation, which also fails that job). @p err says why.
 */
coll_status_t coll_formation_find(coll_daemon_t *d, const coll_session_t *s,
                                  const Coll__Wire__JoinJob *j, const uint8_t *digest,
                                  coll_job_t **job_p, char *err, size_t errlen);

/** @brief Forget the barred names (daemon shutdown). */
void coll_formation_clear(coll_daemon_t *d);

#endif
