/* The trainer's learning-rate schedule (lr.h): spans in epochs become steps, then
 * common/schedule.h does the rest. */
#include "lr.h"

#include <string.h>

static uint64_t span_steps(const train_span_t *span, long steps_per_epoch)
{
    return (uint64_t)span->count * (uint64_t)(span->epochs ? steps_per_epoch : 1);
}

static void set_warmup(const train_lr_opts_t *o, uint64_t steps, coll_schedule_t *s)
{
    if (steps == 0) {
        return;
    }
    s->field_mask |= COLL_SCHEDULE_FIELD_WARMUP;
    s->warmup_steps = steps;
    /* Without scaling there is no smaller base lr to start from: start at 0. */
    if (o->warmup_start >= 0 || !o->linear_scaling) {
        s->field_mask |= COLL_SCHEDULE_FIELD_WARMUP_START;
        s->warmup_start_lr = o->warmup_start >= 0 ? o->warmup_start : 0.0;
    }
}

/* Milestones in steps, increasing, none inside the warmup. */
static int set_step_decay(const train_lr_opts_t *o, long steps_per_epoch, coll_schedule_t *s)
{
    for (unsigned i = 0; i < o->n_milestones; i++) {
        uint64_t m = span_steps(&o->milestones[i], steps_per_epoch);
        if (m < s->warmup_steps || (i > 0 && m <= s->milestones[i - 1])) {
            fprintf(stderr, "coll-train: --milestones: step %llu %s (warmup ends at step "
                            "%llu, %ld steps per epoch)\n", (unsigned long long)m,
                    m < s->warmup_steps ? "is inside the warmup" : "does not increase",
                    (unsigned long long)s->warmup_steps, steps_per_epoch);
            return -1;
        }
        s->milestones[i] = m;
    }
    s->num_milestones = o->n_milestones;
    s->gamma = o->gamma;
    return 0;
}

static int set_decay(const train_lr_opts_t *o, long steps_per_epoch, long total_steps,
                     coll_schedule_t *s)
{
    if (o->decay == COLL_SCHEDULE_CONSTANT) {
        return 0;
    }
    s->field_mask |= COLL_SCHEDULE_FIELD_DECAY;
    s->decay = o->decay;
    if (o->decay == COLL_SCHEDULE_STEP) {
        return set_step_decay(o, steps_per_epoch, s);
    }
    s->total_steps = (uint64_t)total_steps;
    s->final_lr = o->final_lr;
    if (s->total_steps <= s->warmup_steps) {
        fprintf(stderr, "coll-train: --decay cosine: the run has %ld steps, not more than the "
                        "%llu of the warmup\n", total_steps, (unsigned long long)s->warmup_steps);
        return -1;
    }
    return 0;
}

int train_lr_schedule(const train_lr_opts_t *o, long global_batch, long steps_per_epoch,
                      long total_steps, coll_schedule_t *s)
{
    coll_schedule_t r;

    memset(&r, 0, sizeof(r));
    r.base_lr = o->linear_scaling ? o->base_lr : o->lr;
    if (o->linear_scaling) {
        r.field_mask |= COLL_SCHEDULE_FIELD_SCALING;
        r.base_batch = (uint64_t)o->base_batch;
        r.global_batch = (uint64_t)global_batch;
    }
    set_warmup(o, span_steps(&o->warmup, steps_per_epoch), &r);
    if (set_decay(o, steps_per_epoch, total_steps, &r) != 0) {
        return -1;
    }
    if (coll_schedule_check(&r) != COLL_OK) {
        fprintf(stderr, "coll-train: the learning-rate schedule is invalid (see --help)\n");
        return -1;
    }
    *s = r;
    return 0;
}

void train_lr_describe(const coll_schedule_t *s, FILE *out)
{
    fprintf(out, "lr %g", coll_schedule_peak_lr(s));
    if (s->field_mask & COLL_SCHEDULE_FIELD_SCALING) {
        fprintf(out, " = %g x %llu/%llu", s->base_lr, (unsigned long long)s->global_batch,
                (unsigned long long)s->base_batch);
    }
    if (s->field_mask & COLL_SCHEDULE_FIELD_WARMUP) {
        fprintf(out, ", warmup %llu steps from %g", (unsigned long long)s->warmup_steps,
                coll_schedule_lr(s, 0));
    }
    if ((s->field_mask & COLL_SCHEDULE_FIELD_DECAY) && s->decay == COLL_SCHEDULE_STEP) {
        fprintf(out, ", x%g at %u milestone%s from step %llu", s->gamma, s->num_milestones,
                s->num_milestones == 1 ? "" : "s",
                (unsigned long long)(s->num_milestones > 0 ? s->milestones[0] : 0));
    } else if ((s->field_mask & COLL_SCHEDULE_FIELD_DECAY) && s->decay == COLL_SCHEDULE_COSINE) {
        fprintf(out, ", cosine to %g at step %llu", s->final_lr,
                (unsigned long long)s->total_steps);
    }
}
