/*
 * One size of the sweep, out of place then in place: its time (perf.h: warmup, sizing,
 * batch), and with -c its check on fresh data against values computed here (perf/data.h).
 */
#include <stdio.h>
#include <time.h>

#include "perf/perf.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_checked(perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace,
                        const char *what)
{
    coll_status_t st = perf_run_op(c, o, count, inplace);
    if (st != COLL_OK) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s %s %s of %zu elements", what, perf_colls[o->coll].name,
                 inplace ? "in place" : "out of place", count);
        perf_die_st(c, msg, st);
    }
}

/* The time -a asks for from every rank's (in c->trecv), microseconds. */
static double shown_time(const perf_ctx_t *c, const perf_opts_t *o, perf_result_t *r)
{
    double sum = 0, lo = 0, hi = 0;

    for (int k = 0; k < c->world; k++) {
        r->rank_us[k] = c->trecv[k] * 1e6;
        sum += r->rank_us[k];
        lo = k == 0 || r->rank_us[k] < lo ? r->rank_us[k] : lo;
        hi = k == 0 || r->rank_us[k] > hi ? r->rank_us[k] : hi;
    }
    switch (o->average) {
    case PERF_AVG_RANK0: return r->rank_us[0];
    case PERF_AVG_MIN: return lo;
    case PERF_AVG_MAX: return hi;
    default: return sum / c->world;
    }
}

static void time_place(perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace,
                       perf_result_t *r)
{
    double t0, one;
    int n = o->iters;

    for (int w = 0; w < o->warmup; w++) {
        run_checked(c, o, count, inplace, "warmup");
    }
    perf_barrier(c);
    t0 = now_s();
    run_checked(c, o, count, inplace, "sizing");
    one = perf_max_over_ranks(c, now_s() - t0);
    if (one > 0 && one * n > o->budget_s) {
        n = (int)(o->budget_s / one);
    }
    n = n < PERF_MIN_ITERS ? PERF_MIN_ITERS : n;
    perf_barrier(c);
    t0 = now_s();
    for (int i = 0; i < n; i++) {
        run_checked(c, o, count, inplace, "timed");
    }
    perf_gather_times(c, (now_s() - t0) / n);
    r->iters = n;
    r->time_us = shown_time(c, o, r);
    snprintf(r->algo, sizeof(r->algo), "%s", c->algo);
}

/* Fresh inputs for the check operation and a sentinel in every output element it must write
 * (inputs after outputs: in place they share memory). */
static void prepare_check(perf_ctx_t *c, const perf_opts_t *o, const perf_data_t *d,
                          size_t count, int inplace)
{
    size_t blk = count / (size_t)c->world;
    void *sb, *rb;

    perf_op_buffers(c, o, count, inplace, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLGATHER:
        perf_data_poison(d, c->recv, count);
        perf_data_fill(d, c->rank, sb, (size_t)c->rank * blk, blk);
        break;
    case PERF_BROADCAST:
        perf_data_poison(d, rb, count);
        if (c->rank == o->root) {
            perf_data_fill(d, c->rank, sb, 0, count);
        }
        break;
    case PERF_REDUCE_SCATTER:
        perf_data_poison(d, rb, blk);
        perf_data_fill(d, c->rank, sb, 0, count);
        break;
    default: /* allreduce, reduce, sendrecv */
        perf_data_poison(d, rb, count);
        perf_data_fill(d, c->rank, sb, 0, count);
        break;
    }
}

/* Wrong elements in this rank's output of the check operation. */
static size_t count_wrong(const perf_ctx_t *c, const perf_opts_t *o, const perf_data_t *d,
                          size_t count, int inplace)
{
    size_t blk = count / (size_t)c->world, wrong = 0;
    void *sb, *rb;

    perf_op_buffers(c, o, count, inplace, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLREDUCE:
        return perf_data_check_reduced(d, rb, 0, count);
    case PERF_REDUCE:
        return c->rank == o->root ? perf_data_check_reduced(d, rb, 0, count) : 0;
    case PERF_REDUCE_SCATTER:
        return perf_data_check_reduced(d, rb, (size_t)c->rank * blk, blk);
    case PERF_ALLGATHER:
        for (int b = 0; b < c->world; b++) {
            wrong += perf_data_check_input(d, b, c->recv + (size_t)b * blk * c->esize,
                                           (size_t)b * blk, blk);
        }
        return wrong;
    case PERF_BROADCAST:
        return perf_data_check_input(d, o->root, rb, 0, count);
    case PERF_SENDRECV:
        return perf_data_check_input(d, (c->rank + c->world - 1) % c->world, rb, 0, count);
    default:
        return 0;
    }
}

static long long check_place(perf_ctx_t *c, const perf_opts_t *o, perf_data_t *d, size_t count,
                             int inplace, uint64_t seed)
{
    perf_data_seed(d, seed);
    prepare_check(c, o, d, count, inplace);
    perf_barrier(c);
    run_checked(c, o, count, inplace, "check");
    return perf_sum_over_ranks(c, (int64_t)count_wrong(c, o, d, count, inplace));
}

/* Elements of a @p bytes operation: whole blocks of world elements where blocks are split. */
static size_t size_count(const perf_ctx_t *c, const perf_opts_t *o, size_t bytes)
{
    size_t n = bytes / c->esize;
    if (o->coll == PERF_BARRIER) {
        return 0;
    }
    if (o->coll == PERF_REDUCE_SCATTER || o->coll == PERF_ALLGATHER) {
        n = n / (size_t)c->world * (size_t)c->world;
    }
    return n;
}

static double bus_factor(perf_coll_t coll, int n)
{
    switch (coll) {
    case PERF_ALLREDUCE: return 2.0 * (n - 1) / n;
    case PERF_REDUCE_SCATTER:
    case PERF_ALLGATHER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

void perf_run_size(perf_ctx_t *c, const perf_opts_t *o, perf_data_t *d, size_t bytes,
                   unsigned idx, perf_row_t *row)
{
    row->count = size_count(c, o, bytes);
    row->bytes = row->count * c->esize;
    for (int inplace = 0; inplace < 2; inplace++) {
        perf_result_t *r = &row->place[inplace];

        r->ran = (o->places >> inplace & 1u) && (!inplace || perf_colls[o->coll].inplace);
        r->wrong = -1;
        if (!r->ran) {
            continue;
        }
        time_place(c, o, row->count, inplace, r);
        r->algbw = r->time_us > 0 ? (double)row->bytes / (r->time_us * 1e3) : 0;
        r->busbw = r->algbw * bus_factor(o->coll, c->world);
        if (o->check) {
            r->wrong = o->coll == PERF_BARRIER
                           ? 0
                           : check_place(c, o, d, row->count, inplace,
                                         ((uint64_t)o->coll << 32) | (idx << 1) | inplace);
        }
    }
}
