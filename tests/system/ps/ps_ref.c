/*
 * The reference (ps_ref.h): SGD as torch.optim.SGD, AdamW as torch.optim.AdamW, LARS as the
 * MLPerf reference (lars_optimizer.py), LAMB as the paper's Algorithm 2 with the trust clamp of
 * DeepSpeed, global clipping as the service documents it; all in double, layer by layer over the
 * whole layer (no shards). Compressed gradients come from the reference models of
 * tests/model/compress_model.h.
 */
#include "ps_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tests/model/compress_model.h"

double ps_ref_lr(const coll_ps_schedule_t *s, uint64_t t)
{
    double peak = s->base_batch && s->global_batch
                      ? s->base_lr * (double)s->global_batch / (double)s->base_batch
                      : s->base_lr;
    double start = s->warmup_start_lr >= 0 ? s->warmup_start_lr : s->base_lr;
    double T = (double)s->warmup_steps;

    if (t < s->warmup_steps) {
        return start + (peak - start) * (double)t / T;
    }
    if (s->decay == COLL_PS_DECAY_COSINE) {
        if (t >= s->total_steps) {
            return s->final_lr;
        }
        return s->final_lr + (peak - s->final_lr) *
                                 (1 + cos(M_PI * ((double)t - T) / ((double)s->total_steps - T))) /
                                 2;
    }
    if (s->decay == COLL_PS_DECAY_STEP) {
        for (unsigned k = 0; k < s->num_milestones; k++) {
            peak *= t >= s->milestones[k] ? s->gamma : 1.0;
        }
    }
    return peak;
}

int ps_ref_init(ps_ref_t *r, const coll_ps_optim_t *o, const coll_ps_schedule_t *s,
                const unsigned *flags, int world)
{
    memset(r, 0, sizeof(*r));
    r->o = *o;
    r->sched = *s;
    r->flags = flags;
    r->world = world;
    r->n = ps_model_count();
    r->w = calloc(r->n, sizeof(double));
    r->s0 = calloc(r->n, sizeof(double));
    r->s1 = calloc(r->n, sizeof(double));
    r->g = calloc(r->n, sizeof(double));
    if (!r->w || !r->s0 || !r->s1 || !r->g) {
        ps_ref_fini(r);
        return -1;
    }
    for (size_t i = 0; i < r->n; i++) {
        r->w[i] = ps_model_init(i);
    }
    return 0;
}

int ps_ref_compress(ps_ref_t *r, const char *spec, uint32_t nodes, uint32_t local)
{
    coll_compression_t z;
    size_t count[PS_MODEL_BUCKETS] = {0};

    if (coll_compression_parse(spec, &z) != COLL_OK) {
        return -1;
    }
    if (nodes == 1) {
        return 0;
    }
    r->warmup = z.warmup;
    for (int l = 0; l < PS_MODEL_LAYERS; l++) {
        count[ps_model_buckets[l]] += ps_model_counts[l];
    }
    for (uint32_t b = 0; b < PS_MODEL_BUCKETS; b++) {
        if ((r->cm[b] = cm_new(nodes, local, count[b], 1, spec, "", b, NULL, 0)) == NULL) {
            return -1;
        }
    }
    return 0;
}

void ps_ref_sync(ps_ref_t *r, const float *w)
{
    for (size_t i = 0; i < r->n; i++) {
        r->w[i] = w[i];
    }
}

void ps_ref_fini(ps_ref_t *r)
{
    for (int b = 0; b < PS_MODEL_BUCKETS; b++) {
        cm_free(r->cm[b]);
        r->cm[b] = NULL;
    }
    free(r->w);
    free(r->s0);
    free(r->s1);
    free(r->g);
    r->w = r->s0 = r->s1 = r->g = NULL;
}

static double sumsq(const double *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += x[i] * x[i];
    }
    return s;
}

/* A rank's float32 gradient of bucket element i, at the reference's weights in float32. */
typedef struct {
    const ps_ref_t *r;
    size_t off; /* the bucket's first element */
} grad_arg_t;

static float rank_grad(uint32_t rank, uint32_t step, uint64_t i, void *arg)
{
    const grad_arg_t *a = arg;
    return ps_model_grad((float)a->r->w[a->off + i], (int)rank, step, a->off + i);
}

/* Every bucket's compressed reduce-scatter, averaged (compress_model.h). */
static void compressed_gradients(ps_ref_t *r, uint64_t t)
{
    size_t off = 0;

    for (uint32_t b = 0; b < PS_MODEL_BUCKETS; b++) {
        grad_arg_t a = {r, off};
        cm_step_reduced(r->cm[b], (uint32_t)t, rank_grad, &a, r->g + off);
        for (int l = 0; l < PS_MODEL_LAYERS; l++) {
            off += ps_model_buckets[l] == b ? ps_model_counts[l] : 0;
        }
    }
}

/* Each rank computes its gradient in float from float weights; here from the reference's. */
static void exact_gradients(ps_ref_t *r, uint64_t t)
{
    for (size_t i = 0; i < r->n; i++) {
        double acc = 0;
        for (int k = 0; k < r->world; k++) {
            acc += ps_model_a(i) * (r->w[i] - ps_model_c(i)) + ps_model_noise(k, t, i);
        }
        r->g[i] = acc / r->world;
    }
}

static void gradients(ps_ref_t *r, uint64_t t)
{
    if (r->cm[0] != NULL && t > r->warmup) {
        compressed_gradients(r, t);
    } else {
        exact_gradients(r, t);
    }
    if (r->o.clip_grad_norm > 0) {
        double q = (sqrt(sumsq(r->g, r->n)) + r->o.clip_eps) / r->o.clip_grad_norm;
        for (size_t i = 0; q > 1 && i < r->n; i++) {
            r->g[i] /= q;
        }
    }
}

static void sgd(const ps_ref_t *r, double lr, double wd, size_t a, size_t n)
{
    const coll_ps_optim_t *o = &r->o;
    for (size_t i = a; i < a + n; i++) {
        double d = r->g[i] + wd * r->w[i];
        if (o->momentum != 0) {
            r->s0[i] = r->t == 0 ? d : o->momentum * r->s0[i] + (1 - o->dampening) * d;
            d = o->nesterov ? d + o->momentum * r->s0[i] : r->s0[i];
        }
        r->w[i] -= lr * d;
    }
}

static void adamw(const ps_ref_t *r, double lr, double wd, size_t a, size_t n)
{
    const coll_ps_optim_t *o = &r->o;
    double t = (double)(r->t + 1), c1 = 1 - pow(o->beta1, t), c2 = 1 - pow(o->beta2, t);
    for (size_t i = a; i < a + n; i++) {
        r->w[i] *= 1 - lr * wd;
        r->s0[i] = o->beta1 * r->s0[i] + (1 - o->beta1) * r->g[i];
        r->s1[i] = o->beta2 * r->s1[i] + (1 - o->beta2) * r->g[i] * r->g[i];
        r->w[i] -= lr / c1 * r->s0[i] / (sqrt(r->s1[i]) / sqrt(c2) + o->eps);
    }
}

static void lars(const ps_ref_t *r, double lr, unsigned flags, size_t a, size_t n)
{
    const coll_ps_optim_t *o = &r->o;
    double wd = (flags & COLL_PS_NO_WEIGHT_DECAY) ? 0 : o->weight_decay, trust = 1;
    double wn = sqrt(sumsq(r->w + a, n)), gn = sqrt(sumsq(r->g + a, n));
    if (!(flags & COLL_PS_NO_TRUST) && wn > 0 && gn > 0) {
        trust = o->eta * wn / (gn + wd * wn + o->eps);
    }
    for (size_t i = a; i < a + n; i++) {
        double d = r->g[i] + wd * r->w[i];
        r->s0[i] = o->momentum * r->s0[i] + lr * trust * d;
        r->w[i] -= o->nesterov ? o->momentum * r->s0[i] + lr * trust * d : r->s0[i];
    }
}

static void lamb(const ps_ref_t *r, double lr, unsigned flags, size_t a, size_t n)
{
    const coll_ps_optim_t *o = &r->o;
    double wd = (flags & COLL_PS_NO_WEIGHT_DECAY) ? 0 : o->weight_decay, trust = 1;
    double t = (double)(r->t + 1), c1 = 1 - pow(o->beta1, t), c2 = 1 - pow(o->beta2, t);
    double *u = malloc(n * sizeof(double)), wn, un;
    for (size_t i = a; i < a + n; i++) {
        r->s0[i] = o->beta1 * r->s0[i] + (1 - o->beta1) * r->g[i];
        r->s1[i] = o->beta2 * r->s1[i] + (1 - o->beta2) * r->g[i] * r->g[i];
        u[i - a] = (r->s0[i] / c1) / (sqrt(r->s1[i] / c2) + o->eps) + wd * r->w[i];
    }
    wn = sqrt(sumsq(r->w + a, n));
    un = sqrt(sumsq(u, n));
    if (!(flags & COLL_PS_NO_TRUST) && wn > 0 && un > 0) {
        trust = wn / un;
        trust = trust < o->trust_min ? o->trust_min : trust > o->trust_max ? o->trust_max : trust;
    }
    for (size_t i = a; i < a + n; i++) {
        r->w[i] -= lr * trust * u[i - a];
    }
    free(u);
}

void ps_ref_step(ps_ref_t *r)
{
    double lr = ps_ref_lr(&r->sched, r->t);
    size_t a = 0;

    gradients(r, r->t + 1);
    for (int l = 0; l < PS_MODEL_LAYERS; l++) {
        size_t n = ps_model_counts[l];
        unsigned f = r->flags[l];
        double wd = (f & COLL_PS_NO_WEIGHT_DECAY) ? 0 : r->o.weight_decay;
        switch (r->o.kind) {
        case COLL_PS_SGD: sgd(r, lr, wd, a, n); break;
        case COLL_PS_ADAMW: adamw(r, lr, wd, a, n); break;
        case COLL_PS_LARS: lars(r, lr, f, a, n); break;
        default: lamb(r, lr, f, a, n); break;
        }
        a += n;
    }
    r->t++;
}
