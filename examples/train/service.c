/* coll-train --service (service.h): the network's parameters and gradients in the pool, one
 * service layer per tensor, one bucket per network layer, submitted as backward finishes it. */
#include "service.h"

#include <stdio.h>
#include <string.h>

static void service_report(const train_service_t *s, const char *what, coll_status_t st)
{
    const char *detail = coll_comm_last_error(s->dist->comm);

    fprintf(stderr, "coll-train: rank %d: %s: %s (%s)%s%s\n", s->dist->rank, what,
            coll_strerror(st), coll_err_name(st), detail[0] != '\0' ? ": " : "", detail);
}

void train_service_optim(const train_optim_opts_t *o, coll_ps_optim_t *p)
{
    static const coll_ps_optimizer_t kinds[TRAIN_OPTIM_KINDS] = {COLL_PS_SGD, COLL_PS_ADAMW,
                                                                 COLL_PS_LARS, COLL_PS_LAMB};

    /* The reference defaults first: LAMB's bias correction, eps placement, grad averaging and
     * ||w|| clamp are those of the trainer's coll_optim_lamb_params_init(). */
    coll_ps_optim_init(kinds[o->kind], p);
    p->momentum = o->momentum;
    p->dampening = 0.0;
    p->nesterov = o->nesterov;
    p->weight_decay = o->weight_decay;
    p->beta1 = o->beta1;
    p->beta2 = o->beta2;
    p->eps = o->eps;
    p->eta = o->lars_eta;
    p->trust_min = o->trust_min;
    p->trust_max = o->trust_max;
    p->clip_grad_norm = o->clip_grad_norm;
    p->clip_eps = 0.0; /* optimizer.h: q = N / clip_grad_norm */
}

void train_service_schedule(const coll_schedule_t *s, coll_ps_schedule_t *p)
{
    coll_ps_schedule_constant(s->base_lr, p);
    if (s->field_mask & COLL_SCHEDULE_FIELD_SCALING) {
        p->base_batch = s->base_batch;
        p->global_batch = s->global_batch;
    }
    if (s->field_mask & COLL_SCHEDULE_FIELD_WARMUP) {
        p->warmup_steps = s->warmup_steps;
    }
    if (s->field_mask & COLL_SCHEDULE_FIELD_WARMUP_START) {
        p->warmup_start_lr = s->warmup_start_lr;
    }
    if (s->field_mask & COLL_SCHEDULE_FIELD_DECAY) {
        p->decay = (coll_ps_decay_t)s->decay;
        memcpy(p->milestones, s->milestones, sizeof(p->milestones));
        p->num_milestones = s->num_milestones;
        p->gamma = s->gamma;
        p->total_steps = s->total_steps;
        p->final_lr = s->final_lr;
    }
}

/* Parameters copied into the pool, the layers pointed at them, gradients bound to the pool. */
static int service_buffers(train_service_t *s)
{
    mlp_t *mlp = s->mlp;
    size_t off = 0;

    s->params = dist_alloc(s->dist, mlp->n_params);
    s->grads = dist_alloc(s->dist, mlp->n_params);
    if (s->params == NULL || s->grads == NULL) {
        return -1;
    }
    for (int l = 0; l < mlp->n_layers; l++) {
        mlp_layer_t *layer = &mlp->layers[l];
        size_t nw = (size_t)layer->out * (size_t)layer->in, n = nw + (size_t)layer->out;
        memcpy(s->params + off, layer->w, nw * sizeof(float));
        memcpy(s->params + off + nw, layer->b, (size_t)layer->out * sizeof(float));
        layer->w = s->params + off;
        layer->b = layer->w + nw;
        mlp_bind_grads(mlp, l, s->grads + off, s->grads + off + nw);
        off += n;
    }
    return 0;
}

/* Two service layers (weight, bias) per network layer, network layer l in bucket l. */
static void service_layers(const mlp_t *mlp, const train_optim_opts_t *o,
                           coll_ps_layer_t *layers)
{
    for (int l = 0; l < mlp->n_layers; l++) {
        const mlp_layer_t *layer = &mlp->layers[l];
        layers[2 * l] = (coll_ps_layer_t){(size_t)layer->out * (size_t)layer->in, 0, (size_t)l};
        layers[2 * l + 1] = (coll_ps_layer_t){(size_t)layer->out,
                                              o->exclude_bias ? COLL_PS_EXCLUDE : 0u, (size_t)l};
    }
}

int train_service_init(train_service_t *s, dist_t *dist, mlp_t *mlp,
                       const train_optim_opts_t *optim, const coll_schedule_t *sched,
                       const coll_compression_t *compression)
{
    coll_ps_layer_t layers[2 * MLP_MAX_LAYERS];
    coll_ps_params_t p = {0};
    coll_status_t st;

    memset(s, 0, sizeof(*s));
    s->dist = dist;
    s->mlp = mlp;
    if (dist_standalone(dist)) {
        fprintf(stderr, "coll-train: --service needs a job: the optimizer runs in the "
                        "daemons (start it with collective-launch)\n");
        return 2;
    }
    if (service_buffers(s) != 0) {
        return 1;
    }
    service_layers(mlp, optim, layers);
    p.params = s->params;
    p.layers = layers;
    p.num_layers = 2 * (size_t)mlp->n_layers;
    train_service_optim(optim, &p.optim);
    train_service_schedule(sched, &p.schedule);
    if (compression != NULL) {
        p.field_mask |= COLL_PS_PARAM_COMPRESSION;
        p.compression = *compression;
    }
    st = coll_ps_create(dist->comm, &p, &s->ps);
    if (st != COLL_OK) {
        service_report(s, "coll_ps_create", st);
        return st == COLL_ERR_INVALID || st == COLL_ERR_UNSUPPORTED ? 2 : 1;
    }
    return 0;
}

void train_service_grad_ready(void *arg, const mlp_t *mlp, int layer)
{
    train_service_t *s = arg;
    size_t off, count;
    coll_status_t st;

    (void)mlp;
    if (s->submit_st != COLL_OK) {
        return;
    }
    st = coll_ps_bucket_range(s->ps, (size_t)layer, &off, &count);
    if (st == COLL_OK) {
        st = coll_ps_step_bucket_async(s->ps, (size_t)layer, s->grads + off,
                                       &s->reqs[layer]);
    }
    if (st != COLL_INPROGRESS && st != COLL_OK) {
        s->reqs[layer] = NULL;
        s->submit_st = st;
        service_report(s, "coll_ps_step_bucket_async", st);
    }
}

int train_service_wait(train_service_t *s, uint64_t *wire, uint64_t *dense)
{
    coll_status_t first = s->submit_st;

    *wire = *dense = 0;
    for (int l = 0; l < s->mlp->n_layers; l++) {
        uint64_t sent = 0, ring = 0;
        if (s->reqs[l] == NULL) {
            continue;
        }
        coll_status_t st = coll_req_wait(s->reqs[l], s->dist->timeout_ms);
        if (st == COLL_OK && coll_req_wire_bytes(s->reqs[l], &sent, &ring) == COLL_OK) {
            *wire += sent;
            *dense += ring;
        }
        coll_req_free(s->reqs[l]);
        s->reqs[l] = NULL;
        if (st != COLL_OK && first == COLL_OK) {
            first = st;
            service_report(s, "parameter service step", st);
        }
    }
    return first == COLL_OK ? 0 : -1;
}

void train_service_fini(train_service_t *s)
{
    if (s->dist == NULL) {
        return;
    }
    for (int l = 0; l < MLP_MAX_LAYERS; l++) {
        coll_req_free(s->reqs[l]);
        s->reqs[l] = NULL;
    }
    coll_ps_destroy(s->ps);
    s->ps = NULL;
    dist_free(s->dist, s->params);
    dist_free(s->dist, s->grads);
    s->params = s->grads = NULL;
}
