/*
 * ps_rank: one trainer rank of the parameter service's tests (ps_test.py), joined to its job
 * through the COLL_* environment. It registers the synthetic model (ps_model.h) with an
 * optimizer, trains it with the service and says what happened on stdout, one line per event:
 *
 *   JOINED rank=R world=W nodes=N local=L
 *   RESULT steps=S maxrel=X at=I ... apart=Y  (--check: against the double reference, ps_ref.c;
 *                                        with --compression X is the largest difference of a
 *                                        step from it, Y how far the parameters end from the
 *                                        uncompressed reference; Y is 0 without)
 *   PHASE name=NAME                      (--bytes: waits for a line on stdin after each)
 *   PROGRESS step=S                      (--loop: every 10 steps)
 *   FAILED step=S status=NAME t_mono=T msg=TEXT   (the first failed call)
 *   DONE steps=S
 *
 * Modes (besides plain training for --steps):
 *   --check TOL      compare the parameters after the last step with the reference: the
 *                    largest |service - reference| / max(|reference|, the root mean square of
 *                    the reference's layer) must be <= TOL (an element near zero is held to
 *                    its layer's scale, where float32 arithmetic places its error)
 *   --save DIR       after the steps, each node's first local rank writes DIR/shard<node>.ckpt
 *                    (coll_ps_save()) and rank 0 DIR/params.bin
 *   --load DIR       before the steps, rank 0 reads DIR/params.bin and every rank loads every
 *                    DIR/shard*.ckpt (coll_ps_load(): re-shards when the node count differs);
 *                    --steps then counts the steps after the loaded ones
 *   --dump FILE      rank 0 writes the final parameters (float32)
 *   --bytes K        K ring allreduces of each bucket's gradients, then K service steps, each
 *                    phase followed by PHASE and a line on stdin (the test reads /status)
 *   --loop N         N steps of SGD with rank-independent gradients on --count parameters;
 *                    after each step every parameter must equal a local replica computed with
 *                    the same kernels (a step reported as success with half-updated parameters
 *                    fails the test); stops at the first failure (FAILED, exit 3)
 *   --per-bucket     each step submits its buckets one at a time, last first (the order of a
 *                    backward pass), and waits for each before submitting the next: a bucket's
 *                    update must not wait for the step's other buckets
 *   --compression S  the service compresses every step's gradients with S (fp16, onebit,
 *                    topk:0.1, ...: coll_compression_parse()); --check then compares every
 *                    step with the reference of the compressed reduce-scatter
 *                    (ps_ref_compress()) replaying it from the service's weights before the
 *                    step (ps_ref_sync()): maxrel is the largest difference over the steps,
 *                    apart that of the final parameters from the uncompressed reference
 *   --fault F        nan: rank 1 puts a NaN into its gradient of step 3; mismatch: rank 1
 *                    registers other layers; unknown: an unknown optimizer; pool: a model too
 *                    large for the pool; compression: rank 1 asks for fp16 (onebit when the
 *                    others ask for fp16); compression-node: so do the ranks of the last
 *                    node; overlap: rank 1's gradients are its parameters. The first error is
 *                    printed as FAILED (exit 3).
 *   --device         the parameters and gradients in the job's pool on device 0 (the daemons
 *                    stage them, docs/gpu.md), written and read through copies: training and
 *                    --check, --compression, --per-bucket only; a real GPU, or COLL_DEVICE_FAKE
 *
 * Exit status: 0 done, 1 a wrong result, 2 usage, 3 FAILED, 77 skipped (--device without a
 * device layer).
 */
#include <collective.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cpu/optim.h"
#include "ps_files.h"
#include "ps_model.h"
#include "ps_ref.h"
#include "tests/gpu/rank_dev.h"

#define EXIT_WRONG 1
#define EXIT_USAGE 2
#define EXIT_FAILED 3

typedef struct {
    const char *optimizer;
    int steps;
    double check;
    const char *save, *load, *dump, *fault;
    int bytes;
    int loop;
    size_t count;
    double clip;
    double trust_max;
    int per_bucket;
    const char *compression;
    int device;
} opts_t;

typedef struct {
    coll_comm_t *comm;
    int rank, world, nodes;
    const opts_t *o;
    coll_ps_optim_t optim;
    coll_ps_schedule_t sched;
    unsigned flags[PS_MODEL_LAYERS];
    coll_ps_layer_t layers[PS_MODEL_LAYERS];
    size_t n;
    float *w, *g;
    float *dw, *dg;    /* the buffers the service gets: w and g, or with --device theirs on
                          device 0, copied to and from w and g */
    coll_ps_t *ps;
    ps_ref_t *track;   /* --compression with --check: the reference replaying every step */
    float *prev;       /* the parameters before the step */
    double track_worst;
    size_t track_at;
} run_t;

static double now_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int failed(const run_t *r, uint64_t step, coll_status_t st)
{
    printf("FAILED step=%llu status=%s t_mono=%.6f msg=%s\n", (unsigned long long)step,
           coll_err_name(st), now_mono(), coll_comm_last_error(r->comm));
    fflush(stdout);
    return EXIT_FAILED;
}

/* The settings of each optimizer (the reference uses the same), with warmup and cosine decay
 * over a linearly scaled learning rate: batch 64 per rank, base batch 64. */
static int settings(run_t *r)
{
    static const struct { const char *name; double base_lr; } lrs[] = {
        {"sgd", 0.02}, {"adamw", 2e-3}, {"lars", 0.2}, {"lamb", 5e-3}};
    coll_ps_optimizer_t kind;

    if (coll_ps_optimizer_parse(r->o->optimizer, &kind) != COLL_OK) {
        return -1;
    }
    coll_ps_optim_init(kind, &r->optim);
    if (kind == COLL_PS_SGD) {
        r->optim.momentum = 0.9;
        r->optim.weight_decay = 1e-4;
    }
    r->optim.eta = kind == COLL_PS_LARS ? 0.01 : r->optim.eta; /* the trust ratio shows */
    r->optim.clip_grad_norm = r->o->clip;
    r->optim.trust_max = r->o->trust_max;
    coll_ps_schedule_constant(lrs[kind].base_lr, &r->sched);
    r->sched.base_batch = 64;
    r->sched.global_batch = 64 * (uint64_t)r->world;
    r->sched.warmup_steps = 10;
    r->sched.decay = COLL_PS_DECAY_COSINE;
    r->sched.total_steps = 60;
    r->sched.final_lr = 0.0;
    for (int l = 0; l < PS_MODEL_LAYERS; l++) {
        r->flags[l] = (l % 2) ? COLL_PS_EXCLUDE : 0;
        r->layers[l] = (coll_ps_layer_t){ps_model_counts[l], r->flags[l], ps_model_buckets[l]};
    }
    return 0;
}

/* --compression, or another method for rank 1 (--fault compression) or for the ranks of the
 * last node (--fault compression-node). */
static coll_status_t compression(const run_t *r, coll_ps_params_t *p)
{
    const char *spec = r->o->compression, *f = r->o->fault;
    int last_node = r->rank / (r->world / r->nodes) == r->nodes - 1;

    if (f && ((strcmp(f, "compression") == 0 && r->rank == 1) ||
              (strcmp(f, "compression-node") == 0 && last_node))) {
        spec = spec != NULL && strcmp(spec, "fp16") == 0 ? "onebit" : "fp16";
    }
    if (spec == NULL) {
        return COLL_OK;
    }
    p->field_mask |= COLL_PS_PARAM_COMPRESSION;
    return coll_compression_parse(spec, &p->compression);
}

/* @p n floats of @p src into @p dst, one of them on the device with --device. */
static int put(const run_t *r, float *dst, const float *src)
{
    return dst == src ? 0 : rank_dev_copy(dst, src, r->n * sizeof(float));
}

static coll_status_t create(run_t *r)
{
    coll_ps_params_t p = {.params = r->dw, .layers = r->layers, .num_layers = PS_MODEL_LAYERS,
                          .optim = r->optim, .schedule = r->sched};
    coll_ps_layer_t other[PS_MODEL_LAYERS];
    coll_status_t st = compression(r, &p);

    if (st != COLL_OK) {
        return st;
    }
    if (r->o->fault && strcmp(r->o->fault, "mismatch") == 0 && r->rank == 1) {
        memcpy(other, r->layers, sizeof(other));
        other[0].count -= 16;
        other[1].count += 16;
        p.layers = other;
    }
    if (r->o->fault && strcmp(r->o->fault, "unknown") == 0) {
        p.optim.kind = (coll_ps_optimizer_t)7;
    }
    if (put(r, r->dw, r->w) != 0) {
        return COLL_ERR_IO;
    }
    st = coll_ps_create(r->comm, &p, &r->ps);
    return st != COLL_OK || put(r, r->w, r->dw) == 0 ? st : COLL_ERR_IO; /* rank 0's */
}

static coll_status_t grads(run_t *r, uint64_t t)
{
    for (size_t i = 0; i < r->n; i++) {
        r->g[i] = ps_model_grad(r->w[i], r->rank, t, i);
    }
    if (r->o->fault && strcmp(r->o->fault, "nan") == 0 && r->rank == 1 && t == 3) {
        r->g[r->n / 2] = NAN;
    }
    return COLL_OK;
}

/* One step bucket by bucket, last first, each waited for before the next is submitted (with
 * --device each must have run on the staged path). */
static coll_status_t step_per_bucket(run_t *r)
{
    coll_status_t st = COLL_OK;

    for (size_t b = coll_ps_num_buckets(r->ps); b-- > 0 && st == COLL_OK;) {
        coll_request_t *req = NULL;
        size_t off, cnt;
        coll_ps_bucket_range(r->ps, b, &off, &cnt);
        st = coll_ps_step_bucket_async(r->ps, b, r->dg + off, &req);
        if (st == COLL_INPROGRESS) {
            st = coll_req_wait(req, -1);
            if (st == COLL_OK && r->dg != r->g && strncmp(coll_req_algo(req), "staged+", 7)) {
                fprintf(stderr, "rank %d: a step on device buffers ran as '%s', not staged\n",
                        r->rank, coll_req_algo(req));
                st = COLL_ERR_INVALID;
            }
            coll_req_free(req);
        }
    }
    return st;
}

/* The largest |x - ref| / max(|ref|, the root mean square of ref's layer), and where. */
static double maxrel(const double *ref, const double *x, size_t n, size_t *at)
{
    double worst = 0;

    for (size_t a = 0; a < n; a += ps_model_counts[ps_model_layer(a)]) {
        size_t len = ps_model_counts[ps_model_layer(a)];
        double rms = 0;
        for (size_t i = a; i < a + len; i++) {
            rms += ref[i] * ref[i];
        }
        rms = sqrt(rms / (double)len);
        for (size_t i = a; i < a + len; i++) {
            double d = fabs(x[i] - ref[i]) / fmax(fabs(ref[i]), rms);
            if (!(d <= worst)) {
                worst = d;
                *at = i;
            }
        }
    }
    return worst;
}

/* The reference's prediction of the step from the parameters before it, against the step's. */
static int track_step(run_t *r)
{
    double *w = malloc(r->n * sizeof(double)), d;
    size_t at = 0;

    if (w == NULL) {
        return EXIT_WRONG;
    }
    ps_ref_sync(r->track, r->prev);
    ps_ref_step(r->track);
    for (size_t i = 0; i < r->n; i++) {
        w[i] = r->w[i];
    }
    d = maxrel(r->track->w, w, r->n, &at);
    if (!(d <= r->track_worst)) {
        r->track_worst = d;
        r->track_at = at;
    }
    free(w);
    return 0;
}

static int train(run_t *r, int steps)
{
    for (int k = 0; k < steps; k++) {
        uint64_t t = coll_ps_steps(r->ps) + 1;
        coll_status_t st;
        grads(r, t);
        if (r->track != NULL) {
            memcpy(r->prev, r->w, r->n * sizeof(float));
        }
        if (put(r, r->dg, r->g) != 0) {
            return EXIT_WRONG;
        }
        /* --fault overlap: rank 1 gives its parameters as its gradients. */
        st = r->o->per_bucket ? step_per_bucket(r)
             : coll_ps_step(r->ps, r->o->fault && strcmp(r->o->fault, "overlap") == 0 &&
                                          r->rank == 1
                                       ? r->dw
                                       : r->dg);
        if (st != COLL_OK) {
            return failed(r, t, st);
        }
        if (put(r, r->w, r->dw) != 0) {
            return EXIT_WRONG;
        }
        if (r->track != NULL && track_step(r) != 0) {
            return EXIT_WRONG;
        }
    }
    return 0;
}


/* A reference of the run's settings, compressed as the service with @p spec (NULL: exact). */
static int ref_new(const run_t *r, const char *spec, ps_ref_t *ref)
{
    if (ps_ref_init(ref, &r->optim, &r->sched, r->flags, r->world) != 0) {
        return -1;
    }
    if (spec != NULL && ps_ref_compress(ref, spec, (uint32_t)r->nodes,
                                        (uint32_t)(r->world / r->nodes)) != 0) {
        ps_ref_fini(ref);
        return -1;
    }
    return 0;
}

/* Without compression: the parameters against the reference trained alone. With it: the
 * largest difference of a step from the replaying reference (train()), and how far the
 * parameters are from the uncompressed reference. */
static int check(const run_t *r)
{
    ps_ref_t ref;
    double *w = malloc(r->n * sizeof(double)), worst, apart = 0;
    size_t at = 0;

    if (w == NULL || ref_new(r, NULL, &ref) != 0) {
        free(w);
        return EXIT_WRONG;
    }
    while (ref.t < coll_ps_steps(r->ps)) {
        ps_ref_step(&ref);
    }
    for (size_t i = 0; i < r->n; i++) {
        w[i] = r->w[i];
    }
    worst = maxrel(ref.w, w, r->n, &at);
    if (r->track != NULL) {
        apart = worst;
        worst = r->track_worst;
        at = r->track_at;
    }
    printf("RESULT steps=%llu maxrel=%.3e at=%zu service=%.9g reference=%.9g apart=%.3e\n",
           (unsigned long long)ref.t, worst, at, w[at],
           r->track != NULL ? r->track->w[at] : ref.w[at], apart);
    ps_ref_fini(&ref);
    free(w);
    return worst <= r->o->check ? 0 : EXIT_WRONG;
}

static int save(run_t *r)
{
    char path[4096];
    void *image;
    size_t len;
    coll_status_t st = coll_ps_save(r->ps, &image, &len);

    if (st != COLL_OK) {
        return failed(r, coll_ps_steps(r->ps), st);
    }
    snprintf(path, sizeof(path), "%s/shard%d.ckpt", r->o->save, r->rank / coll_comm_local_size(r->comm));
    if (coll_comm_local_rank(r->comm) == 0 && ps_write_file(path, image, len) != 0) {
        return EXIT_WRONG;
    }
    free(image);
    snprintf(path, sizeof(path), "%s/params.bin", r->o->save);
    return r->rank == 0 && ps_write_file(path, r->w, r->n * sizeof(float)) != 0 ? EXIT_WRONG : 0;
}

static int load(run_t *r)
{
    void *images[64];
    size_t lens[64], n = 0, plen;
    char path[4096];
    float *params;
    coll_status_t st;

    snprintf(path, sizeof(path), "%s/params.bin", r->o->load);
    if (r->rank == 0) {
        if ((params = ps_read_file(path, &plen)) == NULL || plen != r->n * sizeof(float)) {
            return EXIT_WRONG;
        }
        memcpy(r->w, params, plen);
        free(params);
    }
    if ((st = create(r)) != COLL_OK) {
        return failed(r, 0, st);
    }
    if (ps_read_shards(r->o->load, images, lens, 64, &n) != 0) {
        return EXIT_WRONG;
    }
    st = coll_ps_load(r->ps, (const void *const *)images, lens, n);
    for (size_t i = 0; i < n; i++) {
        free(images[i]);
    }
    return st == COLL_OK ? 0 : failed(r, 0, st);
}

/* ---- --bytes: the wire bytes of allreduces and of service steps ---------------------------- */

static int phase(const char *name)
{
    char line[64];

    printf("PHASE name=%s\n", name);
    fflush(stdout);
    return fgets(line, sizeof(line), stdin) != NULL ? 0 : EXIT_USAGE;
}

static int allreduces(run_t *r, int k, float *out)
{
    coll_op_params_t op = {.field_mask = COLL_OP_PARAM_KEY | COLL_OP_PARAM_ALGO,
                           .algo = COLL_ALGO_RING};

    for (int i = 0; i < k; i++) {
        for (size_t b = 0; b < coll_ps_num_buckets(r->ps); b++) {
            size_t off, cnt;
            coll_request_t *req;
            coll_status_t st;
            coll_ps_bucket_range(r->ps, b, &off, &cnt);
            op.key = ((uint64_t)i << 8) | b;
            st = coll_allreduce_async(r->comm, r->g + off, out + off, cnt, COLL_FLOAT32,
                                      COLL_AVG, &op, &req);
            st = st == COLL_INPROGRESS ? coll_req_wait(req, -1) : st;
            if (st != COLL_OK) {
                return failed(r, 0, st);
            }
            coll_req_free(req);
        }
    }
    return 0;
}

static int bytes_mode(run_t *r)
{
    float *out;
    int rc;

    if (coll_mem_alloc(r->comm, r->n * sizeof(float), (void **)&out) != COLL_OK) {
        return EXIT_WRONG;
    }
    grads(r, 1);
    rc = phase("start");
    rc = rc ? rc : allreduces(r, r->o->bytes, out);
    rc = rc ? rc : phase("allreduced");
    rc = rc ? rc : train(r, r->o->bytes);
    rc = rc ? rc : phase("stepped");
    return rc;
}

/* ---- --loop and --fault pool: a flat model of --count elements in four layers ------------- */

static coll_status_t flat_create(run_t *r, coll_ps_optimizer_t kind)
{
    coll_ps_layer_t layers[4];
    coll_ps_params_t p = {.params = r->w, .layers = layers, .num_layers = 4};

    for (int l = 0; l < 4; l++) {
        layers[l] = (coll_ps_layer_t){r->n / 4 + (l == 3 ? r->n % 4 : 0), 0, (size_t)l};
    }
    coll_ps_optim_init(kind, &p.optim);
    p.optim.momentum = 0.9;
    coll_ps_schedule_constant(0.01, &p.schedule);
    r->optim = p.optim;
    return coll_ps_create(r->comm, &p, &r->ps);
}

/* Steps of --loop until the first failure: 0, or the exit status. */
static int loop_steps(run_t *r, float *ref, float *buf)
{
    coll_optim_sgd_params_t p = {.momentum = 0.9};
    coll_status_t st;

    memcpy(ref, r->w, r->n * sizeof(float));
    for (int t = 1; t <= r->o->loop; t++) {
        coll_optim_step_t s = {.lr = 0.01, .step = (uint64_t)t};
        for (size_t i = 0; i < r->n; i++) {
            r->g[i] = 0.01f * ps_unit(((uint64_t)t << 32) ^ i);
        }
        coll_optim_sgd_update(&p, &s, ref, r->g, buf, r->n);
        if ((st = coll_ps_step(r->ps, r->g)) != COLL_OK) {
            return failed(r, (uint64_t)t, st);
        }
        if (memcmp(ref, r->w, r->n * sizeof(float)) != 0) {
            printf("WRONG step=%d: a step reported success with parameters that are not the "
                   "update's\n", t);
            return EXIT_WRONG;
        }
        if (t % 10 == 0) {
            printf("PROGRESS step=%d\n", t);
            fflush(stdout);
        }
    }
    return 0;
}

static int loop_mode(run_t *r)
{
    float *ref = calloc(r->n, sizeof(float)), *buf = calloc(r->n, sizeof(float));
    coll_status_t st = COLL_ERR_NOMEM;
    int rc;

    if (ref == NULL || buf == NULL || (st = flat_create(r, COLL_PS_SGD)) != COLL_OK) {
        rc = ref && buf ? failed(r, 0, st) : EXIT_WRONG;
    } else {
        rc = loop_steps(r, ref, buf);
    }
    free(ref);
    free(buf);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------- */

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option longs[] = {
        {"optimizer", 1, 0, 'o'}, {"steps", 1, 0, 's'}, {"check", 1, 0, 'c'},
        {"save", 1, 0, 'S'}, {"load", 1, 0, 'L'}, {"dump", 1, 0, 'd'}, {"bytes", 1, 0, 'b'},
        {"loop", 1, 0, 'l'}, {"count", 1, 0, 'n'}, {"fault", 1, 0, 'f'}, {"clip", 1, 0, 'C'},
        {"trust-max", 1, 0, 'T'}, {"per-bucket", 0, 0, 'P'}, {"compression", 1, 0, 'Z'},
        {"device", 0, 0, 'D'}, {0, 0, 0, 0}};
    int c;

    *o = (opts_t){.optimizer = "sgd", .steps = 50, .check = -1, .count = 1 << 20,
                  .trust_max = INFINITY};
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'o': o->optimizer = optarg; break;
        case 's': o->steps = atoi(optarg); break;
        case 'c': o->check = atof(optarg); break;
        case 'S': o->save = optarg; break;
        case 'L': o->load = optarg; break;
        case 'd': o->dump = optarg; break;
        case 'b': o->bytes = atoi(optarg); break;
        case 'l': o->loop = atoi(optarg); break;
        case 'n': o->count = strtoull(optarg, NULL, 0); break;
        case 'f': o->fault = optarg; break;
        case 'C': o->clip = atof(optarg); break;
        case 'T': o->trust_max = atof(optarg); break;
        case 'P': o->per_bucket = 1; break;
        case 'Z': o->compression = optarg; break;
        case 'D': o->device = 1; break;
        default: return -1;
        }
    }
    return optind == argc && !(o->device && (o->save || o->load || o->dump || o->bytes ||
                                             o->loop || o->fault)) ? 0 : -1;
}

static int setup(run_t *r)
{
    int flat = r->o->loop > 0 || (r->o->fault && strcmp(r->o->fault, "pool") == 0);

    coll_status_t st;

    r->n = flat ? r->o->count : ps_model_count();
    if (r->o->device) {
        r->w = malloc(r->n * sizeof(float));
        r->g = malloc(r->n * sizeof(float));
        r->dw = rank_dev_alloc(r->n * sizeof(float));
        r->dg = rank_dev_alloc(r->n * sizeof(float));
        if (r->w == NULL || r->g == NULL || r->dw == NULL || r->dg == NULL) {
            return EXIT_WRONG;
        }
    } else if ((st = coll_mem_alloc(r->comm, r->n * sizeof(float), (void **)&r->w)) != COLL_OK ||
               (st = coll_mem_alloc(r->comm, r->n * sizeof(float), (void **)&r->g)) != COLL_OK) {
        return failed(r, 0, st);
    } else {
        r->dw = r->w;
        r->dg = r->g;
    }
    for (size_t i = 0; i < r->n; i++) {
        r->w[i] = flat ? 0.1f * ps_unit(i) : ps_model_init(i);
    }
    return flat || settings(r) == 0 ? 0 : EXIT_USAGE;
}

/* --compression with --check: the reference that replays every step (train()). */
static int track_new(run_t *r)
{
    ps_ref_t *track = calloc(1, sizeof(*track));

    if (track == NULL || (r->prev = malloc(r->n * sizeof(float))) == NULL ||
        ref_new(r, r->o->compression, track) != 0) {
        free(track);
        return EXIT_WRONG;
    }
    r->track = track;
    return 0;
}

static void track_free(run_t *r)
{
    if (r->track != NULL) {
        ps_ref_fini(r->track);
        free(r->track);
    }
    free(r->prev);
}

static int run(run_t *r)
{
    int rc;
    coll_status_t st;

    if (r->o->loop > 0) {
        return loop_mode(r);
    }
    if (r->o->fault && strcmp(r->o->fault, "pool") == 0) {
        st = flat_create(r, COLL_PS_ADAMW);
        return st == COLL_OK ? EXIT_WRONG : failed(r, 0, st);
    }
    if (r->o->load) {
        rc = load(r);
    } else {
        rc = (st = create(r)) == COLL_OK ? 0 : failed(r, 0, st);
    }
    if (rc == 0 && r->o->bytes > 0) {
        return bytes_mode(r);
    }
    if (rc == 0 && r->o->compression != NULL && r->o->check >= 0) {
        rc = track_new(r);
    }
    rc = rc ? rc : train(r, r->o->steps);
    rc = rc || r->o->check < 0 ? rc : check(r);
    rc = rc || !r->o->save ? rc : save(r);
    if (rc == 0 && r->o->dump && r->rank == 0 && ps_write_file(r->o->dump, r->w,
                                                             r->n * sizeof(float)) != 0) {
        rc = EXIT_WRONG;
    }
    return rc;
}

int main(int argc, char **argv)
{
    opts_t o;
    run_t r = {.o = &o};
    coll_status_t st;
    int rc;

    if (parse(argc, argv, &o) != 0) {
        fprintf(stderr, "usage: ps_rank [--optimizer sgd|adamw|lars|lamb] [--steps N] "
                "[--check TOL] [--save DIR] [--load DIR] [--dump FILE] [--bytes K] [--loop N] "
                "[--count N] [--fault nan|mismatch|unknown|pool|compression|compression-node|overlap] "
                "[--clip X] [--trust-max X] [--per-bucket] [--compression SPEC] [--device (not "
                "with --save, --load, --dump, --bytes, --loop, --fault)]\n");
        return EXIT_USAGE;
    }
    if (o.device && (r.comm = rank_dev_open("ps_rank", &rc)) == NULL) {
        return rc;
    }
    if (!o.device && (st = coll_comm_create(NULL, &r.comm)) != COLL_OK) {
        printf("FAILED step=0 status=%s t_mono=%.6f msg=%s\n", coll_err_name(st), now_mono(),
               coll_comm_last_error(NULL));
        return EXIT_FAILED;
    }
    r.rank = coll_comm_rank(r.comm);
    r.world = coll_comm_world_size(r.comm);
    r.nodes = r.world / coll_comm_local_size(r.comm);
    printf("JOINED rank=%d world=%d nodes=%d local=%d\n", r.rank, r.world, r.nodes,
           coll_comm_local_rank(r.comm));
    fflush(stdout);
    rc = setup(&r);
    rc = rc ? rc : run(&r);
    if (rc == 0) {
        printf("DONE steps=%llu\n", (unsigned long long)(r.ps ? coll_ps_steps(r.ps) : 0));
    }
    track_free(&r);
    coll_ps_destroy(r.ps);
    if (o.device) {
        free(r.w);
        free(r.g);
        rank_dev_close(r.comm);
    } else {
        coll_comm_destroy(r.comm);
    }
    return rc;
}
