/*
 * nccl_bitwise_check: one rank of the check of the bitwise reductions on device buffers, started
 * by collective-launch with the COLL_* environment of its rank, over the fake device layer
 * (COLL_DEVICE_FAKE=N): on the NCCL path (docs/gpu-nccl.md: NCCL has no band, bor or bxor; the
 * daemons gather the nodes' results with ncclAllGather and reduce them on the device, with the
 * daemons' stand-in NCCL) or, with --algo, on the one-node device path (docs/gpu.md:
 * device+local, device+peers).
 *
 * For int8, uint8, int32 and int64 and each of band, bor and bxor, an allreduce of COUNT
 * elements on device buffers out of place, then in place, each rank's input bits drawn from its
 * rank and the element's index; with --algo also a reduce to the last rank and a reduce-scatter
 * of COUNT elements a rank, each out of place and in place. Every output byte is compared with
 * the reduction of every rank's input computed here, and coll_req_algo() must name the path
 * (before, these took the staged path: "staged+...").
 *
 * Options: --algo=NAME the algorithm's expected name (default "nccl": the allreduces alone);
 * --spread=N each rank's buffers on device rank % N (default: device 0).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 bad usage, 77 skipped (no device
 * layer).
 */
#include <collective.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_dev.h"

enum { COUNT = 1000 };

static coll_comm_t *comm;
static int rank, world;
static const char *algo_want = "nccl"; /* --algo */
static int spread;                     /* --spread: the devices, 0: device 0 alone */

/* The reductions checked. */
typedef enum { ALLREDUCE, REDUCE, REDUCE_SCATTER } kind_t;

/* Rank @p r's input element @p i, as 64 bits (each dtype keeps its low bytes). */
static uint64_t bits(int r, size_t i)
{
    uint64_t x = ((uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)(r + 1) * 0xC2B2AE3D27D4EB4Full);

    return x ^ (x >> 29);
}

/* @p a reduced with @p b by @p op. */
static uint64_t apply(coll_redop_t op, uint64_t a, uint64_t b)
{
    return op == COLL_BAND ? a & b : op == COLL_BOR ? a | b : a ^ b;
}

/* Element @p i of @p buf (@p esize bytes each) set to the low bytes of @p v. */
static void put(uint8_t *buf, size_t esize, size_t i, uint64_t v)
{
    for (size_t b = 0; b < esize; b++) {
        buf[i * esize + b] = (uint8_t)(v >> (8 * b));
    }
}

/* Launch @p coll (an allreduce, a reduce to the last rank or a reduce-scatter of COUNT elements
 * a rank) of @p dt by @p op from @p in to @p out. */
static coll_status_t launch(kind_t coll, void *in, void *out, coll_dtype_t dt, coll_redop_t op,
                            coll_request_t **req)
{
    switch (coll) {
    case REDUCE: return coll_reduce_async(comm, in, out, COUNT, dt, op, world - 1, NULL, req);
    case REDUCE_SCATTER: return coll_reduce_scatter_async(comm, in, out, COUNT, dt, op, NULL, req);
    default: return coll_allreduce_async(comm, in, out, COUNT, dt, op, NULL, req);
    }
}

/* Set this rank's input @p host (@p n elements) and the result @p want of its output (COUNT
 * elements) for @p coll. */
static void inputs(kind_t coll, coll_redop_t op, size_t esize, size_t n, uint8_t *host,
                   uint8_t *want)
{
    size_t first = coll == REDUCE_SCATTER ? (size_t)rank * COUNT : 0;

    for (size_t i = 0; i < n; i++) {
        put(host, esize, i, bits(rank, i));
    }
    for (size_t i = 0; i < COUNT; i++) {
        uint64_t acc = bits(0, first + i);
        for (int r = 1; r < world; r++) {
            acc = apply(op, acc, bits(r, first + i));
        }
        put(want, esize, i, acc);
    }
}

/* @p out (COUNT elements of @p esize bytes, on the device) against @p want; 0 when equal. */
static int compare(const char *what, const void *out, const uint8_t *want, size_t esize,
                   const char *algo)
{
    size_t bytes = COUNT * esize, i = 0;
    uint8_t *host = malloc(bytes);

    if (host == NULL || rank_dev_copy(host, out, bytes) < 0) {
        free(host);
        return -1;
    }
    while (i < bytes && host[i] == want[i]) {
        i++;
    }
    if (i < bytes) {
        fprintf(stderr, "rank %d: %s: byte %zu is 0x%02x, not 0x%02x\n", rank, what, i, host[i],
                want[i]);
    } else {
        printf("rank %d: %s of %d elements right (%s)\n", rank, what, COUNT, algo);
    }
    free(host);
    return i < bytes ? -1 : 0;
}

/* One @p coll of @p dt (@p esize bytes) by @p op, in place or not, against the values computed
 * here; 0 when right and named algo_want. */
static int run_one(kind_t coll, coll_dtype_t dt, size_t esize, coll_redop_t op, int in_place)
{
    size_t n = coll == REDUCE_SCATTER ? (size_t)COUNT * world : COUNT;
    size_t bytes = n * esize, off = coll == REDUCE_SCATTER ? (size_t)rank * COUNT * esize : 0;
    uint8_t *host = malloc(bytes), *want = malloc(COUNT * esize);
    uint8_t *in = rank_dev_alloc(bytes), *out = in_place ? in + off : rank_dev_alloc(bytes);
    coll_request_t *req = NULL;
    char what[80];
    coll_status_t st;
    int rc = -1;

    snprintf(what, sizeof(what), "%s %s %s%s", coll_dtype_name(dt), coll_redop_name(op),
             coll == REDUCE           ? "reduce"
             : coll == REDUCE_SCATTER ? "reduce-scatter"
                                      : "allreduce",
             in_place ? " in place" : "");
    if (host == NULL || want == NULL || in == NULL || out == NULL) {
        goto out;
    }
    inputs(coll, op, esize, n, host, want);
    if (rank_dev_copy(in, host, bytes) < 0) {
        goto out;
    }
    st = launch(coll, in, out, dt, op, &req);
    if (rank_dev_finish(what, st, req, algo_want) != 0) {
        rc = -1;
    } else if (coll == REDUCE && rank != world - 1) {
        rc = 0; /* the root's output alone is written */
    } else {
        rc = compare(what, out, want, esize, algo_want);
    }
out:
    if (out != NULL && !in_place) {
        coll_mem_free(comm, out);
    }
    if (in != NULL) {
        coll_mem_free(comm, in);
    }
    free(want);
    free(host);
    return rc;
}

/* Parse the options; 0, or -1 with a message. */
static int options(int argc, char **argv)
{
    static const struct option longs[] = {{"algo", required_argument, NULL, 'a'},
                                          {"spread", required_argument, NULL, 's'},
                                          {NULL, 0, NULL, 0}};
    int c;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c == 'a') {
            algo_want = optarg;
        } else if (c == 's' && atoi(optarg) > 0) {
            spread = atoi(optarg);
        } else {
            fprintf(stderr, "usage: nccl_bitwise_check [--algo=NAME] [--spread=N]\n");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        coll_dtype_t dt;
        size_t esize;
    } types[] = {{COLL_INT8, 1}, {COLL_UINT8, 1}, {COLL_INT32, 4}, {COLL_INT64, 8}};
    static const coll_redop_t ops[] = {COLL_BAND, COLL_BOR, COLL_BXOR};
    static const kind_t colls[] = {ALLREDUCE, REDUCE, REDUCE_SCATTER};
    /* NCCL's path takes the allreduces alone; the one-node path every reduction. */
    size_t ncolls;
    int rc;

    if (options(argc, argv) < 0) {
        return 2;
    }
    if ((comm = rank_dev_open("nccl_bitwise_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rank_dev_device = spread > 0 ? rank % spread : 0;
    ncolls = strcmp(algo_want, "nccl") == 0 ? 1 : sizeof(colls) / sizeof(colls[0]);
    rc = 0;
    for (size_t c = 0; c < ncolls && rc == 0; c++) {
        for (size_t t = 0; t < sizeof(types) / sizeof(types[0]) && rc == 0; t++) {
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]) && rc == 0; o++) {
                rc = run_one(colls[c], types[t].dt, types[t].esize, ops[o], 0);
                if (rc == 0) {
                    rc = run_one(colls[c], types[t].dt, types[t].esize, ops[o], 1);
                }
            }
        }
    }
    if (rc == 0) {
        printf("rank %d: done\n", rank);
    }
    rank_dev_close(comm);
    return rc == 0 ? 0 : 1;
}
