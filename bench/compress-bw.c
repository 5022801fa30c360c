/*
 * compress-bw: single-core throughput of the gradient compression kernels (kernels/cpu/compress.h)
 * on every instruction set this CPU has, next to a memcpy measured in the same run.
 *
 *   compress-bw [-s MiB,MiB,...] [-r reps] [-i isa] [-p] [-t]
 *
 * Per size (MiB of float32 gradient): the 16-bit casts with error feedback and their float32
 * accumulate, 1-bit encode with error feedback and accumulate, TopK with error feedback at ratios
 * 0.01 and 0.001 by radix select, by sampled threshold and as AUTO chooses (with the passes over
 * the data each took), and TopK's sparse accumulate. Then PowerSGD rank 2 on 1024 x 1024 and
 * 4096 x 1024 matrices: each product, the orthonormalization and a whole step, ours next to
 * OpenBLAS cblas_sgemm on one thread (when built with it). -p runs only PowerSGD. -t runs only
 * the TopK crossover behind COLL_TOPK_SELECT_AUTO: radix against sampled from 2K to 1M elements
 * at ratios 0.1 to 0.001 (best of many runs from the same residual, microseconds).
 *
 * Reported: GB/s of input = count * 4 bytes of float32 gradient / median time (1 GB = 1e9 B),
 * whatever the kernel reads and writes besides; memcpy's payload rate (size / time) for scale.
 * The residual keeps evolving over the repetitions, as in training. Every buffer is written
 * before timing, so no page fault is timed.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/cast.h"
#include "kernels/compress.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/lowrank.h"
#include "kernels/cpu/onebit.h"
#include "kernels/cpu/topk.h"

#if defined(COLL_BENCH_CBLAS)
#include <cblas.h>
#endif

#define MAX_SIZES 16
#define LEN(a) (sizeof(a) / sizeof((a)[0]))

static const char *const isas[] = {"avx512", "avx2", "scalar"};

/* Everything one size needs; n float32 elements. */
typedef struct {
    size_t n;
    float *g, *e, *acc, *val;
    uint16_t *h;
    uint8_t *bits;
    uint32_t *idx;
    void *scratch;
    size_t scratch_bytes;
    coll_topk_info_t info;
} bufs_t;

typedef struct {
    const char *name;
    void (*run)(bufs_t *b, const void *arg);
    const void *arg;
} kernel_t;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median seconds of @p reps calls of @p f (after one untimed warm-up). */
static double time_median(void (*f)(void *), void *arg, int reps)
{
    double t[reps];
    f(arg);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        f(arg);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof(*t), cmp_double);
    return reps % 2 ? t[reps / 2] : (t[reps / 2 - 1] + t[reps / 2]) / 2;
}

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
    if (p == NULL) {
        fprintf(stderr, "compress-bw: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    memset(p, 0, bytes);
    return p;
}

/* Gradient-like values: a bell curve times scales spread over a few binades. */
static void fill(float *x, size_t n, double scale, uint64_t seed)
{
    uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < n; i++) {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        uint64_t z = s * 0x2545f4914f6cdd1dull;
        double u = ((double)(z & 0xffff) + (double)((z >> 16) & 0xffff) +
                    (double)((z >> 32) & 0xffff) - 98302.5) / 37837.0;
        x[i] = (float)(u * scale * ldexp(1.0, (int)((z >> 48) % 7) - 3));
    }
}

/* ---- Dense kernels ---- */

static void run_cast(bufs_t *b, const void *arg)
{
    int32_t p;
    coll_cast_encode(*(const coll_cast_format_t *)arg, b->g, b->e, b->n, b->h, &p);
}

static void run_cast_acc(bufs_t *b, const void *arg)
{
    coll_cast_accumulate(COLL_CAST_FP16, b->h, b->n, -3, 0.25f, b->acc);
}

static void run_onebit(bufs_t *b, const void *arg)
{
    float s;
    coll_onebit_encode(COLL_ONEBIT_SCALE_L2, b->g, b->e, b->n, b->bits, &s);
}

static void run_onebit_acc(bufs_t *b, const void *arg)
{
    coll_onebit_accumulate(b->bits, b->n, 0.01f, 0.25f, b->acc);
}

/* ---- TopK ---- */

typedef struct {
    double ratio;
    coll_topk_select_t select;
} topk_arg_t;

static void run_topk(bufs_t *b, const void *arg)
{
    const topk_arg_t *t = arg;
    coll_topk_args_t a = {.grad = b->g, .residual = b->e, .count = b->n,
                          .k = coll_topk_k(b->n, t->ratio), .select = t->select,
                          .scratch = b->scratch, .scratch_bytes = b->scratch_bytes,
                          .indices = b->idx, .values = b->val, .info = &b->info};
    coll_topk_compress(&a);
}

static void run_topk_acc(bufs_t *b, const void *arg)
{
    /* The set the last run_topk() left (ratio 0.01), summed into a dense buffer. */
    coll_topk_accumulate(b->idx, b->val, coll_topk_k(b->n, 0.01), 0.25f, b->acc, b->n);
}

static const coll_cast_format_t fp16 = COLL_CAST_FP16, bf16 = COLL_CAST_BF16;
static const topk_arg_t topk_args[] = {
    {0.01, COLL_TOPK_SELECT_RADIX},  {0.01, COLL_TOPK_SELECT_SAMPLED},
    {0.01, COLL_TOPK_SELECT_AUTO},   {0.001, COLL_TOPK_SELECT_RADIX},
    {0.001, COLL_TOPK_SELECT_SAMPLED}, {0.001, COLL_TOPK_SELECT_AUTO},
};
static const char *const select_names[] = {"auto", "radix", "sampled"};

static const kernel_t kernels[] = {
    {"fp16 encode + EF", run_cast, &fp16},
    {"bf16 encode + EF", run_cast, &bf16},
    {"fp16 accumulate", run_cast_acc, NULL},
    {"1-bit encode + EF", run_onebit, NULL},
    {"1-bit accumulate", run_onebit_acc, NULL},
    {"topk", run_topk, &topk_args[0]},
    {"topk", run_topk, &topk_args[1]},
    {"topk", run_topk, &topk_args[2]},
    {"topk 1% accumulate", run_topk_acc, NULL},
    {"topk", run_topk, &topk_args[3]},
    {"topk", run_topk, &topk_args[4]},
    {"topk", run_topk, &topk_args[5]},
};

typedef struct {
    const kernel_t *k;
    bufs_t *b;
} call_t;

static void call_kernel(void *arg)
{
    call_t *c = arg;
    c->k->run(c->b, c->k->arg);
}

static void bench_kernel(const char *isa, const kernel_t *k, bufs_t *b, int reps)
{
    call_t c = {k, b};
    char name[64], note[64] = "";

    double t = time_median(call_kernel, &c, reps);
    if (k->run == run_topk) {
        const topk_arg_t *ta = k->arg;
        snprintf(name, sizeof(name), "topk %g%% %s + EF", ta->ratio * 100,
                 select_names[ta->select]);
        snprintf(note, sizeof(note), "%s, %u pass%s, %zu candidates",
                 select_names[b->info.method], b->info.passes, b->info.passes > 1 ? "es" : "",
                 b->info.candidates);
    } else {
        snprintf(name, sizeof(name), "%s", k->name);
    }
    printf("| %-24s | %-6s | %4zu | %7.2f | %8.3f | %s\n", name, isa, b->n * 4 >> 20,
           (double)b->n * 4 / t / 1e9, t * 1e3, note);
    fflush(stdout);
}

static void memcpy_call(void *arg)
{
    bufs_t *b = arg;
    memcpy(b->acc, b->g, b->n * 4);
    __asm__ volatile("" ::: "memory");
}

static void bench_size(size_t mib, int reps_arg, const char *only_isa)
{
    const int reps = reps_arg > 0 ? reps_arg : mib <= 1 ? 51 : mib <= 16 ? 11 : 5;
    bufs_t b = {.n = (mib << 20) / 4};

    b.g = xalloc(b.n * 4), b.e = xalloc(b.n * 4), b.acc = xalloc(b.n * 4);
    b.val = xalloc(b.n * 4), b.idx = xalloc(b.n * 4), b.h = xalloc(b.n * 2);
    b.bits = xalloc(b.n / 8 + 1);
    b.scratch_bytes = coll_topk_scratch_bytes(b.n, coll_topk_k(b.n, 0.001));
    size_t sb1 = coll_topk_scratch_bytes(b.n, coll_topk_k(b.n, 0.01));
    b.scratch_bytes = sb1 > b.scratch_bytes ? sb1 : b.scratch_bytes;
    b.scratch = xalloc(b.scratch_bytes);
    fill(b.g, b.n, 1e-3, 1);
    fill(b.e, b.n, 1e-4, 2);
    double tm = time_median(memcpy_call, &b, reps);
    printf("| %-24s | %-6s | %4zu | %7.2f | %8.3f | payload rate\n", "memcpy", "-", mib,
           (double)b.n * 4 / tm / 1e9, tm * 1e3);
    for (size_t i = 0; i < LEN(isas); i++) {
        if ((only_isa && strcmp(only_isa, isas[i]) != 0) || coll_cpu_force_isa(isas[i])) {
            continue;
        }
        for (size_t k = 0; k < LEN(kernels); k++) {
            bench_kernel(isas[i], &kernels[k], &b, reps);
        }
    }
    free(b.g), free(b.e), free(b.acc), free(b.val), free(b.idx), free(b.h), free(b.bits);
    free(b.scratch);
}

/* ---- TopK crossover (-t) ---- */

/* Best time in seconds of @p reps compressions of b (n elements) with @p sel, each from the
 * same residual (b->acc, copied into b->e untimed), so that both methods see the same input. */
static double topk_best(bufs_t *b, size_t k, coll_topk_select_t sel, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        memcpy(b->e, b->acc, b->n * 4);
        coll_topk_args_t a = {.grad = b->g, .residual = b->e, .count = b->n, .k = k,
                              .select = sel, .scratch = b->scratch,
                              .scratch_bytes = b->scratch_bytes, .indices = b->idx,
                              .values = b->val, .info = &b->info};
        double t0 = now();
        coll_topk_compress(&a);
        double t = now() - t0;
        best = t < best ? t : best;
    }
    return best;
}

static void bench_topk_crossover(int reps_arg)
{
    static const size_t counts[] = {2048, 8192, 16384, 65536, 262144, 1048576};
    static const double ratios[] = {0.1, 0.03, 0.01, 0.001};
    const size_t nmax = counts[LEN(counts) - 1];
    bufs_t b = {.g = xalloc(nmax * 4), .e = xalloc(nmax * 4), .acc = xalloc(nmax * 4),
                .val = xalloc(nmax * 4), .idx = xalloc(nmax * 4), .scratch = xalloc(8 * nmax)};

    printf("| count   | ratio |      k | radix us | sampled us | radix/sampled | auto    |\n");
    printf("|---------|-------|--------|----------|------------|---------------|---------|\n");
    for (size_t c = 0; c < LEN(counts); c++) {
        for (size_t r = 0; r < LEN(ratios); r++) {
            b.n = counts[c];
            const size_t k = coll_topk_k(b.n, ratios[r]);
            const int reps = reps_arg > 0 ? reps_arg : (int)(3e7 / (double)b.n) + 5;
            b.scratch_bytes = coll_topk_scratch_bytes(b.n, k);
            fill(b.g, b.n, 1e-3, c * 10 + r);
            fill(b.acc, b.n, 1e-4, c * 10 + r + 5);
            double tr = topk_best(&b, k, COLL_TOPK_SELECT_RADIX, reps);
            double ts = topk_best(&b, k, COLL_TOPK_SELECT_SAMPLED, reps);
            topk_best(&b, k, COLL_TOPK_SELECT_AUTO, 1);
            printf("| %7zu | %5.3f | %6zu | %8.1f | %10.1f | %13.2f | %-7s |\n", b.n, ratios[r], k,
                   tr * 1e6, ts * 1e6, tr / ts, select_names[b.info.method]);
        }
    }
    free(b.g), free(b.e), free(b.acc), free(b.val), free(b.idx), free(b.scratch);
}

/* ---- PowerSGD ---- */

typedef struct {
    size_t rows, cols;
    unsigned r;
    float *g, *e, *p, *q, *approx;
    int which;
} lr_t;

enum { LR_MUL_Q, LR_EF_MUL_Q, LR_MUL_MT, LR_RESIDUAL, LR_RESIDUAL_APPROX, LR_ORTHO, LR_STEP,
       BLAS_MUL_Q, BLAS_MUL_MT, BLAS_RESIDUAL, BLAS_STEP, LR_NCASES };
static const char *const lr_names[LR_NCASES] = {
    "P = M Q", "M = g + e, P = M Q", "Q = M^T P", "E = M - P Q^T", "E, and A = P Q^T",
    "orthonormalize P", "whole step", "P = M Q", "Q = M^T P", "E = M - P Q^T", "whole step"};

static void lr_call(void *arg)
{
    lr_t *l = arg;
    const size_t n = l->rows, m = l->cols;

    switch (l->which) {
    case LR_MUL_Q: coll_lowrank_mul_q(l->e, n, m, l->q, l->r, l->p); break;
    case LR_EF_MUL_Q: coll_lowrank_ef_mul_q(l->g, l->e, n, m, l->q, l->r, l->p); break;
    case LR_MUL_MT: coll_lowrank_mul_mt(l->e, n, m, l->p, l->r, l->q); break;
    case LR_RESIDUAL: coll_lowrank_residual(l->p, l->q, n, m, l->r, l->e, NULL); break;
    case LR_RESIDUAL_APPROX:
        coll_lowrank_residual(l->p, l->q, n, m, l->r, l->e, l->approx);
        break;
    case LR_ORTHO: coll_lowrank_orthonormalize(l->p, n, l->r, 1e-8f); break;
    case LR_STEP:
        coll_lowrank_orthonormalize(l->q, m, l->r, 1e-8f);
        coll_lowrank_ef_mul_q(l->g, l->e, n, m, l->q, l->r, l->p);
        coll_lowrank_orthonormalize(l->p, n, l->r, 1e-8f);
        coll_lowrank_mul_mt(l->e, n, m, l->p, l->r, l->q);
        coll_lowrank_residual(l->p, l->q, n, m, l->r, l->e, l->approx);
        break;
#if defined(COLL_BENCH_CBLAS)
    /* P^T (r x n) = Q^T (r x m) M^T; Q^T = P^T M; E -= P Q^T, with the same column-major
     * factors as ours (P^T, Q^T row-major). */
    case BLAS_MUL_Q:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)l->r, (int)n, (int)m, 1.0f,
                    l->q, (int)m, l->e, (int)m, 0.0f, l->p, (int)n);
        break;
    case BLAS_MUL_MT:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)l->r, (int)m, (int)n, 1.0f,
                    l->p, (int)n, l->e, (int)m, 0.0f, l->q, (int)m);
        break;
    case BLAS_RESIDUAL:
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)m, (int)l->r, -1.0f,
                    l->p, (int)n, l->q, (int)m, 1.0f, l->e, (int)m);
        break;
    case BLAS_STEP:
        coll_lowrank_orthonormalize(l->q, m, l->r, 1e-8f);
        for (size_t i = 0; i < n * m; i++) {
            l->e[i] += l->g[i];
        }
        l->which = BLAS_MUL_Q, lr_call(l);
        coll_lowrank_orthonormalize(l->p, n, l->r, 1e-8f);
        l->which = BLAS_MUL_MT, lr_call(l);
        l->which = BLAS_RESIDUAL, lr_call(l);
        l->which = BLAS_STEP;
        break;
#endif
    default: break;
    }
}

/* Our kernels on @p isa; OpenBLAS's too when @p blas (once: it does not depend on the set). */
static void bench_lowrank(size_t rows, size_t cols, unsigned r, const char *isa, int blas_too,
                          int reps)
{
    lr_t l = {.rows = rows, .cols = cols, .r = r};

    l.g = xalloc(rows * cols * 4), l.e = xalloc(rows * cols * 4);
    l.approx = xalloc(rows * cols * 4), l.p = xalloc(rows * r * 4), l.q = xalloc(cols * r * 4);
    fill(l.g, rows * cols, 1e-3, 3);
    coll_lowrank_init_q(l.q, cols, r, 1);
    coll_lowrank_orthonormalize(l.q, cols, r, 1e-8f);
    for (int w = 0; w < LR_NCASES; w++) {
        int blas = w >= BLAS_MUL_Q;
#if !defined(COLL_BENCH_CBLAS)
        blas_too = 0;
#endif
        if (blas && !blas_too) {
            continue;
        }
        memset(l.e, 0, rows * cols * 4);
        l.which = w;
        double t = time_median(lr_call, &l, reps);
        printf("| %-8s %-20s | %4zu x %4zu | %-6s | %7.2f | %8.3f |\n", blas ? "cblas" : "ours",
               lr_names[w], rows, cols, blas ? "-" : isa, (double)rows * cols * 4 / t / 1e9,
               t * 1e3);
        fflush(stdout);
    }
    free(l.g), free(l.e), free(l.approx), free(l.p), free(l.q);
}

static void bench_lowrank_all(int reps_arg, const char *only_isa)
{
    static const size_t shapes[][2] = {{1024, 1024}, {4096, 1024}};
#if defined(COLL_BENCH_CBLAS)
    openblas_set_num_threads(1);
#endif
    printf("\nPowerSGD rank 2, GB/s of M (n * m * 4 bytes) / median time; cblas: OpenBLAS "
           "sgemm on one thread for the products, our Gram-Schmidt in its whole step\n\n");
    printf("| kernel                        | shape       | isa    |    GB/s |       ms |\n");
    printf("|-------------------------------|-------------|--------|---------|----------|\n");
    int blas_too = 1;
    for (size_t i = 0; i < LEN(isas); i++) {
        if ((only_isa && strcmp(only_isa, isas[i]) != 0) || coll_cpu_force_isa(isas[i])) {
            continue;
        }
        for (size_t s = 0; s < LEN(shapes); s++) {
            bench_lowrank(shapes[s][0], shapes[s][1], 2, isas[i], blas_too,
                          reps_arg > 0 ? reps_arg : 11);
        }
        blas_too = 0;
    }
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {1, 16, 64};
    int nsizes = 3, reps = 0, opt, only_lowrank = 0, only_topk = 0;
    const char *only_isa = NULL;

    while ((opt = getopt(argc, argv, "s:r:i:pth")) != -1) {
        if (opt == 's') {
            nsizes = 0;
            for (char *t = strtok(optarg, ","); t && nsizes < MAX_SIZES; t = strtok(NULL, ",")) {
                sizes[nsizes++] = strtoul(t, NULL, 10);
            }
        } else if (opt == 'r') {
            reps = atoi(optarg);
        } else if (opt == 'i') {
            only_isa = optarg;
        } else if (opt == 'p') {
            only_lowrank = 1;
        } else if (opt == 't') {
            only_topk = 1;
        } else {
            fprintf(stderr, "usage: %s [-s MiB,...] [-r reps] [-i avx512|avx2|scalar] [-p] [-t]\n",
                    argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    if (only_isa != NULL && coll_cpu_force_isa(only_isa) != 0) {
        fprintf(stderr, "compress-bw: instruction set %s not available\n", only_isa);
        return 2;
    }
    printf("compress-bw: isa %s; GB/s = float32 input bytes / median time, 1 GB = 1e9 B\n\n",
           coll_cpu_isa());
    if (only_topk) {
        bench_topk_crossover(reps);
        return 0;
    }
    if (!only_lowrank) {
        printf("| kernel                   | isa    |  MiB |    GB/s |       ms | note\n");
        printf("|--------------------------|--------|------|---------|----------|-----\n");
        for (int s = 0; s < nsizes; s++) {
            bench_size(sizes[s], reps, only_isa);
        }
    }
    bench_lowrank_all(reps, only_isa);
    return 0;
}
