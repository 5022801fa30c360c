/*
 * optim-bw: single-core throughput of the optimizer kernels (kernels/cpu/optim.h) on every
 * instruction set this CPU has, next to a memcpy measured in the same run. Prints numbers; not
 * a test.
 *
 *   optim-bw [-s MiB,MiB,...] [-r reps] [-i isa]
 *
 * For each size (MiB of fp32 parameters; default 1 and 64) and instruction set, one whole step
 * of each optimizer on one layer, as a daemon would run it on its shard:
 *   sgd    coll_optim_sgd_update, momentum 0.9, weight decay (step > 1: buf read and written)
 *   adamw  coll_optim_adamw_update
 *   lars   coll_optim_sumsq2 (phase 1) + coll_optim_lars_update (phase 2)
 *   lamb   coll_optim_lamb_moments (phase 1) + coll_optim_lamb_apply (phase 2), clipping on
 * Reported: parameters updated per second as GB/s of fp32 parameters (4 bytes per parameter,
 * 1 GB = 1e9 B), the memory traffic that implies (every array read and written, per phase),
 * and that as a fraction of memcpy's (bytes read + written) / time at the same size. The median
 * over the repetitions; every buffer is written before timing, so no page fault is timed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/optim.h"

#define MAX_SIZES 16

static const char *const isas[] = {"avx512", "avx2", "scalar"};
#define NISAS (sizeof(isas) / sizeof(isas[0]))

/* One layer: weights, gradients and two state arrays. */
typedef struct {
    float *w, *g, *s1, *s2;
    size_t n;
} layer_t;

typedef void (*step_fn)(layer_t *l, uint64_t t);

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

static double median(double *t, int n)
{
    qsort(t, (size_t)n, sizeof(*t), cmp_double);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static void step_sgd(layer_t *l, uint64_t t)
{
    const coll_optim_sgd_params_t p = {.momentum = 0.9, .weight_decay = 1e-4};
    const coll_optim_step_t st = {.lr = 1e-3, .step = t + 1};
    coll_optim_sgd_update(&p, &st, l->w, l->g, l->s1, l->n);
}

static void step_adamw(layer_t *l, uint64_t t)
{
    coll_optim_adamw_params_t p;
    coll_optim_adamw_params_init(&p);
    const coll_optim_step_t st = {.lr = 1e-4, .step = t + 1};
    coll_optim_adamw_update(&p, &st, l->w, l->g, l->s1, l->s2, l->n);
}

static void step_lars(layer_t *l, uint64_t t)
{
    coll_optim_lars_params_t p;
    double sums[2];
    coll_optim_lars_params_init(&p);
    const coll_optim_step_t st = {.lr = 1e-2, .step = t + 1};
    coll_optim_sumsq2(l->w, l->g, l->n, sums);
    const coll_optim_layer_t layer = {.w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lars_update(&p, &st, &layer, l->w, l->g, l->s1, l->n);
}

static void step_lamb(layer_t *l, uint64_t t)
{
    coll_optim_lamb_params_t p;
    double sums[2];
    coll_optim_lamb_params_init(&p);
    p.max_grad_norm = 1.0;
    const coll_optim_step_t st = {.lr = 1e-4, .step = t + 1, .grad_sumsq = 4.0};
    coll_optim_lamb_moments(&p, &st, 0, l->w, l->g, l->s1, l->s2, l->n, sums);
    const coll_optim_layer_t layer = {.w_sumsq = sums[0], .u_sumsq = sums[1]};
    coll_optim_lamb_apply(&p, &st, &layer, l->w, l->s1, l->s2, l->n);
}

static const struct {
    const char *name;
    step_fn fn;
    unsigned bytes_per_param; /* read + written over all phases */
} optimizers[] = {
    {"sgd", step_sgd, 5 * 4},    /* w g buf in; w buf out */
    {"adamw", step_adamw, 7 * 4}, /* w g m v in; w m v out */
    {"lars", step_lars, 7 * 4},  /* w g; then w g v in, w v out */
    {"lamb", step_lamb, 10 * 4}, /* w g m v in, m v out; then w m v in, w out */
};
#define NOPT (sizeof(optimizers) / sizeof(optimizers[0]))

/* Median seconds of @p reps steps (after one untimed warm-up). */
static double time_steps(step_fn fn, layer_t *l, int reps)
{
    double t[reps];
    fn(l, 0);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        fn(l, (uint64_t)r + 1);
        t[r] = now() - t0;
    }
    return median(t, reps);
}

static double time_memcpy(void *dst, const void *src, size_t bytes, int reps)
{
    double t[reps];
    memcpy(dst, src, bytes);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        memcpy(dst, src, bytes);
        t[r] = now() - t0;
        __asm__ volatile("" ::: "memory"); /* keep every copy */
    }
    return median(t, reps);
}

static float *alloc_filled(size_t n, float base)
{
    float *p = aligned_alloc(4096, n * sizeof(float));
    if (p == NULL) {
        fprintf(stderr, "optim-bw: out of memory for %zu parameters\n", n);
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        p[i] = base * (float)(1 + (i * 37) % 101) / 101.0f;
    }
    return p;
}

static void bench_size(size_t mib, int reps_arg, const char *only_isa)
{
    const int reps = reps_arg > 0 ? reps_arg : mib <= 1 ? 101 : mib <= 16 ? 21 : 9;
    layer_t l = {.n = (mib << 20) / sizeof(float)};

    l.w = alloc_filled(l.n, 0.5f), l.g = alloc_filled(l.n, 0.01f);
    l.s1 = alloc_filled(l.n, 0.0f), l.s2 = alloc_filled(l.n, 1e-4f);
    const double tm = time_memcpy(l.s2, l.w, mib << 20, reps);
    const double memcpy_gbs = 2.0 * (double)(mib << 20) / tm / 1e9;
    printf("| memcpy  | -       | %4zu |           - | %8.2f |     1.00 |\n", mib, memcpy_gbs);
    for (size_t i = 0; i < NISAS; i++) {
        if ((only_isa != NULL && strcmp(only_isa, isas[i]) != 0) ||
            coll_cpu_force_isa(isas[i]) != 0) {
            continue;
        }
        for (size_t o = 0; o < NOPT; o++) {
            memset(l.s1, 0, l.n * sizeof(float));
            memset(l.s2, 0, l.n * sizeof(float));
            double t = time_steps(optimizers[o].fn, &l, reps);
            double params_gbs = (double)l.n * sizeof(float) / t / 1e9;
            double mem_gbs = (double)l.n * optimizers[o].bytes_per_param / t / 1e9;
            printf("| %-7s | %-7s | %4zu | %11.2f | %8.2f | %8.2f |\n", isas[i],
                   optimizers[o].name, mib, params_gbs, mem_gbs, mem_gbs / memcpy_gbs);
            fflush(stdout);
        }
    }
    free(l.w), free(l.g), free(l.s1), free(l.s2);
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {1, 64};
    int nsizes = 2, reps = 0, opt;
    const char *only_isa = NULL;

    while ((opt = getopt(argc, argv, "s:r:i:h")) != -1) {
        if (opt == 's') {
            nsizes = 0;
            char *tok = strtok(optarg, ",");
            for (; tok != NULL && nsizes < MAX_SIZES; tok = strtok(NULL, ",")) {
                sizes[nsizes++] = strtoul(tok, NULL, 10);
            }
        } else if (opt == 'r') {
            reps = atoi(optarg);
        } else if (opt == 'i') {
            only_isa = optarg;
        } else {
            fprintf(stderr, "usage: %s [-s MiB,MiB,...] [-r reps] [-i avx512|avx2|scalar]\n",
                    argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    printf("optim-bw: default isa %s; one core; params GB/s = 4 B x parameters updated / s; "
           "memory GB/s = bytes read + written / s; 1 GB = 1e9 B\n\n", coll_cpu_isa());
    printf("| isa     | optim   |  MiB | params GB/s | mem GB/s | x memcpy |\n");
    printf("|---------|---------|------|-------------|----------|----------|\n");
    for (int s = 0; s < nsizes; s++) {
        bench_size(sizes[s], reps, only_isa);
    }
    return 0;
}
