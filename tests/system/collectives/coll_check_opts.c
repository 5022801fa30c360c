/* coll_check's command line (coll_check.h). */
#include "coll_check.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
        "usage: coll_check [--colls LIST] [--dtypes LIST] [--ops LIST] [--counts LIST]\n"
        "                  [--algos LIST] [--place LIST] [--roots LIST] [--iters K]\n"
        "                  [--window W] [--shuffle] [--timeout-ms T] [--expect-error NAME]\n"
        "                  [--node-whole] [--mismatch-op RANK:OP]\n"
        "Run as every rank of a collective-launch job; checks every combination of:\n"
        "  --colls LIST   allreduce,reduce_scatter,allgather,broadcast,reduce or all (default)\n"
        "  --dtypes LIST  datatype names as coll_dtype_name() spells them, or all (default)\n"
        "  --ops LIST     sum,avg,prod,min,max,band,bor,bxor or all (default); reductions\n"
        "                 only; the bitwise ones (band, bor, bxor) of integer dtypes only,\n"
        "                 unless --expect-error\n"
        "  --counts LIST  elements per rank (recvcount, sendcount): integers with optional\n"
        "                 Ki/Mi suffix, or N, N-k, N+k with N the number of nodes\n"
        "                 (default 0,1,N-1,N+1,1009)\n"
        "  --algos LIST   auto, ring, rd, chain, env (COLL_ALGO of the environment) or all\n"
        "                 (auto and every forced one); each collective runs those that apply;\n"
        "                 a forced rd above %u bytes per rank is skipped (default auto)\n"
        "  --place LIST   out, in, mixed (default all three): in place is send == recv,\n"
        "                 reduce-scatter's recvbuf = block r of sendbuf, all-gather's sendbuf =\n"
        "                 block r of recvbuf, broadcast and reduce send == recv at the root;\n"
        "                 mixed: even ranks in place, odd ranks out of place\n"
        "  --roots LIST   broadcast and reduce roots: ranks, last, mid (default 0,last)\n"
        "  --iters K      repetitions of each case with other data (default 1)\n"
        "  --window W     operations in flight at once, 1..%d (default 1)\n"
        "  --shuffle      run the cases in a shuffled order (the same on every rank)\n"
        "  --node-whole   the pool has no room for local rank 0's node buffers: every\n"
        "                 multi-node allreduce must run in the daemon whole (rd or ring)\n"
        "  --timeout-ms T bound on each wait (default 60000)\n"
        "  --expect-error NAME  every operation must fail with this status (e.g.\n"
        "                 COLL_ERR_UNSUPPORTED) and leave its buffers untouched\n"
        "  --mismatch-op RANK:OP  rank RANK submits reduction OP instead of the case's (with\n"
        "                 --expect-error COLL_ERR_MISMATCH: the message names both)\n",
        RD_FORCE_MAX_BYTES, MAX_WINDOW);
}

/* Split @p list at commas into @p out (at most @p max tokens); -1 when it does not fit. */
static int split(const char *list, char out[][TOKEN_MAX], int max)
{
    char buf[MAX_LIST * TOKEN_MAX], *save = NULL;
    int n = 0;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        if (n == max || strlen(t) >= TOKEN_MAX) {
            return -1;
        }
        snprintf(out[n++], TOKEN_MAX, "%s", t);
    }
    return n > 0 ? n : -1;
}

/* Parse a list of names with @p parse (or "all": 0..count-1) into @p out. */
static int parse_names(const char *list, int (*parse)(const char *), int count, int *out)
{
    char tok[MAX_LIST][TOKEN_MAX];
    int n = split(list, tok, MAX_LIST);
    if (n == 1 && strcmp(tok[0], "all") == 0) {
        for (int i = 0; i < count; i++) {
            out[i] = i;
        }
        return count;
    }
    for (int i = 0; i < n; i++) {
        if (n > count || (out[i] = parse(tok[i])) < 0) {
            return -1;
        }
    }
    return n;
}

static int parse_kind(const char *s)
{
    for (int k = 0; k < K_COUNT; k++) {
        if (strcmp(s, coll_kind_names[k]) == 0) {
            return k;
        }
    }
    return -1;
}

/* An algorithm name, "env" (ALGO_ENV) or "all"; -2 when unknown. */
static int parse_algos(const char *list, opts_t *o)
{
    char tok[MAX_LIST][TOKEN_MAX];
    int n = split(list, tok, MAX_LIST);
    o->nalgos = 0;
    for (int i = 0; i < n; i++) {
        int found = strcmp(tok[i], "env") == 0 ? ALGO_ENV : -2;
        for (int a = 0; a < COLL_ALGO_COUNT; a++) {
            if (strcmp(tok[i], "all") == 0 || strcmp(tok[i], coll_algo_name((coll_algo_t)a)) == 0) {
                o->algos[o->nalgos++] = found = a;
            }
        }
        if (found == ALGO_ENV) {
            o->algos[o->nalgos++] = ALGO_ENV;
        } else if (found == -2 || o->nalgos > MAX_LIST - COLL_ALGO_COUNT) {
            return -1;
        }
    }
    return n > 0 ? 0 : -1;
}

static int parse_place(const char *s)
{
    return strcmp(s, "out") == 0 ? PLACE_OUT
           : strcmp(s, "in") == 0 ? PLACE_IN
           : strcmp(s, "mixed") == 0 ? PLACE_MIXED
                                     : -1;
}

/* A negative status by its symbolic name, e.g. COLL_ERR_UNSUPPORTED. */
static int parse_status(const char *s, coll_status_t *st)
{
#define STATUS_MATCH(name, value, text)                                                            \
    if (strcmp(s, "COLL_" #name) == 0 && (value) < 0) {                                           \
        *st = (coll_status_t)(value);                                                              \
        return 0;                                                                                  \
    }
    COLL_STATUS_MAP(STATUS_MATCH)
#undef STATUS_MATCH
    return -1;
}

int op_applies(coll_dtype_t dt, coll_redop_t op)
{
    return !(check_dtype_is_float(dt) && (op == COLL_BAND || op == COLL_BOR || op == COLL_BXOR));
}

/* RANK:OP of --mismatch-op. */
static int parse_mismatch_op(const char *arg, opts_t *o)
{
    const char *colon = strchr(arg, ':');
    long rank;
    char rk[TOKEN_MAX];
    int op;

    if (colon == NULL || colon - arg >= TOKEN_MAX) {
        return -1;
    }
    snprintf(rk, sizeof(rk), "%.*s", (int)(colon - arg), arg);
    if (check_parse_int(rk, 0, 1 << 20, &rank) < 0 || (op = check_redop_parse(colon + 1)) < 0) {
        return -1;
    }
    o->mismatch_rank = (int)rank;
    o->mismatch_op = (coll_redop_t)op;
    return 0;
}

static void set_defaults(opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->mismatch_rank = -1;
    o->iters = 1;
    o->window = 1;
    o->timeout_ms = 60000;
    o->nkinds = parse_names("all", parse_kind, K_COUNT, o->kinds);
    o->ndtypes = parse_names("all", check_dtype_parse, COLL_DTYPE_COUNT, o->dtypes);
    o->nops = parse_names("all", check_redop_parse, COLL_REDOP_COUNT, o->ops);
    o->ncounts = split("0,1,N-1,N+1,1009", o->counts, MAX_LIST);
    parse_algos("auto", o);
    o->nplaces = parse_names("out,in,mixed", parse_place, 3, o->places);
    o->nroots = split("0,last", o->roots, MAX_LIST);
}

static int parse_opt(int ch, const char *arg, opts_t *o)
{
    long v;
    switch (ch) {
    case 'C': return (o->nkinds = parse_names(arg, parse_kind, K_COUNT, o->kinds)) < 0;
    case 'd':
        return (o->ndtypes = parse_names(arg, check_dtype_parse, COLL_DTYPE_COUNT, o->dtypes)) < 0;
    case 'o': return (o->nops = parse_names(arg, check_redop_parse, COLL_REDOP_COUNT, o->ops)) < 0;
    case 'c': return (o->ncounts = split(arg, o->counts, MAX_LIST)) < 0;
    case 'a': return parse_algos(arg, o) < 0;
    case 'p': return (o->nplaces = parse_names(arg, parse_place, 3, o->places)) < 0;
    case 'r': return (o->nroots = split(arg, o->roots, MAX_LIST)) < 0;
    case 'i': return check_parse_int(arg, 1, 1000, &v) < 0 || (o->iters = (int)v) < 0;
    case 'w': return check_parse_int(arg, 1, MAX_WINDOW, &v) < 0 || (o->window = (int)v) < 0;
    case 's': o->shuffle = 1; return 0;
    case 'n': o->node_whole = 1; return 0;
    case 't': return check_parse_int(arg, 1, 3600000, &v) < 0 || (o->timeout_ms = (int)v) < 0;
    case 'e': return parse_status(arg, &o->expect) < 0;
    case 'm': return parse_mismatch_op(arg, o) < 0;
    case 'h': usage(stdout); exit(0);
    default: return 1;
    }
}

void parse_opts(int argc, char **argv, opts_t *o)
{
    static const struct option longopts[] = {
        {"colls", required_argument, NULL, 'C'},      {"dtypes", required_argument, NULL, 'd'},
        {"ops", required_argument, NULL, 'o'},        {"counts", required_argument, NULL, 'c'},
        {"algos", required_argument, NULL, 'a'},      {"place", required_argument, NULL, 'p'},
        {"roots", required_argument, NULL, 'r'},      {"iters", required_argument, NULL, 'i'},
        {"window", required_argument, NULL, 'w'},     {"shuffle", no_argument, NULL, 's'},
        {"timeout-ms", required_argument, NULL, 't'}, {"expect-error", required_argument, NULL, 'e'},
        {"node-whole", no_argument, NULL, 'n'},       {"help", no_argument, NULL, 'h'},
        {"mismatch-op", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0}};
    int ch, bad = 0;

    set_defaults(o);
    while (!bad && (ch = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        bad = parse_opt(ch, optarg, o);
    }
    if (bad || optind != argc || (o->expect != COLL_OK && o->window != 1)) {
        usage(stderr);
        exit(2);
    }
}

/* ---- main ----------------------------------------------------------------------------------- */

/* Distinct values of @p n, in order; returns how many. */
static int dedupe(long long *v, int n)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < m; j++) {
            seen |= v[j] == v[i];
        }
        if (!seen) {
            v[m++] = v[i];
        }
    }
    return m;
}

void resolve_counts(const opts_t *o, int nodes, resolved_t *rv)
{
    for (int i = 0; i < o->ncounts; i++) {
        if ((rv->counts[i] = check_parse_count(o->counts[i], nodes)) < 0) {
            check_usage_error("bad count '%s' (nodes=%d)", o->counts[i], nodes);
        }
    }
    rv->ncounts = dedupe(rv->counts, o->ncounts);
}

void resolve_roots(const check_ctx_t *c, const opts_t *o, resolved_t *rv)
{
    for (int i = 0; i < o->nroots; i++) {
        const char *t = o->roots[i];
        long v = strcmp(t, "last") == 0 ? c->world - 1 : c->world / 2;
        if (strcmp(t, "last") != 0 && strcmp(t, "mid") != 0 &&
            check_parse_int(t, 0, c->world - 1, &v) < 0) {
            check_usage_error("bad root '%s' (world size %d)", t, c->world);
        }
        rv->roots[i] = v;
    }
    rv->nroots = dedupe(rv->roots, o->nroots);
}

/* Pool per node: the largest case's buffers of every local rank (the world-sized buffer of
 * reduce-scatter or all-gather and the other one, 8-byte elements) per operation in flight,
 * guards and slack. */
