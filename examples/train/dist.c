/* Data-parallel context: a libcollective communicator, or none in standalone mode. */
#include "dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The reference run: no communicator when the environment describes no job of several ranks. */
static int dist_env_standalone(void)
{
    const char *world = getenv("COLL_WORLD_SIZE");

    if (world == NULL || world[0] == '\0') {
        return 1;
    }
    return strcmp(world, "1") == 0 && getenv("COLL_SOCKET") == NULL;
}

static void dist_report(const dist_t *dist, const char *what, coll_status_t st)
{
    const char *detail = dist->comm != NULL ? coll_comm_last_error(dist->comm) : "";

    fprintf(stderr, "coll-train: rank %d: %s: %s (%s)%s%s\n", dist->rank, what,
            coll_strerror(st), coll_err_name(st), detail[0] != '\0' ? ": " : "", detail);
}

int dist_init(dist_t *dist)
{
    coll_comm_t *comm;
    coll_status_t st;

    memset(dist, 0, sizeof(*dist));
    dist->timeout_ms = DIST_DEFAULT_TIMEOUT_MS;
    if (dist_env_standalone()) {
        dist->world_size = 1;
        dist->local_size = 1;
        return 0;
    }
    st = coll_comm_create(NULL, &comm);
    if (st != COLL_OK) {
        fprintf(stderr, "coll-train: cannot join the job: %s: %s\n", coll_strerror(st),
                coll_comm_last_error(NULL));
        return -1;
    }
    dist->comm = comm;
    dist->rank = coll_comm_rank(comm);
    dist->world_size = coll_comm_world_size(comm);
    dist->local_size = coll_comm_local_size(comm);
    return 0;
}

void dist_fini(dist_t *dist)
{
    coll_comm_destroy(dist->comm);
    dist->comm = NULL;
}

int dist_standalone(const dist_t *dist)
{
    return dist->comm == NULL;
}

float *dist_alloc(dist_t *dist, size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    void *p;
    coll_status_t st;

    if (dist->comm == NULL) {
        p = aligned_alloc(64, bytes);
        if (p == NULL) {
            fprintf(stderr, "coll-train: out of memory for %zu bytes\n", bytes);
            return NULL;
        }
    } else {
        st = coll_mem_alloc(dist->comm, bytes, &p);
        if (st != COLL_OK) {
            char what[64];
            snprintf(what, sizeof(what), "coll_mem_alloc of %zu bytes", bytes);
            dist_report(dist, what, st);
            return NULL;
        }
    }
    memset(p, 0, bytes);
    return p;
}

void dist_free(dist_t *dist, float *buf)
{
    if (buf == NULL) {
        return;
    }
    if (dist->comm == NULL) {
        free(buf);
    } else {
        coll_mem_free(dist->comm, buf);
    }
}

int dist_allreduce(dist_t *dist, float *buf, size_t n, coll_redop_t op)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    /* The loss and the accuracy counts: exact, whatever COLL_COMPRESSION says. */
    coll_op_params_t exact = {.field_mask = COLL_OP_PARAM_COMPRESSION};

    if (dist->comm == NULL) {
        return 0;
    }
    st = coll_allreduce_async(dist->comm, buf, buf, n, COLL_FLOAT32, op, &exact, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, dist->timeout_ms);
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        char what[64];
        snprintf(what, sizeof(what), "allreduce of %zu floats", n);
        dist_report(dist, what, st);
        return -1;
    }
    return 0;
}

uint64_t dist_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void dist_span(dist_t *dist, const char *name, uint64_t begin_ns, uint64_t end_ns)
{
    if (dist->comm != NULL) {
        coll_timeline_span(dist->comm, "step", name, begin_ns, end_ns);
    }
}

/* ---- gradient exchange ------------------------------------------------------------------- */

static void dist_grads_report(const dist_grads_t *g, const char *what, coll_status_t st)
{
    const char *detail = coll_bucketer_last_error(g->bkt);

    fprintf(stderr, "coll-train: rank %d: %s: %s (%s)%s%s\n", g->dist->rank, what,
            coll_strerror(st), coll_err_name(st), detail[0] != '\0' ? ": " : "", detail);
}

static coll_bucketer_params_t dist_bucketer_params(const dist_grads_opts_t *o)
{
    coll_bucketer_params_t p = {0};

    p.field_mask = COLL_BUCKETER_PARAM_KEY_SPACE | COLL_BUCKETER_PARAM_NAME |
                   COLL_BUCKETER_PARAM_OP;
    p.op = COLL_AVG;
    p.key_space = o->key_space;
    p.name = o->name != NULL ? o->name : "grads";
    if (o->comm == DIST_COMM_AFTER || o->comm == DIST_COMM_TENSOR) {
        /* One bucket of everything, or one byte: every tensor closes its own bucket. */
        p.bucket_cap_bytes = p.first_bucket_cap_bytes = o->comm == DIST_COMM_AFTER ? SIZE_MAX : 1;
        p.field_mask |= COLL_BUCKETER_PARAM_CAP | COLL_BUCKETER_PARAM_FIRST_CAP;
    }
    if (o->comm == DIST_COMM_BUCKET && o->cap_bytes > 0) {
        p.bucket_cap_bytes = o->cap_bytes;
        p.field_mask |= COLL_BUCKETER_PARAM_CAP;
    }
    if (o->comm == DIST_COMM_BUCKET && o->first_cap_bytes > 0) {
        p.first_bucket_cap_bytes = o->first_cap_bytes;
        p.field_mask |= COLL_BUCKETER_PARAM_FIRST_CAP;
    }
    if (o->has_compression) {
        p.compression = o->compression;
        p.field_mask |= COLL_BUCKETER_PARAM_COMPRESSION;
    }
    return p;
}

/* Per layer: "fcL.weight" (out x in) then "fcL.bias" (out); tensor 2L and 2L+1. */
static int dist_grads_register(dist_grads_t *g)
{
    char name[32];
    coll_status_t st = COLL_OK;

    for (int l = 0; l < g->mlp->n_layers && st == COLL_OK; l++) {
        const mlp_layer_t *layer = &g->mlp->layers[l];
        snprintf(name, sizeof(name), "fc%d.weight", l);
        st = coll_bucketer_add_param(g->bkt, (size_t)layer->out * (size_t)layer->in,
                                     COLL_FLOAT32, name, NULL);
        if (st == COLL_OK) { /* the matrix PowerSGD compresses */
            st = coll_bucketer_param_shape(g->bkt, 2 * (size_t)l, (uint64_t)layer->out,
                                           (uint64_t)layer->in);
        }
        snprintf(name, sizeof(name), "fc%d.bias", l);
        if (st == COLL_OK) {
            st = coll_bucketer_add_param(g->bkt, (size_t)layer->out, COLL_FLOAT32, name, NULL);
        }
    }
    if (st != COLL_OK) {
        dist_grads_report(g, "registering the gradients", st);
        return -1;
    }
    return 0;
}

int dist_grads_bind(dist_grads_t *g)
{
    void *gw, *gb;
    coll_status_t st = COLL_OK;

    for (int l = 0; l < g->mlp->n_layers && st == COLL_OK; l++) {
        st = coll_bucketer_param_grad(g->bkt, 2 * (size_t)l, &gw);
        if (st == COLL_OK) {
            st = coll_bucketer_param_grad(g->bkt, 2 * (size_t)l + 1, &gb);
        }
        if (st == COLL_OK) {
            mlp_bind_grads(g->mlp, l, gw, gb);
        }
    }
    if (st != COLL_OK) {
        dist_grads_report(g, "placing the gradient buckets in the pool", st);
        return -1;
    }
    return 0;
}

/* Standalone: one contiguous heap buffer in the parameter layout. */
static int dist_grads_heap(dist_grads_t *g)
{
    size_t off = 0;

    g->heap = dist_alloc(g->dist, g->mlp->n_params);
    if (g->heap == NULL) {
        return -1;
    }
    for (int l = 0; l < g->mlp->n_layers; l++) {
        const mlp_layer_t *layer = &g->mlp->layers[l];
        size_t nw = (size_t)layer->out * (size_t)layer->in;
        mlp_bind_grads(g->mlp, l, g->heap + off, g->heap + off + nw);
        off += nw + (size_t)layer->out;
    }
    return 0;
}

int dist_grads_init(dist_grads_t *g, dist_t *dist, mlp_t *mlp, const dist_grads_opts_t *opts)
{
    coll_bucketer_params_t p = dist_bucketer_params(opts);
    coll_status_t st;

    memset(g, 0, sizeof(*g));
    g->dist = dist;
    g->mlp = mlp;
    if (dist->comm == NULL) {
        return dist_grads_heap(g);
    }
    st = coll_bucketer_create(dist->comm, &p, &g->bkt);
    if (st != COLL_OK) {
        dist_report(dist, "creating the gradient bucketer", st);
        return -1;
    }
    return dist_grads_register(g) == 0 && dist_grads_bind(g) == 0 ? 0 : -1;
}

void dist_grad_ready(void *arg, const mlp_t *mlp, int layer)
{
    dist_grads_t *g = arg;
    coll_status_t st;

    if (g->bkt == NULL || g->failed) {
        return;
    }
    /* Bias first: the reverse of the registration order, which the initial layout assumes,
     * so the rebuild after the first step finds the layout it already has. */
    st = coll_bucketer_grad_ready(g->bkt, 2 * (size_t)layer + 1);
    if (st == COLL_OK) {
        st = coll_bucketer_grad_ready(g->bkt, 2 * (size_t)layer);
    }
    if (st != COLL_OK) {
        dist_grads_report(g, "submitting a gradient bucket", st);
        g->failed = 1; /* wait_all returns the same error */
    }
}

int dist_grads_wait(dist_grads_t *g, dist_step_stats_t *out)
{
    coll_bucketer_stats_t bs;
    coll_status_t st;

    memset(out, 0, sizeof(*out));
    if (g->bkt == NULL) {
        return 0;
    }
    st = coll_bucketer_wait_all(g->bkt, g->dist->timeout_ms);
    g->failed = 0;
    if (st != COLL_OK) {
        dist_grads_report(g, "waiting for the gradient buckets", st);
        return -1;
    }
    coll_bucketer_stats(g->bkt, &bs);
    out->comm_s = (double)bs.comm_ns * 1e-9;
    out->exposed_s = (double)bs.exposed_ns * 1e-9;
    out->overlap = bs.overlap_efficiency;
    out->buckets = bs.num_buckets;
    out->wire_bytes = bs.wire_bytes;
    out->dense_bytes = bs.dense_bytes;
    /* The first step's rebuild may have moved the views. */
    return dist_grads_bind(g);
}

void dist_grads_fini(dist_grads_t *g)
{
    coll_bucketer_destroy(g->bkt);
    g->bkt = NULL;
    dist_free(g->dist, g->heap);
    g->heap = NULL;
}
