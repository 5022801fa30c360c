/**
 * @file dev_staged.h
 * @brief The staged path of device buffers: collectives on buffers in a device pool
 *        (core/dev_pools.h) run by the host's algorithms on host copies of them. When the
 *        operation starts, each local member's device input is copied into page-locked host
 *        memory kept by the daemon across operations (core/dev_pinned.h) in chunks on the two
 *        streams of its device pool (engine/dev_staged_copy.h), and the operation's buffers
 *        (op->in, op->out) become the host copies; the algorithm the table chose runs on them
 *        as on any host buffer once the copies' events completed; before the ranks are told,
 *        each device output gets its host copy back.
 *
 * It is a feature (engine/feature.h), not an entry of the algorithm table per memory kind: it
 * wraps whichever host algorithm the table chooses (ring, recursive doubling, chain, the local
 * one), so the choice, the descriptors and the data on the wire are those of host memory, and
 * nodes whose ranks hold the same collective in different memory kinds still agree. It names
 * its implementation "staged+<algorithm>" (coll_req_algo()) and counts each device's staged
 * operations and bytes (core/devices.h, /metrics).
 *
 * The copies do not block the loop thread: the feature's attach and finish answer
 * COLL_INPROGRESS while they are in flight, a timer of the loop polls their events, and the
 * operation starts (coll_op_attached()) or its ranks are told (coll_op_finished()) once they
 * completed. The network does not overlap them: the whole input is in before the algorithm
 * starts. Host copies the driver refuses to lock are ordinary memory, counted per device; the
 * page-locked ones go back to the daemon's cache when the operation is freed, whatever its end.
 */
#ifndef COLL_ENGINE_DEV_STAGED_H
#define COLL_ENGINE_DEV_STAGED_H

#include "engine/feature.h"

/** The staged path as a feature: attached to an operation one of whose local members named a
 *  device pool. Registered in engine/feature.c. */
extern const coll_op_feature_t coll_dev_staged_feature;

/**
 * @return 1 when the staged path runs a @p kind collective (coll_kind_t) with compression
 *         @p compression (0: none) on device buffers: allreduce, compressed or not (the
 *         compressed allreduce reads its host copies as the others do), and reduce-scatter,
 *         all-gather, broadcast, reduce, gather and scatter without compression; 0 otherwise
 *         (the submission is refused).
 */
int coll_dev_staged_runs(unsigned kind, unsigned compression);

#endif
