/**
 * @file options.h
 * @brief Command line of coll-train.
 */
#ifndef COLL_TRAIN_OPTIONS_H
#define COLL_TRAIN_OPTIONS_H

#include "dist.h"
#include "lr.h"
#include "mlp.h"
#include "optimizer.h"

#include <stdint.h>
#include <stdio.h>

/** Default directory of the Fashion-MNIST files (Debian package dataset-fashion-mnist). */
#define TRAIN_DEFAULT_DATA "/usr/share/datasets/fashion-mnist"

/** Settings of one training run. */
typedef struct train_opts {
    const char *data_dir;         /**< directory of the IDX files; points into argv or static */
    int epochs;                   /**< passes over the training set, >= 1 */
    long max_steps;               /**< stop after this many optimizer steps; 0 = no limit */
    int batch;                    /**< global batch (all ranks together), >= 1 */
    int hidden[MLP_MAX_LAYERS];   /**< hidden layer widths */
    int n_hidden;                 /**< number of hidden layers, 0 .. MLP_MAX_LAYERS-1 */
    train_lr_opts_t sched;        /**< the learning-rate schedule (lr.h) */
    train_optim_opts_t optim;     /**< the optimizer (optimizer.h), defaults resolved */
    uint64_t seed;                /**< seed of the initial weights and of the shuffles */
    int eval_every;               /**< test accuracy every this many epochs (default 1); 0 = at
                                       the end only */
    int normalize;                /**< standardise pixels with the Fashion-MNIST mean and std */
    int threads;                  /**< OpenBLAS threads, >= 1 */
    const char *dump_path;        /**< where rank 0 writes the parameters; NULL = nowhere */
    const char *dump_grads_path;  /**< where rank 0 writes the last step's gradients; NULL */
    dist_comm_t comm;             /**< how gradients travel (--comm) */
    size_t bucket_cap_bytes;      /**< --bucket-cap-mb in bytes; 0 = the library's default */
    size_t first_bucket_cap_bytes; /**< --first-bucket-cap-mb in bytes; 0 = default */
    int report_steps;             /**< print one line per step (rank 0) */
    int report_lr;                /**< print the learning rate of every step (rank 0) */
    long report_layers;           /**< print per-tensor norms and trust ratios of the first
                                       this many steps (rank 0); 0 = none */
    int timeout_ms;               /**< bound of every wait on a collective */
    int tp, pp, dp;               /**< 3D-parallel layout (train3d.h); 0 when not given */
    int micro_batches;            /**< micro-batches per replica and step; 0 when not given */
    const char *order;            /**< rank order of the layout, e.g. "tp-dp-pp" */
    int has_compression;          /**< --compression was given */
    coll_compression_t compression; /**< --compression (collective.h) */
    int service;                  /**< --service: the optimizer runs in the daemons (service.h) */
    int train_through;            /**< --on-divergence continue: a diverged loss is said once
                                       and training goes on (studies of divergence); 0 (stop):
                                       the run ends there (diverge.h) */
} train_opts_t;

/** @brief Print the help text to @p out. */
void train_usage(FILE *out);

/**
 * @brief Parse the command line into @p opts (defaults first).
 *
 * Every bad input is said on stderr, one line each, before it returns: each bad value, unknown
 * option, option missing its value and stray argument (then one "try --help"), or, when all
 * were read, each pair of options that cannot go together. Not thread-safe (getopt).
 * @return 0 to train; 1 when --help was printed (exit 0); -1 after saying every bad input
 *         (exit 2), --help or not.
 */
int train_parse_args(int argc, char **argv, train_opts_t *opts);

#endif /* COLL_TRAIN_OPTIONS_H */
