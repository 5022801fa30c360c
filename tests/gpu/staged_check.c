/*
 * staged_check: one rank of the staged path's checks (docs/gpu.md, "The staged path"), started
 * by collective-launch with the COLL_* environment of its rank. With COLL_DEVICE_FAKE=1 (daemons
 * and ranks) it runs over the fake device layer; on a machine with a GPU over the real one.
 *
 * Every buffer is in the job's pool on device 0; inputs are written and outputs read through
 * copies on a stream of the device layer, and every output is checked against values computed
 * here (small integers, exact in float32 and bfloat16 sums):
 *   default     allreduce float32 SUM out of place over --count elements (default 1.5 Mi, more
 *               than one staging chunk) and in place; bfloat16 SUM in place (rank 0's inputs
 *               near 256, so that the sum of two ranks needs more than 16 bits: the host's
 *               float32 sum rounded once is expected, computed here); all-gather,
 *               reduce-scatter, broadcast from the last rank and reduce to rank 0 (float32);
 *               coll_req_algo() of each names the staged path ("staged+...").
 *   --algo NAME the float32 allreduces (out of place and in place) must be named NAME exactly
 *               (coll_req_algo()): "staged+pipelined+ring" for one whose copies overlap the
 *               ring (a large allreduce between nodes), "staged+pipelined+local" on one.
 *   --time REPS a float32 allreduce out of place of --count elements, checked, then REPS of
 *               them timed, each after a barrier; rank 0 prints the median, the fastest and
 *               the slowest in ms and the algorithm (bench/staged-overlap.sh; never a pass or
 *               fail).
 *   --mismatch  rank 0 allreduces a device buffer of 1024 elements, every other rank a host
 *               buffer of 1025: every rank gets COLL_ERR_MISMATCH.
 *   --mixed     an allreduce from a device buffer into a host-pool buffer is refused with
 *               COLL_ERR_INVALID by the library (which ends the job, as any refusal does).
 *   --compression SPEC  the float32 allreduces only (out of place and in place), compressed
 *               with SPEC (coll_compression_parse()): "fp16" keeps these small integers exact.
 *   --nccl      the job's daemons run NCCL between them (the job parameter nccl, docs/gpu.md):
 *               every collective but the gather and scatter must name "nccl" (those the
 *               staged path), and averages follow, each against the host's arithmetic
 *               (collective.h) computed here: allreduce float32 (out of place), bfloat16 (in
 *               place; rank 0's inputs near 256, so a node's scaled sum rounded to 16 bits
 *               before the other node's is added would show), int32 (out of place, sums below
 *               zero truncated toward zero), reduce-scatter and reduce to rank 0 (float32);
 *               then a float16 sum and float16 and bfloat16 products in place whose node
 *               reductions need more than 16 bits, against the host's float32 rounded once
 *               (which 16-bit arithmetic in NCCL, rounding each node's part, misses on 2x2);
 *               --mismatch has every rank's buffer on the device.
 *   --kinds     rank 0 allreduces 1024 elements on the device, every other rank 1024 in the
 *               host pool: COLL_ERR_MISMATCH everywhere. With --nccl the nodes choose
 *               different algorithms (nccl against a host one), which the descriptor check
 *               finds; without, rank 0's node runs it through the daemons (the staged path)
 *               and the others on the direct path, which the daemons find where the paths
 *               cross (daemon/engine/shm_route.h). On one node (1x2) rank 0's goes to the
 *               daemon and rank 1's to the shared-memory area, where the daemon finds it
 *               waiting against its own operation (daemon/engine/shm_watch.h); the message
 *               names rank 1 in host memory and rank 0 in a device pool.
 *   --device[=NAME]  one node whose daemon has the executor of device memory: the same
 *               collectives and averages as --nccl, those must name NAME (default
 *               "device+local": combined on the device, docs/gpu.md; "device+peers" with
 *               --spread over devices that are peers), the gather and scatter the staged path.
 *   --spread[=N] each rank's buffers on device rank % N (default 2; N fake devices:
 *               COLL_DEVICE_FAKE=N), so a node's ranks are on N devices: without --device every
 *               collective must take the staged path ("staged+local" on one node).
 *   --nccl-error  a float32 allreduce of 1031 elements (not --count) must fail on every rank
 *               naming NCCL (the daemons' stand-in NCCL injects it: FAKE_NCCL_ASYNC_ERROR).
 *   --fails-with TEXT  the same, the error naming TEXT (a device's fault the daemons' fake
 *               injects: COLL_DEVICE_FAKE_EXEC_FAIL).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (no device
 * layer in this process).
 */
#include <collective.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rank_dev.h"

#define SMALL 1031 /* elements of the collectives beside the allreduce */

static const coll_op_params_t *params; /* the allreduces' (--compression), NULL: none */
static coll_comm_t *comm;
static int rank, world;
static int nccl; /* --nccl */
static int spread; /* --spread: devices the ranks' buffers are spread over, 0: none */
static const char *on_device; /* what the five device collectives must be named: "nccl" (--nccl),
                                 "device+local" (--device); NULL: "staged+..." */
static coll_redop_t redop = COLL_SUM; /* the reduce-scatter's and the reduce's (run_case()) */
static const char *fail_text = "NCCL"; /* what the failing allreduce's error names */
static const char *f32_algo; /* --algo: the float32 allreduces' name, NULL: any staged one */

/* Rank @p r's input element @p i. */
static float value(int r, size_t i)
{
    return (float)(r + 1) + (float)(i % 5);
}

/* The sum over every rank of element @p i of their inputs. */
static float sum(size_t i)
{
    return (float)(world * (world + 1) / 2) + (float)world * (float)(i % 5);
}

/* The reduction @p op (sum or average) over every rank of element @p i of their inputs: exact
 * for the world sizes of the tests (an average's division by 2 or 4). */
static float reduced(coll_redop_t op, size_t i)
{
    return op == COLL_AVG ? sum(i) / (float)world : sum(i);
}

/* Wait for a collective's request; its algorithm's name into @p algo. */
static coll_status_t finish(coll_status_t st, coll_request_t *req, char *algo, size_t len)
{
    algo[0] = '\0';
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        snprintf(algo, len, "%s", coll_req_algo(req));
        coll_req_free(req);
    }
    return st;
}

/* The collective @p what completed as named (on_device, the staged path for the gather and the
 * scatter); its output @p got equals @p want. */
static int check(const char *what, coll_status_t st, const char *algo, const float *got,
                 const float *want, size_t n)
{
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_err_name(st),
                coll_comm_last_error(comm));
        return -1;
    }
    int on_dev = on_device != NULL && strncmp(what, "gather", 6) != 0 &&
                 strncmp(what, "scatter", 7) != 0;

    if (on_dev ? strcmp(algo, on_device) != 0 : strncmp(algo, "staged+", 7) != 0) {
        fprintf(stderr, "rank %d: %s ran as '%s', not %s\n", rank, what, algo,
                on_dev ? on_device : "on the staged path");
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (got[i] != want[i]) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                    (double)got[i], (double)want[i]);
            return -1;
        }
    }
    printf("rank %d: %s of %zu elements right (%s)\n", rank, what, n, algo);
    return 0;
}

/* Float32 allreduce (@p op: SUM or AVG) of @p n elements from @p in into @p out (device
 * buffers, maybe the same), through @p h (2n floats of host memory). */
static int allreduce_f32(const char *what, float *in, float *out, size_t n, coll_redop_t op,
                         float *h)
{
    coll_request_t *req = NULL;
    char algo[32];
    coll_status_t st;

    for (size_t i = 0; i < n; i++) {
        h[i] = value(rank, i);
        h[n + i] = reduced(op, i);
    }
    if (rank_dev_copy(in, h, n * 4) < 0) {
        return -1;
    }
    st = coll_allreduce_async(comm, in, out, n, COLL_FLOAT32, op, params, &req);
    st = finish(st, req, algo, sizeof(algo));
    if (st == COLL_OK && rank_dev_copy(h, out, n * 4) < 0) {
        return -1;
    }
    if (st == COLL_OK && f32_algo != NULL && strcmp(algo, f32_algo) != 0) {
        fprintf(stderr, "rank %d: %s ran as '%s', not '%s'\n", rank, what, algo, f32_algo);
        return -1;
    }
    return check(what, st, algo, h, h + n, n);
}

/* @p f rounded to bfloat16, to nearest even. */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* @p f, zero or a normal float16 value (exact), as float16. */
static uint16_t to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) == 0) {
        return (uint16_t)(u >> 16);
    }
    return (uint16_t)(((u >> 16) & 0x8000u) | ((((u >> 23) & 0xffu) - 112u) << 10) |
                      ((u >> 13) & 0x3ffu));
}

static float from_half(coll_dtype_t dt, uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    int e = (b >> 10) & 0x1f, m = b & 0x3ff;
    float f;

    if (dt == COLL_BFLOAT16) {
        memcpy(&f, &u, 4);
        return f;
    }
    f = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 0x400), e - 25);
    return b & 0x8000 ? -f : f;
}

/* @p x (finite, in the 16-bit dtype @p dt's normal range or zero) rounded to @p dt, to nearest
 * even, in float arithmetic: 10 bits after the leading one for float16, 7 for bfloat16. */
static float round_half(coll_dtype_t dt, float x)
{
    int e = x == 0.0f ? 0 : ilogbf(x) - (dt == COLL_FLOAT16 ? 10 : 7);
    return ldexpf(rintf(ldexpf(x, -e)), e);
}

/* Rank @p r's 16-bit input element @p i (exact in float16 and bfloat16). A sum's or an
 * average's is B, B + 2 or B + 4 on rank 0 (B: 2048 for float16, 256 for bfloat16) and 0 to 2
 * on the others; a product's 33 to 63 (odd) on ranks 0 and 1 and 1 or 3 on the others. So the
 * reduction of the first two ranks (a node's, on 2x2) often needs more than 16 bits, and rounding
 * it before the rest is combined (NCCL's 16-bit arithmetic) gives another result than the host's
 * one rounding at the end (element 5 of a bfloat16 product, 43 x 53 x 3 x 1 = 6837: 6848 once,
 * 6816 from 2272 x 3). */
static float half_value(coll_dtype_t dt, coll_redop_t op, int r, size_t i)
{
    if (op == COLL_PROD) {
        return r < 2 ? 33.0f + 2.0f * (float)((i + 5 * (size_t)r) % 16)
                     : 1.0f + 2.0f * (float)((i + (size_t)r) % 2);
    }
    if (r == 0) {
        return (dt == COLL_FLOAT16 ? 2048.0f : 256.0f) + 2.0f * (float)(i % 3);
    }
    return (float)((i + (size_t)r) % 3);
}

/* Element @p i of a 16-bit allreduce with @p op as the host computes it (collective.h): every
 * input (an average's scaled by 1/world) summed or multiplied in float32, rounded once. */
static float half_want(coll_dtype_t dt, coll_redop_t op, size_t i)
{
    float inv = 1.0f / (float)world, acc = op == COLL_PROD ? 1.0f : 0.0f;

    for (int r = 0; r < world; r++) {
        float v = half_value(dt, op, r, i);
        acc = op == COLL_PROD ? acc * v : op == COLL_AVG ? acc + v * inv : acc + v;
    }
    return round_half(dt, acc);
}

/* A 16-bit (@p dt) allreduce with @p op (SUM, AVG or PROD) in place of SMALL elements. */
static int allreduce_half(coll_dtype_t dt, coll_redop_t op, float *h)
{
    uint16_t *d = rank_dev_alloc(SMALL * 2), *b = (uint16_t *)(h + 2 * SMALL);
    coll_request_t *req = NULL;
    char algo[32], what[64];
    coll_status_t st;

    for (size_t i = 0; i < SMALL && d != NULL; i++) {
        float v = half_value(dt, op, rank, i);
        b[i] = dt == COLL_FLOAT16 ? to_f16(v) : to_bf16(v);
        h[SMALL + i] = half_want(dt, op, i);
    }
    if (d == NULL || rank_dev_copy(d, b, SMALL * 2) < 0) {
        return -1;
    }
    st = coll_allreduce_async(comm, d, d, SMALL, dt, op, NULL, &req);
    st = finish(st, req, algo, sizeof(algo));
    if (st == COLL_OK && rank_dev_copy(b, d, SMALL * 2) < 0) {
        return -1;
    }
    for (size_t i = 0; i < SMALL; i++) {
        h[i] = from_half(dt, b[i]);
    }
    coll_mem_free(comm, d);
    snprintf(what, sizeof(what), "%s %s allreduce in place",
             dt == COLL_FLOAT16 ? "float16" : "bfloat16",
             op == COLL_AVG ? "average" : op == COLL_PROD ? "product" : "sum");
    return check(what, st, algo, h, h + SMALL, SMALL);
}

/* Rank @p r's int32 input element @p i: rank 0's below zero, so some sums are. */
static int32_t i32_value(int r, size_t i)
{
    return r == 0 ? -3 * (int32_t)(i % 11) : (int32_t)((i + (size_t)r) % 4);
}

/* Int32 AVG allreduce out of place of SMALL elements: the sum divided by the world size,
 * truncated toward zero (as C's division). */
static int allreduce_i32_avg(float *h)
{
    int32_t *in = rank_dev_alloc(SMALL * 4), *out = rank_dev_alloc(SMALL * 4);
    int32_t *b = (int32_t *)(h + 2 * SMALL);
    coll_request_t *req = NULL;
    char algo[32];
    coll_status_t st;
    int rc;

    for (size_t i = 0; i < SMALL; i++) {
        int64_t s = 0;
        for (int r = 0; r < world; r++) {
            s += i32_value(r, i);
        }
        b[i] = i32_value(rank, i);
        h[SMALL + i] = (float)(s / world);
    }
    if (in == NULL || out == NULL || rank_dev_copy(in, b, SMALL * 4) < 0) {
        return -1;
    }
    st = coll_allreduce_async(comm, in, out, SMALL, COLL_INT32, COLL_AVG, NULL, &req);
    st = finish(st, req, algo, sizeof(algo));
    if (st == COLL_OK && rank_dev_copy(b, out, SMALL * 4) < 0) {
        return -1;
    }
    for (size_t i = 0; i < SMALL; i++) {
        h[i] = (float)b[i];
    }
    rc = check("int32 average allreduce", st, algo, h, h + SMALL, SMALL);
    coll_mem_free(comm, out);
    coll_mem_free(comm, in);
    return rc;
}

enum { ALLGATHER, REDUCE_SCATTER, BROADCAST, REDUCE, GATHER, SCATTER, NCASES };

static const char *const case_names[NCASES] = {
    "all-gather", "reduce-scatter", "broadcast from the last rank", "reduce to rank 0",
    "gather to the last rank", "scatter from rank 0"};

/* Elements of case @p c's input and of the output this rank checks. */
static void extent(int c, size_t *in_p, size_t *out_p)
{
    size_t all = SMALL * (size_t)world;

    *in_p = c == REDUCE_SCATTER || (c == SCATTER && rank == 0) ? all
            : c == SCATTER                                    ? 0
                                                              : SMALL;
    *out_p = c == ALLGATHER || (c == GATHER && rank == world - 1) ? all
             : (c == REDUCE && rank != 0) || c == GATHER        ? 0
                                                                : SMALL;
}

/* Element @p i of what case @p c writes into this rank's output. */
static float expected(int c, size_t i)
{
    switch (c) {
    case ALLGATHER:
    case GATHER: return value((int)(i / SMALL), i % SMALL);
    case SCATTER: return value(0, (size_t)rank * SMALL + i);
    case REDUCE_SCATTER: return reduced(redop, (size_t)rank * SMALL + i);
    case BROADCAST: return value(world - 1, i);
    default: return reduced(redop, i);
    }
}

static coll_status_t start(int c, const float *in, float *out, coll_request_t **req)
{
    switch (c) {
    case ALLGATHER:
        return coll_allgather_async(comm, in, out, SMALL, COLL_FLOAT32, NULL, req);
    case REDUCE_SCATTER:
        return coll_reduce_scatter_async(comm, in, out, SMALL, COLL_FLOAT32, redop, NULL, req);
    case BROADCAST:
        return coll_broadcast_async(comm, in, out, SMALL, COLL_FLOAT32, world - 1, NULL, req);
    case REDUCE:
        return coll_reduce_async(comm, in, out, SMALL, COLL_FLOAT32, redop, 0, NULL, req);
    case GATHER:
        return coll_gather_async(comm, in, out, SMALL, COLL_FLOAT32, world - 1, NULL, req);
    default:
        return coll_scatter_async(comm, in, out, SMALL, COLL_FLOAT32, 0, NULL, req);
    }
}

/* Case @p c on device buffers of its own, through @p h (host memory for 2 (world + 1) SMALL
 * floats). */
static int run_case(int c, float *h)
{
    size_t nin, nout;
    float *in, *out;
    coll_request_t *req = NULL;
    char algo[32], what[64];
    coll_status_t st;
    int rc;

    snprintf(what, sizeof(what), "%s%s", redop == COLL_AVG ? "average " : "", case_names[c]);
    extent(c, &nin, &nout);
    if ((in = rank_dev_alloc((nin > 0 ? nin : 1) * 4)) == NULL || (out = rank_dev_alloc(SMALL * (size_t)world * 4)) == NULL) {
        return -1;
    }
    for (size_t i = 0; i < nin; i++) {
        h[i] = value(rank, i);
    }
    if (rank_dev_copy(in, h, nin * 4) < 0) {
        return -1;
    }
    st = start(c, in, out, &req);
    st = finish(st, req, algo, sizeof(algo));
    for (size_t i = 0; i < nout; i++) {
        h[nout + i] = expected(c, i);
    }
    rc = st == COLL_OK && rank_dev_copy(h, out, nout * 4) < 0
             ? -1
             : check(what, st, algo, h, h + nout, nout);
    coll_mem_free(comm, out);
    coll_mem_free(comm, in);
    return rc;
}

/* The float32 allreduces only, compressed with --compression's method. */
static int run_compressed(size_t count)
{
    float *h = malloc(count * 2 * sizeof(float));
    float *a = rank_dev_alloc(count * 4), *b = rank_dev_alloc(count * 4);
    int rc = h == NULL || a == NULL || b == NULL ? -1 : 0;

    if (rc == 0) {
        rc = allreduce_f32("compressed float32 allreduce", a, b, count, COLL_SUM, h);
    }
    if (rc == 0) {
        rc = allreduce_f32("compressed float32 allreduce in place", b, b, count, COLL_SUM, h);
    }
    free(h);
    return rc;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* --time @p reps: the checked allreduce of @p count floats, then @p reps timed. */
static int run_timed(size_t count, int reps)
{
    float *h = malloc(count * 2 * sizeof(float));
    float *a = rank_dev_alloc(count * 4), *b = rank_dev_alloc(count * 4);
    double *ms = calloc((size_t)reps, sizeof(double));
    char algo[32] = "";
    int rc = h == NULL || a == NULL || b == NULL || ms == NULL ? -1 : 0;

    rc = rc == 0 ? allreduce_f32("float32 allreduce", a, b, count, COLL_SUM, h) : rc;
    for (int k = 0; k < reps && rc == 0; k++) {
        coll_request_t *req = NULL;
        struct timespec t0, t1;
        coll_status_t st = coll_barrier_async(comm, NULL, &req);

        st = finish(st, req, algo, sizeof(algo));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        st = st == COLL_OK ? coll_allreduce_async(comm, a, b, count, COLL_FLOAT32, COLL_SUM,
                                                  NULL, &req)
                           : st;
        st = finish(st, req, algo, sizeof(algo));
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ms[k] = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        rc = st == COLL_OK ? 0 : check("timed float32 allreduce", st, algo, NULL, NULL, 0);
    }
    if (rc == 0 && rank == 0 && reps > 0) {
        qsort(ms, (size_t)reps, sizeof(*ms), by_value);
        printf("staged allreduce of %zu bytes: median %.1f ms, fastest %.1f, slowest %.1f over "
               "%d (%s)\n", count * 4, ms[reps / 2], ms[0], ms[reps - 1], reps, algo);
    }
    free(ms);
    free(h);
    return rc;
}

/* The averages of --nccl and --device: allreduces of float32, bfloat16 and int32, the
 * reduce-scatter and the reduce, on @p a and @p b (@p count floats each) and buffers of their
 * own, through @p h. */
static int run_averages(float *a, float *b, size_t count, float *h)
{
    int rc = allreduce_f32("float32 average allreduce", a, b, count, COLL_AVG, h);

    rc = rc == 0 ? allreduce_half(COLL_BFLOAT16, COLL_AVG, h) : rc;
    rc = rc == 0 ? allreduce_i32_avg(h) : rc;
    redop = COLL_AVG;
    rc = rc == 0 ? run_case(REDUCE_SCATTER, h) : rc;
    rc = rc == 0 ? run_case(REDUCE, h) : rc;
    redop = COLL_SUM;
    return rc;
}

/* The 16-bit reductions of --nccl and --device beside the bfloat16 sum and average, which
 * NCCL's 16-bit arithmetic would round on each node: a float16 sum, float16 and bfloat16
 * products. */
static int run_half(float *h)
{
    int rc = allreduce_half(COLL_FLOAT16, COLL_SUM, h);

    rc = rc == 0 ? allreduce_half(COLL_FLOAT16, COLL_PROD, h) : rc;
    return rc == 0 ? allreduce_half(COLL_BFLOAT16, COLL_PROD, h) : rc;
}

static int run_all(size_t count)
{
    float *h = malloc((count > SMALL * 8 ? count : SMALL * 8) * 2 * sizeof(float) +
                      2 * SMALL * (size_t)world * sizeof(float));
    float *a = rank_dev_alloc(count * 4), *b = rank_dev_alloc(count * 4);
    int rc = h == NULL || a == NULL || b == NULL ? -1 : 0;

    if (rc == 0) {
        rc = allreduce_f32("float32 allreduce", a, b, count, COLL_SUM, h);
    }
    if (rc == 0) {
        rc = allreduce_f32("float32 allreduce in place", b, b, count, COLL_SUM, h);
    }
    if (rc == 0) {
        rc = allreduce_half(COLL_BFLOAT16, COLL_SUM, h);
    }
    for (int c = 0; c < NCASES && rc == 0; c++) {
        rc = run_case(c, h);
    }
    if (rc == 0 && on_device != NULL) {
        rc = run_averages(a, b, count, h);
    }
    if (rc == 0 && on_device != NULL) {
        rc = run_half(h);
    }
    coll_mem_free(comm, b);
    coll_mem_free(comm, a);
    free(h);
    return rc;
}

static int expect(coll_status_t st, coll_status_t want, const char *what)
{
    if (st != want) {
        fprintf(stderr, "rank %d: %s: expected %s, got %s: %s\n", rank, what,
                coll_err_name(want), coll_err_name(st), coll_comm_last_error(comm));
        return -1;
    }
    printf("rank %d: %s: %s as expected: %s\n", rank, what, coll_err_name(st),
           coll_comm_last_error(comm));
    return 0;
}

/* --kinds on one node: the message names rank 1 (whose buffers are in host memory, posted in
 * shared memory) and rank 0 (a device pool, submitted to the daemon), and no rank as "not
 * submitted" (each side's ranks did submit, on their own path). */
static int kinds_named(void)
{
    const char *msg = coll_comm_last_error(comm);
    const char *host = strstr(msg, "in host memory at rank 1 (pid ");
    const char *dev = strstr(msg, "in a device pool at rank 0 (pid ");

    if (host == NULL || strstr(host, "node 0, posted it in shared memory)") == NULL ||
        dev == NULL || strstr(dev, "node 0, submitted it to the daemon)") == NULL ||
        strstr(msg, "not submitted") != NULL) {
        fprintf(stderr, "rank %d: the mismatch does not name rank 1 in host memory and rank 0 "
                "on the device: %s\n", rank, msg);
        return -1;
    }
    return 0;
}

/* Rank 0 on the device with 1024 elements, the others in the host pool (with --nccl on the
 * device) with 1025; with @p same_count (--kinds) every rank with 1024, the others in the host
 * pool. */
static int run_mismatch(int same_count)
{
    size_t n = rank == 0 || same_count ? 1024 : 1025;
    void *buf = NULL;
    coll_request_t *req = NULL;
    char algo[32];
    coll_status_t st = rank == 0 || (nccl && !same_count) ? ((buf = rank_dev_alloc(n * 4)) != NULL ? COLL_OK : COLL_ERR_NOMEM)
                                 : coll_mem_alloc(comm, n * 4, &buf);

    if (st != COLL_OK) {
        return -1;
    }
    st = coll_allreduce_async(comm, buf, buf, n, COLL_FLOAT32, COLL_SUM, NULL, &req);
    if (expect(finish(st, req, algo, sizeof(algo)), COLL_ERR_MISMATCH,
               same_count ? "an allreduce on the device on one node, in host memory on the "
                            "others"
                          : "an allreduce whose counts disagree") < 0) {
        return -1;
    }
    return same_count && !nccl && coll_comm_local_size(comm) == coll_comm_world_size(comm)
               ? kinds_named()
               : 0;
}

/* Send on the device, receive in the host pool: refused by the library, which ends the job (as
 * any refused submission does). */
static int run_mixed(void)
{
    float *d = rank_dev_alloc(SMALL * 4), *h = NULL;
    coll_request_t *req = NULL;
    coll_status_t st = coll_mem_alloc(comm, SMALL * 4, (void **)&h);

    if (d == NULL || st != COLL_OK) {
        return -1;
    }
    /* Every rank holds its buffers before the first refusal ends the job (a host allreduce). */
    memset(h, 0, SMALL * 4);
    if ((st = coll_allreduce(comm, h, h, SMALL, COLL_FLOAT32, COLL_SUM)) != COLL_OK) {
        return expect(st, COLL_OK, "a host allreduce");
    }
    st = coll_allreduce_async(comm, d, h, SMALL, COLL_FLOAT32, COLL_SUM, NULL, &req);
    return expect(st, COLL_ERR_INVALID, "an allreduce from the device into the host pool");
}

/* A float32 allreduce on the device that the daemons fail: an error naming fail_text (NCCL's
 * or the device's); never a success, whose result would be wrong. */
static int run_nccl_error(void)
{
    float *d = rank_dev_alloc(SMALL * 4);
    coll_request_t *req = NULL;
    char algo[32];
    coll_status_t st;

    if (d == NULL) {
        return -1;
    }
    /* Every rank joined before any device work: a node whose ranks are in could otherwise fail
     * the job while another rank still joins (its join then gets the error, not this call). */
    st = coll_barrier_async(comm, NULL, &req);
    if (finish(st, req, algo, sizeof(algo)) != COLL_OK) {
        fprintf(stderr, "rank %d: barrier: %s\n", rank, coll_comm_last_error(comm));
        return -1;
    }
    st = coll_allreduce_async(comm, d, d, SMALL, COLL_FLOAT32, COLL_SUM, NULL, &req);
    st = finish(st, req, algo, sizeof(algo));
    if (st == COLL_OK || strstr(coll_comm_last_error(comm), fail_text) == NULL) {
        fprintf(stderr, "rank %d: an allreduce that must fail naming %s: %s: '%s'\n", rank,
                fail_text, coll_err_name(st), coll_comm_last_error(comm));
        return -1;
    }
    printf("rank %d: the allreduce failed as expected: %s: %s\n", rank, coll_err_name(st),
           coll_comm_last_error(comm));
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"count", required_argument, NULL, 'n'},
                                         {"mismatch", no_argument, NULL, 'm'},
                                         {"mixed", no_argument, NULL, 'x'},
                                         {"compression", required_argument, NULL, 'c'},
                                         {"nccl", no_argument, NULL, 'N'},
                                         {"device", optional_argument, NULL, 'D'},
                                         {"spread", optional_argument, NULL, 'S'},
                                         {"nccl-error", no_argument, NULL, 'e'},
                                         {"fails-with", required_argument, NULL, 'F'},
                                         {"kinds", no_argument, NULL, 'k'},
                                         {"algo", required_argument, NULL, 'a'},
                                         {"time", required_argument, NULL, 't'},
                                         {NULL, 0, NULL, 0}};
    static coll_op_params_t compressed = {.field_mask = COLL_OP_PARAM_COMPRESSION};
    size_t count = 3u << 19;
    int c, mode = 0, rc, reps = 0;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'n') {
            count = (size_t)atol(optarg);
        } else if (c == 'N') {
            nccl = 1;
            on_device = "nccl";
        } else if (c == 'D') {
            on_device = optarg != NULL ? optarg : "device+local";
        } else if (c == 'S') {
            spread = optarg != NULL ? atoi(optarg) : 2;
        } else if (c == 'F') {
            mode = 'e';
            fail_text = optarg;
        } else if (c == 'a') {
            f32_algo = optarg;
        } else if (c == 't') {
            mode = c;
            reps = atoi(optarg);
        } else if (c == 'm' || c == 'x' || c == 'e' || c == 'k') {
            mode = c;
        } else if (c == 'c' && coll_compression_parse(optarg, &compressed.compression) == COLL_OK) {
            mode = c;
            params = &compressed;
        } else {
            fprintf(stderr, "usage: staged_check [--count N] [--algo NAME] [--mismatch | "
                    "--mixed | --compression SPEC | --nccl-error | --fails-with TEXT | --kinds | "
                    "--time REPS] "
                    "[--nccl | --device[=NAME]] [--spread[=N]]\n");
            return 2;
        }
    }
    if ((comm = rank_dev_open("staged_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rank_dev_device = spread > 0 ? rank % spread : 0;
    rc = mode == 'm' || mode == 'k' ? run_mismatch(mode == 'k')
         : mode == 'x' ? run_mixed()
         : mode == 'e' ? run_nccl_error()
         : mode == 'c' ? run_compressed(count)
         : mode == 't' ? run_timed(count, reps)
                       : run_all(count);
    if (rc == 0) {
        printf("rank %d: done\n", rank);
    }
    rank_dev_close(comm);
    return rc == 0 ? 0 : 1;
}
