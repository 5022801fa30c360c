/**
 * @file algos.h
 * @brief The implementations of the registered algorithms (engine/algos/table.c lists them per
 *        collective and memory kind; engine/algo.h says how one is chosen).
 */
#ifndef COLL_ENGINE_ALGOS_H
#define COLL_ENGINE_ALGOS_H

#include "engine/op.h"

/** The pipelined ring: allreduce, reduce-scatter, all-gather (ring.c). */
extern const coll_impl_t coll_impl_ring;
/** Recursive doubling allreduce (rd.c). */
extern const coll_impl_t coll_impl_rd;
/** Pipelined chain broadcast (chain.c). */
extern const coll_impl_t coll_impl_chain_bcast;
/** Pipelined chain reduce (chain.c). */
extern const coll_impl_t coll_impl_chain_reduce;
/** Dissemination barrier (barrier.c). */
extern const coll_impl_t coll_impl_barrier;
/** Direct gather and scatter, the root's node exchanging each remote rank's block with its
 *  node once every node's descriptor agreed (direct.c). */
extern const coll_impl_t coll_impl_direct;
/** The same with every rank on one node: the blocks through the pool (direct.c). */
extern const coll_impl_t coll_impl_direct_local;
/** All-to-all with per-rank sizes: every node's counts checked on every node, then one
 *  message per pair of ranks on different nodes, copies within a node (alltoallv.c). */
extern const coll_impl_t coll_impl_alltoallv;
/** Single node: every collective from the local ranks' buffers (single_node.c). */
extern const coll_impl_t coll_impl_local;
/** NCCL between the daemons, on device buffers: allreduce, reduce-scatter, all-gather,
 *  broadcast and reduce, the node's members' buffers combined, one NCCL call, the result
 *  delivered to each member (nccl.c, nccl_calls.c). */
extern const coll_impl_t coll_impl_nccl;
/** On the device, a group on one node: allreduce, reduce-scatter, all-gather, broadcast and
 *  reduce of the members' device buffers by the executor of device memory on the daemon's
 *  stream, without host copies ("device+local"; dev_local.c, dev_combine.h). */
extern const coll_impl_t coll_impl_dev_local;
/** The same on members' buffers in pools of several devices that are peers (one GPU per rank,
 *  the single 8-GPU box): combined on the first member's device, reading and writing the
 *  others' pools through the access the daemon granted it ("device+peers"; dev_local.c,
 *  coll_devc_lane_pool()). */
extern const coll_impl_t coll_impl_dev_peers;
/** device+peers split across the members' devices (dev_peers.c): each device reduces its
 *  members' blocks on its own stream, then copies them to the others' outputs after a device
 *  wait for their reductions (allreduce); reduce-scatter and all-gather each device its own
 *  members' part. Named "device+peers" too. */
extern const coll_impl_t coll_impl_dev_peers_split;

/** @return 1 when @p op, which device+peers runs (coll_devc_lane_pool() of its members is not
 *          0), is split across its members' devices (coll_impl_dev_peers_split): an allreduce,
 *          a reduce-scatter or an all-gather whose whole vector (the allreduce's count, the
 *          others' count times the group's size) has at least device_peers_split_min elements
 *          (the configuration), its members' devices all peers of each other. Loop thread. */
int coll_dev_peers_splits(const coll_op_t *op);

#endif
