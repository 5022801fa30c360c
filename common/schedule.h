/**
 * @file schedule.h
 * @brief Learning-rate schedules for large-batch training: the linear scaling rule, gradual
 *        linear warmup, then constant, step or cosine decay. Pure functions of a parameter
 *        struct and a step; no state, no allocation, thread-safe. Static library coll_schedule.
 *
 * Steps count optimizer updates from 0: coll_schedule_lr(s, t) is the learning rate of the
 * update that is the (t+1)-th of the run, i.e. whose coll_optim_step_t.step is t + 1 (optim.h),
 * as PyTorch's schedulers count from 0 while Adam's bias correction counts from 1. A caller
 * thinking in epochs converts: steps = epochs * steps_per_epoch.
 *
 * The shape, with peak = coll_schedule_peak_lr(s), T = warmup_steps:
 *   t < T:   start + (peak - start) * t / T        (start = warmup_start_lr, default base_lr)
 *   t >= T:  CONSTANT  peak
 *            STEP      peak * gamma^k, k = number of milestones <= t
 *            COSINE    peak - (peak - final_lr) * (1 - cos(pi * (t - T) / (total_steps - T))) / 2
 *                      for t < total_steps, final_lr from total_steps on
 * This is Goyal et al. 2017, "Accurate, Large Minibatch SGD" (arXiv 1706.02677): lr = base_lr *
 * global_batch / base_batch (section 2.1), reached by a gradual warmup from base_lr "by a
 * constant amount at each iteration" over the first epochs (section 2.2; 5 epochs for ResNet-50),
 * then the usual decay (x0.1 at epochs 30, 60, 80 there). Cosine is SGDR's annealing without
 * restarts (Loshchilov & Hutter 2017), PyTorch's CosineAnnealingLR closed form, with T_max =
 * total_steps - T.
 *
 * Exact values: step 0 gives start exactly (base_lr unless warmup_start_lr is set); every step
 * from T on gives peak exactly with CONSTANT, and with STEP before the first milestone; COSINE
 * gives peak exactly at T and final_lr exactly from total_steps on. Other steps are within a few
 * ulps of the formula evaluated exactly.
 */
#ifndef COLL_COMMON_SCHEDULE_H
#define COLL_COMMON_SCHEDULE_H

#include <stdint.h>

#include <collective.h>

/** Most milestones of a STEP decay. */
#define COLL_SCHEDULE_MAX_MILESTONES 16

/** Fields of coll_schedule_t that are set; an unset field takes the default named here. */
enum {
    /** base_batch and global_batch (default: no scaling, peak = base_lr). */
    COLL_SCHEDULE_FIELD_SCALING = 1u << 0,
    /** warmup_steps (default 0: no warmup). */
    COLL_SCHEDULE_FIELD_WARMUP = 1u << 1,
    /** warmup_start_lr (default base_lr, as Goyal et al.; e.g. 0 for a warmup from zero). */
    COLL_SCHEDULE_FIELD_WARMUP_START = 1u << 2,
    /** decay and its fields (default COLL_SCHEDULE_CONSTANT). */
    COLL_SCHEDULE_FIELD_DECAY = 1u << 3,
};

/** What follows the warmup. */
typedef enum {
    COLL_SCHEDULE_CONSTANT = 0, /**< the peak lr */
    COLL_SCHEDULE_STEP = 1,     /**< times gamma at each milestone */
    COLL_SCHEDULE_COSINE = 2,   /**< half a cosine from the peak to final_lr */
} coll_schedule_decay_t;

/** A schedule. base_lr is always read; the rest according to field_mask. */
typedef struct {
    uint64_t field_mask;      /**< COLL_SCHEDULE_FIELD_* */
    double base_lr;           /**< lr at base_batch (Goyal's 0.1 for 256), finite, >= 0 */
    uint64_t base_batch;      /**< global batch base_lr was tuned for, > 0 */
    uint64_t global_batch;    /**< global batch of this run (all ranks), > 0 */
    uint64_t warmup_steps;    /**< T: steps of linear warmup, 0 for none */
    double warmup_start_lr;   /**< lr at step 0, finite, >= 0 */
    coll_schedule_decay_t decay;
    /** STEP: steps at which the lr is multiplied by gamma, strictly increasing, each >= T. */
    uint64_t milestones[COLL_SCHEDULE_MAX_MILESTONES];
    unsigned num_milestones;  /**< STEP: entries of milestones used, <= MAX_MILESTONES */
    double gamma;             /**< STEP: factor per milestone, finite, > 0 (Goyal: 0.1) */
    uint64_t total_steps;     /**< COSINE: length of the run in steps, > T */
    double final_lr;          /**< COSINE: lr from total_steps on, finite, >= 0 */
} coll_schedule_t;

/**
 * @brief The linear scaling rule (Goyal et al. section 2.1): base_lr * global_batch / base_batch,
 *        in double, multiplied before dividing (0.1 * 8192 / 256 is 3.2 exactly as written).
 * @return The scaled lr; thread-safe. base_batch must be > 0.
 */
double coll_schedule_scale_lr(double base_lr, uint64_t base_batch, uint64_t global_batch);

/**
 * @brief Check a schedule.
 * @return COLL_OK; COLL_ERR_INVALID when field_mask has an unknown bit, base_lr,
 *         warmup_start_lr or final_lr is negative or not finite, a batch is 0, decay is unknown,
 *         STEP has more than COLL_SCHEDULE_MAX_MILESTONES milestones, milestones not strictly
 *         increasing or before the end of the warmup, or gamma <= 0 or not finite, or COSINE has
 *         total_steps <= warmup_steps.
 */
coll_status_t coll_schedule_check(const coll_schedule_t *s);

/**
 * @brief The lr warmup ends at and decay starts from: the scaled lr with
 *        COLL_SCHEDULE_FIELD_SCALING, else base_lr. @p s passed coll_schedule_check().
 */
double coll_schedule_peak_lr(const coll_schedule_t *s);

/**
 * @brief The learning rate of step @p step (0-based; see the file comment).
 * @param [in] s A schedule that passed coll_schedule_check() (otherwise the result is
 *        unspecified, but the call is still safe).
 * @return The lr, >= 0. Thread-safe.
 */
double coll_schedule_lr(const coll_schedule_t *s, uint64_t step);

#endif
