/**
 * @file lr.h
 * @brief The trainer's learning-rate schedule: the command line's settings turned into a
 *        coll_schedule_t (common/schedule.h) once the global batch and the steps per epoch are
 *        known. The trainer asks coll_schedule_lr(s, t) for the lr of its update t + 1.
 */
#ifndef COLL_TRAIN_LR_H
#define COLL_TRAIN_LR_H

#include "common/schedule.h"

#include <stdio.h>

/** A length given in steps ("500") or in epochs ("5ep"). */
typedef struct train_span {
    long count;  /**< >= 0 */
    int epochs;  /**< nonzero: count is in epochs */
} train_span_t;

/** The schedule as the command line gives it. */
typedef struct train_lr_opts {
    double lr;             /**< --lr: the peak lr without scaling */
    int linear_scaling;    /**< --lr-scaling linear: peak = base_lr x batch / base_batch */
    double base_lr;        /**< --base-lr (with linear scaling) */
    long base_batch;       /**< --base-batch (with linear scaling), > 0 */
    train_span_t warmup;   /**< --warmup: linear warmup length, 0 for none */
    double warmup_start;   /**< --warmup-start-lr; < 0: base_lr with linear scaling (Goyal
                                et al.), 0 without */
    coll_schedule_decay_t decay; /**< --decay */
    train_span_t milestones[COLL_SCHEDULE_MAX_MILESTONES]; /**< --milestones (step decay) */
    unsigned n_milestones;
    double gamma;          /**< --gamma (step decay) */
    double final_lr;       /**< --final-lr (cosine decay) */
} train_lr_opts_t;

/**
 * @brief Build and check the schedule of a run.
 * @param [in]  o                The settings.
 * @param [in]  global_batch     Images per step over all ranks, > 0.
 * @param [in]  steps_per_epoch  Steps of one epoch, > 0 (converts "ep" spans).
 * @param [in]  total_steps      Steps of the whole run (cosine decay ends there), > 0.
 * @param [out] s                The schedule, set only on success.
 * @return 0; -1 after printing which setting is wrong to stderr.
 */
int train_lr_schedule(const train_lr_opts_t *o, long global_batch, long steps_per_epoch,
                      long total_steps, coll_schedule_t *s);

/** @brief One phrase describing @p s ("lr 3.2 = 0.1 x 8192/256, warmup ...") to @p out. */
void train_lr_describe(const coll_schedule_t *s, FILE *out);

#endif /* COLL_TRAIN_LR_H */
