/**
 * @file shm.h
 * @brief The daemon's part in its job's shared-memory area (proto/shm_area.h): it sets the area up,
 *        takes the posts of a node submission, and tells the ranks when the job fails or a
 *        rank left. The ranks run small single-node collectives there without the daemon;
 *        engine/shm_watch.h is how the daemon still sees them.
 */
#ifndef COLL_ENGINE_SHM_H
#define COLL_ENGINE_SHM_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "proto/shm_area.h"

/** @return The job's area header (its pool is mapped). */
coll_shm_hdr_t *coll_shm_hdr(const coll_job_t *job);

/** @return Local rank @p l's area. */
coll_shm_rank_t *coll_shm_rank(const coll_job_t *job, uint32_t l);

/**
 * @brief Fill the header and the rank table once every local rank joined and the job is
 *        ready: ranks, pids, the crossover @p max_bytes, the histogram bounds.
 */
void coll_shm_init(coll_job_t *job, uint64_t max_bytes);

/**
 * @brief Take every local rank's post of collective @p key (a node submission): copy each,
 *        check its fields, mark it TAKEN, and fill @p subs[l] with the Submit of local rank l
 *        (req_id 0 and nothing else for a rank that has left).
 * @param [out] who_p On a refusal: the local rank whose post is at fault.
 * @return COLL_OK; COLL_ERR_PROTOCOL (a post with impossible fields: that rank broke the
 *         protocol) or COLL_ERR_JOB (a rank no longer has the post: it withdrew it) with the
 *         reason in @p err. Nothing is taken on an error.
 */
coll_status_t coll_shm_take(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                            uint32_t *who_p, char *err, size_t len);

/** @brief The job failed: its status and message go to the header, every local rank is woken
 *         (those waiting in the area end their posts with that error). */
void coll_shm_fail(coll_job_t *job);

/** @brief Local rank @p who ("rank R (pid P)") left the ready job: later posts cannot run. */
void coll_shm_left(coll_job_t *job, const char *who);

#endif
