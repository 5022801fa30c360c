/*
 * The registered algorithms (engine/algo.h): one entry per collective, memory kind and
 * algorithm. An algorithm goes in its own file of this folder and in this table; on a new
 * memory kind (a GPU's memory through NCCL, next) it is one more entry per collective, with
 * that kind, its own predicate and score, and its implementation; the engine's core is not
 * touched.
 *
 * The automatic choice on host memory is the root's cost model's where it names an entry
 * (engine/crossover.h: recursive doubling or the ring for an allreduce by size, the only
 * collective with two candidates today); these scores decide where it names none, and for a
 * job whose root has no model (cost_params = none): allreduces up to rd_max_bytes by recursive
 * doubling (whose whole buffer and a descriptor travel in one staging half), larger ones by the
 * ring;
 * reduce-scatter, all-gather and the parameter service's steps by the ring; broadcast and
 * reduce by the chain; the barrier and the parameter service's registration, save and load
 * (the agreement of every node) by dissemination; gather and scatter directly between the
 * root's node and each other node; all-to-all directly between every pair of nodes. With
 * every rank on one node, every one of them runs from the local ranks' buffers in the daemon.
 * On device memory: allreduce, reduce-scatter,
 * all-gather, broadcast and reduce through NCCL where the job's parameter nccl is on and the
 * group has two nodes or more (and NCCL takes the operation, engine/submit.c), on the device by
 * the executor where the group is on one node and the daemon has the executor (dev_local.c);
 * everything else takes the host's entries through the staged path (engine/dev_staged.h).
 */
#include "core/daemon.h"
#include "engine/algo.h"
#include "engine/algos/algos.h"

/* The whole buffer and a descriptor travel in one staging half. */
static int rd_runs(const coll_job_t *job, uint32_t nnodes, uint64_t bytes)
{
    (void)nnodes;
    return bytes + sizeof(coll_desc_t) <= job->params.segment_bytes;
}

/* Above the ring's claim (1) up to rd_max_bytes, never chosen beyond. */
static double rd_score(const coll_job_t *job, uint64_t bytes)
{
    return bytes <= job->params.rd_max_bytes ? 2.0 : 0.0;
}

/* The root decided that the job's daemons all run NCCL (net/rdv_nccl.h); a group on one node
 * has nothing between nodes. */
static int nccl_runs(const coll_job_t *job, uint32_t nnodes, uint64_t bytes)
{
    (void)bytes;
    return job->params.nccl && nnodes > 1;
}

/* A group on one node, and the daemon has the executor of device memory (core/devices.h). */
static int device_runs(const coll_job_t *job, uint32_t nnodes, uint64_t bytes)
{
    (void)bytes;
    return nnodes == 1 && job->d->devices.exec != NULL;
}

#define HOST(kind, algo, runs, score, impl)                                                       \
    {COLL_KIND_##kind, COLL_MEM_HOST, COLL_ALGO_##algo, runs, score, impl, &coll_impl_local}

#define DEVICE(kind)                                                                              \
    {COLL_KIND_##kind, COLL_MEM_CUDA, COLL_ALGO_DEVICE, device_runs, NULL, &coll_impl_dev_local, \
     &coll_impl_dev_local}

static const coll_algo_entry_t table[] = {
    HOST(ALLREDUCE, RD, rd_runs, rd_score, &coll_impl_rd),
    HOST(ALLREDUCE, RING, NULL, NULL, &coll_impl_ring),
    HOST(REDUCE_SCATTER, RING, NULL, NULL, &coll_impl_ring),
    HOST(ALLGATHER, RING, NULL, NULL, &coll_impl_ring),
    HOST(PS_STEP, RING, NULL, NULL, &coll_impl_ring),
    HOST(BROADCAST, CHAIN, NULL, NULL, &coll_impl_chain_bcast),
    HOST(REDUCE, CHAIN, NULL, NULL, &coll_impl_chain_reduce),
    HOST(BARRIER, DISSEMINATION, NULL, NULL, &coll_impl_barrier),
    HOST(PS_REGISTER, DISSEMINATION, NULL, NULL, &coll_impl_barrier),
    HOST(PS_SAVE, DISSEMINATION, NULL, NULL, &coll_impl_barrier),
    HOST(PS_LOAD, DISSEMINATION, NULL, NULL, &coll_impl_barrier),
    {COLL_KIND_GATHER, COLL_MEM_HOST, COLL_ALGO_DIRECT, NULL, NULL, &coll_impl_direct,
     &coll_impl_direct_local},
    {COLL_KIND_SCATTER, COLL_MEM_HOST, COLL_ALGO_DIRECT, NULL, NULL, &coll_impl_direct,
     &coll_impl_direct_local},
    {COLL_KIND_ALLTOALLV, COLL_MEM_HOST, COLL_ALGO_DIRECT, NULL, NULL, &coll_impl_alltoallv,
     &coll_impl_alltoallv},
    /* The job's NCCL between its daemons (algos/nccl.c); never with every rank on one node. */
    {COLL_KIND_ALLREDUCE, COLL_MEM_CUDA, COLL_ALGO_NCCL, nccl_runs, NULL, &coll_impl_nccl,
     &coll_impl_nccl},
    {COLL_KIND_REDUCE_SCATTER, COLL_MEM_CUDA, COLL_ALGO_NCCL, nccl_runs, NULL, &coll_impl_nccl,
     &coll_impl_nccl},
    {COLL_KIND_ALLGATHER, COLL_MEM_CUDA, COLL_ALGO_NCCL, nccl_runs, NULL, &coll_impl_nccl,
     &coll_impl_nccl},
    {COLL_KIND_BROADCAST, COLL_MEM_CUDA, COLL_ALGO_NCCL, nccl_runs, NULL, &coll_impl_nccl,
     &coll_impl_nccl},
    {COLL_KIND_REDUCE, COLL_MEM_CUDA, COLL_ALGO_NCCL, nccl_runs, NULL, &coll_impl_nccl,
     &coll_impl_nccl},
    /* A group on one node, on the device through the executor (algos/dev_local.c); never on
     * several nodes (device_runs()), where its implementation is the same and unused. */
    DEVICE(ALLREDUCE), DEVICE(REDUCE_SCATTER), DEVICE(ALLGATHER), DEVICE(BROADCAST),
    DEVICE(REDUCE),
};

const coll_algo_entry_t *coll_algo_table(size_t *n_p)
{
    *n_p = sizeof(table) / sizeof(table[0]);
    return table;
}
