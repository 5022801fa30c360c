/**
 * @file shm.h
 * @brief The daemon's part in its job's shared-memory area (proto/shm_area.h): it sets the area up,
 *        takes the posts of a node submission (or reads them, for an allreduce they reduce
 *        and distribute themselves around its inter-node phase), and tells the ranks when
 *        that phase ended, when the job fails or a rank left. The ranks run small single-node
 *        collectives there without the daemon; engine/shm_watch.h is how the daemon still
 *        sees them.
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

/** Local rank 0's post of a node-reduced allreduce (proto/shm_area.h): where its local ranks
 *  reduced their inputs, and the post whose node word the daemon writes at the end. */
typedef struct {
    uint64_t off;   /**< the node buffer: a pool offset, inside one of local rank 0's allocations */
    uint32_t slot;  /**< the home post's slot */
    uint64_t state; /**< its state word (generation) when read */
} coll_shm_home_t;

/**
 * @brief Fill the header and the rank table once every local rank joined and the job is
 *        ready: ranks, pids, the crossovers @p max_bytes (single node) and @p node_max_bytes
 *        (node-reduced allreduces, only with several nodes), the direct path's bound and token
 *        from the job's parameters, the histogram bounds.
 */
void coll_shm_init(coll_job_t *job, uint64_t max_bytes, uint64_t node_max_bytes);

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

/**
 * @brief Read every local rank's post of node-reduced allreduce @p key (a node submission
 *        with COLL_SUBMISSION_REDUCED), as coll_shm_take() but leaving the posts to the ranks:
 *        @p subs[l] as local rank l's Submit, @p home from local rank 0's post.
 * @param [out] who_p On a refusal: the local rank whose post is at fault.
 * @return COLL_OK; COLL_ERR_PROTOCOL (a malformed post, or a home post without a node buffer)
 *         or COLL_ERR_JOB (a rank withdrew its post, or local rank 0 left) with the reason in
 *         @p err.
 */
coll_status_t coll_shm_read_reduced(coll_job_t *job, uint64_t key, Coll__Wire__Submit *subs,
                                    coll_shm_home_t *home, uint32_t *who_p, char *err,
                                    size_t len);

/**
 * @brief The inter-node phase of the node-reduced allreduce at @p home ended with @p status
 *        (COLL_OK or an error) by algorithm @p algo, with the phase times and steps @p t
 *        (ready_ns, peers_ns, reduced_ns: uv_hrtime(), 0 when not reached; nsteps records
 *        from ready_ns): write those and the home post's node word, and wake every local
 *        rank, which then distribute the node buffer (or end with the error). Nothing is
 *        written for a failed job, whose header tells the ranks.
 */
void coll_shm_node_done(coll_job_t *job, const coll_shm_home_t *home, coll_status_t status,
                        uint32_t algo, const coll_ctl_times_t *t);

/** @brief The job failed: its status and message go to the header, every local rank is woken
 *         (those waiting in the area end their posts with that error). */
void coll_shm_fail(coll_job_t *job);

/** @brief Local rank @p who ("rank R (pid P)") left the ready job: later posts cannot run. */
void coll_shm_left(coll_job_t *job, const char *who);

/**
 * @brief Another node's daemon said that rank @p who ("rank R (pid P) on node N") left the
 *        job: written into the area's header (the first one) for the direct path's rounds,
 *        which fail the job naming it when they still wait for that node a second later.
 *        Loop thread.
 */
void coll_shm_peer_left(coll_job_t *job, const char *who);

#endif
