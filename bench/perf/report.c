/*
 * coll-perf's output: nccl-tests' table (out of place and in place side by side, with the
 * algorithm that ran next to each), its footer, and the same numbers as JSON.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "perf/perf.h"

static const char *op_name(const perf_opts_t *o)
{
    return perf_colls[o->coll].reduces ? coll_redop_name(o->op) : "none";
}

void perf_print_header(const perf_ctx_t *c, const perf_opts_t *o)
{
    static const char *const avg[] = {"rank 0's", "mean over ranks", "min over ranks",
                                      "max over ranks"};
    const char *busdef[PERF_COLL_COUNT] = {
        [PERF_ALLREDUCE] = "algbw * 2(n-1)/n", [PERF_REDUCE_SCATTER] = "algbw * (n-1)/n",
        [PERF_ALLGATHER] = "algbw * (n-1)/n",  [PERF_BROADCAST] = "algbw",
        [PERF_REDUCE] = "algbw",               [PERF_BARRIER] = "0 (no data)",
        [PERF_SENDRECV] = "algbw"};

    printf("# coll-perf: %s, %d ranks (%d nodes x %d ranks per node), %s %s, algo %s\n",
           perf_colls[o->coll].name, c->world, c->world / c->local_size, c->local_size,
           perf_dtype_name(o->dtype), op_name(o), coll_algo_name(o->algo));
    printf("# sizes %zu..%zu B %s%zu, warmup %d, iters <= %d, budget %g s per size (at least %d "
           "iters), check %s\n", o->minb, o->maxb, o->factor > 1 ? "x" : "+",
           o->factor > 1 ? (size_t)o->factor : o->stepb, o->warmup, o->iters, o->budget_s,
           PERF_MIN_ITERS, o->check ? "on" : "off");
    printf("# time: per-op wall time, %s (-a %d); algbw = size/time; busbw = %s, n = %d; "
           "GB = 1e9 B\n", avg[o->average], (int)o->average, busdef[o->coll], c->world);
    printf("#%66s %42s\n", "out-of-place", "in-place");
    printf("#%12s %12s %8s %6s %6s %9s %7s %7s %10s %6s %9s %7s %7s %10s %6s\n", "size", "count",
           "type", "redop", "root", "time", "algbw", "busbw", "algo", "#wrong", "time", "algbw",
           "busbw", "algo", "#wrong");
    printf("#%12s %12s %8s %6s %6s %9s %7s %7s %10s %6s %9s %7s %7s %10s %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "", "(us)", "(GB/s)",
           "(GB/s)", "", "");
    fflush(stdout);
}

static void print_result(const perf_result_t *r)
{
    char wrong[24] = "N/A";

    if (!r->ran) {
        printf(" %9s %7s %7s %10s %6s", "-", "-", "-", "-", "-");
        return;
    }
    if (r->wrong >= 0) {
        snprintf(wrong, sizeof(wrong), "%lld", r->wrong);
    }
    printf(" %9.2f %7.3f %7.3f %10s %6s", r->time_us, r->algbw, r->busbw, r->algo, wrong);
}

void perf_print_row(const perf_opts_t *o, const perf_row_t *r)
{
    printf(" %12zu %12zu %8s %6s %6d", r->bytes, r->count, perf_dtype_name(o->dtype),
           op_name(o), perf_colls[o->coll].rooted ? o->root : -1);
    print_result(&r->place[0]);
    print_result(&r->place[1]);
    printf("\n");
    fflush(stdout);
}

void perf_print_footer(const perf_opts_t *o, const perf_row_t *rows, int nrows)
{
    long long wrong = 0;
    double bus = 0;
    int n = 0;

    for (int i = 0; i < nrows; i++) {
        for (int p = 0; p < 2; p++) {
            const perf_result_t *r = &rows[i].place[p];
            wrong += r->ran && r->wrong > 0 ? r->wrong : 0;
            bus += r->ran ? r->busbw : 0;
            n += r->ran;
        }
    }
    printf("# #wrong total: %lld (%s)\n", wrong,
           !o->check ? "not checked" : wrong ? "WRONG RESULTS" : "all sizes correct");
    printf("# Avg bus bandwidth    : %g\n", n > 0 ? bus / n : 0.0);
    fflush(stdout);
}

static void json_result(FILE *f, const perf_ctx_t *c, const char *name, const perf_result_t *r)
{
    fprintf(f, "\"%s\": {\"iters\": %d, \"time_us\": %.3f, \"algbw\": %.6f, \"busbw\": %.6f, "
            "\"algo\": \"%s\", \"wrong\": %lld, \"rank_time_us\": [", name, r->iters,
            r->time_us, r->algbw, r->busbw, r->algo, r->wrong);
    for (int k = 0; k < c->world; k++) {
        fprintf(f, "%s%.3f", k ? ", " : "", r->rank_us[k]);
    }
    fprintf(f, "]}");
}

void perf_write_json(const perf_ctx_t *c, const perf_opts_t *o, const perf_row_t *rows,
                     int nrows)
{
    FILE *f = fopen(o->json, "w");

    if (f == NULL) {
        perf_die("cannot write %s: %s", o->json, strerror(errno));
    }
    fprintf(f, "{\"tool\": \"coll-perf\", \"collective\": \"%s\", \"world\": %d, "
            "\"nodes\": %d, \"ranks_per_node\": %d, \"dtype\": \"%s\", \"op\": \"%s\", "
            "\"algo\": \"%s\", \"root\": %d, \"average\": %d, \"check\": %d,\n \"rows\": [",
            perf_colls[o->coll].name, c->world, c->world / c->local_size, c->local_size,
            coll_dtype_name(o->dtype), op_name(o), coll_algo_name(o->algo), o->root,
            (int)o->average, o->check);
    for (int i = 0; i < nrows; i++) {
        fprintf(f, "%s\n  {\"bytes\": %zu, \"count\": %zu", i ? "," : "", rows[i].bytes,
                rows[i].count);
        for (int p = 0; p < 2; p++) {
            if (rows[i].place[p].ran) {
                fprintf(f, ", ");
                json_result(f, c, p ? "in_place" : "out_of_place", &rows[i].place[p]);
            }
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0) {
        perf_die("cannot write %s: %s", o->json, strerror(errno));
    }
}
