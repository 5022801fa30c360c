/*
 * coll-cost: the daemon's cost model (daemon/engine/cost.h) on the command line, so that the
 * benchmarks compare measurements with the very formulas the daemon has, and extrapolate them.
 *
 *   coll-cost [--params FILE] [--set KEY=VALUE]... [--collective NAME] [-N NODES,...]
 *             [-L RANKS_PER_NODE] [-b MIN] [-e MAX] [-f FACTOR]
 *
 * Prints one CSV line per node count, size and algorithm that applies:
 *   collective,nodes,ranks_per_node,bytes,algo,seconds,busbw_GBps,best,lossy
 * (busbw as coll-perf: size / time x the collective's factor, n = nodes x ranks per node; best 1
 * for the fastest exact algorithm of that shape). The constants start from
 * coll_cost_params_default(); --params reads KEY = VALUE lines (bench/calibrate.sh writes
 * them; '#' starts a comment), --set overrides one. KEY is a field of coll_cost_params_t.
 * Exit status: 0, 2 on a usage error or an unknown key.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/cost.h"

#define MAX_NODES 64

typedef struct {
    const char *name;
    size_t off;
    int integer; /* 1: uint32_t, 2: uint64_t, 0: double */
} param_key_t;

#define D(f) {#f, offsetof(coll_cost_params_t, f), 0}
#define U(f) {#f, offsetof(coll_cost_params_t, f), 1}
#define U64(f) {#f, offsetof(coll_cost_params_t, f), 2}
static const param_key_t keys[] = {
    D(alpha),        D(beta),          D(gamma),         D(alpha_op),
    D(alpha_shm),    D(beta_mem),      D(alpha_direct),  D(codec_cast),
    D(codec_onebit), D(codec_topk),    D(codec_flop),    D(topk_ratio),
    U(powersgd_rank), U64(powersgd_rows), U(knomial_radix), U64(segment_bytes),
    U64(rd_max_bytes),
};

static const char *const kinds[] = {"allreduce", "reduce_scatter", "allgather",
                                    "broadcast", "reduce", "barrier"};

static void usage_exit(const char *why)
{
    fprintf(stderr, "coll-cost: %s\nusage: coll-cost [--params FILE] [--set KEY=VALUE]... "
                    "[--collective NAME] [-N NODES,...] [-L RANKS] [-b MIN] [-e MAX] "
                    "[-f FACTOR]\n", why);
    exit(2);
}

/* KEY=VALUE (spaces around '=' allowed) into @p p; exits 2 on a bad key or value. */
static void set_key(coll_cost_params_t *p, char *kv)
{
    char *eq = strchr(kv, '='), *key = kv, *end;
    if (eq == NULL) {
        usage_exit("want KEY=VALUE");
    }
    *eq = '\0';
    key += strspn(key, " \t");
    key[strcspn(key, " \t")] = '\0';
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        if (strcmp(keys[i].name, key) != 0) {
            continue;
        }
        errno = 0;
        double v = strtod(eq + 1, &end);
        if (errno != 0 || end == eq + 1 || v < 0) {
            usage_exit("not a non-negative number");
        }
        char *f = (char *)p + keys[i].off;
        if (keys[i].integer == 1) {
            *(uint32_t *)f = (uint32_t)v;
        } else if (keys[i].integer == 2) {
            *(uint64_t *)f = (uint64_t)v;
        } else {
            *(double *)f = v;
        }
        return;
    }
    fprintf(stderr, "coll-cost: unknown key '%s'\n", key);
    exit(2);
}

static void read_params(coll_cost_params_t *p, const char *path)
{
    char line[256];
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "coll-cost: %s: %s\n", path, strerror(errno));
        exit(2);
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "#\n")] = '\0';
        if (line[strspn(line, " \t")] != '\0') {
            set_key(p, line);
        }
    }
    fclose(f);
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
        printf("%s,%u,%u,%llu,%s,%.9g,%.6g,%d,%d\n", kinds[kind], n, l,
               (unsigned long long)bytes, coll_cost_algo_name((coll_cost_algo_t)a), r.time[a],
               busbw, a == (int)r.best, coll_cost_algo_lossy((coll_cost_algo_t)a));
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
    printf("collective,nodes,ranks_per_node,bytes,algo,seconds,busbw_GBps,best,lossy\n");
    for (uint32_t i = 0; i < nn; i++) {
        for (uint64_t b = minb; b <= maxb; b = b ? b * factor : 1) {
            print_shape(&p, (coll_kind_t)kind, nodes[i], l, b);
        }
    }
    return 0;
}
