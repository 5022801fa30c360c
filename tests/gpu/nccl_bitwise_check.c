/*
 * nccl_bitwise_check: one rank of the check of the bitwise allreduces on the NCCL path
 * (docs/gpu-nccl.md: NCCL has no band, bor or bxor; the daemons gather the nodes' results with
 * ncclAllGather and reduce them on the device), started by collective-launch with the COLL_*
 * environment of its rank, over the fake device layer (COLL_DEVICE_FAKE=1) and the daemons'
 * stand-in NCCL.
 *
 * For int8, uint8, int32 and int64 and each of band, bor and bxor, an allreduce of COUNT
 * elements on device buffers out of place, then in place, each rank's input bits drawn from its
 * rank and the element's index; every output byte is compared with the reduction of every
 * rank's input computed here, and coll_req_algo() must say "nccl" (before, these took the
 * staged path: "staged+...").
 *
 * Exit status: 0 success, 1 a failed check (with a message), 77 skipped (no device layer).
 */
#include <collective.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_dev.h"

enum { COUNT = 1000 };

static coll_comm_t *comm;
static int rank, world;

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

/* One allreduce of @p dt (@p esize bytes) by @p op, in place or not, against the values
 * computed here; 0 when right and named "nccl". */
static int run_one(coll_dtype_t dt, size_t esize, coll_redop_t op, int in_place)
{
    size_t bytes = COUNT * esize;
    uint8_t *host = malloc(bytes), *want = malloc(bytes);
    void *in = rank_dev_alloc(bytes), *out = in_place ? in : rank_dev_alloc(bytes);
    coll_request_t *req = NULL;
    char what[64], algo[32] = "";
    coll_status_t st;
    int rc = -1;

    snprintf(what, sizeof(what), "%s %s allreduce%s", coll_dtype_name(dt), coll_redop_name(op),
             in_place ? " in place" : "");
    if (host == NULL || want == NULL || in == NULL || out == NULL) {
        goto out;
    }
    for (size_t i = 0; i < COUNT; i++) {
        uint64_t acc = bits(0, i);
        for (int r = 1; r < world; r++) {
            acc = apply(op, acc, bits(r, i));
        }
        put(want, esize, i, acc);
        put(host, esize, i, bits(rank, i));
    }
    if (rank_dev_copy(in, host, bytes) < 0) {
        goto out;
    }
    st = coll_allreduce_async(comm, in, out, COUNT, dt, op, NULL, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        snprintf(algo, sizeof(algo), "%s", coll_req_algo(req));
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_err_name(st),
                coll_comm_last_error(comm));
    } else if (strcmp(algo, "nccl") != 0) {
        fprintf(stderr, "rank %d: %s ran as '%s', not nccl\n", rank, what, algo);
    } else if (rank_dev_copy(host, out, bytes) == 0) {
        size_t i = 0;
        while (i < bytes && host[i] == want[i]) {
            i++;
        }
        if (i < bytes) {
            fprintf(stderr, "rank %d: %s: byte %zu is 0x%02x, not 0x%02x\n", rank, what, i,
                    host[i], want[i]);
        } else {
            printf("rank %d: %s of %d elements right (%s)\n", rank, what, COUNT, algo);
            rc = 0;
        }
    }
out:
    if (out != NULL && out != in) {
        coll_mem_free(comm, out);
    }
    if (in != NULL) {
        coll_mem_free(comm, in);
    }
    free(want);
    free(host);
    return rc;
}

int main(void)
{
    static const struct {
        coll_dtype_t dt;
        size_t esize;
    } types[] = {{COLL_INT8, 1}, {COLL_UINT8, 1}, {COLL_INT32, 4}, {COLL_INT64, 8}};
    static const coll_redop_t ops[] = {COLL_BAND, COLL_BOR, COLL_BXOR};
    int rc;

    if ((comm = rank_dev_open("nccl_bitwise_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rc = 0;
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]) && rc == 0; t++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]) && rc == 0; o++) {
            rc = run_one(types[t].dt, types[t].esize, ops[o], 0);
            if (rc == 0) {
                rc = run_one(types[t].dt, types[t].esize, ops[o], 1);
            }
        }
    }
    if (rc == 0) {
        printf("rank %d: done\n", rank);
    }
    rank_dev_close(comm);
    return rc == 0 ? 0 : 1;
}
