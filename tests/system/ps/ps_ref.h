/*
 * The reference of the parameter service's tests: single-process training of the synthetic
 * model (ps_model.h) in double, with the optimizers written out from their published formulas
 * (independently of kernels/cpu/optim*.c) and the schedule's closed forms by hand. With
 * compression (ps_ref_compress()) each step's averaged gradient is instead what the
 * compressed reduce-scatter of tests/model/compress_model.h gives (every rank's float32
 * gradient at the weights rounded to float32, a model per bucket with its residuals).
 */
#ifndef TEST_PS_REF_H
#define TEST_PS_REF_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "ps_model.h"

struct cm;

typedef struct {
    coll_ps_optim_t o;
    coll_ps_schedule_t sched;
    const unsigned *flags; /* per layer, COLL_PS_* */
    int world;             /* ranks whose gradients are averaged */
    size_t n;
    double *w, *s0, *s1, *g; /* weights, state, the averaged gradient */
    uint64_t t;            /* steps done */
    struct cm *cm[PS_MODEL_BUCKETS]; /* compression: each bucket's model, or NULL */
    unsigned warmup;       /* compression: steps that are exact first */
} ps_ref_t;

/* @return 0; -1 out of memory. The weights start at ps_model_init(). */
int ps_ref_init(ps_ref_t *r, const coll_ps_optim_t *o, const coll_ps_schedule_t *s,
                const unsigned *flags, int world);

/* Compress every later step's gradients as the service does with @p spec (fp16, bf16, onebit,
 * topk; coll_compression_parse() text) on @p nodes nodes of @p local ranks each: on one node
 * not at all (a job on one node never compresses). @return 0; -1 for a spec the models refuse,
 * or out of memory. */
int ps_ref_compress(ps_ref_t *r, const char *spec, uint32_t nodes, uint32_t local);

/* The weights := @p w (n float32): the next ps_ref_step() predicts the service's step from
 * the service's own weights. The compressed tests do so every step: 1-bit takes the sign of a
 * value within rounding of zero, so two float paths (the service's float32 updates, these in
 * double) that were left to drift apart would round such a value apart, and compression
 * would amplify that into differences of a whole scale. */
void ps_ref_sync(ps_ref_t *r, const float *w);

/* The learning rate of step index @p s (0-based), from the formulas of collective_ps.h. */
double ps_ref_lr(const coll_ps_schedule_t *s, uint64_t step);

/* One step: every rank's gradient at the current weights, averaged, then the update. */
void ps_ref_step(ps_ref_t *r);

void ps_ref_fini(ps_ref_t *r);

#endif
