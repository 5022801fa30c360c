/*
 * overlap: how much of the gradient communication a bucketer hides behind backward.
 *
 * Runs as every rank of a job (collective-launch) the training step of coll-train (the same
 * MLP, data and gradient exchange: dist.h, mlp.h, mnist.h) in three ways, interleaved in rounds
 * so that they see the same machine:
 *   bucket  buckets reduced during backward as they fill (coll_bucketer_*, DDP's scheme)
 *   after   one allreduce of all gradients when backward ends (no overlap)
 *   tensor  one allreduce per tensor, each as soon as it is ready (overlap, no bucketing)
 * Each mode has its own bucketer (key space) on the one communicator; the network's gradient
 * views are rebound when the mode changes. Per round and mode: a barrier, --warmup steps, then
 * --steps measured steps.
 *
 * Per step and rank (CLOCK_MONOTONIC): step = gather to end of the optimizer step; compute =
 * forward + backward (wall, with the submissions made from backward); comm = union over the
 * buckets of [submit, seen] (seen: this rank saw the completion, its wake-up included), the
 * wall time some bucket was in flight for the rank; exposed = the part of comm spent waiting
 * in wait_all after backward (so never above comm); overlap efficiency = 1 - exposed / comm;
 * cpu share = CPU time of the trainer thread over forward + backward / their wall time (1.0: it
 * had a core to itself; less: other processes, the daemons or the kernel's network work took
 * part of it, which slows compute in the overlapping modes). Reported: per rank the median over
 * all measured steps of each, then the mean over ranks.
 *
 * Output (rank 0): one "overlap:" line per mode (key=value, for bench/overlap.sh) and a
 * markdown table. Exit status 0, 1 on a runtime error, 2 on a usage error.
 */
#include "dist.h"
#include "mlp.h"
#include "mnist.h"

#include <cblas.h>
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MODES 3

static const char *const mode_names[MODES] = {"bucket", "after", "tensor"};

typedef struct {
    const char *data;
    const char *label;
    int sizes[MLP_MAX_LAYERS + 1];
    int n_layers;
    int batch;       /* global */
    int steps, warmup, rounds, threads;
    double cap_mb, first_cap_mb; /* bucket mode; 0 = library defaults */
} bench_opts_t;

/* One measured step: times in ms (comm and exposed as at the top: exposed <= comm); overlap =
 * 1 - exposed / comm; cpu = the trainer thread's CPU time during compute / compute (the cpu
 * share). */
typedef struct {
    double step, compute, comm, exposed, overlap, cpu;
} sample_t;

/* The fields of sample_t, reported in this order. */
#define FIELDS 6

typedef struct {
    dist_grads_t g;
    sample_t *samples;
    size_t n;
    size_t buckets;
} mode_run_t;

typedef struct {
    bench_opts_t o;
    dist_t dist;
    mnist_set_t train;
    mlp_t *mlp;
    float *x;
    uint8_t *y;
    float *stats;  /* pool buffer for the cross-rank means */
    int shard;
    size_t next;   /* next image of the (unshuffled) training set */
    mode_run_t run[MODES];
} bench_t;

/* ---- options ------------------------------------------------------------------------------- */

static void usage(FILE *out)
{
    fputs("usage: overlap [--hidden H[,H..]|WxN] [--batch B] [--steps N] [--warmup N]\n"
          "               [--rounds R] [--bucket-cap-mb M] [--first-bucket-cap-mb M]\n"
          "               [--threads T] [--data DIR] [--label NAME]\n"
          "Run under collective-launch; see the comment at the top of\n"
          "examples/train/overlap.c and docs/benchmarks.md. Defaults: --hidden 1024x12\n"
          "--batch 256 --steps 10 --warmup 2 --rounds 3, library bucket caps (25 MiB, first\n"
          "1 MiB), 1 thread.\n", out);
}

/* "1024x4" or "512,256": hidden widths, then the input and output sizes around them. */
static int parse_hidden(const char *s, bench_opts_t *o)
{
    char buf[256], *save = NULL;
    int n = 0;

    snprintf(buf, sizeof(buf), "%s", s);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *times = strchr(tok, 'x');
        int width = atoi(tok), reps = times != NULL ? atoi(times + 1) : 1;
        for (int r = 0; r < reps; r++) {
            if (width < 1 || reps < 1 || n == MLP_MAX_LAYERS - 1) {
                fprintf(stderr, "overlap: --hidden %s: widths >= 1, at most %d layers\n", s,
                        MLP_MAX_LAYERS - 1);
                return -1;
            }
            o->sizes[++n] = width;
        }
    }
    o->n_layers = n + 1;
    return 0;
}

static int parse_args(int argc, char **argv, bench_opts_t *o)
{
    static const struct option opts[] = {
        {"hidden", 1, NULL, 'H'}, {"batch", 1, NULL, 'b'},   {"steps", 1, NULL, 's'},
        {"warmup", 1, NULL, 'w'}, {"rounds", 1, NULL, 'r'},  {"bucket-cap-mb", 1, NULL, 'c'},
        {"first-bucket-cap-mb", 1, NULL, 'f'}, {"threads", 1, NULL, 't'},
        {"data", 1, NULL, 'd'},   {"label", 1, NULL, 'l'},   {"help", 0, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c;

    *o = (bench_opts_t){.data = "/usr/share/datasets/fashion-mnist", .label = "-", .batch = 256,
                        .steps = 10, .warmup = 2, .rounds = 3, .threads = 1};
    if (parse_hidden("1024x12", o) != 0) {
        return -1;
    }
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'H': if (parse_hidden(optarg, o) != 0) return -1; break;
        case 'b': o->batch = atoi(optarg); break;
        case 's': o->steps = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'r': o->rounds = atoi(optarg); break;
        case 'c': o->cap_mb = atof(optarg); break;
        case 'f': o->first_cap_mb = atof(optarg); break;
        case 't': o->threads = atoi(optarg); break;
        case 'd': o->data = optarg; break;
        case 'l': o->label = optarg; break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (o->batch < 1 || o->steps < 1 || o->warmup < 0 || o->rounds < 1 || o->threads < 1 ||
        o->cap_mb < 0 || o->first_cap_mb < 0 || optind < argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

/* ---- set-up -------------------------------------------------------------------------------- */

static int setup_modes(bench_t *b)
{
    for (int m = 0; m < MODES; m++) {
        dist_grads_opts_t go = {(dist_comm_t)m, 0, 0, (unsigned)m, mode_names[m], 0,
                                {COLL_COMPRESS_NONE, 0.0, 0, 0, 0, 0}};
        if (m == DIST_COMM_BUCKET) {
            go.cap_bytes = (size_t)(b->o.cap_mb * 1048576.0);
            go.first_cap_bytes = (size_t)(b->o.first_cap_mb * 1048576.0);
        }
        b->run[m].samples = calloc((size_t)(b->o.steps * b->o.rounds), sizeof(sample_t));
        if (b->run[m].samples == NULL || dist_grads_init(&b->run[m].g, &b->dist, b->mlp, &go)) {
            return -1;
        }
    }
    return 0;
}

static int setup(bench_t *b)
{
    if (mnist_load(b->o.data, "train", &b->train) != 0 || dist_init(&b->dist) != 0) {
        return -1;
    }
    if (dist_standalone(&b->dist) || b->o.batch % b->dist.world_size != 0) {
        fprintf(stderr, "overlap: run it under collective-launch with a --batch divisible by "
                        "the world size\n");
        return -1;
    }
    b->shard = b->o.batch / b->dist.world_size;
    b->o.sizes[0] = (int)mnist_image_size(&b->train);
    b->o.sizes[b->o.n_layers] = MNIST_CLASSES;
    b->x = malloc((size_t)b->shard * mnist_image_size(&b->train) * sizeof(float));
    b->y = malloc((size_t)b->shard);
    b->stats = dist_alloc(&b->dist, 16);
    if (b->x == NULL || b->y == NULL || b->stats == NULL ||
        mlp_create(b->o.sizes, b->o.n_layers, b->shard, 1, NULL, &b->mlp) != 0) {
        return -1;
    }
    return setup_modes(b);
}

static void teardown(bench_t *b)
{
    for (int m = 0; m < MODES; m++) {
        dist_grads_fini(&b->run[m].g);
        free(b->run[m].samples);
    }
    mlp_destroy(b->mlp);
    dist_free(&b->dist, b->stats);
    dist_fini(&b->dist);
    mnist_free(&b->train);
    free(b->x);
    free(b->y);
}

/* ---- measuring ----------------------------------------------------------------------------- */

/* CPU time of the calling thread in ns (OpenBLAS runs single-threaded in it, --threads 1). */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One training step of this rank's shard; @p s gets its times when not NULL. */
static int step(bench_t *b, mode_run_t *run, sample_t *s)
{
    size_t first = b->next + (size_t)b->dist.rank * (size_t)b->shard;
    uint64_t t[6], cpu[2];
    dist_step_stats_t ds;

    b->next = (b->next + (size_t)b->o.batch) % (b->train.count - (size_t)b->o.batch);
    t[0] = dist_now_ns();
    mnist_gather(&b->train, NULL, first, (size_t)b->shard, MNIST_FASHION_MEAN,
                 MNIST_FASHION_STD, b->x, b->y);
    t[1] = dist_now_ns();
    cpu[0] = thread_cpu_ns();
    mlp_forward(b->mlp, b->x, b->shard);
    mlp_loss(b->mlp, b->y, b->shard);
    t[2] = dist_now_ns();
    mlp_backward(b->mlp, b->shard, dist_grad_ready, &run->g);
    t[3] = dist_now_ns();
    cpu[1] = thread_cpu_ns();
    if (dist_grads_wait(&run->g, &ds) != 0) {
        return -1;
    }
    t[4] = dist_now_ns();
    mlp_sgd_step(b->mlp, 0.01f, 0.9f);
    t[5] = dist_now_ns();
    dist_span(&b->dist, "forward", t[1], t[2]);
    dist_span(&b->dist, "backward", t[2], t[3]);
    dist_span(&b->dist, "optimizer", t[4], t[5]);
    run->buckets = ds.buckets;
    if (s != NULL) {
        *s = (sample_t){(double)(t[5] - t[0]) * 1e-6, (double)(t[3] - t[1]) * 1e-6,
                        ds.comm_s * 1e3, ds.exposed_s * 1e3, ds.overlap,
                        (double)(cpu[1] - cpu[0]) / (double)(t[3] - t[1])};
    }
    return 0;
}

static int barrier(bench_t *b)
{
    coll_request_t *r;
    coll_status_t st = coll_barrier_async(b->dist.comm, NULL, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, b->dist.timeout_ms);
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "overlap: rank %d: barrier: %s\n", b->dist.rank, coll_strerror(st));
        return -1;
    }
    return 0;
}

static int run_block(bench_t *b, int m)
{
    mode_run_t *run = &b->run[m];

    if (dist_grads_bind(&run->g) != 0 || barrier(b) != 0) {
        return -1;
    }
    for (int i = 0; i < b->o.warmup; i++) {
        if (step(b, run, NULL) != 0) {
            return -1;
        }
    }
    for (int i = 0; i < b->o.steps; i++) {
        if (step(b, run, &run->samples[run->n++]) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Rounds of all modes, the order rotated from round to round. */
static int measure(bench_t *b)
{
    for (int r = 0; r < b->o.rounds; r++) {
        for (int k = 0; k < MODES; k++) {
            if (run_block(b, (k + r) % MODES) != 0) {
                return -1;
            }
        }
    }
    return 0;
}

/* ---- reporting ----------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of field @p off of the samples. */
static double median(const mode_run_t *run, size_t off)
{
    double v[4096];
    size_t n = run->n < 4096 ? run->n : 4096;

    for (size_t i = 0; i < n; i++) {
        v[i] = *(const double *)((const char *)&run->samples[i] + off);
    }
    qsort(v, n, sizeof(v[0]), cmp_double);
    return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

/* Per mode: the medians of this rank, averaged over the ranks. */
static int summarize(bench_t *b, double out[MODES][FIELDS])
{
    static const size_t offs[FIELDS] = {
        offsetof(sample_t, step),    offsetof(sample_t, compute), offsetof(sample_t, comm),
        offsetof(sample_t, exposed), offsetof(sample_t, overlap), offsetof(sample_t, cpu)};

    for (int m = 0; m < MODES; m++) {
        for (int f = 0; f < FIELDS; f++) {
            b->stats[f] = (float)median(&b->run[m], offs[f]);
        }
        if (dist_allreduce(&b->dist, b->stats, FIELDS, COLL_AVG) != 0) {
            return -1;
        }
        for (int f = 0; f < FIELDS; f++) {
            out[m][f] = b->stats[f];
        }
    }
    return 0;
}

/* The widths, a run of N equal hidden widths W as WxN: "784-1024x12-10". */
static void describe(const bench_t *b, char *model, size_t len)
{
    const int *w = b->o.sizes;
    int o = snprintf(model, len, "%d", w[0]);

    for (int l = 1; l <= b->o.n_layers && o > 0 && (size_t)o < len;) {
        int run = 1;
        while (l < b->o.n_layers && l + run < b->o.n_layers && w[l + run] == w[l]) {
            run++;
        }
        o += run > 1 ? snprintf(model + o, len - (size_t)o, "-%dx%d", w[l], run)
                     : snprintf(model + o, len - (size_t)o, "-%d", w[l]);
        l += run;
    }
}

static void report(const bench_t *b, double r[MODES][FIELDS])
{
    int nodes = b->dist.world_size / b->dist.local_size;
    char model[160];

    describe(b, model, sizeof(model));
    for (int m = 0; m < MODES; m++) {
        printf("overlap: label=%s nodes=%d ranks=%d model=%s params=%zu batch=%d mode=%s "
               "buckets=%zu step_ms=%.2f compute_ms=%.2f comm_ms=%.2f exposed_ms=%.2f "
               "overlap=%.3f cpu=%.2f step_vs_after=%.3f\n", b->o.label, nodes,
               b->dist.world_size, model, b->mlp->n_params, b->o.batch, mode_names[m],
               b->run[m].buckets, r[m][0], r[m][1], r[m][2], r[m][3], r[m][4], r[m][5],
               r[m][0] / r[DIST_COMM_AFTER][0]);
    }
    printf("\n%s: %d nodes x %d ranks, %s (%zu parameters, %.1f MB of gradients), global batch "
           "%d, %d x %d measured steps per mode\n\n", b->o.label, nodes, b->dist.local_size, model,
           b->mlp->n_params, (double)b->mlp->n_params * 4e-6, b->o.batch, b->o.rounds,
           b->o.steps);
    printf("| mode | buckets | step ms | compute ms | comm ms | exposed ms | overlap efficiency "
           "| step / after | cpu share |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int m = 0; m < MODES; m++) {
        printf("| %s | %zu | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n", mode_names[m],
               b->run[m].buckets, r[m][0], r[m][1], r[m][2], r[m][3], r[m][4],
               r[m][0] / r[DIST_COMM_AFTER][0], r[m][5]);
    }
}

int main(int argc, char **argv)
{
    bench_t b;
    double r[MODES][FIELDS];
    int rc = 1;

    memset(&b, 0, sizeof(b));
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(argc, argv, &b.o) != 0) {
        return 2;
    }
    openblas_set_num_threads(b.o.threads);
    if (setup(&b) == 0 && measure(&b) == 0 && summarize(&b, r) == 0) {
        if (b.dist.rank == 0) {
            report(&b, r);
        }
        rc = 0;
    }
    teardown(&b);
    return rc;
}
