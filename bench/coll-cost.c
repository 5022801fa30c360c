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
 * Exit status: 0, 2 on a usage error or an unknown key.
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

static uint64_t size_arg(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    double m = *end == 'K' ? 1024.0 : *end == 'M' ? 1048576.0 : *end == 'G' ? 1073741824.0 : 1;
    if (v <= 0 && strcmp(s, "0") != 0) {
        usage_exit("not a size");
    }
    return (uint64_t)(v * m);
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

static void print_shape(const coll_cost_params_t *p, coll_kind_t kind, uint32_t n, uint32_t l,
                        uint64_t bytes)
{
    coll_cost_result_t r;
    if (coll_cost_predict(p, kind, bytes, n, l, COLL_COST_ALL, &r) != COLL_OK) {
        return;
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
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {
        {"params", required_argument, NULL, 'p'}, {"set", required_argument, NULL, 's'},
        {"collective", required_argument, NULL, 'c'}, {NULL, 0, NULL, 0}};
    coll_cost_params_t p;
    uint32_t nodes[MAX_NODES] = {2, 4, 8}, nn = 3, l = 1;
    uint64_t minb = 4096, maxb = 64u << 20, factor = 16;
    int kind = COLL_KIND_ALLREDUCE, c;

    coll_cost_params_default(&p);
    while ((c = getopt_long(argc, argv, "N:L:b:e:f:", longs, NULL)) != -1) {
        switch (c) {
        case 'p': read_params(&p, optarg); break;
        case 's': set_key(&p, optarg); break;
        case 'c': kind = kind_arg(optarg); break;
        case 'N':
            nn = 0;
            for (char *t = strtok(optarg, ","); t != NULL && nn < MAX_NODES; t = strtok(NULL, ",")) {
                nodes[nn++] = (uint32_t)strtoul(t, NULL, 10);
            }
            break;
        case 'L': l = (uint32_t)strtoul(optarg, NULL, 10); break;
        case 'b': minb = size_arg(optarg); break;
        case 'e': maxb = size_arg(optarg); break;
        case 'f': factor = size_arg(optarg); break;
        default: usage_exit("unknown option");
        }
    }
    if (factor < 2 || maxb < minb || l == 0 || nn == 0) {
        usage_exit("need -f >= 2, -b <= -e, -L >= 1 and node counts");
    }
    printf("collective,nodes,ranks_per_node,bytes,algo,seconds,busbw_GBps,best,lossy,"
           "cpu_work_s\n");
    for (uint32_t i = 0; i < nn; i++) {
        for (uint64_t b = minb; b <= maxb; b = b ? b * factor : 1) {
            print_shape(&p, (coll_kind_t)kind, nodes[i], l, b);
        }
    }
    return 0;
}
