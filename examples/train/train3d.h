/**
 * @file train3d.h
 * @brief coll-train with --tp, --pp, --dp or --micro-batches: the same MLP on the same data in
 *        the same order as the data-parallel trainer, trained by tp x pp x dp ranks.
 *
 * The world is split into the tp, pp and dp groups of the layout (coll_comm_groups(), rank
 * order --order, Megatron's tp-dp-pp by default). Replica d (its dp coordinate) takes images
 * d B/D .. (d + 1) B/D - 1 of each global batch of B, in M micro-batches of B/(D M); pipeline
 * stage s holds its layers (shard.h) split over its tp group, and runs the 1F1B schedule
 * (pipe.h). Each micro-batch's loss is scaled by 1/(B/D) (its mean over the replica's images),
 * the gradients of the M micro-batches add up, and the dp group averages them (COLL_AVG, in
 * the buckets of a bucketer, submitted as each layer's last micro-batch finished): every rank
 * applies SGD with momentum to the gradient of the mean loss over the global batch, the update
 * one process makes with batch B. With tp = pp = dp = 1 and no job it runs standalone (the
 * micro-batches then only accumulate gradients).
 *
 * Output (rank 0, stdout), besides the trainer's epoch and final lines:
 *   layout: tp=T pp=P dp=D micro_batches=M micro_batch=b order=O groups: tp intra ...
 *   stage S: layers=... pairs=K tp_allreduces_per_micro_batch forward=F backward=G
 *   stage S: bubble measured=X ideal=(P-1)/M=Y busy_ms=... idle_ms=...   (means per step,
 *            the first step left out)
 *   memory: rank R tp=T pp=S dp=D vmhwm_kb=N                             (every rank)
 */
#ifndef COLL_TRAIN_TRAIN3D_H
#define COLL_TRAIN_TRAIN3D_H

#include "options.h"

/** @return Nonzero when the command line asks for 3D parallelism (any of its options). */
int train3d_requested(const train_opts_t *opts);

/**
 * @brief Train as the header says, then evaluate, report and (rank 0, --dump-weights) write
 *        the whole network gathered from the shards.
 * @return The exit status: 0, 1 for a runtime error, 2 for a usage error (a layout that does
 *         not fit the world, a batch that does not split, a width tp does not divide).
 */
int train3d_main(const train_opts_t *opts);

#endif /* COLL_TRAIN_TRAIN3D_H */
