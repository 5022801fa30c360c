/*
 * mpi-allreduce: the coll-perf allreduce sweep for MPI_Allreduce, so that compare.sh measures
 * Open MPI with the same sizes, timing rules and output columns as collectived. Not built by
 * CMake (MPI is optional); compare.sh builds it:
 *
 *   mpicc -O2 -o mpi-allreduce bench/mpi-allreduce.c
 *   mpirun --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo -np 4 ./mpi-allreduce
 *
 * float32 MPI_SUM, out of place (-I: in place, MPI_IN_PLACE, as torch gloo always is), on
 * MPI_COMM_WORLD. For each size: -w warmup operations; one
 * operation timed to choose the iteration count (at most -n, fewer when -n of them would take
 * longer than -T seconds, never fewer than 3); MPI_Barrier; the batch back to back; per-rank
 * times (CLOCK_MONOTONIC) gathered to rank 0. With -c 1 one more operation on fresh data,
 * compared element by element with sums computed here (small integers: exact in float32).
 * time = per-op time averaged over ranks (max shown too), algbw = size/time, busbw =
 * algbw * 2(n-1)/n, GB = 1e9 bytes: the conventions of coll-perf and nccl-tests.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIN_ITERS 3
#define CLASSES 13

typedef struct {
    size_t minb, maxb;
    long factor;
    int iters, warmup, check, inplace;
    double budget_s;
} opts_t;

/* -I: every operation in place, on the output buffer. */
static int g_inplace;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1048576.0; break;
    case 'g': case 'G': v *= 1073741824.0; break;
    default: break;
    }
    return v > 0 ? (size_t)v : 0;
}

static int parse_options(int argc, char **argv, opts_t *o)
{
    int c;
    *o = (opts_t){.minb = 4096, .maxb = 64u << 20, .factor = 4, .iters = 100, .warmup = 5,
                  .check = 1, .budget_s = 5.0};
    while ((c = getopt(argc, argv, "b:e:f:n:w:T:c:Ih")) != -1) {
        switch (c) {
        case 'b': o->minb = parse_size(optarg); break;
        case 'e': o->maxb = parse_size(optarg); break;
        case 'f': o->factor = atol(optarg); break;
        case 'n': o->iters = atoi(optarg); break;
        case 'w': o->warmup = atoi(optarg); break;
        case 'T': o->budget_s = atof(optarg); break;
        case 'c': o->check = atoi(optarg); break;
        case 'I': o->inplace = 1; break;
        default: return -1;
        }
    }
    if (o->minb < sizeof(float) || o->maxb < o->minb || o->factor < 2 || o->iters < 1 ||
        o->warmup < 0 || o->budget_s <= 0) {
        return -1;
    }
    return 0;
}

/* Rank r's element i for check number @p seed: (r + 1) * (class + 1), class from a hash of i. */
static float input_value(int r, size_t i, uint64_t seed)
{
    uint64_t x = (i ^ (seed * 0x9e3779b97f4a7c15ull)) * 0xbf58476d1ce4e5b9ull;
    return (float)((r + 1) * (int)((x >> 40) % CLASSES + 1));
}

static void fill(float *p, size_t count, int rank, uint64_t seed)
{
    for (size_t i = 0; i < count; i++) {
        p[i] = input_value(rank, i, seed);
    }
}

/* sum over r of (r + 1) * (class + 1) = n(n+1)/2 * (class + 1). */
static long count_wrong(const float *p, size_t count, int nranks, uint64_t seed)
{
    long wrong = 0;
    float scale = (float)(nranks * (nranks + 1) / 2);
    for (size_t i = 0; i < count; i++) {
        if (p[i] != scale * input_value(0, i, seed)) {
            wrong++;
        }
    }
    return wrong;
}

static void allreduce(float *s, float *r, size_t count)
{
    MPI_Allreduce(g_inplace ? MPI_IN_PLACE : s, r, (int)count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
}

/* Per-op seconds of this rank, after choosing the batch size *iters_p. */
static double time_size(const opts_t *o, float *s, float *r, size_t count, int *iters_p)
{
    double t0, one, onemax;
    int n = o->iters;

    for (int w = 0; w < o->warmup; w++) {
        allreduce(s, r, count);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    allreduce(s, r, count);
    one = now_s() - t0;
    MPI_Allreduce(&one, &onemax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (onemax > 0 && onemax * n > o->budget_s) {
        n = (int)(o->budget_s / onemax);
    }
    n = n < MIN_ITERS ? MIN_ITERS : n;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        allreduce(s, r, count);
    }
    *iters_p = n;
    return (now_s() - t0) / n;
}

static long check_size(float *s, float *r, size_t count, int rank, int nranks, uint64_t seed)
{
    long wrong, total = 0;
    if (g_inplace) {
        fill(r, count, rank, seed);
    } else {
        fill(s, count, rank, seed);
        memset(r, 0x7f, count * sizeof(float));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    allreduce(s, r, count);
    wrong = count_wrong(r, count, nranks, seed);
    MPI_Allreduce(&wrong, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    return total;
}

static void print_header(const opts_t *o, int nranks)
{
    char ver[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len;
    MPI_Get_library_version(ver, &len);
    ver[strcspn(ver, "\n")] = '\0';
    printf("# mpi-allreduce: MPI_Allreduce, %d ranks, float32 sum, %s; %s\n", nranks,
           o->inplace ? "in place" : "out of place", ver);
    printf("# sizes %zu..%zu B x%ld, warmup %d, iters <= %d, budget %g s per size (at least %d "
           "iters), check %s\n", o->minb, o->maxb, o->factor, o->warmup, o->iters, o->budget_s,
           MIN_ITERS, o->check ? "on" : "off");
    printf("# time: per-op wall time averaged over ranks (max over ranks also shown); "
           "algbw = size/time; busbw = algbw * 2(n-1)/n, n = %d; GB = 1e9 B\n", nranks);
    printf("#%13s %12s %9s %6s %5s %6s %12s %12s %11s %11s %10s %7s\n", "size(B)", "count",
           "type", "redop", "root", "iters", "time(us)", "maxtime(us)", "algbw(GB/s)",
           "busbw(GB/s)", "algo", "#wrong");
    fflush(stdout);
}

static void print_row(size_t bytes, int n, const double *t, int nranks, long wrong, int check)
{
    double sum = 0, max = 0, avg, algbw;
    char w[24] = "N/A";
    for (int r = 0; r < nranks; r++) {
        sum += t[r];
        max = t[r] > max ? t[r] : max;
    }
    avg = sum / nranks;
    algbw = (double)bytes / avg / 1e9;
    if (check) {
        snprintf(w, sizeof(w), "%ld", wrong);
    }
    printf(" %13zu %12zu %9s %6s %5d %6d %12.1f %12.1f %11.3f %11.3f %10s %7s\n", bytes,
           bytes / sizeof(float), "float32", "sum", -1, n, avg * 1e6, max * 1e6, algbw,
           algbw * 2.0 * (nranks - 1) / nranks, "mpi", w);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    opts_t o;
    int rank, nranks, n;
    long wrong, total_wrong = 0;
    unsigned idx = 0;
    float *s, *r;
    double *times;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (parse_options(argc, argv, &o) < 0) {
        if (rank == 0) {
            fprintf(stderr, "usage: mpi-allreduce [-b min] [-e max] [-f factor] [-n iters] "
                            "[-w warmup] [-T seconds per size] [-c 0|1] [-I]\n");
        }
        MPI_Finalize();
        return 2;
    }
    g_inplace = o.inplace;
    s = malloc(o.maxb);
    r = malloc(o.maxb);
    times = malloc(sizeof(double) * (size_t)nranks);
    if (s == NULL || r == NULL || times == NULL) {
        fprintf(stderr, "mpi-allreduce: rank %d: out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    fill(s, o.maxb / sizeof(float), rank, 0);
    memset(r, 0, o.maxb);
    if (rank == 0) {
        print_header(&o, nranks);
    }
    for (size_t bytes = o.minb; bytes <= o.maxb; bytes *= (size_t)o.factor, idx++) {
        size_t count = bytes / sizeof(float);
        double t = time_size(&o, s, r, count, &n);
        MPI_Gather(&t, 1, MPI_DOUBLE, times, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        wrong = o.check ? check_size(s, r, count, rank, nranks, idx + 1) : 0;
        total_wrong += wrong;
        if (rank == 0) {
            print_row(count * sizeof(float), n, times, nranks, wrong, o.check);
        }
    }
    if (rank == 0) {
        printf("# #wrong total: %ld (%s)\n", total_wrong,
               !o.check ? "not checked" : total_wrong ? "WRONG RESULTS" : "all sizes correct");
    }
    free(s);
    free(r);
    free(times);
    MPI_Finalize();
    return total_wrong ? 1 : 0;
}
