/**
 * @file stage.h
 * @brief Work between an operation's reduction and its distribution: the parameter service's
 *        optimizer step (ps/), which the engine reaches only through what the layer above
 *        attached to the operation (a coll_stage_ops_t) and the hooks the composition root
 *        installed (d->stage_hooks), as UCT calls what UCP registered.
 *
 * A staged operation (COLL_KIND_PS_STEP) is an allreduce whose reduced chunk is handed to its
 * stage before the all-gather: the ring (algos/ring.c) and the single-node algorithm
 * (algos/single_node.c) combine the reduce-scatter's result of each piece of this node's chunk
 * into local rank 0's input (the gradient buffer is the scratch, so the update needs no memory
 * of its own), call reduced() with the piece, and distribute out[0] (the parameters) once the
 * stage has written the piece there (distribute()). Pieces are the segments of the node's chunk
 * in the plan of coll_plan_init(count, nodes, element size, the job's segment bytes), each
 * passed exactly once to reduced() and once to distribute(), in any order.
 *
 * Without a barrier each piece is distributed right after reduced() (element-wise updates:
 * SGD, AdamW). With op->stage_barrier (norms of whole layers: LARS, LAMB; global clipping) the
 * algorithm reduces every piece first, then calls all_reduced(); the stage exchanges what it
 * needs with the other nodes (its own transfers, COLL_XFER_STAGE) and calls
 * coll_stage_release(), after which every piece goes through distribute() and the all-gather.
 * The bytes of the reduce-scatter and the all-gather are those of an allreduce either way.
 *
 * A compressed step (its submission asked for compression: engine/codec/staged.c) runs the
 * codec's reduction between nodes instead of the ring's reduce-scatter, writes this node's chunk
 * of the decoded, averaged gradient into local rank 0's input, and hands the stage the same
 * pieces in the same order (reduced(), all_reduced() and the release with a barrier,
 * distribute()); the all-gather of the updated chunk is float32 and exact. Its bytes are the
 * codec's reduction plus that all-gather.
 *
 * Every callback runs on the loop thread and does bounded work (one piece) unless it says
 * otherwise. A callback that fails the job (coll_job_fail()) leaves op->done set; the
 * algorithm checks it before going on.
 */
#ifndef COLL_ENGINE_STAGE_H
#define COLL_ENGINE_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "core/session.h"
#include "net/transport.h"
#include "proto/wire.h"

struct coll_op;

/** coll_xfer_t.kind of a transfer the stage posted (its tag is the stage's, tag.h). */
#define COLL_XFER_STAGE 4u

/** What a stage does with an operation (see the file comment). */
typedef struct coll_stage_ops {
    /** Piece [off, off + len) of this node's chunk is reduced: op->in[0] holds the result
     *  there (float32, averaged), op->out[0] the values before the update. */
    void (*reduced)(struct coll_op *op, uint64_t off, uint64_t len);
    /** With op->stage_barrier: every piece is reduced; call coll_stage_release() when they may
     *  be distributed (now or later), or fail the job. */
    void (*all_reduced)(struct coll_op *op);
    /** Piece [off, off + len) goes out next: op->out[0] must hold its final values after this
     *  call. */
    void (*distribute)(struct coll_op *op, uint64_t off, uint64_t len);
    /** A transfer of the stage (COLL_XFER_STAGE) completed: a send, or a receive of the
     *  length it expected. Failures never come here (they fail the job). */
    void (*on_xfer)(struct coll_op *op, coll_xfer_t *x);
    /** The operation completed with @p status on every local rank (COLL_OK: every piece was
     *  distributed and the all-gather finished). */
    void (*done)(struct coll_op *op, coll_status_t status);
    /** Nothing of the operation is in flight any more: free op->stage_state. */
    void (*end)(struct coll_op *op);
    /** A compressed step only: this node's sum of its local ranks' gradients (and its
     *  compression residual) holds a non-finite value at bucket element @p elem, found before
     *  anything of it was sent; fail the job, saying where. */
    void (*nonfinite)(struct coll_op *op, uint64_t elem);
} coll_stage_ops_t;

/** What the layer above does for the engine with the parameter service's operations
 *  (coll_kind_is_ps()); installed in d->stage_hooks by the composition root (daemon.c). */
typedef struct coll_stage_hooks {
    /** Check a submission (its bucket, step, records) beyond the engine's buffer checks.
     *  @return COLL_OK, or an error with its text in @p err (the job fails everywhere). */
    coll_status_t (*check)(const coll_job_t *job, const coll_session_t *s,
                           const Coll__Wire__Submit *sub, char *err, size_t errlen);
    /** Every local rank submitted @p op: a step attaches its stage (op->stage, stage_state,
     *  stage_barrier); registration, save and load do their part on this node (the nodes'
     *  agreement follows, as a barrier). @return COLL_OK, or an error with its text in @p err
     *  (the job fails everywhere). */
    coll_status_t (*start)(struct coll_op *op, char *err, size_t errlen);
} coll_stage_hooks_t;

/** @brief A barrier stage lets the reduced chunk go: the algorithm distributes every piece.
 *         Call once per operation, on the loop thread, after all_reduced(). */
void coll_stage_release(struct coll_op *op);

#endif
