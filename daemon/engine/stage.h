/**
 * @file stage.h
 * @brief Work between an operation's reduction and its distribution: the parameter service's
 *        optimizer step (ps/), which the engine reaches only through the stage the layer above
 *        gave the operation (a coll_stage_t, kept by the stage feature, engine/feature.h) and
 *        the hooks the composition root installed (d->stage_hooks), as UCT calls what UCP
 *        registered.
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
 * SGD, AdamW). With a barrier (coll_stage_t.barrier: norms of whole layers, LARS, LAMB; global
 * clipping) the algorithm reduces every piece first, then calls all_reduced(); the stage
 * exchanges what it needs with the other nodes (its own transfers, coll_stage_post()) and calls
 * coll_stage_resume(), after which every piece goes through distribute() and the all-gather.
 * The bytes of the reduce-scatter and the all-gather are those of an allreduce either way.
 *
 * A compressed step (its submission asked for compression: engine/codec/staged.c) runs the
 * codec's reduction between nodes instead of the ring's reduce-scatter, writes this node's chunk
 * of the decoded, averaged gradient into local rank 0's input, and hands the stage the same
 * pieces in the same order (reduced(), all_reduced() and the resumption with a barrier,
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
#include "engine/feature.h"
#include "net/transport.h"
#include "proto/wire.h"

struct coll_op;

/** coll_xfer_t.kind of a transfer the stage posted (its tag is the stage's, tag.h). */
#define COLL_XFER_STAGE 4u

/** What a stage does with an operation (see the file comment). */
typedef struct coll_stage_calls {
    /** Piece [off, off + len) of this node's chunk is reduced: op->in[0] holds the result
     *  there (float32, averaged), op->out[0] the values before the update. */
    void (*reduced)(struct coll_op *op, uint64_t off, uint64_t len);
    /** With a barrier: every piece is reduced; call coll_stage_resume() when they may be
     *  distributed (now or later), or fail the job. */
    void (*all_reduced)(struct coll_op *op);
    /** Piece [off, off + len) goes out next: op->out[0] must hold its final values after this
     *  call. */
    void (*distribute)(struct coll_op *op, uint64_t off, uint64_t len);
    /** A transfer of the stage (coll_stage_post()) completed: a send, or a receive of the
     *  length it expected. Failures never come here (they fail the job). */
    void (*on_xfer)(struct coll_op *op, coll_xfer_t *x);
    /** The operation completed with @p status on every local rank (COLL_OK: every piece was
     *  distributed and the all-gather finished). */
    void (*done)(struct coll_op *op, coll_status_t status);
    /** Nothing of the operation is in flight any more: free the stage's state. */
    void (*end)(struct coll_op *op);
    /** A compressed step only: this node's sum of its local ranks' gradients (and its
     *  compression residual) holds a non-finite value at bucket element @p elem, found before
     *  anything of it was sent; fail the job, saying where. */
    void (*nonfinite)(struct coll_op *op, uint64_t elem);
} coll_stage_calls_t;

/** An operation's stage: what the layer above gave it when it started (coll_stage_hooks_t). */
typedef struct coll_stage {
    const coll_stage_calls_t *calls; /**< NULL: the operation has no stage */
    void *state;                     /**< the stage's own (coll_stage_state()) */
    int barrier;                     /**< every piece reduced before any is distributed */
} coll_stage_t;

/** What the layer above does for the engine with the parameter service's operations
 *  (coll_kind_is_ps()); installed in d->stage_hooks by the composition root (daemon.c). */
typedef struct coll_stage_hooks {
    /** Check a submission (its bucket, step, records) beyond the engine's buffer checks.
     *  @return COLL_OK, or an error with its text in @p err (the job fails everywhere). */
    coll_status_t (*check)(const coll_job_t *job, const coll_session_t *s,
                           const Coll__Wire__Submit *sub, char *err, size_t errlen);
    /** Every local rank submitted @p op: a step fills @p stage (calls, state, barrier);
     *  registration, save and load do their part on this node (the nodes' agreement follows,
     *  as a barrier) and leave it empty. @return COLL_OK, or an error with its text in @p err
     *  (the job fails everywhere; nothing is kept in @p stage). */
    coll_status_t (*start)(struct coll_op *op, coll_stage_t *stage, char *err, size_t errlen);
} coll_stage_hooks_t;

/** The stage as a feature of the parameter service's operations (engine/feature.c). */
extern const coll_op_feature_t coll_stage_feature;

/** @return @p op's stage, NULL when it has none. */
const coll_stage_t *coll_op_stage(const struct coll_op *op);

/** @return The state of @p op's stage (coll_stage_t.state); @p op must have one. */
void *coll_stage_state(const struct coll_op *op);

/** @brief A barrier stage lets the reduced chunk go: the algorithm distributes every piece.
 *         Call once per operation, on the loop thread, after all_reduced(). */
void coll_stage_resume(struct coll_op *op);

/**
 * @brief Post a transfer of @p op's stage to (@p send) or from node @p node of its group, as
 *        coll_op_send() and coll_op_recv() (set x->kind = COLL_XFER_STAGE first); it
 *        completes in the stage's on_xfer().
 * @return COLL_OK, or the transport's error (the caller fails the job).
 */
coll_status_t coll_stage_post(struct coll_op *op, int send, uint32_t node, uint64_t tag,
                              void *buf, size_t len, coll_xfer_t *x);

#endif
