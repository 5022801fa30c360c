/**
 * @file train3d_io.h
 * @brief The 3D-parallel trainer's state (train3d.c) and what it reads, reduces, reports and
 *        writes (train3d_io.c): the data set, the micro-batches' inputs and losses, the
 *        reductions of loss and accuracy over the world, the report lines of train3d.h, and the
 *        gathering of the shards for --dump-weights. Internal to coll-train.
 */
#ifndef COLL_TRAIN_TRAIN3D_IO_H
#define COLL_TRAIN_TRAIN3D_IO_H

#include <stdint.h>

#include <collective.h>

#include "dist.h"
#include "mnist.h"
#include "options.h"
#include "pipe.h"
#include "shard.h"

/** Sums over the measured steps (all but the first). */
typedef struct {
    long measured;
    double step_s, busy_s, idle_s, exposed_s;
    long tp_fwd, tp_bwd;   /**< tp allreduces of every step */
} t3_acc_t;

/** One rank of a 3D-parallel run. */
typedef struct {
    const train_opts_t *opts;
    dist_t world;
    dist_t dp;                     /**< the dp group, as the bucketer's communicator */
    coll_layout_t layout;
    coll_groups_t groups;          /**< zeroed standalone */
    int dims[COLL_DIM_COUNT];      /**< tp, pp, dp */
    int coords[COLL_DIM_COUNT];    /**< this rank's coordinates */
    int micro, rows;               /**< micro-batches per step, images per micro-batch */
    mnist_set_t train, test;
    float mean, std;
    int sizes[MLP_MAX_LAYERS + 1];
    int n_layers;
    shard_t shard;
    pipe_t pipe;
    dist_grads_t grads;
    uint32_t *order;               /**< the epoch's order of the training images */
    const uint32_t *batch;         /**< this replica's images of the current step */
    uint8_t *labels;               /**< labels of one micro-batch */
    float *x_eval;                 /**< stage 0: inputs of one evaluation chunk */
    float *stats;                  /**< pool buffer of the world reductions */
    long steps_per_epoch, steps_done;
    t3_acc_t acc;
} t3_t;

/** @brief Load the training and test sets and the pixel standardisation. @return 0 or -1. */
int t3_load_data(t3_t *t);

/** @brief The buffers below (once the layout, pipeline and world exist). @return 0 or 1. */
int t3_io_init(t3_t *t);

/** @brief Free them. Safe on a zeroed state. */
void t3_io_fini(t3_t *t);

/** @brief pipe_io_t.input: micro-batch @p m of this replica's images of the step. */
void t3_input(void *arg, int m, float *x);

/** @brief pipe_io_t.loss: its softmax cross-entropy, scaled by 1 / (the replica's images). */
float t3_loss(void *arg, int m, float *logits, float *delta);

/** @brief The epoch's mean training loss over @p steps steps and every replica (every rank
 *         calls it). @return 0 or -1. */
int t3_epoch_loss(t3_t *t, long steps, double *loss);

/** @brief Test accuracy: each replica evaluates its share of the test set through the
 *         pipeline (every rank calls it). @return 0 or -1. */
int t3_evaluate(t3_t *t, double *accuracy);

/** @brief Rank 0's layout line. */
void t3_describe(const t3_t *t);

/** @brief Rank 0's epoch line. */
void t3_report_epoch(const t3_t *t, int epoch, long steps, double loss, double accuracy);

/** @brief The stage lines (tp allreduces, bubble) of train3d.h (every rank calls it).
 *  @return 0 or -1. */
int t3_report_pipeline(t3_t *t);

/** @brief Every rank's memory line (its peak resident set, VmHWM). */
void t3_report_memory(const t3_t *t);

/** @brief --dump-weights: replica 0's ranks send their shards to rank 0, which writes the
 *         whole network (every rank calls it). @return 0 or -1. */
int t3_dump(t3_t *t);

#endif /* COLL_TRAIN_TRAIN3D_IO_H */
