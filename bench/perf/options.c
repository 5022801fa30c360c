/*
 * coll-perf's command line: nccl-tests' flags where nccl-tests has one (src/common.cu there:
 * -b -e -i -f -n -w -c -o -d -r -a -T -J -g -t -h), its datatype names, and long options of
 * our own where it has none (--collective, --algo, --time-budget).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf/perf.h"

const perf_coll_info_t perf_colls[PERF_COLL_COUNT] = {
    [PERF_ALLREDUCE] = {"allreduce", 1, 0, 1},
    [PERF_REDUCE_SCATTER] = {"reduce_scatter", 1, 0, 1},
    [PERF_ALLGATHER] = {"allgather", 0, 0, 1},
    [PERF_BROADCAST] = {"broadcast", 0, 1, 1},
    [PERF_REDUCE] = {"reduce", 1, 1, 1},
    [PERF_BARRIER] = {"barrier", 0, 0, 0},
    [PERF_SENDRECV] = {"sendrecv", 0, 0, 0},
};

/* nccl-tests' datatype names (and their older ones) next to ours; those nccl-tests has and
 * collectived has not are refused with a reason. */
static const struct {
    const char *name;
    int dtype; /* -1: not supported */
} dtype_names[] = {
    {"int8", COLL_INT8},       {"char", COLL_INT8},          {"uint8", COLL_UINT8},
    {"int32", COLL_INT32},     {"int", COLL_INT32},          {"int64", COLL_INT64},
    {"half", COLL_FLOAT16},    {"float16", COLL_FLOAT16},    {"float", COLL_FLOAT32},
    {"float32", COLL_FLOAT32}, {"double", COLL_FLOAT64},     {"float64", COLL_FLOAT64},
    {"bfloat16", COLL_BFLOAT16}, {"uint32", -1},             {"uint64", -1},
    {"f8e4m3", -1},            {"f8e5m2", -1},
};

const char *perf_dtype_name(coll_dtype_t dtype)
{
    static const char *const nccl[COLL_DTYPE_COUNT] = {
        [COLL_FLOAT32] = "float", [COLL_FLOAT64] = "double", [COLL_FLOAT16] = "half",
        [COLL_BFLOAT16] = "bfloat16", [COLL_INT8] = "int8", [COLL_UINT8] = "uint8",
        [COLL_INT32] = "int32", [COLL_INT64] = "int64"};
    return (unsigned)dtype < COLL_DTYPE_COUNT && nccl[dtype] ? nccl[dtype] : "?";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: coll-perf [options]   (every rank of a job, or alone as one rank)\n"
            "nccl-tests' options:\n"
            "  -b, --minbytes SIZE      smallest size (default 4K; K, M, G: powers of 1024)\n"
            "  -e, --maxbytes SIZE      largest size (default 64M)\n"
            "  -f, --stepfactor N       multiply the size by N each step (default 4)\n"
            "  -i, --stepbytes SIZE     with -f 1: add SIZE each step (default 1M)\n"
            "  -n, --iters N            timed operations per size, at most (default 100)\n"
            "  -w, --warmup_iters N     untimed operations first (default 5)\n"
            "  -c, --check N            0: no check; else check each size on fresh data (1)\n"
            "  -o, --op NAME            sum (default), prod, max, min, avg\n"
            "  -d, --datatype NAME      float (default), double, half, bfloat16, int8, uint8,\n"
            "                           int32, int64 (also float32, float64, float16, char, int)\n"
            "  -r, --root N             root rank of broadcast and reduce (default 0)\n"
            "  -a, --average N          time shown: 0 rank 0's, 1 mean of ranks (default),\n"
            "                           2 min, 3 max\n"
            "  -T, --timeout SECONDS    bound of one operation (default 600)\n"
            "  -J, --output_file PATH   also write the results as JSON (rank 0)\n"
            "  -g, --ngpus 1, -t, --nthreads 1   accepted: one rank per process\n"
            "of its own:\n"
            "  --collective NAME        allreduce (default), reduce_scatter, allgather,\n"
            "                           broadcast, reduce, barrier, sendrecv\n"
            "  --algo NAME              auto (default), ring, rd, chain, dissemination\n"
            "  --time-budget SECONDS    per size and placement: fewer iterations when -n of\n"
            "                           them would take longer, never fewer than %d (default 5)\n"
            "  --place WHICH            both (default), out (of place) or in (place) only\n"
            "  -h, --help\n",
            PERF_MIN_ITERS);
}

static void bad_option(const char *opt, const char *value, const char *why)
{
    fprintf(stderr, "coll-perf: invalid value '%s' for %s%s%s\n", value, opt, why ? ": " : "",
            why ? why : "");
    exit(2);
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || v < 0) {
        return -1;
    }
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; end++; break;
    case 'm': case 'M': v *= 1048576.0; end++; break;
    case 'g': case 'G': v *= 1073741824.0; end++; break;
    default: break;
    }
    if (*end != '\0' || v > 1e15) {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int int_arg(const char *opt, const char *s, int lo, int hi)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        bad_option(opt, s, NULL);
    }
    return (int)v;
}

static int name_arg(const char *opt, const char *s, const char *(*name)(int), int n)
{
    for (int i = 0; i < n; i++) {
        if (strcmp(s, name(i)) == 0) {
            return i;
        }
    }
    bad_option(opt, s, NULL);
    return -1;
}

static const char *coll_name_at(int i) { return perf_colls[i].name; }
static const char *redop_name_at(int i) { return coll_redop_name((coll_redop_t)i); }
static const char *algo_name_at(int i) { return coll_algo_name((coll_algo_t)i); }

static coll_dtype_t dtype_arg(const char *s)
{
    for (size_t i = 0; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++) {
        if (strcmp(s, dtype_names[i].name) == 0) {
            if (dtype_names[i].dtype < 0) {
                bad_option("-d", s, "collectived has no such datatype");
            }
            return (coll_dtype_t)dtype_names[i].dtype;
        }
    }
    bad_option("-d", s, NULL);
    return COLL_FLOAT32;
}

enum { OPT_COLLECTIVE = 256, OPT_ALGO, OPT_BUDGET, OPT_PLACE };

static void size_arg(const char *opt, const char *v, size_t *out)
{
    if (parse_size(v, out) < 0) {
        bad_option(opt, v, "not a size");
    }
}

static void parse_option(perf_opts_t *o, int c, const char *v)
{
    switch (c) {
    case 'b': size_arg("-b", v, &o->minb); break;
    case 'e': size_arg("-e", v, &o->maxb); break;
    case 'i': size_arg("-i", v, &o->stepb); break;
    case 'f': o->factor = (unsigned)int_arg("-f", v, 1, 1 << 20); break;
    case 'n': o->iters = int_arg("-n", v, 1, 1000000000); break;
    case 'w': o->warmup = int_arg("-w", v, 0, 1000000000); break;
    case 'c': o->check = int_arg("-c", v, 0, 1000000000) != 0; break;
    case 'r': o->root = int_arg("-r", v, 0, 1 << 24); break;
    case 'a': o->average = (perf_average_t)int_arg("-a", v, 0, 3); break;
    case 'T': o->timeout_ms = int_arg("-T", v, 1, 86400) * 1000; break;
    case 'J': o->json = v; break;
    case 'o': o->op = (coll_redop_t)name_arg("-o", v, redop_name_at, COLL_REDOP_COUNT); break;
    case 'd': o->dtype = dtype_arg(v); break;
    case 'g': case 't':
        if (strcmp(v, "1") != 0) {
            bad_option(c == 'g' ? "-g" : "-t", v, "one rank per process: start more ranks "
                       "(collective-launch, mpirun, srun)");
        }
        break;
    case OPT_COLLECTIVE:
        o->coll = (perf_coll_t)name_arg("--collective", v, coll_name_at, PERF_COLL_COUNT);
        break;
    case OPT_ALGO:
        o->algo = (coll_algo_t)name_arg("--algo", v, algo_name_at, COLL_ALGO_COUNT);
        break;
    case OPT_BUDGET:
        if ((o->budget_s = strtod(v, NULL)) <= 0) {
            bad_option("--time-budget", v, NULL);
        }
        break;
    case OPT_PLACE:
        o->places = strcmp(v, "both") == 0 ? 3u : strcmp(v, "out") == 0 ? 1u
                    : strcmp(v, "in") == 0  ? 2u : 0u;
        if (o->places == 0) {
            bad_option("--place", v, "both, out or in");
        }
        break;
    case 'h': usage(stdout); exit(0);
    default: usage(stderr); exit(2);
    }
}

void perf_parse_options(int argc, char **argv, perf_opts_t *o)
{
    static const struct option longs[] = {
        {"minbytes", required_argument, NULL, 'b'},    {"maxbytes", required_argument, NULL, 'e'},
        {"stepbytes", required_argument, NULL, 'i'},   {"stepfactor", required_argument, NULL, 'f'},
        {"iters", required_argument, NULL, 'n'},       {"check", required_argument, NULL, 'c'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"op", required_argument, NULL, 'o'},
        {"datatype", required_argument, NULL, 'd'},    {"root", required_argument, NULL, 'r'},
        {"average", required_argument, NULL, 'a'},     {"timeout", required_argument, NULL, 'T'},
        {"output_file", required_argument, NULL, 'J'}, {"ngpus", required_argument, NULL, 'g'},
        {"nthreads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
        {"collective", required_argument, NULL, OPT_COLLECTIVE},
        {"algo", required_argument, NULL, OPT_ALGO},
        {"time-budget", required_argument, NULL, OPT_BUDGET},
        {"place", required_argument, NULL, OPT_PLACE}, {NULL, 0, NULL, 0}};
    int c;

    *o = (perf_opts_t){.minb = 4096, .maxb = 64u << 20, .stepb = 1u << 20, .factor = 4,
                       .iters = 100, .warmup = 5, .check = 1, .average = PERF_AVG_MEAN,
                       .budget_s = 5.0, .timeout_ms = 600 * 1000, .coll = PERF_ALLREDUCE,
                       .dtype = COLL_FLOAT32, .op = COLL_SUM, .algo = COLL_ALGO_AUTO,
                       .places = 3};
    while ((c = getopt_long(argc, argv, "b:e:i:f:n:w:c:o:d:r:a:T:J:g:t:h", longs, NULL)) != -1) {
        parse_option(o, c, optarg);
    }
    if (optind < argc) {
        fprintf(stderr, "coll-perf: unexpected argument '%s' (the collective is "
                "--collective NAME)\n", argv[optind]);
        exit(2);
    }
    if (o->maxb < o->minb || (o->factor == 1 && o->stepb == 0 && o->maxb != o->minb)) {
        fprintf(stderr, "coll-perf: need -b <= -e, and with -f 1 a step -i > 0\n");
        exit(2);
    }
    if (o->places == 2 && !perf_colls[o->coll].inplace) {
        fprintf(stderr, "coll-perf: %s has no in-place form (--place in)\n",
                perf_colls[o->coll].name);
        exit(2);
    }
}
