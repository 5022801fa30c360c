/**
 * @file feature.h
 * @brief What an operation may carry beside its algorithm, attached through a table of hooks:
 *        compression and the bytes on the wire (engine/codec/codec.h), the parameter service's
 *        stage (engine/stage.h), the node-reduced path (engine/node_op.h), the staged path of
 *        device buffers (engine/dev_staged.h). The features are registered in one array
 *        (engine/feature.c); the core (engine/op.c, engine/xfer.c) calls their hooks in that
 *        order and names none of them, as UCP's core calls the protocols registered with it and
 *        Redis' event loop knows no command.
 *
 * Each feature keeps its state of an operation in its slot (coll_op_feature_state()); an empty
 * slot means the operation does not carry it, and none of its hooks runs for that operation.
 *
 * The life of a feature on an operation, hook by hook (NULL hooks are skipped):
 *   attach   every local member submitted (its buffers are mapped): the feature attaches by
 *            putting its state in @p state, or leaves it NULL. It may choose the operation's
 *            implementation (op->impl: compression runs its own allreduce); the core chooses
 *            from the algorithm table (engine/algo.h) when none did. A feature whose own entry
 *            creates the operation attaches it there instead (coll_op_feature_attach()). One
 *            that needs time first (the staged path's copies in) answers COLL_INPROGRESS and
 *            calls coll_op_attached() from the loop when ready: the later features attach and
 *            the operation starts then.
 *   start    the operation's descriptor went to the previous node: post the feature's own
 *            transfers (coll_op_feature_post()).
 *   on_xfer  one of them completed successfully (failures fail the job in the core).
 *   waiting  1 while the feature holds the completion back (asked again after each of its
 *            transfers).
 *   finish   the operation is about to complete successfully: the feature's last work on its
 *            results (the staged path copies them back to the device); a failure fails the job
 *            and the operation completes with it. One that needs time (the copies back)
 *            answers COLL_INPROGRESS and calls coll_op_finished() from the loop when done: the
 *            later features finish and the ranks are told then.
 *   done     the operation completes with a status on every local rank: the feature's part of
 *            the completion (@p t: what the ranks are told). A feature that answers the ranks
 *            itself (the node-reduced path) clears op->members[].session here.
 *   free     nothing of the operation is in flight any more: free the state.
 *
 * Loop thread only. Every hook may fail the job (coll_job_fail()), which completes the
 * operation: the core holds it (coll_op_hold()) around every hook it calls.
 */
#ifndef COLL_ENGINE_FEATURE_H
#define COLL_ENGINE_FEATURE_H

#include <stddef.h>
#include <stdint.h>

#include "engine/op.h"

/** A feature an operation may carry (see the file comment). */
typedef struct coll_op_feature {
    const char *name;
    /** Attach to @p op (its state in *@p state) or not. @return COLL_OK; COLL_INPROGRESS:
     *  attached, the start held back until the feature calls coll_op_attached(); or the error
     *  with which the feature failed the job (coll_job_fail(), saying why). */
    coll_status_t (*attach)(coll_op_t *op, void **state);
    /** Post the feature's transfers. @return COLL_OK or the transport's error (the core fails
     *  the job). */
    coll_status_t (*start)(coll_op_t *op, void *state);
    /** A transfer the feature posted completed successfully. */
    void (*on_xfer)(coll_op_t *op, void *state, coll_xfer_t *x);
    /** @return 1 while the feature holds @p op's completion back. */
    int (*waiting)(const coll_op_t *op, const void *state);
    /** @p op is about to complete successfully (op->done is set, the ranks are not told yet).
     *  @return COLL_OK; COLL_INPROGRESS: the ranks are told once the feature calls
     *  coll_op_finished(); or the error with which the feature failed the job
     *  (coll_job_fail(), saying why): the operation completes with it. */
    coll_status_t (*finish)(coll_op_t *op, void *state);
    /** @p op completes with @p status (COLL_OK or an error); @p t is its completion record. */
    void (*done)(coll_op_t *op, void *state, coll_status_t status, coll_ctl_times_t *t);
    /** Free @p state: @p op is about to be freed. */
    void (*free)(coll_op_t *op, void *state);
} coll_op_feature_t;

/**
 * @brief The registered features, in the order their hooks run (engine/feature.c).
 * @param [out] n_p How many (at most COLL_OP_FEATURES).
 */
const coll_op_feature_t *const *coll_op_features(uint32_t *n_p);

/** @return @p f's state of @p op, NULL when @p op does not carry it. */
void *coll_op_feature_state(const coll_op_t *op, const coll_op_feature_t *f);

/**
 * @brief Attach @p f to @p op with @p state (not NULL) before coll_op_start(), for a feature
 *        whose own entry creates the operation; its attach hook is not called then.
 */
void coll_op_feature_attach(coll_op_t *op, const coll_op_feature_t *f, void *state);

/**
 * @brief Post a transfer of feature @p f to (@p send) or from group node @p node, as
 *        coll_op_send() and coll_op_recv(): its completion goes to @p f's on_xfer hook.
 * @return COLL_OK, or the transport's error (the caller fails the job).
 */
coll_status_t coll_op_feature_post(coll_op_t *op, const coll_op_feature_t *f, int send,
                                   uint32_t node, uint64_t tag, void *buf, size_t len,
                                   coll_xfer_t *x);

/** @brief The feature of a transfer (coll_op_feature_post()), NULL for the algorithm's and the
 *         engine's own. */
const coll_op_feature_t *coll_op_feature_of(const coll_xfer_t *x);

#endif
