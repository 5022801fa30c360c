/*
 * The trainer's divergence check (diverge.h): a loss that is not finite, worse than chance, or
 * growing epoch after epoch stops the run with the reason, rather than training through it (a
 * diverged LAMB at SGD's lr ended two epochs at loss 60 and 15 % accuracy, silently).
 */
#include "diverge.h"

#include <math.h>
#include <stdio.h>

void train_diverge_init(train_diverge_t *d, int classes, int go_on)
{
    *d = (train_diverge_t){.chance = log((double)classes), .go_on = go_on};
}

/* Why @p loss diverged, into @p buf; 0 when it did not. */
static int why(train_diverge_t *d, double loss, char *buf, size_t len)
{
    d->growing = d->epochs > 0 && loss > d->last ? d->growing + 1 : 0;
    d->last = loss;
    d->epochs++;
    if (!isfinite(loss)) {
        snprintf(buf, len, "is not finite");
    } else if (loss > 2.0 * d->chance) {
        snprintf(buf, len, "is above %.4g, twice the loss of predicting every class alike",
                 2.0 * d->chance);
    } else if (d->growing >= TRAIN_DIVERGE_EPOCHS) {
        snprintf(buf, len, "grew in each of the last %d epochs", TRAIN_DIVERGE_EPOCHS);
    } else {
        return 0;
    }
    return 1;
}

int train_diverge_check(train_diverge_t *d, int epoch, double loss, double lr,
                        const char *optimizer, int verbose)
{
    char reason[96];

    if (!why(d, loss, reason, sizeof(reason)) || d->said) {
        return 0;
    }
    if (verbose) {
        fprintf(stderr, "coll-train: the training diverged: epoch %d's loss %.4g %s; %s. The lr "
                "was %g with --optimizer %s: try a lower --lr, or a --warmup\n", epoch, loss,
                reason, d->go_on ? "training on (--on-divergence continue)" : "stopping", lr,
                optimizer);
    }
    d->said = 1;
    return d->go_on ? 0 : TRAIN_EXIT_DIVERGED;
}
