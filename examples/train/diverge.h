/**
 * @file diverge.h
 * @brief Whether a run's training loss says that it diverged: a run that diverged stops with a
 *        message (exit status TRAIN_EXIT_DIVERGED) instead of training on.
 *
 * After each epoch the trainer gives the epoch's mean loss over every step and rank, the same
 * number on every rank, so that every rank stops at the same epoch. The loss diverged when it
 * is not finite, when it is above twice that of a model predicting every class alike (2 ln of
 * the number of classes: far worse than any model, trained or not, should be; an untrained one
 * starts near ln C), or when it grew in each of the last TRAIN_DIVERGE_EPOCHS epochs. With
 * go_on (--on-divergence continue, for studies of divergence) it is said once and the run
 * goes on.
 */
#ifndef COLL_TRAIN_DIVERGE_H
#define COLL_TRAIN_DIVERGE_H

/** The exit status of a run that stopped because its loss diverged. */
#define TRAIN_EXIT_DIVERGED 3
/** Epochs of growth in a row that count as divergence. */
#define TRAIN_DIVERGE_EPOCHS 3

/** The losses seen so far. */
typedef struct train_diverge {
    double chance;  /**< ln(classes): the loss of a uniform prediction */
    double last;    /**< the previous epoch's loss */
    int growing;    /**< epochs in a row whose loss grew */
    int epochs;     /**< epochs seen */
    int go_on;      /**< train through a divergence (saying it once) instead of stopping */
    int said;       /**< the divergence was said */
} train_diverge_t;

/** @brief Start watching a run over @p classes classes (>= 2); @p go_on: --on-divergence
 *         continue. */
void train_diverge_init(train_diverge_t *d, int classes, int go_on);

/**
 * @brief Judge epoch @p epoch's loss @p loss.
 * @param [in] lr         The epoch's learning rate and @p optimizer's name, for the message.
 * @param [in] verbose    Nonzero: say why on stderr (the trainer's rank 0).
 * @return 0 when training may go on; TRAIN_EXIT_DIVERGED when it diverged and the run stops
 *         (said when @p verbose, with the lr and what to try).
 */
int train_diverge_check(train_diverge_t *d, int epoch, double loss, double lr,
                        const char *optimizer, int verbose);

#endif
