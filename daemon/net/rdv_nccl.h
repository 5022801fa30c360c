/**
 * @file rdv_nccl.h
 * @brief Whether a job's daemons run collectives on device buffers between them through NCCL
 *        (the job parameter nccl), decided by the root daemon at the rendezvous, as the other
 *        job parameters are, so that every node chooses its algorithms alike (engine/algo.h).
 *
 * Each node offers in its join what it has: whether it can run NCCL (a device layer, a usable
 * NCCL, its nccl key not off, and NCCL's kind of memory: a real NCCL with a real device layer,
 * the tests' stand-in with the fake one) and the UUIDs of the GPUs it serves. The root says yes
 * when every node can and no GPU is served by two nodes: NCCL refuses two ranks on one GPU, so
 * daemons that share one stay on the staged path (engine/dev_staged.h). The fake device layer's
 * devices are host memory of each process and name no GPU.
 */
#ifndef COLL_NET_RDV_NCCL_H
#define COLL_NET_RDV_NCCL_H

#include <stddef.h>

#include "core/daemon.h"
#include "proto/collective.pb-c.h"

/**
 * @brief Fill this node's offer into its join @p j: nccl, nccl_why and the device UUIDs, which
 *        point into @p d's device table (valid while @p d is).
 * @param [out] uuids Room for COLL_DEV_MAX entries, which @p j points to.
 */
void coll_rdv_nccl_offer(const coll_daemon_t *d, Coll__Wire__NodeJoin *j,
                         ProtobufCBinaryData *uuids);

/**
 * @brief The root's decision from the joins of every node of a job.
 * @param [out] why When no, which node and why ("node host-b: no NCCL: ...", "nodes host-a and
 *                  host-b serve the same GPU"), for the root's log; "" when yes.
 * @return 1 when the job's collectives on device buffers may run through NCCL, 0 otherwise.
 */
int coll_rdv_nccl_decide(const Coll__Wire__NodeJoin *const *joins, size_t n, char *why,
                         size_t whylen);

#endif
