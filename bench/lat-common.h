/*
 * What coll-lat.c (collectived) and mpi-lat.c (Open MPI) share, so that both measure and print
 * alike: the options, the sizes, the per-iteration samples and their percentiles.
 *
 * Each size: -w untimed operations, then up to -n timed ones back to back (fewer when they
 * would take longer than -T seconds, at least 10), each timed on every rank from just before
 * the submit to the return of its wait (CLOCK_MONOTONIC). The sample of an iteration is the
 * mean over the ranks of their times for it; p50, p90 and p99 are percentiles of those samples
 * (nearest rank), "mean" their mean. float32 sum allreduce, out of place (-I: in place).
 */
#ifndef COLL_BENCH_LAT_COMMON_H
#define COLL_BENCH_LAT_COMMON_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define LAT_MIN_ITERS 10

typedef struct {
    size_t minb, maxb;
    long factor;
    int iters, warmup;
    double budget_s;
    int phases; /* coll-lat only: the phase times of collectived's requests */
    int inplace; /* -I: in place, on the output buffer */
} lat_opts_t;

static inline double lat_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline size_t lat_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1048576.0; break;
    default: break;
    }
    return v > 0 ? (size_t)v : 0;
}

static inline void lat_usage(const char *prog)
{
    fprintf(stderr, "usage: %s [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-T SEC] "
                    "[-I]%s\n"
                    "  float32 sum allreduce latency, p50/p90/p99 per size (defaults: 8 B .. "
                    "1 MiB, x2, 2000 iterations, 50 warmup, 2 s per size); -I in place\n",
            prog, strcmp(prog, "coll-lat") == 0 ? " [-p]\n  -p  also the phases of one "
                                                  "operation (coll_req_timing())" : "");
}

/* Returns 0, or 2 after printing the usage. */
static inline int lat_parse(int argc, char **argv, const char *prog, lat_opts_t *o)
{
    int c;
    *o = (lat_opts_t){.minb = 8, .maxb = 1u << 20, .factor = 2, .iters = 2000, .warmup = 50,
                      .budget_s = 2.0};
    while ((c = getopt(argc, argv, "b:e:f:n:w:T:pIh")) != -1) {
        switch (c) {
        case 'b': o->minb = lat_parse_size(optarg); break;
        case 'e': o->maxb = lat_parse_size(optarg); break;
        case 'f': o->factor = strtol(optarg, NULL, 10); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'T': o->budget_s = atof(optarg); break;
        case 'p': o->phases = 1; break;
        case 'I': o->inplace = 1; break;
        default: lat_usage(prog); return 2;
        }
    }
    if (o->minb < 4 || o->maxb < o->minb || o->factor < 2 || o->iters < LAT_MIN_ITERS ||
        o->warmup < 0 || o->budget_s <= 0) {
        lat_usage(prog);
        return 2;
    }
    return 0;
}

/* Iterations for a size whose one operation took @p one_s. */
static inline int lat_iters(const lat_opts_t *o, double one_s)
{
    double n = one_s > 0 ? o->budget_s / one_s : o->iters;
    return n >= o->iters ? o->iters : n < LAT_MIN_ITERS ? LAT_MIN_ITERS : (int)n;
}

static int lat_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Percentile @p p (0..100) of the sorted @p v[0..n), nearest rank. */
static inline double lat_pct(const double *v, int n, double p)
{
    int k = (int)(p / 100.0 * n + 0.999999) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* The table's header. */
static inline void lat_header(const char *lib, int world, int nodes, int phases, int inplace)
{
    printf("# %s: allreduce float32 sum, %s, %d ranks (%d nodes x %d)\n", lib,
           inplace ? "in place" : "out of place", world, nodes, world / nodes);
    printf("# per iteration: the mean over ranks of submit-to-wait-return; percentiles over "
           "iterations, microseconds\n");
    printf("#%11s %7s %9s %9s %9s %9s %8s%s\n", "size(B)", "iters", "p50", "p90", "p99", "mean",
           "algo", phases ? "  phases: arrive  peers  reduce  notify (medians, us)" : "");
}

/* One line from the per-iteration samples @p s (sorted here). */
static inline void lat_line(size_t bytes, double *s, int n, const char *algo)
{
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += s[i];
    }
    qsort(s, (size_t)n, sizeof(*s), lat_cmp);
    printf("%12zu %7d %9.2f %9.2f %9.2f %9.2f %8s", bytes, n, lat_pct(s, n, 50) * 1e6,
           lat_pct(s, n, 90) * 1e6, lat_pct(s, n, 99) * 1e6, sum / n * 1e6, algo);
}

#endif
