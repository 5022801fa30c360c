/**
 * @file nccl.h
 * @brief NCCL between the daemons of a job (coll_impl_nccl, algos.h): what the choice asks of
 *        it and the end of the job's communicator. One communicator per job among its daemons
 *        (one NCCL rank per node, on the device of the operations' device pool), made at the
 *        job's first NCCL operation and kept until the job ends. Loop thread only.
 */
#ifndef COLL_ENGINE_ALGOS_NCCL_H
#define COLL_ENGINE_ALGOS_NCCL_H

#include "core/group.h"
#include "core/job.h"

/**
 * @return 1 when NCCL runs a @p coll operation (Collective) of group @p grp with dtype @p dtype
 *         and reduction @p op (the wire's numbers): a dtype NCCL has; an allreduce, a
 *         reduce-scatter or a reduce with sum, average (NCCL's sum, the host's average:
 *         nccl_calls.c), product, minimum or maximum (the bitwise reductions NCCL has not); an
 *         all-gather; a broadcast; reduce-scatter and all-gather only where every node holds the
 *         same number of consecutive ranks (NCCL's blocks are the nodes'). 0 otherwise: those
 *         take the staged path. The same on every node (the group's layout is every node's).
 *         Thread-safe.
 */
int coll_nccl_fits(const coll_group_t *grp, unsigned coll, unsigned dtype, unsigned op);

/**
 * @brief End @p job's communicator, if it has one: aborted (ncclCommAbort, which ends the
 *        peers' waits in NCCL) when the job failed or an operation is still in it, destroyed
 *        otherwise; its poll stops. Called when the job fails or closes, before its operations
 *        complete (engine/op.c). Safe to call again.
 */
void coll_nccl_job_end(coll_job_t *job);

/** @brief Free what coll_nccl_job_end() left of @p job's communicator (its stream, event and
 *         timer). Safe when it has none. */
void coll_nccl_job_free(coll_job_t *job);

#endif
