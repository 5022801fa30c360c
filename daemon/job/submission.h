/**
 * @file submission.h
 * @brief A rank's submission, from its socket or its control block: its own (a point-to-point
 *        transfer, or any operation of a library without the shared-memory area), or the
 *        node's: one for every local rank, whose posts of the collective wait in the job's
 *        shared-memory area (proto/shm_area.h, COLL_SUBMISSION_NODE), or, for an allreduce they
 *        reduced there (COLL_SUBMISSION_REDUCED), its inter-node phase on the node buffer.
 */
#ifndef COLL_JOB_SUBMISSION_H
#define COLL_JOB_SUBMISSION_H

#include "core/job.h"

/**
 * @brief Hand @p sub from local rank @p s to the engine: a node submission as every local
 *        rank's own, taken from their posts. A post with impossible fields cuts that rank off
 *        (a protocol error); a rank that withdrew its post fails the job. A node submission
 *        for a job that is not ready is dropped: the ranks end their posts themselves. A
 *        reduced one becomes one operation on the node buffer (engine/node_op.h).
 */
void coll_job_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub);

#endif
