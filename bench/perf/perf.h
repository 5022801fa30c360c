/*
 * coll-perf: nccl-tests style bandwidth and latency sweep of one libcollective collective,
 * out of place and in place side by side, with nccl-tests' options and datatype names (see
 * options.c and docs/benchmarks.md). Run as every rank of a job (collective-launch, mpirun,
 * srun), or alone as a single rank when no launcher started it:
 *
 *   coll-perf -b 8 -e 128M -f 2 -g 1                          # one rank, like all_reduce_perf
 *   collective-launch --nodes 2 --ranks-per-node 2 -- coll-perf -b 4K -e 256M -d float -o sum
 *
 * For each size and placement: -w warmup operations; one operation timed to choose the
 * iteration count (at most -n, fewer when -n of them would take longer than --time-budget
 * seconds, never fewer than 3); a barrier; the batch of operations back to back, each waited
 * before the next is submitted, timed with CLOCK_MONOTONIC; the per-rank times are
 * all-gathered and reduced as -a says (rank 0, mean, min, max). With -c 1 one more operation
 * runs on fresh data and every output element is compared with a result computed here
 * independently (perf/data.h); #wrong is the number of wrong elements summed over ranks.
 *
 * Conventions (those of nccl-tests, doc/PERFORMANCE.md there):
 *   size   bytes of the whole buffer: the allreduce/broadcast/reduce buffer, the reduce-scatter
 *          input (world x the output), the all-gather output (world x the input), one message
 *          of sendrecv. count is size in elements.
 *   algbw  size / time, GB/s with 1 GB = 1e9 bytes
 *   busbw  algbw x factor, n = world size (ranks, not nodes): allreduce 2(n-1)/n,
 *          reduce_scatter and allgather (n-1)/n, broadcast, reduce and sendrecv 1.
 *
 * The files: options.c (the command line), run.c (the communicator, its buffers, one
 * operation, the tool's own collectives), measure.c (one size: timing and check), report.c
 * (the table and JSON), main.c. Exit status: 0 all sizes ran (and were correct with -c), 1 an
 * error or a wrong result, 2 a usage error.
 */
#ifndef COLL_PERF_H
#define COLL_PERF_H

#include <collective.h>

#include <stddef.h>
#include <stdint.h>

#include "perf/data.h"

#define PERF_ALGO_NAME_MAX 32
#define PERF_MIN_ITERS 3

/** The collectives coll-perf measures. */
typedef enum {
    PERF_ALLREDUCE,
    PERF_REDUCE_SCATTER,
    PERF_ALLGATHER,
    PERF_BROADCAST,
    PERF_REDUCE,
    PERF_BARRIER,
    PERF_SENDRECV,
    PERF_COLL_COUNT
} perf_coll_t;

/** What a collective is: its name, whether it reduces, has a root, has an in-place form. */
typedef struct {
    const char *name;
    int reduces, rooted, inplace;
} perf_coll_info_t;

/** The table of perf_coll_t (options.c). */
extern const perf_coll_info_t perf_colls[PERF_COLL_COUNT];

/** -a: which time of the ranks' a row shows (nccl-tests' --average). */
typedef enum { PERF_AVG_RANK0, PERF_AVG_MEAN, PERF_AVG_MIN, PERF_AVG_MAX } perf_average_t;

/** The command line. */
typedef struct {
    size_t minb, maxb, stepb;
    unsigned factor;       /**< -f; 1: sizes grow by -i bytes instead */
    int iters, warmup, check, root;
    perf_average_t average;
    double budget_s;       /**< --time-budget per size and placement */
    int timeout_ms;        /**< -T: one operation's bound */
    perf_coll_t coll;
    coll_dtype_t dtype;
    coll_redop_t op;
    coll_algo_t algo;
    const char *json;      /**< -J: results as JSON (rank 0), or NULL */
    unsigned places;       /**< --place: bit 0 out of place, bit 1 in place */
} perf_opts_t;

/** The communicator and the buffers of one rank. */
typedef struct {
    coll_comm_t *comm;
    int rank, world, local_size;
    int timeout_ms;        /* -T, for every wait */
    size_t esize;
    uint8_t *send, *recv;  /* -e bytes each */
    double *tsend, *trecv; /* 1 and world doubles: per-rank times */
    int64_t *wsend, *wrecv;
    char algo[PERF_ALGO_NAME_MAX]; /* of the last operation */
} perf_ctx_t;

/** One placement (out of place, in place) of one size. */
typedef struct {
    int ran;               /**< 0: the collective has no such form (the columns show "-") */
    int iters;
    double time_us, algbw, busbw;
    double *rank_us;       /**< world entries */
    char algo[PERF_ALGO_NAME_MAX];
    long long wrong;       /**< -1: not checked */
} perf_result_t;

/** One line of the table: [0] out of place, [1] in place. */
typedef struct {
    size_t bytes, count;
    perf_result_t place[2];
} perf_row_t;

/** @brief Parse the command line into @p o; exits 2 with a message on a usage error. */
void perf_parse_options(int argc, char **argv, perf_opts_t *o);

/** @brief Print "coll-perf: [rank R: ]..." on stderr and exit 1. */
void perf_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/** @brief perf_die() with @p st's name, text and the communicator's last error. */
void perf_die_st(const perf_ctx_t *c, const char *what, coll_status_t st)
    __attribute__((noreturn));

/** @brief Join the job (a single rank of its own when no launcher started this process) and
 *         allocate the buffers in its pool; exits on failure. */
void perf_ctx_open(perf_ctx_t *c, const perf_opts_t *o);

/** @brief The send and receive buffers of an operation of @p count elements (@p inplace: the
 *         in-place form, nccl-tests' layout). */
void perf_op_buffers(const perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace,
                     void **sb, void **rb);

/** @brief Run one operation of the benchmarked collective and wait for it; c->algo is set. */
coll_status_t perf_run_op(perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace);

/** @brief The tool's own collectives (exit on failure): a barrier, the max and the sum of a
 *         value over ranks, every rank's value into c->trecv. */
void perf_barrier(perf_ctx_t *c);
double perf_max_over_ranks(perf_ctx_t *c, double v);
long long perf_sum_over_ranks(perf_ctx_t *c, int64_t v);
void perf_gather_times(perf_ctx_t *c, double t);

/** @brief Measure (and check) size @p bytes in both placements into @p row (measure.c);
 *         @p idx numbers the size, for fresh check data. */
void perf_run_size(perf_ctx_t *c, const perf_opts_t *o, perf_data_t *d, size_t bytes,
                   unsigned idx, perf_row_t *row);

/** @brief The table (report.c): header, one row per size, footer; JSON of every row. */
void perf_print_header(const perf_ctx_t *c, const perf_opts_t *o);
void perf_print_row(const perf_opts_t *o, const perf_row_t *r);
void perf_print_footer(const perf_opts_t *o, const perf_row_t *rows, int nrows);
void perf_write_json(const perf_ctx_t *c, const perf_opts_t *o, const perf_row_t *rows,
                     int nrows);

/** @return nccl-tests' name of @p dtype ("float", "half", "bfloat16", "int32", ...). */
const char *perf_dtype_name(coll_dtype_t dtype);

#endif
