/**
 * @file dev_staged.h
 * @brief The staged path of device buffers: collectives on buffers in a device pool
 *        (core/dev_pools.h) run by the host's algorithms on host copies of them. When the
 *        operation starts, each local member's device input is copied into page-locked host
 *        memory kept by the daemon across operations (core/dev_pinned.h) in chunks on the two
 *        streams of its device pool (engine/dev_staged_copy.h), and the operation's buffers
 *        (op->in, op->out) become the host copies; the algorithm the table chose runs on them
 *        as on any host buffer once the copies' events completed; before the ranks are told,
 *        each device output gets its host copy back. What is copied is each member's extent
 *        (engine/dev_staged_copy.h): a send's input only, a receive's output only, an
 *        all-to-all's furthest block in and its receive blocks back, nothing between them.
 *        Point-to-point operations, which the engine starts without the features
 *        (engine/algos/p2p.h), are staged through coll_dev_staged_p2p().
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
 * completed. A ring allreduce of more than one batch of the ring's columns (the gradient
 * buckets; coll_dev_staged_batches()) overlaps them with the ring: it starts at once, each
 * column once its batch is in (the operation's gate, op.h), and each batch goes back as soon as
 * the ring finished its columns (engine/dev_staged_pipe.c, named "staged+pipelined+ring"); so
 * does an allreduce, reduce or broadcast of more than one batch on one node, run by the local
 * algorithm ("staged+pipelined+local"). Every other operation (compressed, the parameter
 * service's step, the other collectives, recursive doubling) has its whole input in before its
 * algorithm starts and its whole output back after it ends. Host copies the driver refuses to lock are ordinary
 * memory, counted per device; the page-locked ones go back to the daemon's cache when the
 * operation is freed, whatever its end.
 */
#ifndef COLL_ENGINE_DEV_STAGED_H
#define COLL_ENGINE_DEV_STAGED_H

#include "engine/feature.h"

/** The staged path as a feature: attached to an operation one of whose local members named a
 *  device pool. Registered in engine/feature.c. */
extern const coll_op_feature_t coll_dev_staged_feature;

/**
 * @return 1 when the staged path runs a @p kind operation (coll_kind_t) with compression
 *         @p compression (0: none) on device buffers: allreduce and the parameter service's
 *         step, compressed or not (both read their host copies as the others do; the service
 *         checks which methods its steps take), and reduce-scatter, all-gather, broadcast,
 *         reduce, gather, scatter, send, receive and the all-to-all (equal counts or not)
 *         without compression; 0 otherwise (the submission is refused: the service's
 *         registration, save and load, whose records the library keeps in the host pool).
 */
int coll_dev_staged_runs(unsigned kind, unsigned compression);

/**
 * @brief Stage point-to-point operation @p op (engine/algos/p2p.h), whose one buffer (op->in[0]
 *        of a send, op->out[0] of a receive) is a device address in the device pool of its
 *        member @p m: the feature attaches to it (coll_op_feature_attach()), the buffer
 *        becomes its host copy, a send's is copied in, and a receive's is copied back when
 *        the operation completes successfully, before its rank is told (the feature's finish).
 *        Loop thread only; hold @p op across the call (a failure fails the job).
 * @param ready Called from the loop once a send's copy in completed, unless the operation
 *        ended meanwhile; @p op is held across the call.
 * @return COLL_OK: the host copy is ready now (a receive, which copies nothing in, or copies
 *         done at once); COLL_INPROGRESS: @p ready follows; or the error with which the job
 *         failed (coll_job_fail(): COLL_ERR_NOMEM, the device layer's).
 */
coll_status_t coll_dev_staged_p2p(coll_op_t *op, const coll_op_member_t *m,
                                  void (*ready)(coll_op_t *op));

#endif
