/* The trainer's optimizer (optimizer.h): per tensor of the network, one call of a coll_optim
 * kernel on the tensor's weights, its gradient and its slice of the optimizer state. */
#include "optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <collective_ps.h>

/* One tensor: its weights, its gradient (a bucket view, which may move between steps: taken
 * from the network at every step) and its offset in the parameter layout. */
typedef struct tensor {
    float *w;
    float *g;
    size_t n;
    size_t off;
} tensor_t;

typedef double (*update_fn)(const train_optim_t *o, const coll_optim_step_t *st, unsigned flags,
                            const tensor_t *x);

static tensor_t tensor_at(const mlp_t *mlp, int t)
{
    const mlp_layer_t *l = &mlp->layers[t / 2];
    int bias = t % 2;
    tensor_t x = {bias ? l->b : l->w, bias ? l->gb : l->gw,
                  bias ? (size_t)l->out : (size_t)l->out * (size_t)l->in, 0};

    x.off = (size_t)(x.w - mlp->params);
    return x;
}

const char *train_optim_name(train_optim_kind_t kind)
{
    static const char *const names[TRAIN_OPTIM_KINDS] = {"sgd", "adamw", "lars", "lamb"};

    return kind < TRAIN_OPTIM_KINDS ? names[kind] : "?";
}

void train_tensor_name(int t, char *buf, size_t len)
{
    snprintf(buf, len, "fc%d.%s", t / 2, t % 2 ? "bias" : "weight");
}

void train_optim_defaults(train_optim_kind_t kind, train_optim_opts_t *o)
{
    coll_optim_adamw_params_t a;
    coll_optim_lars_params_t l;
    coll_optim_lamb_params_t b;

    coll_optim_adamw_params_init(&a);
    coll_optim_lars_params_init(&l);
    coll_optim_lamb_params_init(&b);
    *o = (train_optim_opts_t){.kind = kind, .momentum = 0.9, .beta1 = a.beta1, .beta2 = a.beta2,
                              .lars_eta = l.eta, .trust_min = 0, .trust_max = INFINITY};
    if (kind == TRAIN_OPTIM_ADAMW) {
        o->weight_decay = a.weight_decay;
        o->eps = a.eps;
    } else if (kind == TRAIN_OPTIM_LARS) {
        o->momentum = l.momentum;
        o->weight_decay = l.weight_decay;
        o->eps = l.eps;
    } else if (kind == TRAIN_OPTIM_LAMB) {
        o->beta1 = b.beta1;
        o->beta2 = b.beta2;
        o->weight_decay = b.weight_decay;
        o->eps = b.eps;
    }
    o->exclude_bias = kind == TRAIN_OPTIM_LARS || kind == TRAIN_OPTIM_LAMB;
}

double train_optim_default_lr(train_optim_kind_t kind)
{
    static const coll_ps_optimizer_t kinds[TRAIN_OPTIM_KINDS] = {COLL_PS_SGD, COLL_PS_ADAMW,
                                                                 COLL_PS_LARS, COLL_PS_LAMB};
    return coll_ps_optim_default_lr(kinds[kind]);
}

void train_optim_describe(const train_optim_opts_t *o, FILE *out)
{
    int moments = o->kind == TRAIN_OPTIM_ADAMW || o->kind == TRAIN_OPTIM_LAMB;

    fprintf(out, "%s", train_optim_name(o->kind));
    if (moments) {
        fprintf(out, ", betas %g %g", o->beta1, o->beta2);
    } else {
        fprintf(out, ", %smomentum %g", o->nesterov ? "Nesterov " : "", o->momentum);
    }
    fprintf(out, ", weight decay %g", o->weight_decay);
    if (o->kind != TRAIN_OPTIM_SGD) {
        fprintf(out, ", eps %g", o->eps);
    }
    if (o->kind == TRAIN_OPTIM_LARS) {
        fprintf(out, ", eta %g", o->lars_eta);
    }
    if (o->kind == TRAIN_OPTIM_LAMB && (o->trust_min > 0 || isfinite(o->trust_max))) {
        fprintf(out, ", trust clamped to [%g, %g]", o->trust_min, o->trust_max);
    }
    if (o->clip_grad_norm > 0) {
        fprintf(out, ", gradients clipped to norm %g", o->clip_grad_norm);
    }
    fprintf(out, "%s", o->exclude_bias ? ", biases excluded" : "");
}

/* ---- the kernels' parameters ------------------------------------------------------------ */

static double decay_of(const train_optim_opts_t *o, unsigned flags)
{
    return (flags & COLL_OPTIM_NO_WEIGHT_DECAY) ? 0.0 : o->weight_decay;
}

static coll_optim_sgd_params_t sgd_params(const train_optim_opts_t *o, unsigned flags)
{
    return (coll_optim_sgd_params_t){.momentum = o->momentum, .dampening = 0.0,
                                     .weight_decay = decay_of(o, flags), .nesterov = o->nesterov};
}

static coll_optim_adamw_params_t adamw_params(const train_optim_opts_t *o, unsigned flags)
{
    return (coll_optim_adamw_params_t){.beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                                       .weight_decay = decay_of(o, flags)};
}

/* LARS and LAMB read the exclusion from the layer flags themselves. */
static coll_optim_lars_params_t lars_params(const train_optim_opts_t *o)
{
    return (coll_optim_lars_params_t){.momentum = o->momentum, .weight_decay = o->weight_decay,
                                      .eta = o->lars_eta, .eps = o->eps,
                                      .nesterov = o->nesterov};
}

static coll_optim_lamb_params_t lamb_params(const train_optim_opts_t *o)
{
    coll_optim_lamb_params_t p;

    coll_optim_lamb_params_init(&p);
    p.beta1 = o->beta1;
    p.beta2 = o->beta2;
    p.eps = o->eps;
    p.weight_decay = o->weight_decay;
    p.trust_min = o->trust_min;
    p.trust_max = o->trust_max;
    return p;
}

static coll_status_t params_check(const train_optim_opts_t *o)
{
    coll_optim_sgd_params_t s = sgd_params(o, 0);
    coll_optim_adamw_params_t a = adamw_params(o, 0);
    coll_optim_lars_params_t l = lars_params(o);
    coll_optim_lamb_params_t b = lamb_params(o);

    switch (o->kind) {
    case TRAIN_OPTIM_SGD: return coll_optim_sgd_params_check(&s);
    case TRAIN_OPTIM_ADAMW: return coll_optim_adamw_params_check(&a);
    case TRAIN_OPTIM_LARS: return coll_optim_lars_params_check(&l);
    case TRAIN_OPTIM_LAMB: return coll_optim_lamb_params_check(&b);
    default: return COLL_ERR_INVALID;
    }
}

/* ---- one tensor's update; each returns the trust ratio it applied ----------------------- */

static double update_sgd(const train_optim_t *o, const coll_optim_step_t *st, unsigned flags,
                         const tensor_t *x)
{
    const coll_optim_sgd_params_t p = sgd_params(&o->opts, flags);

    coll_optim_sgd_update(&p, st, x->w, x->g, o->state[0] + x->off, x->n);
    return 1.0;
}

static double update_adamw(const train_optim_t *o, const coll_optim_step_t *st, unsigned flags,
                           const tensor_t *x)
{
    const coll_optim_adamw_params_t p = adamw_params(&o->opts, flags);

    coll_optim_adamw_update(&p, st, x->w, x->g, o->state[0] + x->off, o->state[1] + x->off,
                            x->n);
    return 1.0;
}

/* The tensor is the whole layer, so its own sums of squares are the reduced sums. */
static double update_lars(const train_optim_t *o, const coll_optim_step_t *st, unsigned flags,
                          const tensor_t *x)
{
    const coll_optim_lars_params_t p = lars_params(&o->opts);
    double sums[2];
    coll_optim_layer_t layer;

    coll_optim_sumsq2(x->w, x->g, x->n, sums);
    layer = (coll_optim_layer_t){.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lars_update(&p, st, &layer, x->w, x->g, o->state[0] + x->off, x->n);
    return coll_optim_lars_trust(&p, &layer);
}

static double update_lamb(const train_optim_t *o, const coll_optim_step_t *st, unsigned flags,
                          const tensor_t *x)
{
    const coll_optim_lamb_params_t p = lamb_params(&o->opts);
    float *m = o->state[0] + x->off, *v = o->state[1] + x->off;
    double sums[2];
    coll_optim_layer_t layer;

    coll_optim_lamb_moments(&p, st, flags, x->w, x->g, m, v, x->n, sums);
    layer = (coll_optim_layer_t){.flags = flags, .w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lamb_apply(&p, st, &layer, x->w, m, v, x->n);
    return coll_optim_lamb_trust(&p, &layer);
}

static const update_fn updates[TRAIN_OPTIM_KINDS] = {update_sgd, update_adamw, update_lars,
                                                     update_lamb};

/* ---- state ------------------------------------------------------------------------------ */

static float *alloc_zeroed(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes != 0 ? bytes : 64);

    if (p != NULL) {
        memset(p, 0, bytes);
    }
    return p;
}

static size_t largest_tensor(const mlp_t *mlp)
{
    size_t n = 0;

    for (int t = 0; t < 2 * mlp->n_layers; t++) {
        size_t len = tensor_at(mlp, t).n;
        n = len > n ? len : n;
    }
    return n;
}

int train_optim_init(train_optim_t *o, const train_optim_opts_t *opts, const mlp_t *mlp,
                     int want_stats)
{
    int two = opts->kind == TRAIN_OPTIM_ADAMW || opts->kind == TRAIN_OPTIM_LAMB;

    memset(o, 0, sizeof(*o));
    o->opts = *opts;
    if (params_check(opts) != COLL_OK) {
        fprintf(stderr, "coll-train: invalid settings for --optimizer %s\n",
                train_optim_name(opts->kind));
        return -1;
    }
    o->n_tensors = 2 * mlp->n_layers;
    for (int t = 1; t < o->n_tensors; t += 2) {
        o->flags[t] = opts->exclude_bias ? COLL_OPTIM_EXCLUDE : 0;
    }
    o->state[0] = alloc_zeroed(mlp->n_params);
    o->state[1] = two ? alloc_zeroed(mlp->n_params) : NULL;
    o->before = want_stats ? alloc_zeroed(largest_tensor(mlp)) : NULL;
    if (o->state[0] == NULL || (two && o->state[1] == NULL) || (want_stats && !o->before)) {
        fprintf(stderr, "coll-train: out of memory for the optimizer state\n");
        train_optim_fini(o);
        return -1;
    }
    return 0;
}

void train_optim_fini(train_optim_t *o)
{
    free(o->state[0]);
    free(o->state[1]);
    free(o->before);
    o->state[0] = o->state[1] = o->before = NULL;
}

/* ---- a step ----------------------------------------------------------------------------- */

/* Global gradient-norm clipping (optimizer.h), in place. A non-finite norm clips nothing: the
 * non-finite gradients propagate as they would without clipping. */
static void clip_grads(const train_optim_t *o, const mlp_t *mlp)
{
    double sumsq = 0.0, q;
    float scale;

    for (int t = 0; t < o->n_tensors; t++) {
        tensor_t x = tensor_at(mlp, t);
        sumsq += coll_optim_sumsq(x.g, x.n);
    }
    q = sqrt(sumsq) / o->opts.clip_grad_norm;
    if (!(q > 1.0)) {
        return;
    }
    scale = (float)(1.0 / q);
    for (int t = 0; t < o->n_tensors; t++) {
        tensor_t x = tensor_at(mlp, t);
        for (size_t i = 0; i < x.n; i++) {
            x.g[i] *= scale;
        }
    }
}

static void stats_before(const train_optim_t *o, const tensor_t *x, train_tensor_stats_t *s)
{
    double sums[2];

    coll_optim_sumsq2(x->w, x->g, x->n, sums);
    s->w_norm = sqrt(sums[0]);
    s->g_norm = sqrt(sums[1]);
    memcpy(o->before, x->w, x->n * sizeof(float));
}

static void stats_after(const train_optim_t *o, const tensor_t *x, train_tensor_stats_t *s)
{
    double acc = 0.0;

    for (size_t i = 0; i < x->n; i++) {
        double d = (double)x->w[i] - (double)o->before[i];
        acc += d * d;
    }
    s->update_norm = sqrt(acc);
}

void train_optim_step(train_optim_t *o, mlp_t *mlp, double lr, train_tensor_stats_t *stats)
{
    const coll_optim_step_t st = {.lr = lr, .step = o->steps + 1, .grad_sumsq = 0.0};

    if (o->opts.clip_grad_norm > 0) {
        clip_grads(o, mlp);
    }
    stats = o->before != NULL ? stats : NULL;
    for (int t = 0; t < o->n_tensors; t++) {
        tensor_t x = tensor_at(mlp, t);
        if (stats != NULL) {
            stats_before(o, &x, &stats[t]);
        }
        double trust = updates[o->opts.kind](o, &st, o->flags[t], &x);
        if (stats != NULL) {
            stats[t].trust = trust;
            stats_after(o, &x, &stats[t]);
        }
    }
    o->steps++;
}
