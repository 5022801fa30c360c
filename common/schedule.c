/*
 * Learning-rate schedules (schedule.h): the linear scaling rule, linear warmup and the decays,
 * each a closed form of the step so that any step can be asked for in any order (a resumed
 * job, a daemon that joins late) and gives the same value.
 */
#include <math.h>

#include "common/schedule.h"

#define KNOWN_FIELDS                                                                           \
    (COLL_SCHEDULE_FIELD_SCALING | COLL_SCHEDULE_FIELD_WARMUP |                                \
     COLL_SCHEDULE_FIELD_WARMUP_START | COLL_SCHEDULE_FIELD_DECAY)

static int has(const coll_schedule_t *s, uint64_t field)
{
    return (s->field_mask & field) != 0;
}

static int lr_ok(double lr)
{
    return lr >= 0 && isfinite(lr);
}

static uint64_t warmup_steps(const coll_schedule_t *s)
{
    return has(s, COLL_SCHEDULE_FIELD_WARMUP) ? s->warmup_steps : 0;
}

static coll_schedule_decay_t decay_kind(const coll_schedule_t *s)
{
    return has(s, COLL_SCHEDULE_FIELD_DECAY) ? s->decay : COLL_SCHEDULE_CONSTANT;
}

double coll_schedule_scale_lr(double base_lr, uint64_t base_batch, uint64_t global_batch)
{
    return base_lr * (double)global_batch / (double)base_batch;
}

static coll_status_t check_step_decay(const coll_schedule_t *s)
{
    if (s->num_milestones > COLL_SCHEDULE_MAX_MILESTONES || !(s->gamma > 0) ||
        !isfinite(s->gamma)) {
        return COLL_ERR_INVALID;
    }
    for (unsigned i = 0; i < s->num_milestones; i++) {
        if (s->milestones[i] < warmup_steps(s) ||
            (i > 0 && s->milestones[i] <= s->milestones[i - 1])) {
            return COLL_ERR_INVALID;
        }
    }
    return COLL_OK;
}

static coll_status_t check_decay(const coll_schedule_t *s)
{
    switch (decay_kind(s)) {
    case COLL_SCHEDULE_CONSTANT: return COLL_OK;
    case COLL_SCHEDULE_STEP: return check_step_decay(s);
    case COLL_SCHEDULE_COSINE:
        return s->total_steps > warmup_steps(s) && lr_ok(s->final_lr) ? COLL_OK
                                                                      : COLL_ERR_INVALID;
    default: return COLL_ERR_INVALID;
    }
}

coll_status_t coll_schedule_check(const coll_schedule_t *s)
{
    if ((s->field_mask & ~(uint64_t)KNOWN_FIELDS) != 0 || !lr_ok(s->base_lr)) {
        return COLL_ERR_INVALID;
    }
    if (has(s, COLL_SCHEDULE_FIELD_SCALING) && (s->base_batch == 0 || s->global_batch == 0)) {
        return COLL_ERR_INVALID;
    }
    if (has(s, COLL_SCHEDULE_FIELD_WARMUP_START) && !lr_ok(s->warmup_start_lr)) {
        return COLL_ERR_INVALID;
    }
    return check_decay(s);
}

double coll_schedule_peak_lr(const coll_schedule_t *s)
{
    if (!has(s, COLL_SCHEDULE_FIELD_SCALING) || s->base_batch == 0) {
        return s->base_lr;
    }
    return coll_schedule_scale_lr(s->base_lr, s->base_batch, s->global_batch);
}

/* start + (peak - start) * t / T for t < T: exactly start at t = 0. */
static double warmup_lr(const coll_schedule_t *s, double peak, uint64_t t)
{
    double start = has(s, COLL_SCHEDULE_FIELD_WARMUP_START) ? s->warmup_start_lr : s->base_lr;
    return start + (peak - start) * ((double)t / (double)s->warmup_steps);
}

static double step_decay_lr(const coll_schedule_t *s, double peak, uint64_t t)
{
    unsigned k = 0;
    unsigned n = s->num_milestones < COLL_SCHEDULE_MAX_MILESTONES ? s->num_milestones
                                                                   : COLL_SCHEDULE_MAX_MILESTONES;

    while (k < n && s->milestones[k] <= t) {
        k++;
    }
    return k == 0 ? peak : peak * pow(s->gamma, (double)k);
}

/* Written as peak minus a decrement, so that t = T gives the peak exactly. */
static double cosine_lr(const coll_schedule_t *s, double peak, uint64_t t)
{
    const uint64_t t0 = warmup_steps(s);

    if (t >= s->total_steps || s->total_steps <= t0) {
        return s->final_lr;
    }
    double frac = (double)(t - t0) / (double)(s->total_steps - t0);
    return peak - (peak - s->final_lr) * ((1.0 - cos(M_PI * frac)) / 2.0);
}

double coll_schedule_lr(const coll_schedule_t *s, uint64_t step)
{
    const double peak = coll_schedule_peak_lr(s);

    if (step < warmup_steps(s)) {
        return warmup_lr(s, peak, step);
    }
    switch (decay_kind(s)) {
    case COLL_SCHEDULE_STEP: return step_decay_lr(s, peak, step);
    case COLL_SCHEDULE_COSINE: return cosine_lr(s, peak, step);
    default: return peak;
    }
}
