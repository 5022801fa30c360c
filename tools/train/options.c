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
        "with one allreduce (COLL_AVG) through collectived, and applies the same update.\n"
        "\n"
        "options:\n"
        "  --data DIR          IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]\n"
        "                      (default " TRAIN_DEFAULT_DATA ")\n"
        "  --epochs E          passes over the 60000 training images (default 2)\n"
        "  --steps N           stop after N optimizer steps in total (default: no limit)\n"
        "  --batch B           global batch, divisible by the world size (default 256); the\n"
        "                      last incomplete batch of an epoch is dropped\n"
        "  --hidden H[,H...]   hidden layer widths (default 256)\n"
        "  --lr LR             learning rate (default 0.05)\n"
        "  --momentum M        SGD momentum, 0 <= M < 1 (default 0.9)\n"
        "  --seed S            seed of the initial weights and the shuffles, the same on every\n"
        "                      rank (default 1)\n"
        "  --eval-every E      also report test accuracy every E epochs (default: only at end)\n"
        "  --no-normalize      feed pixels scaled to [0,1] instead of standardised ones\n"
        "  --threads T         OpenBLAS threads per rank (default 1)\n"
        "  --dump-weights FILE after training, rank 0 writes all parameters to FILE as raw\n"
        "                      little-endian float32: for each layer in order (784->H first),\n"
        "                      its weights as an out x in row-major matrix, then its out biases\n"
        "  -h, --help          this text\n"
        "\n"
        "environment (set by collective-launch): COLL_WORLD_SIZE, COLL_RANK, COLL_LOCAL_RANK,\n"
        "COLL_LOCAL_SIZE, COLL_SOCKET, COLL_JOB, COLL_ROOT. Without COLL_WORLD_SIZE (or with 1\n"
        "and no COLL_SOCKET) it trains standalone: one process, no daemon, no communication.\n"
        "\n"
        "output (rank 0, stdout): per epoch\n"
        "  epoch 1/2 loss=0.5123 samples/s=12345 allreduce=12.3%\n"
        "(loss: mean over the epoch's steps and ranks; samples/s: global images per second;\n"
        "allreduce: share of the step time spent in the gradient allreduce), then\n"
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
        if (n == MLP_MAX_LAYERS - 1) {
            fprintf(stderr, "coll-train: --hidden: at most %d layers\n", MLP_MAX_LAYERS - 1);
            return -1;
        }
        if (parse_int("hidden", tok, 1, &opts->hidden[n]) != 0) {
            return -1;
        }
        n++;
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
