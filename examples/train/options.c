/* Command line of coll-train. */
#include "options.h"

#include "args.h"

#include <getopt.h>
#include <limits.h>
#include <string.h>

enum {
    OPT_DATA = 256,
    OPT_EPOCHS,
    OPT_STEPS,
    OPT_BATCH,
    OPT_HIDDEN,
    OPT_SEED,
    OPT_EVAL_EVERY,
    OPT_NO_NORMALIZE,
    OPT_THREADS,
    OPT_DUMP,
    OPT_DUMP_GRADS,
    OPT_COMM,
    OPT_BUCKET_CAP,
    OPT_FIRST_BUCKET_CAP,
    OPT_REPORT_STEPS,
    OPT_REPORT_LR,
    OPT_REPORT_LAYERS,
    OPT_TIMEOUT,
    OPT_TP,
    OPT_PP,
    OPT_DP,
    OPT_MICRO,
    OPT_ORDER,
    OPT_COMPRESSION,
    OPT_SERVICE,
    OPT_ON_DIVERGENCE,
    /* The optimizer (apply_optim), from OPT_OPTIMIZER to OPT_EXCLUDE. */
    OPT_OPTIMIZER,
    OPT_MOMENTUM,
    OPT_NESTEROV,
    OPT_WEIGHT_DECAY,
    OPT_BETA1,
    OPT_BETA2,
    OPT_EPS,
    OPT_LARS_ETA,
    OPT_TRUST_CLAMP,
    OPT_CLIP,
    OPT_EXCLUDE,
    /* The learning-rate schedule (apply_sched), from OPT_LR to OPT_FINAL_LR. */
    OPT_LR,
    OPT_LR_SCALING,
    OPT_BASE_LR,
    OPT_BASE_BATCH,
    OPT_WARMUP,
    OPT_WARMUP_START,
    OPT_DECAY,
    OPT_MILESTONES,
    OPT_GAMMA,
    OPT_FINAL_LR,
    OPT_END
};

/* Bit of an option in the set of those given. */
#define GIVEN(opt) (1ull << ((opt) - OPT_DATA))
/* The options that ask for the 3D-parallel trainer (train3d.h). */
#define GIVEN_3D \
    (GIVEN(OPT_TP) | GIVEN(OPT_PP) | GIVEN(OPT_DP) | GIVEN(OPT_MICRO) | GIVEN(OPT_ORDER))

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
    {"service", no_argument, NULL, OPT_SERVICE},
    {"on-divergence", required_argument, NULL, OPT_ON_DIVERGENCE},
    {"optimizer", required_argument, NULL, OPT_OPTIMIZER},
    {"weight-decay", required_argument, NULL, OPT_WEIGHT_DECAY},
    {"nesterov", no_argument, NULL, OPT_NESTEROV},
    {"beta1", required_argument, NULL, OPT_BETA1},
    {"beta2", required_argument, NULL, OPT_BETA2},
    {"eps", required_argument, NULL, OPT_EPS},
    {"lars-eta", required_argument, NULL, OPT_LARS_ETA},
    {"trust-clamp", required_argument, NULL, OPT_TRUST_CLAMP},
    {"clip-grad-norm", required_argument, NULL, OPT_CLIP},
    {"exclude", required_argument, NULL, OPT_EXCLUDE},
    {"lr-scaling", required_argument, NULL, OPT_LR_SCALING},
    {"base-lr", required_argument, NULL, OPT_BASE_LR},
    {"base-batch", required_argument, NULL, OPT_BASE_BATCH},
    {"warmup", required_argument, NULL, OPT_WARMUP},
    {"warmup-start-lr", required_argument, NULL, OPT_WARMUP_START},
    {"decay", required_argument, NULL, OPT_DECAY},
    {"milestones", required_argument, NULL, OPT_MILESTONES},
    {"gamma", required_argument, NULL, OPT_GAMMA},
    {"final-lr", required_argument, NULL, OPT_FINAL_LR},
    {"report-lr", no_argument, NULL, OPT_REPORT_LR},
    {"report-layers", required_argument, NULL, OPT_REPORT_LAYERS},
    {"dump-grads", required_argument, NULL, OPT_DUMP_GRADS},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static int parse_milestones(const char *s, train_lr_opts_t *o)
{
    char buf[256];
    char *save = NULL;
    unsigned n = 0;

    if (strlen(s) >= sizeof(buf)) {
        fprintf(stderr, "coll-train: --milestones: '%s' is too long\n", s);
        return -1;
    }
    strcpy(buf, s);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        if (n == COLL_SCHEDULE_MAX_MILESTONES) {
            fprintf(stderr, "coll-train: --milestones: at most %d\n",
                    COLL_SCHEDULE_MAX_MILESTONES);
            return -1;
        }
        if (train_arg_span("milestones", tok, &o->milestones[n++]) != 0) {
            return -1;
        }
    }
    o->n_milestones = n;
    return 0;
}

/* "MIN,MAX" with 0 <= MIN <= MAX. */
static int parse_clamp(const char *s, train_optim_opts_t *o)
{
    char buf[64];
    char *comma;

    if (strlen(s) >= sizeof(buf) || (comma = strchr(strcpy(buf, s), ',')) == NULL) {
        fprintf(stderr, "coll-train: --trust-clamp: '%s' is not MIN,MAX\n", s);
        return -1;
    }
    *comma = '\0';
    if (train_arg_double("trust-clamp", buf, 0.0, 1e30, &o->trust_min) != 0 ||
        train_arg_double("trust-clamp", comma + 1, 0.0, 1e30, &o->trust_max) != 0) {
        return -1;
    }
    if (o->trust_min > o->trust_max) {
        fprintf(stderr, "coll-train: --trust-clamp: MIN %g > MAX %g\n", o->trust_min,
                o->trust_max);
        return -1;
    }
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
            if (train_arg_int("hidden", times + 1, 1, &reps) != 0) {
                return -1;
            }
        }
        if (train_arg_int("hidden", tok, 1, &width) != 0) {
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
    opts->sched.lr = 0.05;
    opts->sched.warmup_start = -1.0;
    opts->sched.gamma = 0.1;
    opts->seed = 1;
    opts->eval_every = 1;
    opts->normalize = 1;
    opts->threads = 1;
    opts->comm = DIST_COMM_BUCKET;
    opts->timeout_ms = DIST_DEFAULT_TIMEOUT_MS;
    train_optim_defaults(TRAIN_OPTIM_SGD, &opts->optim);
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

    if (train_arg_float(opt, s, 1e-6, 1048576.0, &mb) != 0) {
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

    if (train_arg_long("timeout", s, 1, INT_MAX / 1000, &v) != 0) {
        return -1;
    }
    opts->timeout_ms = (int)(v * 1000);
    return 0;
}

static int apply_optim(int c, const char *arg, train_optim_opts_t *o)
{
    static const char *const kinds[TRAIN_OPTIM_KINDS] = {"sgd", "adamw", "lars", "lamb"};
    static const char *const exclude[2] = {"none", "bias"};
    int v;

    switch (c) {
    case OPT_OPTIMIZER:
        if (train_arg_name("optimizer", arg, kinds, TRAIN_OPTIM_KINDS, &v) != 0) {
            return -1;
        }
        o->kind = (train_optim_kind_t)v;
        return 0;
    case OPT_MOMENTUM: return train_arg_double("momentum", arg, 0.0, 1.0, &o->momentum);
    case OPT_NESTEROV: o->nesterov = 1; return 0;
    case OPT_WEIGHT_DECAY: return train_arg_double("weight-decay", arg, 0.0, 1e3, &o->weight_decay);
    case OPT_BETA1: return train_arg_double("beta1", arg, 0.0, 1.0, &o->beta1);
    case OPT_BETA2: return train_arg_double("beta2", arg, 0.0, 1.0, &o->beta2);
    case OPT_EPS: return train_arg_double("eps", arg, 0.0, 1.0, &o->eps);
    case OPT_LARS_ETA: return train_arg_double("lars-eta", arg, 1e-12, 1e6, &o->lars_eta);
    case OPT_TRUST_CLAMP: return parse_clamp(arg, o);
    case OPT_CLIP: return train_arg_double("clip-grad-norm", arg, 1e-30, 1e30, &o->clip_grad_norm);
    case OPT_EXCLUDE:
        if (train_arg_name("exclude", arg, exclude, 2, &v) != 0) {
            return -1;
        }
        o->exclude_bias = v;
        return 0;
    default: return -1;
    }
}

static int apply_sched(int c, const char *arg, train_lr_opts_t *o)
{
    static const char *const scaling[2] = {"none", "linear"};
    static const char *const decay[3] = {"constant", "step", "cosine"};
    int v;

    switch (c) {
    case OPT_LR: return train_arg_double("lr", arg, 1e-12, 1e6, &o->lr);
    case OPT_LR_SCALING: return train_arg_name("lr-scaling", arg, scaling, 2, &o->linear_scaling);
    case OPT_BASE_LR: return train_arg_double("base-lr", arg, 1e-12, 1e6, &o->base_lr);
    case OPT_BASE_BATCH: return train_arg_long("base-batch", arg, 1, INT_MAX, &o->base_batch);
    case OPT_WARMUP: return train_arg_span("warmup", arg, &o->warmup);
    case OPT_WARMUP_START:
        return train_arg_double("warmup-start-lr", arg, 0.0, 1e6, &o->warmup_start);
    case OPT_DECAY:
        if (train_arg_name("decay", arg, decay, 3, &v) != 0) {
            return -1;
        }
        o->decay = (coll_schedule_decay_t)v;
        return 0;
    case OPT_MILESTONES: return parse_milestones(arg, o);
    case OPT_GAMMA: return train_arg_double("gamma", arg, 1e-12, 1e6, &o->gamma);
    case OPT_FINAL_LR: return train_arg_double("final-lr", arg, 0.0, 1e6, &o->final_lr);
    default: return -1;
    }
}

/* Applies one option; returns 0, or -1 after saying why its value is bad. */
static int train_apply(int c, const char *arg, train_opts_t *opts)
{
    static const char *const divergence[] = {"stop", "continue"};

    if (c >= OPT_OPTIMIZER && c <= OPT_EXCLUDE) {
        return apply_optim(c, arg, &opts->optim);
    }
    if (c >= OPT_LR && c <= OPT_FINAL_LR) {
        return apply_sched(c, arg, &opts->sched);
    }
    switch (c) {
    case OPT_DATA: opts->data_dir = arg; return 0;
    case OPT_EPOCHS: return train_arg_int("epochs", arg, 1, &opts->epochs);
    case OPT_STEPS: return train_arg_long("steps", arg, 1, LONG_MAX, &opts->max_steps);
    case OPT_BATCH: return train_arg_int("batch", arg, 1, &opts->batch);
    case OPT_HIDDEN: return parse_hidden(arg, opts);
    case OPT_SEED: return train_arg_u64("seed", arg, &opts->seed);
    case OPT_EVAL_EVERY: return train_arg_int("eval-every", arg, 0, &opts->eval_every);
    case OPT_NO_NORMALIZE: opts->normalize = 0; return 0;
    case OPT_THREADS: return train_arg_int("threads", arg, 1, &opts->threads);
    case OPT_DUMP: opts->dump_path = arg; return 0;
    case OPT_DUMP_GRADS: opts->dump_grads_path = arg; return 0;
    case OPT_COMM: return parse_comm(arg, opts);
    case OPT_BUCKET_CAP: return parse_cap("bucket-cap-mb", arg, &opts->bucket_cap_bytes);
    case OPT_FIRST_BUCKET_CAP:
        return parse_cap("first-bucket-cap-mb", arg, &opts->first_bucket_cap_bytes);
    case OPT_REPORT_STEPS: opts->report_steps = 1; return 0;
    case OPT_REPORT_LR: opts->report_lr = 1; return 0;
    case OPT_REPORT_LAYERS:
        return train_arg_long("report-layers", arg, 0, LONG_MAX, &opts->report_layers);
    case OPT_TIMEOUT: return parse_timeout(arg, opts);
    case OPT_TP: return train_arg_int("tp", arg, 1, &opts->tp);
    case OPT_PP: return train_arg_int("pp", arg, 1, &opts->pp);
    case OPT_DP: return train_arg_int("dp", arg, 1, &opts->dp);
    case OPT_MICRO: return train_arg_int("micro-batches", arg, 1, &opts->micro_batches);
    case OPT_ORDER: opts->order = arg; return 0;
    case OPT_COMPRESSION: return parse_compression(arg, opts);
    case OPT_SERVICE: opts->service = 1; return 0;
    case OPT_ON_DIVERGENCE:
        return train_arg_name("on-divergence", arg, divergence, 2, &opts->train_through);
    default: return -1;
    }
}

/* ---- what the options mean together ----------------------------------------------------- */

/* The optimizer's own defaults for what the command line left out. */
static void resolve_optim(train_optim_opts_t *o, uint64_t given)
{
    train_optim_opts_t d;

    train_optim_defaults(o->kind, &d);
    o->momentum = (given & GIVEN(OPT_MOMENTUM)) ? o->momentum : d.momentum;
    o->weight_decay = (given & GIVEN(OPT_WEIGHT_DECAY)) ? o->weight_decay : d.weight_decay;
    o->beta1 = (given & GIVEN(OPT_BETA1)) ? o->beta1 : d.beta1;
    o->beta2 = (given & GIVEN(OPT_BETA2)) ? o->beta2 : d.beta2;
    o->eps = (given & GIVEN(OPT_EPS)) ? o->eps : d.eps;
    o->exclude_bias = (given & GIVEN(OPT_EXCLUDE)) ? o->exclude_bias : d.exclude_bias;
}

#define KIND(k) (1u << (k))

/* Options of some optimizers only: refused with the others, rather than silently unused. */
static int check_optim(const train_optim_opts_t *o, uint64_t given)
{
    static const struct {
        int opt;
        const char *name;
        unsigned kinds;
    } only[] = {
        {OPT_MOMENTUM, "momentum", KIND(TRAIN_OPTIM_SGD) | KIND(TRAIN_OPTIM_LARS)},
        {OPT_NESTEROV, "nesterov", KIND(TRAIN_OPTIM_SGD) | KIND(TRAIN_OPTIM_LARS)},
        {OPT_BETA1, "beta1", KIND(TRAIN_OPTIM_ADAMW) | KIND(TRAIN_OPTIM_LAMB)},
        {OPT_BETA2, "beta2", KIND(TRAIN_OPTIM_ADAMW) | KIND(TRAIN_OPTIM_LAMB)},
        {OPT_EPS, "eps", KIND(TRAIN_OPTIM_ADAMW) | KIND(TRAIN_OPTIM_LARS) | KIND(TRAIN_OPTIM_LAMB)},
        {OPT_LARS_ETA, "lars-eta", KIND(TRAIN_OPTIM_LARS)},
        {OPT_TRUST_CLAMP, "trust-clamp", KIND(TRAIN_OPTIM_LAMB)},
    };
    int bad = 0;

    for (size_t i = 0; i < sizeof(only) / sizeof(only[0]); i++) {
        if ((given & GIVEN(only[i].opt)) && !(only[i].kinds & KIND(o->kind))) {
            fprintf(stderr, "coll-train: --%s does not apply to --optimizer %s\n", only[i].name,
                    train_optim_name(o->kind));
            bad = 1;
        }
    }
    if (o->nesterov && !(o->momentum > 0)) {
        fprintf(stderr, "coll-train: --nesterov needs --momentum > 0\n");
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* Nonzero, after saying so, when @p opt was given but means nothing without @p needs. */
static int misplaced(uint64_t given, int opt, int meaningful, const char *name,
                     const char *needs)
{
    if ((given & GIVEN(opt)) && !meaningful) {
        fprintf(stderr, "coll-train: --%s needs %s\n", name, needs);
        return 1;
    }
    return 0;
}

static int check_sched(const train_lr_opts_t *o, uint64_t given)
{
    const uint64_t base = GIVEN(OPT_BASE_LR) | GIVEN(OPT_BASE_BATCH);
    int step = o->decay == COLL_SCHEDULE_STEP, cosine = o->decay == COLL_SCHEDULE_COSINE;
    int bad = misplaced(given, OPT_BASE_LR, o->linear_scaling, "base-lr", "--lr-scaling linear") |
              misplaced(given, OPT_BASE_BATCH, o->linear_scaling, "base-batch",
                        "--lr-scaling linear") |
              misplaced(given, OPT_WARMUP_START, o->warmup.count > 0, "warmup-start-lr",
                        "--warmup") |
              misplaced(given, OPT_MILESTONES, step, "milestones", "--decay step") |
              misplaced(given, OPT_GAMMA, step, "gamma", "--decay step") |
              misplaced(given, OPT_FINAL_LR, cosine, "final-lr", "--decay cosine");

    if (o->linear_scaling && ((given & base) != base || (given & GIVEN(OPT_LR)))) {
        fprintf(stderr, "coll-train: --lr-scaling linear takes --base-lr and --base-batch "
                        "instead of --lr\n");
        bad = 1;
    }
    if (step && o->n_milestones == 0) {
        fprintf(stderr, "coll-train: --decay step needs --milestones\n");
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* What --service cannot be combined with (service.h): the 3D trainer keeps its optimizer, the
 * service's buckets are one per network layer, the daemons neither report per-tensor norms nor
 * keep the gradients, and the service compresses with fp16, bf16, onebit or topk only. */
static int check_service(uint64_t given, const train_opts_t *opts)
{
    static const struct {
        int opt;
        const char *name;
        const char *why;
    } refused[] = {
        {OPT_TP, "tp", "the 3D trainer runs its own optimizer"},
        {OPT_PP, "pp", "the 3D trainer runs its own optimizer"},
        {OPT_DP, "dp", "the 3D trainer runs its own optimizer"},
        {OPT_MICRO, "micro-batches", "the 3D trainer runs its own optimizer"},
        {OPT_ORDER, "order", "the 3D trainer runs its own optimizer"},
        {OPT_COMM, "comm", "the service's buckets are one per network layer"},
        {OPT_BUCKET_CAP, "bucket-cap-mb", "the service's buckets are one per network layer"},
        {OPT_FIRST_BUCKET_CAP, "first-bucket-cap-mb",
         "the service's buckets are one per network layer"},
        {OPT_REPORT_LAYERS, "report-layers", "the daemons do not report per-tensor norms"},
        {OPT_DUMP_GRADS, "dump-grads", "the service consumes the gradient buffer"},
    };
    int bad = 0;

    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (given & GIVEN(refused[i].opt)) {
            fprintf(stderr, "coll-train: --service cannot be used with --%s: %s\n",
                    refused[i].name, refused[i].why);
            bad = 1;
        }
    }
    if (opts->has_compression && (opts->compression.method == COLL_COMPRESS_POWERSGD ||
                                  opts->compression.method == COLL_COMPRESS_AUTO)) {
        fprintf(stderr, "coll-train: --service cannot be used with --compression %s: the "
                "parameter service compresses with fp16, bf16, onebit or topk\n",
                coll_compress_method_name(opts->compression.method));
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* The long option whose value is @p opt, or NULL. */
static const struct option *long_opt(int opt)
{
    for (const struct option *o = train_long_opts; o->name != NULL; o++) {
        if (o->val == opt) {
            return o;
        }
    }
    return NULL;
}

/* What the 3D-parallel trainer (train3d.h) does not take: it runs SGD with --momentum at the
 * constant --lr, and reduces its dp gradients uncompressed. */
static int check_3d(uint64_t given)
{
    int bad = 0;

    for (int c = OPT_DATA; c < OPT_END; c++) {
        int refused = c == OPT_COMPRESSION || c == OPT_REPORT_LAYERS || c == OPT_DUMP_GRADS ||
                      (c >= OPT_OPTIMIZER && c <= OPT_FINAL_LR && c != OPT_MOMENTUM &&
                       c != OPT_LR);
        if (refused && (given & GIVEN(c))) {
            fprintf(stderr, "coll-train: --tp/--pp/--dp cannot be used with --%s: the 3D-parallel "
                    "trainer runs SGD with --momentum at a constant --lr, uncompressed\n",
                    long_opt(c)->name);
            bad = 1;
        }
    }
    return bad ? -1 : 0;
}

/* Says what getopt refused: a short option that does not exist (optopt), a long one that does
 * not exist or abbreviates several (optopt 0; the element before optind), or a known one
 * missing its value or given one it does not take (optopt is its value). */
static void say_refused(char *const *argv)
{
    const struct option *o = long_opt(optopt);

    if (o == NULL && optopt != 0) {
        fprintf(stderr, "coll-train: '-%c' is not an option\n", optopt);
    } else if (o == NULL) {
        fprintf(stderr, "coll-train: '%s' is not an option (nor the start of only one)\n",
                argv[optind - 1]);
    } else if (o->has_arg == no_argument) {
        fprintf(stderr, "coll-train: --%s takes no value\n", o->name);
    } else {
        fprintf(stderr, "coll-train: --%s needs a value\n", o->name);
    }
}

/* Reads every option into @p opts and @p given, saying each bad one; returns the number of
 * bad ones, and sets @p help for --help and @p unknown for an option or argument that is not
 * one of coll-train's. */
static int read_options(int argc, char **argv, train_opts_t *opts, uint64_t *given, int *help,
                        int *unknown)
{
    int c, bad = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", train_long_opts, NULL)) != -1) {
        if (c == 'h') {
            *help = 1;
        } else if (c == '?') {
            say_refused(argv);
            *unknown |= long_opt(optopt) == NULL;
            bad++;
        } else if (train_apply(c, optarg, opts) != 0) {
            bad++;
        } else {
            *given |= GIVEN(c);
        }
    }
    for (int i = optind; i < argc; i++) {
        fprintf(stderr, "coll-train: unexpected argument '%s'\n", argv[i]);
        *unknown = 1;
        bad++;
    }
    return bad;
}

/* Every value was read: the defaults that depend on others, then what the options mean
 * together, each conflict said. */
static int check_together(train_opts_t *opts, uint64_t given)
{
    int bad = 0;

    resolve_optim(&opts->optim, given);
    if (!(given & GIVEN(OPT_LR))) {
        opts->sched.lr = train_optim_default_lr(opts->optim.kind);
    }
    bad |= opts->service && check_service(given, opts) != 0;
    if ((given & GIVEN_3D) && check_3d(given) != 0) {
        /* It refused each optimizer and schedule option but --momentum and --lr: checking
         * them against the optimizer would name them twice. */
        return -1;
    }
    bad |= check_optim(&opts->optim, given) != 0;
    bad |= check_sched(&opts->sched, given) != 0;
    return bad ? -1 : 0;
}

int train_parse_args(int argc, char **argv, train_opts_t *opts)
{
    uint64_t given = 0;
    int help = 0, unknown = 0;

    train_defaults(opts);
    if (read_options(argc, argv, opts, &given, &help, &unknown) != 0) {
        if (unknown) {
            fprintf(stderr, "coll-train: try --help\n");
        }
        return -1;
    }
    if (help) {
        train_usage(stdout);
        return 1;
    }
    return check_together(opts, given);
}
