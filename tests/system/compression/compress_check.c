/*
 * compress_check: one rank of a compression test with real daemons and UCX, started as every
 * rank of a local cluster by collective-launch. Every rank knows every rank's inputs
 * (multiples of 1/64 from check_mix(), so local sums are exact), runs the reference model of
 * the documented algorithm (tests/model/compress_model.h: TopK's exact selection, fp16/bf16 and
 * 1-bit with worker and server error, PowerSGD with its warm-started Q) for every node, and
 * checks its own result against it, step after step, so that residuals carry over.
 *
 *   --spec S        the compression (coll_compression_parse()), e.g. topk:0.01, onebit
 *   --counts LIST   bucket sizes (check_parse_count(): N-1, 8N+1, 1000003, ...); with
 *                   --layout the layout's size instead
 *   --layout KIND   PowerSGD's shapes: mixed (a 1000 x 1000 matrix and a vector: 1,000,003
 *                   elements), matrices, vectors, wide (matrices with min(n, m) <= r)
 *   --steps T       operations per bucket (default 3)
 *   --avg           COLL_AVG (default COLL_SUM)
 *   --mismatch-rank R --mismatch-spec S   rank R asks for S: every rank must get
 *                   COLL_ERR_MISMATCH (its output untouched)
 *   --nan-rank R    rank R's input has a NaN at step 1: every rank must get COLL_ERR_INVALID
 *                   at that step, outputs untouched; the next step matches the model with the
 *                   residuals of before
 *   --overflow      at step 1 every rank's last element is 2^127, finite, but the sum over
 *                   two nodes (of one rank each) overflows float32: the same as --nan-rank
 *   --reset         PowerSGD: the last step names another layout of the same size: the model
 *                   starts over (the daemon's reset rule)
 *   --auto-check    auto: every step, every rank ran the same method (a min and max allreduce
 *                   of its number), and an uncompressed step gives the exact sum
 *
 * Exit status 0 when every check passed, 1 on a failed check (check_die() says which), 2 on a
 * usage error.
 */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_common.h"
#include "tests/model/compress_model.h"

#define MAX_COUNTS 16
#define BUCKET 1

typedef struct {
    const char *spec, *mismatch_spec, *layout;
    char count_tokens[MAX_COUNTS][32];
    int ncounts, steps, avg, mismatch_rank, nan_rank, overflow, reset, auto_check;
} opts_t;

static float input(uint32_t rank, uint32_t step, uint64_t i, void *arg)
{
    uint64_t h = check_mix((uint64_t)rank << 48 ^ (uint64_t)step << 40 ^ i);
    (void)arg;
    return (float)((int64_t)(h % 2049) - 1024) / 64.0f;
}

/* The shapes of --layout; returns the tensor count (0: none). */
static size_t layout_shapes(const char *kind, int alt, uint64_t *shape)
{
    static const uint64_t mixed[] = {1000, 1000, 3, 1}, mixed_alt[] = {500, 2000, 3, 1};
    static const uint64_t matrices[] = {64, 96, 128, 32, 40, 40};
    static const uint64_t vectors[] = {5000, 1, 17, 1, 1, 1};
    static const uint64_t wide[] = {2, 500, 3, 400, 64, 64};
    const uint64_t *s = NULL;
    size_t n = 0;

    if (kind == NULL) {
        return 0;
    }
    if (strcmp(kind, "mixed") == 0) {
        s = alt ? mixed_alt : mixed, n = 2;
    } else if (strcmp(kind, "matrices") == 0) {
        s = matrices, n = 3;
    } else if (strcmp(kind, "vectors") == 0) {
        s = vectors, n = 3;
    } else if (strcmp(kind, "wide") == 0) {
        s = wide, n = 3;
    } else {
        check_usage_error("--layout %s: mixed, matrices, vectors or wide", kind);
    }
    memcpy(shape, s, 2 * n * sizeof(uint64_t));
    return n;
}

static uint64_t shapes_total(const uint64_t *shape, size_t n)
{
    uint64_t t = 0;
    for (size_t i = 0; i < n; i++) {
        t += shape[2 * i] * shape[2 * i + 1];
    }
    return t;
}

/* check_parse_count()'s tokens, and kN+j (k times the nodes, plus j). */
static long long count_token(const char *t, int nodes)
{
    char *end;
    long k = strtol(t, &end, 10);

    if (end != t && *end == 'N' && k > 0) { /* "N+j" with no nodes is j, "N" is 0 */
        long long rest = check_parse_count(end, 0);
        return rest >= 0 && end[1] != '-' ? k * nodes + rest : -1;
    }
    return check_parse_count(t, nodes);
}

static void parse_counts(opts_t *o, const char *list)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL && o->ncounts < MAX_COUNTS;
         t = strtok_r(NULL, ",", &save)) {
        snprintf(o->count_tokens[o->ncounts++], sizeof(o->count_tokens[0]), "%s", t);
    }
}

static void parse(int argc, char **argv, opts_t *o)
{
    static const struct option lo[] = {
        {"spec", 1, 0, 's'},  {"counts", 1, 0, 'c'},         {"layout", 1, 0, 'l'},
        {"steps", 1, 0, 't'}, {"avg", 0, 0, 'a'},            {"mismatch-rank", 1, 0, 'm'},
        {"mismatch-spec", 1, 0, 'M'}, {"nan-rank", 1, 0, 'n'}, {"reset", 0, 0, 'r'},
        {"auto-check", 0, 0, 'A'}, {"overflow", 0, 0, 'o'}, {0, 0, 0, 0}};
    int c;
    long v;

    *o = (opts_t){.spec = "none", .steps = 3, .mismatch_rank = -1, .nan_rank = -1};
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 's': o->spec = optarg; break;
        case 'c': parse_counts(o, optarg); break;
        case 'l': o->layout = optarg; break;
        case 't': o->steps = check_parse_int(optarg, 1, 1000, &v) < 0 ? -1 : (int)v; break;
        case 'a': o->avg = 1; break;
        case 'm': o->mismatch_rank = atoi(optarg); break;
        case 'M': o->mismatch_spec = optarg; break;
        case 'n': o->nan_rank = atoi(optarg); break;
        case 'r': o->reset = 1; break;
        case 'A': o->auto_check = 1; break;
        case 'o': o->overflow = 1; break;
        default: check_usage_error("unknown option");
        }
    }
    if (o->steps < 1 || (o->ncounts == 0 && o->layout == NULL)) {
        check_usage_error("give --counts or --layout, and --steps 1..1000");
    }
}

static const char *method_name(const char *spec)
{
    coll_compression_t z;
    if (coll_compression_parse(spec, &z) != COLL_OK) {
        check_usage_error("--spec %s", spec);
    }
    return coll_compress_method_name(z.method);
}

/* The spec rank @p rank asks for. */
static const char *spec_of(const check_ctx_t *c, const opts_t *o)
{
    return c->rank == o->mismatch_rank ? o->mismatch_spec : o->spec;
}

static coll_status_t allreduce(const check_ctx_t *c, const opts_t *o, float *buf, uint64_t count,
                               uint64_t key, uint64_t layout, uint32_t bucket, char *algo)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY | COLL_OP_PARAM_COMPRESSION |
                                        (layout != 0 ? COLL_OP_PARAM_LAYOUT : 0),
                          .key = key, .layout = layout};
    coll_request_t *req;
    coll_status_t st;

    coll_compression_parse(spec_of(c, o), &p.compression);
    p.compression.bucket = bucket;
    st = coll_allreduce_async(c->comm, buf, buf, count, COLL_FLOAT32,
                              o->avg ? COLL_AVG : COLL_SUM, &p, &req);
    if (st != COLL_INPROGRESS) {
        return st;
    }
    return check_wait(c, req, 120000, "compressed allreduce", algo, 32);
}

/* The method number an algorithm name stands for (0: uncompressed). */
static int method_of(const char *algo)
{
    for (int m = 1; m < COLL_COMPRESS_COUNT; m++) {
        if (strcmp(algo, coll_compress_method_name((coll_compress_method_t)m)) == 0) {
            return m;
        }
    }
    return 0;
}

/* auto: every rank ran the same method; an uncompressed step is exact. */
static void check_auto(const check_ctx_t *c, const opts_t *o, const float *buf, uint64_t count,
                       uint32_t t, const char *algo)
{
    int32_t *mm;
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_COMPRESSION};
    coll_request_t *req;

    if (coll_mem_alloc(c->comm, 64, (void **)&mm) != COLL_OK) {
        check_die("coll_mem_alloc: %s", coll_comm_last_error(c->comm));
    }
    mm[0] = method_of(algo);
    mm[1] = -mm[0];
    if (coll_allreduce_async(c->comm, mm, mm, 2, COLL_INT32, COLL_MAX, &p, &req) !=
            COLL_INPROGRESS ||
        check_wait(c, req, 60000, "method agreement", NULL, 0) != COLL_OK || mm[0] != -mm[1]) {
        check_die("step %u: the ranks ran different methods (this one %s)", t, algo);
    }
    for (uint64_t i = 0; mm[0] == 0 && i < count; i++) {
        double want = 0.0;
        for (int r = 0; r < c->world; r++) {
            want += input((uint32_t)r, t, i, NULL);
        }
        want = o->avg ? want / c->world : want;
        if (fabs(buf[i] - want) > 1e-5 * (fabs(want) + 1)) {
            check_die("auto, uncompressed step %u element %llu: %g, expected %g", t,
                      (unsigned long long)i, buf[i], want);
        }
    }
    coll_mem_free(c->comm, mm);
}

static double max_of(const double *x, uint64_t n)
{
    double m = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    }
    return m;
}

static void compare(const check_ctx_t *c, const float *got, const double *want, uint64_t count,
                    double tol, const char *what)
{
    for (uint64_t i = 0; i < count; i++) {
        if (!(fabs((double)got[i] - want[i]) <= tol)) {
            check_die("%s: element %llu of %llu: %.9g, the model gives %.9g (tolerance %g)",
                      what, (unsigned long long)i, (unsigned long long)count, got[i], want[i],
                      tol);
        }
    }
}

/* What step @p t must end with on this rank. */
static coll_status_t expected(const check_ctx_t *c, const opts_t *o, uint32_t t)
{
    if (o->mismatch_rank >= 0) {
        return COLL_ERR_MISMATCH;
    }
    return (o->nan_rank >= 0 || o->overflow) && t == 1 ? COLL_ERR_INVALID : COLL_OK;
}

/* Step t's input into @p buf (a NaN where --nan-rank says, 2^127 where --overflow does). */
static void fill(const check_ctx_t *c, const opts_t *o, float *buf, uint64_t count, uint32_t t)
{
    for (uint64_t i = 0; i < count; i++) {
        buf[i] = input((uint32_t)c->rank, t, i, NULL);
    }
    if (c->rank == o->nan_rank && t == 1 && count > 0) {
        buf[count / 2] = NAN;
    }
    if (o->overflow && t == 1 && count > 0) {
        buf[count - 1] = 0x1p127f;
    }
}

typedef struct {
    uint64_t count;
    uint32_t bucket;  /* its own residual: a count listed twice starts afresh */
    uint64_t shape[16], alt[16];
    size_t nt;
    const char *job;
} bucket_t;

/* One step; returns 0 once the job failed as expected (nothing more to run). */
static int step(const check_ctx_t *c, const opts_t *o, const bucket_t *b, cm_t **m, float *buf,
                float *copy, double *want, uint32_t t, uint64_t key)
{
    int alt = o->reset && t + 1 == (uint32_t)o->steps;
    char algo[32] = "", what[160];
    coll_status_t st, want_st = expected(c, o, t);

    if (alt) { /* another layout of the same size: the daemons start the bucket over */
        cm_free(*m);
        *m = cm_new((uint32_t)c->nodes, (uint32_t)c->local_size, b->count, o->avg, o->spec,
                    b->job, b->bucket, b->alt, b->nt);
    }
    fill(c, o, buf, b->count, t);
    memcpy(copy, buf, b->count * sizeof(float));
    st = allreduce(c, o, buf, b->count, key, b->nt == 0 ? 0 : alt ? 0xB22 : 0xA11, b->bucket,
                   algo);
    snprintf(what, sizeof(what), "%s, %llu elements, step %u", o->spec,
             (unsigned long long)b->count, t);
    if (st != want_st) {
        check_die("%s: %s, expected %s (%s)", what, coll_err_name(st), coll_err_name(want_st),
                  coll_comm_last_error(c->comm));
    }
    if (st != COLL_OK) {
        if (memcmp(buf, copy, b->count * sizeof(float)) != 0) {
            check_die("%s: failed with %s but wrote the buffer", what, coll_err_name(st));
        }
        return st != COLL_ERR_MISMATCH; /* a mismatch ends the job */
    }
    if (o->auto_check) {
        check_auto(c, o, buf, b->count, t, algo);
        return 1;
    }
    if (c->nodes > 1 && strcmp(algo, method_name(o->spec)) != 0 &&
        !(b->nt > 0 && strcmp(o->layout, "vectors") == 0)) {
        check_die("%s: ran %s, expected %s", what, algo, method_name(o->spec));
    }
    cm_step(*m, t, input, NULL, want);
    compare(c, buf, want, b->count, cm_rel_tolerance(*m) * (1e-30 + max_of(want, b->count)),
            what);
    return 1;
}

static void register_layouts(const check_ctx_t *c, const bucket_t *b)
{
    if (b->nt > 0 && (coll_layout_register(c->comm, 0xA11, b->nt, b->shape) != COLL_OK ||
                      coll_layout_register(c->comm, 0xB22, b->nt, b->alt) != COLL_OK)) {
        check_die("coll_layout_register: %s", coll_comm_last_error(c->comm));
    }
}

/* Every rank has allocated its buffers: a barrier (uncompressed, so it cannot mismatch). */
static void sync_ranks(const check_ctx_t *c)
{
    coll_request_t *r = NULL;
    coll_status_t st = coll_barrier_async(c->comm, NULL, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, 60000);
    }
    coll_req_free(r);
    if (st != COLL_OK) {
        check_die("barrier before the mismatch: %s (%s)", coll_err_name(st),
                  coll_comm_last_error(c->comm));
    }
}

/* Every step of one bucket size; returns 0 when the job ended (an expected mismatch). */
static int run_bucket(const check_ctx_t *c, const opts_t *o, bucket_t *b, int index)
{
    cm_t *m = cm_new((uint32_t)c->nodes, (uint32_t)c->local_size, b->count, o->avg, o->spec,
                     b->job, b->bucket, b->shape, b->nt);
    check_buf_t buf, copy;
    double *want = malloc((b->count + 1) * sizeof(double));
    int go = 1;

    if (m == NULL || want == NULL) {
        check_die("no memory for the model of %llu elements", (unsigned long long)b->count);
    }
    check_buf_alloc(c, b->count * sizeof(float), 0, &buf);
    copy.data = malloc(b->count * sizeof(float) + 1);
    if (o->mismatch_rank >= 0) {
        sync_ranks(c); /* or a slow rank's allocation meets the mismatch of the others */
    }
    for (int t = 0; t < o->steps && go; t++) {
        go = step(c, o, b, &m, (float *)(void *)buf.data, (float *)(void *)copy.data, want,
                  (uint32_t)t, (uint64_t)index * 1000 + (uint64_t)t + 1);
        check_buf_guards(c, &buf, "the bucket");
    }
    check_say(c, 1, "%s: %llu elements x %d steps on %dx%d: as the model", o->spec,
              (unsigned long long)b->count, o->steps, c->nodes, c->local_size);
    check_buf_free(c, &buf);
    free(copy.data);
    free(want);
    cm_free(m);
    return go;
}

int main(int argc, char **argv)
{
    check_ctx_t c;
    opts_t o;
    bucket_t b = {.job = getenv("COLL_JOB")};

    check_set_prog(argv[0]);
    parse(argc, argv, &o);
    check_join(&c, 256u << 20);
    b.nt = layout_shapes(o.layout, 0, b.shape);
    layout_shapes(o.layout, 1, b.alt);
    register_layouts(&c, &b);
    for (int i = 0; i < (b.nt > 0 ? 1 : o.ncounts); i++) {
        long long n = b.nt > 0 ? (long long)shapes_total(b.shape, b.nt)
                               : count_token(o.count_tokens[i], c.nodes);
        if (n < 0) {
            check_usage_error("count %s", o.count_tokens[i]);
        }
        b.count = (uint64_t)n;
        b.bucket = BUCKET + (uint32_t)i;
        if (!run_bucket(&c, &o, &b, i)) {
            break;
        }
    }
    coll_comm_destroy(c.comm);
    return 0;
}
