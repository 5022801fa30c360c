/**
 * @file nccl.h
 * @brief NCCL between the daemons of a job (coll_impl_nccl, algos.h): what the choice asks of
 *        it and the end of the job's communicators. One communicator per group of two nodes or
 *        more (the world, a split group) among the daemons of its nodes (one NCCL rank per
 *        group node, in the group's node order, on the device of the operations' device pool),
 *        made at the group's first NCCL operation and kept until the job ends. Loop thread only.
 */
#ifndef COLL_ENGINE_ALGOS_NCCL_H
#define COLL_ENGINE_ALGOS_NCCL_H

#include "core/group.h"
#include "core/job.h"

/**
 * @return 1 when NCCL runs a @p coll operation (Collective) of group @p grp with dtype @p dtype
 *         and reduction @p op (the wire's numbers): a group of two nodes or more (one node has
 *         nothing between nodes: the staged path's local algorithm serves it); a dtype NCCL has; an allreduce, a
 *         reduce-scatter or a reduce with sum, average (NCCL's sum, the host's average:
 *         nccl_calls.c), product, minimum or maximum; an allreduce with a bitwise reduction
 *         of int8, uint8, int32 or int64 (NCCL has none: an all-gather of the nodes' results,
 *         reduced by the executor); an all-gather; a broadcast; reduce-scatter and all-gather
 *         only where every node holds the same number of consecutive ranks of the group
 *         (NCCL's blocks are the group's nodes'). 0 otherwise: those take the staged path.
 *         The same on every node (the group's layout is every node's).
 *         Thread-safe.
 */
int coll_nccl_fits(const coll_group_t *grp, unsigned coll, unsigned dtype, unsigned op);

/**
 * @brief End each of @p job's communicators: aborted (ncclCommAbort, which ends the
 *        peers' waits in NCCL) when the job failed or an operation is still in it, destroyed
 *        otherwise; its poll stops. A communicator whose stream waits on the device for a
 *        rank's ready word not there yet is not aborted here but by coll_nccl_job_free() (its
 *        queued NCCL call would start on the freed communicator once the word came). Called
 *        when the job fails or closes, before its operations complete (engine/op.c). Safe to
 *        call again.
 */
void coll_nccl_job_end(coll_job_t *job);

/** @brief End and free @p job's communicators (their streams, events and timers), once its
 *         ranks here are gone and before coll_dev_sync_job_end(): one whose abort was deferred
 *         has the ready words its stream waits for stored, then is aborted, then its stream
 *         drained. Safe when it has none. */
void coll_nccl_job_free(coll_job_t *job);

#endif
