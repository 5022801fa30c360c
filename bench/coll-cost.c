/*
 * coll-cost: the daemon's cost model (daemon/engine/cost.h) on the command line, so that the
 * benchmarks compare measurements with the very formulas the daemon has, and extrapolate them.
 *
 *   coll-cost [--params FILE] [--set KEY=VALUE]... [--collective NAME] [-N NODES,...]
 *             [-L RANKS_PER_NODE] [-b MIN] [-e MAX] [-f FACTOR]
 *
 * Prints one CSV line per node count, size and algorithm that applies:
 *   collective,nodes,ranks_per_node,bytes,algo,seconds,busbw_GBps,best,lossy,cpu_work_s
 * (busbw as coll-perf: size / time x the collective's factor, n = nodes x ranks per node; best 1
 * for the fastest exact algorithm of that shape; cpu_work_s the CPU seconds of one node's share,
 * cost.h's W). The constants start from
 * coll_cost_params_default(); --params reads KEY = VALUE lines (bench/calibrate.sh writes
 * them; '#' starts a comment), --set overrides one. KEY is a field of coll_cost_params_t.
 * Sizes are at most 2^60 B; node counts and ranks per node whole numbers >= 1.
 * Exit status: 0; 2 on a usage error, an unknown key or a bad value, constants not usable
 * together (the one at fault named), or constants so large that a time is not finite.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cost.h"

#define MAX_NODES 64

static const char *const kinds[] = {"allreduce", "reduce_scatter", "allgather",
                                    "broadcast", "reduce", "barrier"};

static void usage_exit(const char *why)
{
    fprintf(stderr, "coll-cost: %s\nusage: coll-cost [--params FILE] [--set KEY=VALUE]... "
                    "[--collective NAME] [-N NODES,...] [-L RANKS] [-b MIN] [-e MAX] "
                    "[-f FACTOR]\n", why);
    exit(2);
}

/* KEY=VALUE into @p p (cost.h: coll_cost_params_set()); exits 2 on a bad key or value. */
static void set_key(coll_cost_params_t *p, const char *kv)
{
    char err[300];
    if (coll_cost_params_set(p, kv, err, sizeof(err)) != COLL_OK) {
        fprintf(stderr, "coll-cost: %s\n", err);
        exit(2);
    }
}

/* The file's constants over @p p (cost.h: coll_cost_params_load()); exits 2 on an error. */
static void read_params(coll_cost_params_t *p, const char *path)
{
    char err[400];
    if (coll_cost_params_load(p, path, err, sizeof(err)) != COLL_OK) {
        fprintf(stderr, "coll-cost: %s\n", err);
        exit(2);
    }
}

/* The largest size coll-cost sweeps: 2^60 B, so that a step of the sweep cannot overflow. */
#define MAX_BYTES (1ull << 60)

/* A size: a number >= 0 with an optional K, M or G (powers of 1024), at most MAX_BYTES. */
static uint64_t size_arg(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double m = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1;
    end += m > 1;
    if (end == s || *end != '\0' || !(v >= 0) || v * m > (double)MAX_BYTES) {
        usage_exit("a size is a number >= 0 of bytes with K, M or G, at most 2^60 B");
    }
    return (uint64_t)(v * m);
}

/* A whole number in [1, max]. */
static uint32_t count_arg(const char *s, uint32_t max, const char *what)
{
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (end == s || *end != '\0' || s[0] == '-' || v < 1 || v > max) {
        usage_exit(what);
    }
    return (uint32_t)v;
}

static int kind_arg(const char *s)
{
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (strcmp(kinds[i], s) == 0) {
            return (int)i;
        }
    }
    usage_exit("unknown collective");
    return 0;
}

static double bus_factor(coll_kind_t kind, double n)
{
    switch (kind) {
    case COLL_KIND_ALLREDUCE: return 2 * (n - 1) / n;
    case COLL_KIND_REDUCE_SCATTER:
    case COLL_KIND_ALLGATHER: return (n - 1) / n;
    case COLL_KIND_BARRIER: return 0;
    default: return 1;
    }
}

/* The lines of one shape; 0, or -1 after saying why the model refused it. */
static int print_shape(const coll_cost_params_t *p, coll_kind_t kind, uint32_t n, uint32_t l,
                       uint64_t bytes)
{
    coll_cost_result_t r;
    coll_status_t st = coll_cost_predict(p, kind, bytes, n, l, COLL_COST_ALL, &r);
    if (st == COLL_ERR_UNSUPPORTED) {
        return 0; /* no algorithm of the model runs this shape */
    }
    if (st != COLL_OK) {
        fprintf(stderr, "coll-cost: %s of %llu B on %u x %u: %s (a time that is not finite: "
                        "constants too large)\n", kinds[kind], (unsigned long long)bytes, n, l,
                coll_strerror(st));
        return -1;
    }
    for (int a = 0; a < COLL_COST_NALGOS; a++) {
        if (r.time[a] < 0) {
            continue;
        }
        double busbw = r.time[a] > 0 ? (double)bytes / r.time[a] / 1e9 *
                                           bus_factor(kind, (double)n * l) : 0;
        printf("%s,%u,%u,%llu,%s,%.9g,%.6g,%d,%d,%.9g\n", kinds[kind], n, l,
               (unsigned long long)bytes, coll_cost_algo_name((coll_cost_algo_t)a), r.time[a],
               busbw, a == (int)r.best, coll_cost_algo_lossy((coll_cost_algo_t)a), r.work[a]);
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"params", required_argument, NULL, 'p'}, {"set", required_argument, NULL, 's'},
        {"collective", required_argument, NULL, 'c'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    coll_cost_params_t p;
    uint32_t nodes[MAX_NODES] = {2, 4, 8}, nn = 3, l = 1;
    uint64_t minb = 4096, maxb = 64u << 20, factor = 16;
    int kind = COLL_KIND_ALLREDUCE, c;

    coll_cost_params_default(&p);
    while ((c = getopt_long(argc, argv, "N:L:b:e:f:h", longs, NULL)) != -1) {
        switch (c) {
        case 'p': read_params(&p, optarg); break;
        case 's': set_key(&p, optarg); break;
        case 'c': kind = kind_arg(optarg); break;
        case 'N':
            nn = 0;
            for (char *t = strtok(optarg, ","); t != NULL; t = strtok(NULL, ",")) {
                if (nn == MAX_NODES) {
                    usage_exit("at most 64 node counts");
                }
                nodes[nn++] = count_arg(t, 1u << 30, "-N wants node counts >= 1, e.g. 2,4,8");
            }
            break;
        case 'L': l = count_arg(optarg, 1u << 20, "-L wants ranks per node >= 1"); break;
        case 'b': minb = size_arg(optarg); break;
        case 'e': maxb = size_arg(optarg); break;
        case 'f': factor = size_arg(optarg); break;
        case 'h':
            printf("usage: coll-cost [--params FILE] [--set KEY=VALUE]... [--collective NAME] "
                   "[-N NODES,...] [-L RANKS] [-b MIN] [-e MAX] [-f FACTOR]\n"
                   "the cost model's predictions as CSV (bench/coll-cost.c says what each column "
                   "is; docs/cost-model.md the model)\n");
            return 0;
        default: usage_exit("unknown option");
        }
    }
    if (optind < argc) {
        usage_exit("no arguments besides the options");
    }
    if (factor < 2 || maxb < minb || nn == 0) {
        usage_exit("need -f >= 2, -b <= -e and node counts");
    }
    if (!coll_cost_params_valid(&p)) {
        fprintf(stderr, "coll-cost: the constants are not usable together: %s\n",
                coll_cost_params_problem(&p));
        return 2;
    }
    printf("collective,nodes,ranks_per_node,bytes,algo,seconds,busbw_GBps,best,lossy,"
           "cpu_work_s\n");
    for (uint32_t i = 0; i < nn; i++) {
        for (uint64_t b = minb; b <= maxb; b = b ? b * factor : 1) {
            if (print_shape(&p, (coll_kind_t)kind, nodes[i], l, b) != 0) {
                return 2;
            }
            if (b > maxb / factor) { /* the next step would pass -e (or overflow) */
                break;
            }
        }
    }
    return 0;
}
