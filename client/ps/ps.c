/*
 * The parameter service's client side (collective_ps.h): the registration record built into
 * the pool (proto/ps_records.h), the broadcast of rank 0's parameters, and each bucket's step as one
 * PS_STEP operation whose key is (key space, step, bucket), as the bucketer's keys are, and
 * whose compression (if any) uses the residual of bucket (key space, bucket), as a bucketer's.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client/ps/ps.h"
#include "common/compression.h"
#include "proto/cspec.h"
#include "proto/ps_records.h"

/* Keys: coll__space_key() of the key space, the step and the bucket or a control code. */
enum { PS_CODE_BROADCAST = 0xFFF0, PS_CODE_REGISTER = 0xFFF1 };

uint64_t coll__ps_key(const coll_ps_t *ps, uint64_t step, unsigned code)
{
    return coll__space_key(ps->key_space, step, code);
}

size_t coll_ps_num_buckets(const coll_ps_t *ps)
{
    COLL_ARG_CHECK_OR(NULL, ps, 0);
    return ps->num_buckets;
}

coll_status_t coll_ps_bucket_range(const coll_ps_t *ps, size_t bucket, size_t *offset,
                                   size_t *count)
{
    COLL_ARG_CHECK(NULL, ps);
    COLL_ARG_CHECK(ps->comm, offset);
    COLL_ARG_CHECK(ps->comm, count);
    if (bucket >= ps->num_buckets) {
        pthread_mutex_lock(&ps->comm->conn->lock);
        coll__set_error(ps->comm, "%s: rank %d: bucket %zu does not exist (the service has %zu)",
                        __func__, ps->comm->rank, bucket, ps->num_buckets);
        pthread_mutex_unlock(&ps->comm->conn->lock);
        return COLL_ERR_INVALID;
    }
    *offset = ps->bucket_off[bucket];
    *count = ps->bucket_count[bucket];
    return COLL_OK;
}

uint64_t coll_ps_steps(const coll_ps_t *ps)
{
    uint64_t s = UINT64_MAX;

    COLL_ARG_CHECK_OR(NULL, ps, 0);
    for (size_t b = 0; b < ps->num_buckets; b++) {
        s = ps->bucket_steps[b] < s ? ps->bucket_steps[b] : s;
    }
    return s;
}

static void reg_optim(const coll_ps_optim_t *o, coll_ps_reg_optim_t *r)
{
    *r = (coll_ps_reg_optim_t){
        .momentum = o->momentum, .dampening = o->dampening, .weight_decay = o->weight_decay,
        .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps, .eta = o->eta,
        .trust_min = o->trust_min, .trust_max = o->trust_max, .phi_min = o->phi_min,
        .phi_max = o->phi_max, .clip_grad_norm = o->clip_grad_norm, .clip_eps = o->clip_eps,
        .kind = (uint32_t)o->kind, .nesterov = (uint32_t)(o->nesterov != 0),
        .lamb_bias = (uint32_t)o->lamb_bias,
        .eps_inside_sqrt = (uint32_t)(o->eps_inside_sqrt != 0),
        .grad_averaging = (uint32_t)(o->grad_averaging != 0), .l2 = (uint32_t)(o->l2 != 0)};
}

static void reg_sched(const coll_ps_schedule_t *s, coll_ps_reg_sched_t *r)
{
    memset(r, 0, sizeof(*r));
    r->base_lr = s->base_lr;
    r->warmup_start_lr = s->warmup_start_lr;
    r->gamma = s->gamma;
    r->final_lr = s->final_lr;
    r->base_batch = s->base_batch;
    r->global_batch = s->global_batch;
    r->warmup_steps = s->warmup_steps;
    r->total_steps = s->total_steps;
    memcpy(r->milestones, s->milestones, sizeof(r->milestones));
    r->decay = (uint32_t)s->decay;
    r->num_milestones = s->num_milestones;
}

/* The registration record of @p p into @p reg (coll_ps_reg_bytes(num_layers) bytes). */
static void reg_build(const coll_ps_params_t *p, void *reg)
{
    coll_ps_reg_t *h = reg;
    coll_ps_reg_layer_t *l = (coll_ps_reg_layer_t *)(void *)(h + 1);

    memset(h, 0, sizeof(*h));
    h->magic = COLL_PS_REG_MAGIC;
    h->version = COLL_PS_RECORD_VERSION;
    h->num_layers = (uint32_t)p->num_layers;
    for (size_t i = 0; i < p->num_layers; i++) {
        l[i] = (coll_ps_reg_layer_t){.count = p->layers[i].count, .flags = p->layers[i].flags,
                                     .bucket = (uint32_t)p->layers[i].bucket};
        h->count += p->layers[i].count;
        h->num_buckets = (uint32_t)p->layers[i].bucket + 1;
    }
    reg_optim(&p->optim, &h->optim);
    reg_sched(&p->schedule, &h->sched);
}

/* The methods whose reduction leaves each node its chunk of the sum (docs/parameter-service.md). */
static coll_status_t check_compression(coll_comm_t *c, const coll_compression_t *z)
{
    if (coll__compression_check(z) != COLL_OK) {
        coll__set_error(c, "coll_ps_create: invalid compression (method %d, ratio %g, flags %#x)",
                        (int)z->method, z->ratio, z->flags);
        return COLL_ERR_INVALID;
    }
    if (z->method == COLL_COMPRESS_POWERSGD || z->method == COLL_COMPRESS_AUTO) {
        coll__set_error(c, "coll_ps_create: the parameter service compresses with fp16, bf16, "
                        "onebit or topk, not %s (%s)", coll_compress_method_name(z->method),
                        z->method == COLL_COMPRESS_AUTO
                            ? "auto chooses per allreduce"
                            : "PowerSGD needs matrix shapes the service does not have");
        return COLL_ERR_UNSUPPORTED;
    }
    return COLL_OK;
}

static coll_status_t check_params(coll_comm_t *c, const coll_ps_params_t *p, coll_ps_t **ps_p)
{
    if (p == NULL || ps_p == NULL) {
        coll__set_error(c, "coll_ps_create: rank %d: %s must not be NULL", c->rank,
                        p == NULL ? "params" : "ps_p");
        return COLL_ERR_INVALID;
    }
    if (p->layers == NULL || p->params == NULL || p->num_layers == 0 ||
        p->num_layers > COLL_PS_MAX_LAYERS) {
        coll__set_error(c, "coll_ps_create: no parameters, or a number of layers outside "
                        "1..%u", COLL_PS_MAX_LAYERS);
        return COLL_ERR_INVALID;
    }
    if ((p->field_mask & COLL_PS_PARAM_KEY_SPACE) && p->key_space >= COLL_BUCKETER_KEY_SPACES) {
        coll__set_error(c, "coll_ps_create: key space %u, at most %u", p->key_space,
                        COLL_BUCKETER_KEY_SPACES - 1);
        return COLL_ERR_INVALID;
    }
    for (size_t i = 0; i < p->num_layers; i++) {
        if (p->layers[i].bucket >= COLL_PS_MAX_BUCKETS || p->layers[i].flags > UINT32_MAX) {
            coll__set_error(c, "coll_ps_create: layer %zu: bucket %zu, at most %u", i,
                            p->layers[i].bucket, COLL_PS_MAX_BUCKETS - 1);
            return COLL_ERR_INVALID;
        }
    }
    return (p->field_mask & COLL_PS_PARAM_COMPRESSION) ? check_compression(c, &p->compression)
                                                       : COLL_OK;
}

/* Buckets' ranges and step counters, from the checked record. */
static coll_status_t ps_new(coll_comm_t *c, const coll_ps_params_t *p, const coll_ps_reg_t *h,
                            coll_ps_t **ps_p)
{
    size_t nb = h->num_buckets;
    coll_ps_t *ps = calloc(1, sizeof(*ps) + nb * (2 * sizeof(size_t) + sizeof(uint64_t)));

    if (ps == NULL) {
        return COLL_ERR_NOMEM;
    }
    ps->comm = c;
    ps->params = p->params;
    ps->count = h->count;
    ps->num_layers = h->num_layers;
    ps->num_buckets = nb;
    ps->bucket_off = (size_t *)(void *)(ps + 1);
    ps->bucket_count = ps->bucket_off + nb;
    ps->bucket_steps = (uint64_t *)(void *)(ps->bucket_count + nb);
    ps->key_space = (p->field_mask & COLL_PS_PARAM_KEY_SPACE) ? p->key_space
                                                              : COLL_BUCKETER_KEY_SPACES - 1;
    if (p->field_mask & COLL_PS_PARAM_COMPRESSION) {
        ps->compression = p->compression;
    }
    for (size_t i = 0, off = 0; i < p->num_layers; off += p->layers[i++].count) {
        if (ps->bucket_count[p->layers[i].bucket] == 0) {
            ps->bucket_off[p->layers[i].bucket] = off;
        }
        ps->bucket_count[p->layers[i].bucket] += p->layers[i].count;
    }
    *ps_p = ps;
    return COLL_OK;
}

/* The public function that submits a control operation of @p kind, which its messages name. */
static const char *control_caller(uint32_t kind)
{
    return kind == COLL_KIND_PS_REGISTER ? "coll_ps_create"
           : kind == COLL_KIND_PS_SAVE   ? "coll_ps_save"
                                         : "coll_ps_load";
}

coll_status_t coll__ps_control(coll_ps_t *ps, uint32_t kind, const void *send, void *recv,
                               size_t count, uint64_t arg, uint64_t key)
{
    coll_comm_t *c = ps->comm;
    coll_request_t *r = NULL;
    coll_status_t st;

    pthread_mutex_lock(&c->lock);
    st = coll__submit_msg(c, control_caller(kind), &(coll_submission_t){
        .coll = kind,
        .key = key,
        .dtype = COLL_UINT8,
        .count = count,
        .send_offset = send != NULL ? (uint64_t)coll__pool_offset(c, send, count) : 0,
        .recv_offset = recv != NULL ? (uint64_t)coll__pool_offset(c, recv, count) : 0,
        .layout = arg,
    }, NULL, &r);
    pthread_mutex_unlock(&c->lock);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    return st;
}

/* Rank 0's parameters to every rank, then the registration. */
static coll_status_t ps_register(coll_ps_t *ps, const void *reg, size_t bytes)
{
    coll_op_params_t op = {.field_mask = COLL_OP_PARAM_KEY,
                           .key = coll__ps_key(ps, 0, PS_CODE_BROADCAST)};
    coll_request_t *r = NULL;
    coll_status_t st = coll_broadcast_async(ps->comm, ps->params, ps->params, ps->count,
                                            COLL_FLOAT32, 0, &op, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    if (st == COLL_OK) {
        ps->fingerprint = coll_ps_fingerprint(reg, bytes);
        st = coll__ps_control(ps, COLL_KIND_PS_REGISTER, reg, NULL, bytes,
                              ps->fingerprint, coll__ps_key(ps, 0, PS_CODE_REGISTER));
    }
    return st;
}

/* [@p p, + @p bytes) lies in the job's host pool or one of its device pools. */
static int in_a_pool(coll_comm_t *c, const void *p, size_t bytes)
{
    uint32_t pool;
    int64_t off;

    pthread_mutex_lock(&c->lock);
    off = coll__buffer_offset(c->conn, p, bytes, &pool);
    pthread_mutex_unlock(&c->lock);
    return off >= 0;
}

/* The record in the pool, checked as the daemon will check it. */
static coll_status_t reg_make(coll_comm_t *c, const coll_ps_params_t *p, void **reg_p)
{
    size_t bytes = coll_ps_reg_bytes(p->num_layers);
    coll_status_t st = coll_mem_alloc(c, bytes, reg_p);
    char err[256];

    if (st != COLL_OK) {
        return st;
    }
    reg_build(p, *reg_p);
    if ((st = coll_ps_reg_check(*reg_p, bytes, err, sizeof(err))) != COLL_OK) {
        coll__set_error(c, "coll_ps_create: %s", err);
    } else if (!in_a_pool(c, p->params,
                          ((const coll_ps_reg_t *)*reg_p)->count * sizeof(float))) {
        coll__set_error(c, "coll_ps_create: the parameters are not inside the job's pool or "
                        "one of its device pools; allocate them with coll_mem_alloc() or "
                        "coll_mem_alloc_on()");
        st = COLL_ERR_NOT_IN_POOL;
    }
    return st;
}

coll_status_t coll_ps_create(coll_comm_t *comm, const coll_ps_params_t *params, coll_ps_t **ps_p)
{
    coll_status_t st;
    void *reg = NULL;
    coll_ps_t *ps = NULL;

    COLL_ARG_CHECK(NULL, comm);
    st = check_params(comm, params, ps_p);
    st = st == COLL_OK ? reg_make(comm, params, &reg) : st;
    st = st == COLL_OK ? ps_new(comm, params, reg, &ps) : st;
    if (st != COLL_OK && st != COLL_ERR_NOMEM && st != COLL_ERR_POOL_FULL) {
        /* The other ranks would wait in the broadcast for this one: end the job for them. */
        coll_comm_abort(comm, coll_comm_last_error(comm));
    }
    st = st == COLL_OK ? ps_register(ps, reg, coll_ps_reg_bytes(params->num_layers)) : st;
    if (reg != NULL) {
        coll_mem_free(comm, reg);
    }
    if (st != COLL_OK) {
        free(ps);
        return st;
    }
    *ps_p = ps;
    return COLL_OK;
}

void coll_ps_destroy(coll_ps_t *ps)
{
    free(ps);
}

/* The bucket exists and has not been submitted this step; its gradients and parameters are in
 * one pool, apart: the host's or a device's (the daemons stage device buffers, docs/gpu.md), a
 * device's where the step has a @p stream (which orders only device work). */
static coll_status_t check_step(const char *func, coll_ps_t *ps, size_t bucket,
                                const float *grad, int stream, coll_submission_t *m)
{
    coll_comm_t *c = ps->comm;
    size_t bytes;
    int64_t go, po;
    uint32_t gp = 0, pp = 0;

    if (grad == NULL) {
        coll__set_error(c, "%s: rank %d: grad must not be NULL", func, c->rank);
        return COLL_ERR_INVALID;
    }
    if (bucket >= ps->num_buckets || ps->bucket_steps[bucket] > coll_ps_steps(ps)) {
        coll__set_error(c, "%s: rank %d: bucket %zu %s", func, c->rank, bucket,
                        bucket >= ps->num_buckets ? "does not exist"
                                                  : "was submitted twice in one step");
        return COLL_ERR_INVALID;
    }
    bytes = ps->bucket_count[bucket] * sizeof(float);
    go = coll__buffer_offset(c->conn, grad, bytes, &gp);
    po = coll__buffer_offset(c->conn, ps->params + ps->bucket_off[bucket], bytes, &pp);
    if (go < 0 || po < 0) {
        coll__set_error(c, "%s: rank %d: the gradients of bucket %zu are not inside the job's "
                        "pool or one of its device pools", func, c->rank, bucket);
        return COLL_ERR_NOT_IN_POOL;
    }
    if (gp != pp) {
        coll__set_error(c, "%s: rank %d: the gradients of bucket %zu are in %s, its parameters "
                        "in %s: both must be in one pool", func, c->rank, bucket,
                        gp == 0 ? "host memory" : "a device pool",
                        pp == 0 ? "host memory" : gp == 0 ? "a device pool" : "another one");
        return COLL_ERR_INVALID;
    }
    if (go < po + (int64_t)bytes && po < go + (int64_t)bytes) {
        coll__set_error(c, "%s: rank %d: the gradients of bucket %zu overlap its parameters "
                        "(%zu bytes at pool offsets %lld and %lld): they must be apart", func,
                        c->rank, bucket, bytes, (long long)go, (long long)po);
        return COLL_ERR_INVALID;
    }
    if (stream && gp == 0) {
        coll__set_error(c, "%s: rank %d: a stream orders operations on device buffers; the "
                        "gradients and parameters of bucket %zu are in the host pool", func,
                        c->rank, bucket);
        return COLL_ERR_INVALID;
    }
    m->send_offset = (uint64_t)go;
    m->recv_offset = (uint64_t)po;
    m->pool = gp;
    return COLL_OK;
}

/* The step of @p bucket, whose buffers check_step() placed in @p m. */
static void fill_step(const coll_ps_t *ps, size_t bucket, coll_submission_t *m)
{
    m->coll = COLL_KIND_PS_STEP;
    m->key = coll__ps_key(ps, ps->bucket_steps[bucket] + 1, (unsigned)bucket);
    m->dtype = COLL_FLOAT32;
    m->redop = COLL_AVG;
    m->count = ps->bucket_count[bucket];
    m->root = (uint32_t)bucket;
    m->layout = ps->bucket_steps[bucket] + 1; /* a step's layout field: its step number */
    if (ps->compression.method != COLL_COMPRESS_NONE) {
        m->compression = coll_cspec_pack(&ps->compression,
                                         coll__compress_ratio_units(ps->compression.ratio));
        m->bucket = (uint32_t)ps->key_space << 16 | (uint32_t)bucket;
        m->warmup = ps->compression.warmup;
    }
}

/* The step of @p bucket, for public function @p func (the one the caller called, for the
 * messages); with @p stream (NULL: none; *@p stream NULL: CUDA's default stream) its device
 * buffers are read after the stream's earlier work (coll__submit_msg()). */
static coll_status_t step_bucket(const char *func, coll_ps_t *ps, size_t bucket,
                                 const float *grad, void *const *stream, coll_request_t **req_p)
{
    coll_comm_t *c = ps->comm;
    coll_submission_t m = {0};
    coll_status_t st;

    pthread_mutex_lock(&c->lock);
    st = check_step(func, ps, bucket, grad, stream != NULL, &m);
    if (st == COLL_OK) {
        fill_step(ps, bucket, &m);
        st = coll__submit_msg(c, func, &m, stream, req_p);
        ps->bucket_steps[bucket] += st == COLL_INPROGRESS;
    }
    if (st != COLL_INPROGRESS && c->conn->ended == COLL_OK) {
        /* Refused here or in the submission (a stream with every word pair in flight, ...):
         * the other ranks would wait for this bucket, so end the job for them too. */
        coll__abort(c, st, c->last_error);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

coll_status_t coll_ps_step_bucket_async(coll_ps_t *ps, size_t bucket, const float *grad,
                                        coll_request_t **req_p)
{
    COLL_ARG_CHECK(NULL, ps);
    if (req_p == NULL) {
        return coll__refuse_null(ps->comm, __func__, "req_p");
    }
    return step_bucket(__func__, ps, bucket, grad, NULL, req_p);
}

/* The fields of coll_op_params_t a step takes: its key, algorithm, layout and compression are
 * the service's own. */
#define STEP_PARAMS COLL_OP_PARAM_STREAM

coll_status_t coll_ps_step_bucket_params_async(coll_ps_t *ps, size_t bucket, const float *grad,
                                               const coll_op_params_t *params,
                                               coll_request_t **req_p)
{
    COLL_ARG_CHECK(NULL, ps);
    if (req_p == NULL) {
        return coll__refuse_null(ps->comm, __func__, "req_p");
    }
    if (params != NULL && (params->field_mask & ~(uint64_t)STEP_PARAMS) != 0) {
        return coll__refuse(ps->comm, COLL_ERR_INVALID, "%s: rank %d: field_mask %#" PRIx64
                            " of the parameters: a step takes only a stream "
                            "(COLL_OP_PARAM_STREAM); its key, algorithm, layout and compression "
                            "are the service's", __func__, ps->comm->rank, params->field_mask);
    }
    /* A stream of NULL is CUDA's default stream, not none: the mask says whether. */
    return step_bucket(__func__, ps, bucket, grad,
                       params != NULL && (params->field_mask & COLL_OP_PARAM_STREAM)
                           ? &params->stream
                           : NULL,
                       req_p);
}

coll_status_t coll_ps_step(coll_ps_t *ps, const float *grads)
{
    coll_request_t **reqs;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, ps);
    if (grads == NULL) {
        return coll__refuse_null(ps->comm, __func__, "grads");
    }
    reqs = calloc(ps->num_buckets, sizeof(*reqs));
    st = reqs != NULL ? COLL_OK : COLL_ERR_NOMEM;
    for (size_t b = 0; b < ps->num_buckets && st == COLL_OK; b++) {
        st = step_bucket(__func__, ps, b, grads + ps->bucket_off[b], NULL, &reqs[b]);
        st = st == COLL_INPROGRESS ? COLL_OK : st;
    }
    for (size_t b = 0; reqs != NULL && b < ps->num_buckets; b++) {
        if (reqs[b] != NULL) {
            coll_status_t w = coll_req_wait(reqs[b], -1);
            st = st == COLL_OK ? w : st;
            coll_req_free(reqs[b]);
        }
    }
    free(reqs);
    return st;
}
