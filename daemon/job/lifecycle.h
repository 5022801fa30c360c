/**
 * @file lifecycle.h
 * @brief The job layer: a job's life on this node, from its first local rank's JoinJob to its
 *        release once no rank, transfer or handle holds it (job/join.c, job/lifecycle.c).
 *        Installs the hooks through which the layers below report (core/hooks.h).
 */
#ifndef COLL_JOB_LIFECYCLE_H
#define COLL_JOB_LIFECYCLE_H

#include "core/job.h"

/** @brief Install the job layer's hooks on @p d (the composition root, before anything runs). */
void coll_job_layer_init(coll_daemon_t *d);

/**
 * @brief Handle a client's JoinJob: find or create the job and add the session as a local rank.
 *        The reply (with the pool fd) goes out once the whole job has met; errors are replied at
 *        once, and a job this node refuses (budget, pool) is refused at its root too.
 */
void coll_job_join(coll_daemon_t *d, coll_session_t *s, const Coll__Wire__JoinJob *join);

/**
 * @brief Answer local rank @p s's JoinJob: with @p status COLL_OK the job's pool and doorbell
 *        fds go along (@p job must be ready), else @p error.
 */
void coll_job_reply_join(coll_session_t *s, coll_status_t status, const char *error,
                         const coll_job_t *job);

/** How long a join waits before its ranks hear what the job waits for (coll_job_join_note()). */
#define COLL_JOIN_NOTE_MS 1000

/**
 * @brief Tell every local rank of @p job (gathering or in its rendezvous) what the job waits
 *        for: the local ranks missing, the unreachable root and why, or what the root has
 *        (JoinWait; job/joinwait.c). The ranks' libraries print it (COLL_DEBUG=WARN).
 */
void coll_job_join_note(coll_job_t *job);

/** @brief Every rank is on this node: no rendezvous, the job is ready now. */
void coll_job_ready_alone(coll_job_t *job);

/**
 * @brief Local rank @p s ended the job (coll_comm_abort(), or a submission its library
 *        refused): fail it on every node with a message naming the rank, @p status (unless
 *        COLL_ERR_JOB) and the rank's @p reason; @p s keeps @p status, every other rank gets
 *        COLL_ERR_JOB (coll_job_fail_by()). With COLL_ERR_MISMATCH (its library found local
 *        ranks that disagree on a collective) every rank gets it, and the reason, which names
 *        both descriptors, is the job's message as it is.
 */
void coll_job_abort(coll_job_t *job, coll_session_t *s, coll_status_t status, const char *reason);

/** @brief The session of local rank @p s->local_rank left the job. */
void coll_job_leave(coll_job_t *job, coll_session_t *s);

/** @brief Leave the job table now and close the job's engine and transport; the rest is freed
 *         when the transport reports it closed. Once per job. */
void coll_job_free_now(coll_job_t *job);

/** @brief Fail every job (daemon shutdown). */
void coll_job_close_all(coll_daemon_t *d);

#endif
