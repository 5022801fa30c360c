/* Command line of coll-train. */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    OPT_DATA = 256,
    OPT_EPOCHS,
    OPT_STEPS,
    OPT_BATCH,
    OPT_HIDDEN,
    OPT_LR,
    OPT_MOMENTUM,
    OPT_SEED,
    OPT_EVAL_EVERY,
    OPT_NO_NORMALIZE,
    OPT_THREADS,
    OPT_DUMP,
    OPT_COMM,
    OPT_BUCKET_CAP,
    OPT_FIRST_BUCKET_CAP,
    OPT_REPORT_STEPS,
    OPT_TIMEOUT,
    OPT_TP,
    OPT_PP,
    OPT_DP,
    OPT_MICRO,
    OPT_ORDER,
    OPT_COMPRESSION,
};

static const struct option train_long_opts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"hidden", required_argument, NULL, OPT_HIDDEN},
    {"lr", required_argument, NULL, OPT_LR},
    {"momentum", required_argument, NULL, OPT_MOMENTUM},
    {"seed", required_argument, NULL, OPT_SEED},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
    {"no-normalize", no_argument, NULL, OPT_NO_NORMALIZE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"dump-weights", required_argument, NULL, OPT_DUMP},
    {"comm", required_argument, NULL, OPT_COMM},
    {"bucket-cap-mb", required_argument, NULL, OPT_BUCKET_CAP},
    {"first-bucket-cap-mb", required_argument, NULL, OPT_FIRST_BUCKET_CAP},
    {"report-steps", no_argument, NULL, OPT_REPORT_STEPS},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"tp", required_argument, NULL, OPT_TP},
    {"pp", required_argument, NULL, OPT_PP},
    {"dp", required_argument, NULL, OPT_DP},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"order", required_argument, NULL, OPT_ORDER},
    {"compression", required_argument, NULL, OPT_COMPRESSION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

void train_usage(FILE *out)
{
    fputs(
        "usage: coll-train [OPTIONS]\n"
        "\n"
        "Data-parallel training of an MLP (784-H-10, ReLU, softmax cross-entropy, SGD with\n"
        "momentum) on Fashion-MNIST. Every rank holds the whole model and the same shuffled order\n"
        "of the training set; it takes its contiguous shard [rank*B/W, (rank+1)*B/W) of each\n"
        "global batch of B images, computes the mean loss over its shard, averages all gradients\n"
        "(COLL_AVG) through collectived, and applies the same update. Gradients live in buckets\n"
        "of a libcollective bucketer (coll_bucketer_*, as PyTorch DDP): backward runs layer by\n"
        "layer and reports each layer's gradients, and a bucket is reduced as soon as it is\n"
        "full, while backward continues on the layers below.\n"
        "\n"
        "options:\n"
        "  --data DIR          IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
        "                      (default " TRAIN_DEFAULT_DATA ")\n"
        "  --epochs E          passes over the 60000 training images (default 2)\n"
        "  --steps N           stop after N optimizer steps in total (default: no limit)\n"
        "  --batch B           global batch, divisible by the world size (default 256); the\n"
        "                      last incomplete batch of an epoch is dropped\n"
        "  --hidden H[,H...]   hidden layer widths (default 256); WxN is N layers of width W,\n"
        "                      e.g. 2048x4 (at most 15 hidden layers)\n"
        "  --lr LR             learning rate (default 0.05)\n"
        "  --momentum M        SGD momentum, 0 <= M < 1 (default 0.9)\n"
        "  --seed S            seed of the initial weights and the shuffles, the same on every\n"
        "                      rank (default 1)\n"
        "  --eval-every E      also report test accuracy every E epochs (default: only at end)\n"
        "  --no-normalize      feed pixels scaled to [0,1] instead of standardised ones\n"
        "  --threads T         OpenBLAS threads per rank (default 1)\n"
        "  --comm MODE         how gradients travel: bucket (default: buckets reduced during\n"
        "                      backward as they fill), after (one allreduce of all gradients\n"
        "                      when backward ends), tensor (one allreduce per tensor, each\n"
        "                      as soon as it is ready)\n"
        "  --bucket-cap-mb M   bucket cap in MiB for --comm bucket (default: COLL_BUCKET_CAP_MB,\n"
        "                      else 25)\n"
        "  --first-bucket-cap-mb M  cap of the first bucket (default: COLL_FIRST_BUCKET_CAP_MB,\n"
        "                      else 1)\n"
        "  --compression SPEC  how gradient buckets travel between nodes (default:\n"
        "                      COLL_COMPRESSION, else none): none, fp16, bf16, topk:RATIO,\n"
        "                      onebit, powersgd:RANK or auto, with ,noef (no error feedback)\n"
        "                      and ,warmup=N (N uncompressed steps first); the epoch lines\n"
        "                      then show the bytes sent and the compression ratio\n"
        "  --report-steps      rank 0 prints one line per step (see output)\n"
        "  --timeout S         bound in seconds of every wait on a collective (default 300)\n"
        "  --dump-weights FILE after training, rank 0 writes all parameters to FILE as raw\n"
        "                      little-endian float32: for each layer in order (784->H first),\n"
        "                      its weights as an out x in row-major matrix, then its out biases\n"
        "  --tp T --pp P --dp D  3D parallelism, T x P x D = the world size (any of them; the\n"
        "                      others default to 1, dp to what is left): tensor-parallel layer\n"
        "                      pairs (Megatron's column- then row-parallel layer, one tp\n"
        "                      allreduce forward and one backward per pair), P pipeline stages\n"
        "                      run with the 1F1B schedule, D replicas averaging their gradients\n"
        "                      (bucketed) in their dp group; --dump-weights gathers the whole\n"
        "                      network to rank 0\n"
        "  --micro-batches M   micro-batches per replica and step (default 1; a replica's B/D\n"
        "                      images split into M); the bubble (P-1)/M is reported per stage\n"
        "  --order O           rank order of the layout, fastest first (default tp-dp-pp)\n"
        "  -h, --help          this text\n"
        "\n"
        "environment (set by collective-launch): COLL_WORLD_SIZE, COLL_RANK, COLL_LOCAL_RANK,\n"
        "COLL_LOCAL_SIZE, COLL_SOCKET, COLL_JOB, COLL_ROOT. Without COLL_WORLD_SIZE (or with 1\n"
        "and no COLL_SOCKET) it trains standalone: one process, no daemon, no communication.\n"
        "\n"
        "output (rank 0, stdout): per epoch\n"
        "  epoch 1/2 loss=0.5123 samples/s=12345 step_ms=20.1 compute_ms=15.2 comm_ms=8.3\n"
        "        exposed_ms=2.1 overlap=0.75\n"
        "(one line; loss: mean over the epoch's steps and ranks; samples/s: global images per\n"
        "second; then rank 0's means per step, the first step of the run left out: step_ms the\n"
        "whole step; compute_ms forward and backward; comm_ms the union over buckets of [submit,\n"
        "done]; exposed_ms the wait after backward for communication it did not hide; overlap\n"
        "1 - exposed/comm), with --report-steps the same per step:\n"
        "  step 12 step_ms=... compute_ms=... comm_ms=... exposed_ms=... overlap=... buckets=B\n"
        "and at the end\n"
        "  final: nodes=N ranks=R epochs=E test_accuracy=0.xxxx train_loss=x.xxxx\n"
        "\n"
        "examples:\n"
        "  coll-train --epochs 2\n"
        "  collective-launch --nodes 2 --ranks-per-node 2 -- coll-train --epochs 2\n"
        "exit status: 0 success, 1 runtime error, 2 usage error.\n",
        out);
}

static int parse_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        fprintf(stderr, "coll-train: --%s: '%s' is not an integer in [%ld, %ld]\n", opt, s, min,
                max);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_int(const char *opt, const char *s, int min, int *out)
{
    long v;

    if (parse_long(opt, s, min, INT_MAX, &v) != 0) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A finite float in [min, max). */
static int parse_float(const char *opt, const char *s, double min, double max, float *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < min || v >= max) {
        fprintf(stderr, "coll-train: --%s: '%s' is not a number in [%g, %g)\n", opt, s, min, max);
        return -1;
    }
    *out = (float)v;
    return 0;
}

static int parse_seed(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
        fprintf(stderr, "coll-train: --seed: '%s' is not an unsigned 64-bit integer\n", s);
        return -1;
    }
    *out = v;
    return 0;
}

/* "256" or "512,256": one width per hidden layer. */
static int parse_hidden(const char *s, train_opts_t *opts)
{
    char buf[256];
    char *save = NULL;
    int n = 0;

    if (strlen(s) >= sizeof(buf)) {
        fprintf(stderr, "coll-train: --hidden: '%s' is too long\n", s);
        return -1;
    }
    strcpy(buf, s);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        char *times = strchr(tok, 'x');
        int width, reps = 1;
        if (times != NULL) {
            *times = '\0';
            if (parse_int("hidden", times + 1, 1, &reps) != 0) {
                return -1;
            }
        }
        if (parse_int("hidden", tok, 1, &width) != 0) {
            return -1;
        }
        for (int r = 0; r < reps; r++) {
            if (n == MLP_MAX_LAYERS - 1) {
                fprintf(stderr, "coll-train: --hidden: at most %d layers\n", MLP_MAX_LAYERS - 1);
                return -1;
            }
            opts->hidden[n++] = width;
        }
    }
    opts->n_hidden = n;
    return 0;
}

static void train_defaults(train_opts_t *opts)
{
    memset(opts, 0, sizeof(*opts));
    opts->data_dir = TRAIN_DEFAULT_DATA;
    opts->epochs = 2;
    opts->batch = 256;
    opts->hidden[0] = 256;
    opts->n_hidden = 1;
    opts->lr = 0.05f;
    opts->momentum = 0.9f;
    opts->seed = 1;
    opts->normalize = 1;
    opts->threads = 1;
    opts->comm = DIST_COMM_BUCKET;
    opts->timeout_ms = DIST_DEFAULT_TIMEOUT_MS;
}

static int parse_comm(const char *s, train_opts_t *opts)
{
    static const char *const names[] = {"bucket", "after", "tensor"};

    for (int i = 0; i < 3; i++) {
        if (strcmp(s, names[i]) == 0) {
            opts->comm = (dist_comm_t)i;
            return 0;
        }
    }
    fprintf(stderr, "coll-train: --comm: '%s' is not bucket, after or tensor\n", s);
    return -1;
}

/* A cap in MiB (fractions allowed) as bytes, at least 1. */
static int parse_cap(const char *opt, const char *s, size_t *out)
{
    float mb;

    if (parse_float(opt, s, 1e-6, 1048576.0, &mb) != 0) {
        return -1;
    }
    *out = (double)mb * 1048576.0 < 1.0 ? 1 : (size_t)((double)mb * 1048576.0);
    return 0;
}

static int parse_compression(const char *s, train_opts_t *opts)
{
    if (coll_compression_parse(s, &opts->compression) != COLL_OK) {
        fprintf(stderr, "coll-train: --compression: '%s' is not none, fp16, bf16, topk:RATIO, "
                "onebit, powersgd:RANK or auto (optionally with ,noef and ,warmup=N)\n", s);
        return -1;
    }
    opts->has_compression = 1;
    return 0;
}

static int parse_timeout(const char *s, train_opts_t *opts)
{
    long v;

    if (parse_long("timeout", s, 1, INT_MAX / 1000, &v) != 0) {
        return -1;
    }
    opts->timeout_ms = (int)(v * 1000);
    return 0;
}

/* Applies one option; returns 0, 1 for --help, -1 for a bad value. */
static int train_apply(int c, const char *arg, train_opts_t *opts)
{
    switch (c) {
    case OPT_DATA: opts->data_dir = arg; return 0;
    case OPT_EPOCHS: return parse_int("epochs", arg, 1, &opts->epochs);
    case OPT_STEPS: return parse_long("steps", arg, 1, LONG_MAX, &opts->max_steps);
    case OPT_BATCH: return parse_int("batch", arg, 1, &opts->batch);
    case OPT_HIDDEN: return parse_hidden(arg, opts);
    case OPT_LR: return parse_float("lr", arg, 1e-12, 1e6, &opts->lr);
    case OPT_MOMENTUM: return parse_float("momentum", arg, 0.0, 1.0, &opts->momentum);
    case OPT_SEED: return parse_seed(arg, &opts->seed);
    case OPT_EVAL_EVERY: return parse_int("eval-every", arg, 1, &opts->eval_every);
    case OPT_NO_NORMALIZE: opts->normalize = 0; return 0;
    case OPT_THREADS: return parse_int("threads", arg, 1, &opts->threads);
    case OPT_DUMP: opts->dump_path = arg; return 0;
    case OPT_COMM: return parse_comm(arg, opts);
    case OPT_BUCKET_CAP: return parse_cap("bucket-cap-mb", arg, &opts->bucket_cap_bytes);
    case OPT_FIRST_BUCKET_CAP:
        return parse_cap("first-bucket-cap-mb", arg, &opts->first_bucket_cap_bytes);
    case OPT_REPORT_STEPS: opts->report_steps = 1; return 0;
    case OPT_TIMEOUT: return parse_timeout(arg, opts);
    case OPT_TP: return parse_int("tp", arg, 1, &opts->tp);
    case OPT_PP: return parse_int("pp", arg, 1, &opts->pp);
    case OPT_DP: return parse_int("dp", arg, 1, &opts->dp);
    case OPT_MICRO: return parse_int("micro-batches", arg, 1, &opts->micro_batches);
    case OPT_ORDER: opts->order = arg; return 0;
    case OPT_COMPRESSION: return parse_compression(arg, opts);
    case 'h': train_usage(stdout); return 1;
    default: fprintf(stderr, "coll-train: try --help\n"); return -1;
    }
}

int train_parse_args(int argc, char **argv, train_opts_t *opts)
{
    int c, rc;

    train_defaults(opts);
    while ((c = getopt_long(argc, argv, "h", train_long_opts, NULL)) != -1) {
        rc = train_apply(c, optarg, opts);
        if (rc != 0) {
            return rc;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "coll-train: unexpected argument '%s' (try --help)\n", argv[optind]);
        return -1;
    }
    return 0;
}
