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
#include "engine/feature.h"
#include "engine/shm.h"

/** The node-reduced path as a feature of its operations (engine/feature.c): its state is the
 *  home post (coll_shm_home_t) that the operation's completion goes to instead of the ranks. */
extern const coll_op_feature_t coll_node_feature;

/** @return 1 when @p op is the inter-node phase of a node-reduced allreduce. */
int coll_op_is_node_reduced(const coll_op_t *op);

/**
 * @brief Start node-reduced allreduce @p subs (every local rank's Submit, from its post) whose
 *        node sum is in @p home's node buffer. The checks of separate submissions apply (every
 *        local rank still in the job, its buffers its own, equal descriptors), and the node
 *        buffer must lie in local rank 0's allocations; any refusal fails the job on every node
 *        with the reason. The operation's descriptor is the one the daemon would build for
 *        the ranks' own submissions, so the check with the previous node is unchanged and
 *        nodes that run it whole agree with this one. The operation has one buffer (op->nbufs
 *        == 1: in[0] = out[0], the node buffer) and answers the home post when it completes.
 *        Loop thread.
 */
void coll_op_submit_reduced(coll_job_t *job, const Coll__Wire__Submit *subs,
                            const coll_shm_home_t *home);

#endif
