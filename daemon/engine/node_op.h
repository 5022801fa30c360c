/**
 * @file node_op.h
 * @brief The inter-node phase of a node-reduced allreduce: the local ranks of a multi-node job
 *        reduced their inputs in shared memory into one node buffer (proto/shm_area.h,
 *        COLL_SUBMISSION_REDUCED); the daemon runs the inter-node algorithm on that buffer alone,
 *        as a node with one rank, and the ranks distribute its result themselves.
 */
#ifndef COLL_ENGINE_NODE_OP_H
#define COLL_ENGINE_NODE_OP_H

#include "core/job.h"
#include "engine/shm.h"

/**
 * @brief Start node-reduced allreduce @p subs (every local rank's Submit, from its post) whose
 *        node sum is in @p home's node buffer. The checks of separate submissions apply (every
 *        local rank still in the job, its buffers its own, equal descriptors), and the node
 *        buffer must lie in local rank 0's allocations; any refusal fails the job on every node
 *        with the reason. The operation's descriptor is the one the daemon would build for
 *        the ranks' own submissions, so the check with the previous node is unchanged and
 *        nodes that run it whole agree with this one. Loop thread.
 */
void coll_op_submit_reduced(coll_job_t *job, const Coll__Wire__Submit *subs,
                            const coll_shm_home_t *home);

#endif
