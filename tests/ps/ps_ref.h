/*
 * The reference of the parameter service's tests: single-process training of the synthetic
 * model (ps_model.h) in double, with the optimizers written out from their published formulas
 * (independently of kernels/cpu/optim*.c) and the schedule's closed forms by hand.
 */
#ifndef TEST_PS_REF_H
#define TEST_PS_REF_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

typedef struct {
    coll_ps_optim_t o;
    coll_ps_schedule_t sched;
    const unsigned *flags; /* per layer, COLL_PS_* */
    int world;             /* ranks whose gradients are averaged */
    size_t n;
    double *w, *s0, *s1, *g; /* weights, state, the averaged gradient */
    uint64_t t;            /* steps done */
} ps_ref_t;

/* @return 0; -1 out of memory. The weights start at ps_model_init(). */
int ps_ref_init(ps_ref_t *r, const coll_ps_optim_t *o, const coll_ps_schedule_t *s,
                const unsigned *flags, int world);

/* The learning rate of step index @p s (0-based), from the formulas of collective_ps.h. */
double ps_ref_lr(const coll_ps_schedule_t *s, uint64_t step);

/* One step: every rank's gradient at the current weights, averaged, then the update. */
void ps_ref_step(ps_ref_t *r);

void ps_ref_fini(ps_ref_t *r);

#endif
