/**
 * @file pipe.h
 * @brief A pipeline stage running the 1F1B schedule (Narayanan et al. 2021, Sec 2.2.1;
 *        megatron/core/pipeline_parallel/schedules.py, without interleaving) over
 *        point-to-point messages in its pipeline group.
 *
 * A step runs m micro-batches: stage s first runs w = min(pp - s - 1, m) forwards (warm-up),
 * then alternates one forward and one backward until every forward ran, then the remaining w
 * backwards (cool-down). So stage s holds at most min(pp - s, m) micro-batches whose forward
 * ran and backward did not: one buffer slot each. Activations go to the next stage and input
 * gradients back to the previous one as pool-to-pool messages of the stage's pp group (the
 * n-th send to a peer matches its n-th receive); sends are waited for only before their buffer
 * is reused, so a stage blocks only on what it receives, and the schedule's order of
 * dependencies has no cycle.
 *
 * The bubble: every wait for another stage is idle time; the rest of the step is busy (the
 * stage's forwards and backwards, their tp allreduces included). idle / busy is the bubble
 * fraction of the paper, (pp - 1) / m in the ideal pipeline of equal stages.
 */
#ifndef COLL_TRAIN_PIPE_H
#define COLL_TRAIN_PIPE_H

#include <stdint.h>

#include "dist.h"
#include "shard.h"

/** Most micro-batches in flight on a stage (slots). */
#define PIPE_MAX_SLOTS 64

/** What the trainer supplies per micro-batch. */
typedef struct {
    /** Stage 0: write micro-batch @p m's inputs into @p x (rows x input width). */
    void (*input)(void *arg, int m, float *x);
    /** Last stage: the loss of micro-batch @p m from its @p logits (overwritten), writing the
     *  gradient of the scaled loss into @p delta; returns the micro-batch's mean loss. */
    float (*loss)(void *arg, int m, float *logits, float *delta);
    void *arg;
} pipe_io_t;

/** One stage. */
typedef struct {
    shard_t *shard;
    coll_comm_t *pp;       /**< its pipeline group; NULL when pp is 1 */
    int stage, nstages;
    int micro;             /**< micro-batches per step */
    int rows;              /**< rows per micro-batch */
    int slots;             /**< min(pp - stage, micro) */
    int timeout_ms;
    float *in[PIPE_MAX_SLOTS];      /**< stage input per slot (pool) */
    float *act[PIPE_MAX_SLOTS][MLP_MAX_LAYERS]; /**< each layer's output per slot (pool) */
    float *delta[MLP_MAX_LAYERS];   /**< one micro-batch of deltas per layer (pool) */
    float *grad_in[PIPE_MAX_SLOTS]; /**< stage > 0: input gradient per slot (pool) */
    float *scratch;                 /**< stage 0: the first column layer's input gradient */
    coll_request_t *fwd[PIPE_MAX_SLOTS], *bwd[PIPE_MAX_SLOTS]; /**< sends in flight */
    uint64_t busy_ns, idle_ns;      /**< of the last step */
    double loss_sum;                /**< last stage: sum of the micro-batches' mean losses */
} pipe_t;

/**
 * @brief Set up stage @p stage of @p nstages for @p micro micro-batches of @p rows rows, its
 *        buffers allocated through @p d (the job's pool).
 * @return 0; -1 after printing the error.
 */
int pipe_init(pipe_t *p, dist_t *d, shard_t *s, coll_comm_t *pp, int stage, int nstages,
              int micro, int rows, int timeout_ms);

/** @brief Free the stage's buffers (no request may be in flight). Safe on a zeroed stage. */
void pipe_fini(pipe_t *p, dist_t *d);

/**
 * @brief One training step: the 1F1B schedule over @p io's micro-batches, gradients
 *        accumulated in the shard's gradient buffers and each layer reported to @p ready after
 *        its last micro-batch (to start the data-parallel reduction). Sets busy_ns and
 *        idle_ns; adds the last stage's losses to loss_sum.
 * @return 0; -1 after printing the error of a failed message or allreduce.
 */
int pipe_step(pipe_t *p, const pipe_io_t *io, mlp_grad_ready_fn ready, void *arg);

/**
 * @brief Forward only, for evaluation: @p n <= rows rows, the inputs @p x on stage 0 (unused
 *        elsewhere), through every stage; on the last stage @p logits_p points at the logits.
 * @return 0; -1 after printing the error.
 */
int pipe_infer(pipe_t *p, int n, const float *x, float **logits_p);

#endif /* COLL_TRAIN_PIPE_H */
