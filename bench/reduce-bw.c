/*
 * reduce-bw: single-core bandwidth of the host reduction kernels (kernels/cpu/reduce.h) on
 * every instruction set this CPU has, next to a memcpy measured in the same run.
 *
 *   reduce-bw [-s SIZE,SIZE,...] [-r reps] [-i isa] [-o OP]
 *
 * A SIZE is in MiB, or in KiB with a k suffix ("4k,1,64": 4 KiB, 1 MiB, 64 MiB). For each size
 * (bytes per source) and instruction set: the reduction OP (sum unless -o names another, as
 * coll_redop_name() spells it) of float32, float16, bfloat16 and int32 (of int32 alone for the
 * bitwise ones) over 2, 3 and 5 sources into a separate destination, plus float32 over 2
 * sources in place (dst = src[0], the classic a[i] += b[i]). Reported: the median over the repetitions
 * of (bytes read + bytes written) / time, in GB/s (1e9 bytes), and that as a fraction of
 * memcpy's (bytes read + bytes written) / time at the same size. memcpy's payload rate
 * (size / time, the unit nccl-tests and memcpy benchmarks quote) is printed too.
 * Every buffer is written before timing, so no page fault is timed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/reduce.h"

#define MAX_SIZES 16
#define MAX_NSRC 5

static const char *const isas[] = {"avx512", "avx2", "scalar"};
static const struct {
    coll_dtype_t dtype;
    const char *name;
    size_t esize;
} dtypes[] = {{COLL_FLOAT32, "float32", 4},
              {COLL_FLOAT16, "float16", 2},
              {COLL_BFLOAT16, "bfloat16", 2},
              {COLL_INT32, "int32", 4}};
static const unsigned nsrcs[] = {2, 3, 5};
static coll_redop_t g_op = COLL_SUM;

#define LEN(a) (sizeof(a) / sizeof((a)[0]))

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

/* Small, normal values in every format: 1.0 .. 1.99 in float32/16/bf16 bit patterns. */
static void fill(uint8_t *p, size_t bytes, unsigned seed)
{
    uint16_t *h = (uint16_t *)p;
    for (size_t i = 0; i < bytes / 2; i++) {
        h[i] = (uint16_t)(0x3c00 + ((i * 37 + seed * 101) & 0xff)); /* also fine as bf16 halves */
    }
}

/* Median seconds of one reduction over @p reps samples of @p inner reductions each (after one
 * untimed warm-up). */
static double time_reduce(const coll_reduce_args_t *a, int reps, int inner)
{
    double t[reps];
    coll_reduce(a);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        for (int k = 0; k < inner; k++) {
            coll_reduce(a);
        }
        t[r] = (now() - t0) / inner;
    }
    return median(t, reps);
}

/* "4K" or "64M": @p bytes for the table. */
static const char *size_name(size_t bytes, char *buf, size_t len)
{
    if (bytes < (1u << 20)) {
        snprintf(buf, len, "%zuK", bytes >> 10);
    } else {
        snprintf(buf, len, "%zuM", bytes >> 20);
    }
    return buf;
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

/* One row: the reduction of @p nsrc sources of @p bytes, out of place unless @p in_place. */
static void bench_one(const char *isa, int d, unsigned nsrc, int in_place, uint8_t **buf,
                      size_t bytes, int reps, double memcpy_gbs)
{
    const void *srcs[MAX_NSRC];
    size_t count = bytes / dtypes[d].esize;

    for (unsigned k = 0; k < nsrc; k++) {
        srcs[k] = buf[k];
    }
    coll_reduce_args_t a = {.dtype = dtypes[d].dtype, .op = g_op, .world_size = 1,
                            .dst = in_place ? buf[0] : buf[MAX_NSRC], .src = srcs,
                            .nsrc = nsrc, .raw_mask = ~0ull, .count = count};
    if (in_place) {
        fill(buf[0], bytes, 0); /* keep values from growing over repetitions */
    }
    double t = time_reduce(&a, reps, bytes < (1u << 20) ? (int)((1u << 20) / bytes) : 1);
    double gbs = (double)(nsrc + 1) * (double)bytes / t / 1e9;
    char what[16], sz[16];
    snprintf(what, sizeof(what), "%u%s", nsrc, in_place ? " in place" : "");
    printf("| %-6s | %-8s | %-10s | %5s | %6.2f | %8.2f |\n", isa, dtypes[d].name, what,
           size_name(bytes, sz, sizeof(sz)), gbs, gbs / memcpy_gbs);
    fflush(stdout);
}

static void bench_size(size_t bytes, int reps_arg, const char *only_isa)
{
    const size_t mib = bytes >> 20;
    char sz[16];
    /* Enough repetitions for a stable median, fewer for the big sizes. */
    const int reps = reps_arg > 0 ? reps_arg : mib <= 1 ? 101 : mib <= 16 ? 21 : mib <= 64 ? 9 : 5;
    uint8_t *buf[MAX_NSRC + 1];

    for (int k = 0; k <= MAX_NSRC; k++) {
        buf[k] = aligned_alloc(4096, bytes);
        if (buf[k] == NULL) {
            fprintf(stderr, "reduce-bw: out of memory for %s buffers\n",
                    size_name(bytes, sz, sizeof(sz)));
            exit(1);
        }
        fill(buf[k], bytes, (unsigned)k);
    }
    double tm = time_memcpy(buf[MAX_NSRC], buf[0], bytes, reps);
    double memcpy_gbs = 2.0 * (double)bytes / tm / 1e9;
    printf("| memcpy | -        | -          | %5s | %6.2f |     1.00 | payload %.2f GB/s\n",
           size_name(bytes, sz, sizeof(sz)), memcpy_gbs, (double)bytes / tm / 1e9);
    for (size_t i = 0; i < LEN(isas); i++) {
        if ((only_isa != NULL && strcmp(only_isa, isas[i]) != 0) ||
            coll_cpu_force_isa(isas[i]) != 0) {
            continue;
        }
        for (size_t d = 0; d < LEN(dtypes); d++) {
            for (size_t n = 0; n < LEN(nsrcs) && coll_reduce_op_fits(dtypes[d].dtype, g_op); n++) {
                bench_one(isas[i], (int)d, nsrcs[n], 0, buf, bytes, reps, memcpy_gbs);
            }
        }
        if (coll_reduce_op_fits(COLL_FLOAT32, g_op)) {
            bench_one(isas[i], 0, 2, 1, buf, bytes, reps, memcpy_gbs);
        }
    }
    for (int k = 0; k <= MAX_NSRC; k++) {
        free(buf[k]);
    }
}

/* The reduction named @p name into g_op; -1 when none is. */
static int parse_op(const char *name)
{
    for (int o = 0; o < COLL_REDOP_COUNT; o++) {
        if (strcmp(name, coll_redop_name((coll_redop_t)o)) == 0) {
            g_op = (coll_redop_t)o;
            return 0;
        }
    }
    return -1;
}

int main(int argc, char **argv)
{
    size_t sizes[MAX_SIZES] = {1u << 20, 16u << 20, 64u << 20, 256u << 20};
    int nsizes = 4, reps = 0, opt;
    const char *only_isa = NULL;

    while ((opt = getopt(argc, argv, "s:r:i:o:h")) != -1) {
        if (opt == 's') {
            nsizes = 0;
            char *tok = strtok(optarg, ",");
            for (; tok != NULL && nsizes < MAX_SIZES; tok = strtok(NULL, ",")) {
                char *unit;
                size_t n = strtoul(tok, &unit, 10);
                sizes[nsizes++] = *unit == 'k' || *unit == 'K' ? n << 10 : n << 20;
            }
        } else if (opt == 'r') {
            reps = atoi(optarg);
        } else if (opt == 'i') {
            only_isa = optarg;
        } else if (opt == 'o' && parse_op(optarg) == 0) {
            continue;
        } else {
            fprintf(stderr, "usage: %s [-s SIZE,...] [-r reps] [-i avx512|avx2|scalar] [-o OP] "
                    "(SIZE: MiB, or KiB with a k suffix; OP: sum, avg, prod, min, max, band, bor, "
                    "bxor)\n", argv[0]);
            return opt == 'h' ? 0 : 2;
        }
    }
    printf("reduce-bw: %s, default isa %s; GB/s = (bytes read + written) / median time, "
           "1 GB = 1e9 B\n\n", coll_redop_name(g_op), coll_cpu_isa());
    printf("| isa    | dtype    | nsrc       |  size |   GB/s | x memcpy |\n");
    printf("|--------|----------|------------|-------|--------|----------|\n");
    for (int s = 0; s < nsizes; s++) {
        bench_size(sizes[s], reps, only_isa);
    }
    return 0;
}
