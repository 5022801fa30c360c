/*
 * coll-perf's main (perf.h): the sizes of the sweep, one row each, on every rank; rank 0
 * prints.
 */
#include <stdio.h>
#include <stdlib.h>

#include "perf/perf.h"

static size_t next_size(const perf_opts_t *o, size_t b)
{
    return o->factor > 1 ? b * o->factor : b + o->stepb;
}

static int count_sizes(const perf_opts_t *o)
{
    int n = 0;

    if (o->coll == PERF_BARRIER) {
        return 1;
    }
    for (size_t b = o->minb; b <= o->maxb; b = next_size(o, b)) {
        n++;
        if (next_size(o, b) <= b) { /* -b 0 with a factor */
            break;
        }
    }
    return n;
}

static perf_row_t *alloc_rows(int nrows, int world)
{
    perf_row_t *rows = calloc((size_t)nrows, sizeof(*rows));

    for (int i = 0; rows != NULL && i < nrows; i++) {
        for (int p = 0; p < 2; p++) {
            if ((rows[i].place[p].rank_us = calloc((size_t)world, sizeof(double))) == NULL) {
                perf_die("out of memory");
            }
        }
    }
    if (rows == NULL) {
        perf_die("out of memory");
    }
    return rows;
}

static void free_rows(perf_row_t *rows, int nrows)
{
    for (int i = 0; i < nrows; i++) {
        free(rows[i].place[0].rank_us);
        free(rows[i].place[1].rank_us);
    }
    free(rows);
}

static long long row_wrong(const perf_row_t *r)
{
    return (r->place[0].wrong > 0 ? r->place[0].wrong : 0) +
           (r->place[1].wrong > 0 ? r->place[1].wrong : 0);
}

int main(int argc, char **argv)
{
    perf_opts_t o;
    perf_ctx_t c;
    perf_data_t data;
    perf_row_t *rows;
    int nrows, i = 0;
    long long wrong = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    perf_parse_options(argc, argv, &o);
    nrows = count_sizes(&o);
    perf_ctx_open(&c, &o);
    rows = alloc_rows(nrows, c.world);
    if (perf_data_init(&data, o.dtype, o.op, c.world, perf_colls[o.coll].reduces) < 0) {
        perf_die("out of memory");
    }
    if (c.rank == 0) {
        perf_print_header(&c, &o);
    }
    for (size_t b = o.minb; i < nrows; b = next_size(&o, b), i++) {
        perf_run_size(&c, &o, &data, b, (unsigned)i, &rows[i]);
        wrong += row_wrong(&rows[i]);
        if (c.rank == 0) {
            perf_print_row(&o, &rows[i]);
        }
    }
    if (c.rank == 0) {
        perf_print_footer(&o, rows, nrows);
        if (o.json != NULL) {
            perf_write_json(&c, &o, rows, nrows);
        }
    }
    perf_barrier(&c);
    perf_data_free(&data);
    free_rows(rows, nrows);
    coll_comm_destroy(c.comm);
    return wrong > 0 ? 1 : 0;
}
