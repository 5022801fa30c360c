/*
 * staged_p2p_check: one rank of the staged path's checks of point-to-point transfers and the
 * all-to-all on device buffers (docs/gpu.md, "The staged path"), started by collective-launch
 * with the COLL_* environment of its rank. With COLL_DEVICE_FAKE=1 (daemons and ranks) it runs
 * over the fake device layer; on a machine with a GPU over the real one.
 *
 * Inputs are written and outputs read through copies on a stream of the device layer; every
 * output is checked against values computed here, and coll_req_algo() of every request whose
 * buffer is on the device names the staged path ("staged+p2p", "staged+direct"), of one whose
 * buffer is in the host pool the host's ("p2p"):
 *   a ring    rank r sends --count floats from a device buffer to rank r + 1 and receives
 *             rank r - 1's into a device buffer (on 2x2 two of the four cross the nodes, two
 *             stay on one);
 *   pairs     ranks 2k and 2k + 1 exchange --count floats, device to device;
 *   device to host, host to device
 *             the ring again with the receive buffers in the host pool, then with the send
 *             buffers in the host pool and the receive buffers on the device;
 *   alltoall  SMALL floats from every rank to every rank, device to device;
 *   alltoallv rank r sends j + r + 1 floats to rank j, and receives them at displacements
 *             with gaps of GAP floats between the blocks: the gaps keep what the rank wrote
 *             there before (the staged path copies back the receive blocks only).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (no device
 * layer in this process).
 */
#include <collective.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rank_dev.h"

#define SMALL 1031   /* elements of each all-to-all block */
#define GAP 7        /* floats between the alltoallv's receive blocks */
#define SENTINEL -5.0f

static coll_comm_t *comm;
static int rank, world;

/* Element @p i of what rank @p from sends rank @p to (a message or an all-to-all's block). */
static float value(int from, int to, size_t i)
{
    return (float)(from * 1000 + to * 10) + (float)(i % 7);
}

/* @p bytes (at least 4) in the job's pool on device 0 (@p dev) or in the host pool. */
static float *alloc(size_t bytes, int dev)
{
    void *p = NULL;
    coll_status_t st = dev ? coll_mem_alloc_on(comm, bytes + 4, COLL_MEMORY_CUDA, 0, &p)
                           : coll_mem_alloc(comm, bytes + 4, &p);

    if (st != COLL_OK) {
        fprintf(stderr, "rank %d: allocating %zu bytes: %s: %s\n", rank, bytes,
                coll_err_name(st), coll_comm_last_error(comm));
    }
    return st == COLL_OK ? p : NULL;
}

/* Write @p n floats of @p h into @p buf (device or host). */
static int put(float *buf, int dev, const float *h, size_t n)
{
    if (dev) {
        return rank_dev_copy(buf, h, n * 4);
    }
    memcpy(buf, h, n * 4);
    return 0;
}

/* Read @p n floats of @p buf (device or host) into @p h. */
static int get(float *h, const float *buf, int dev, size_t n)
{
    if (dev) {
        return rank_dev_copy(h, buf, n * 4);
    }
    memcpy(h, buf, n * 4);
    return 0;
}

/* Elements [@p from, @p from + @p n) of @p got against @p want (of elements from @p from). */
static int check(const char *what, const float *got, const float *want, size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++) {
        if (got[i] != want[i]) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                    (double)got[i], (double)want[i]);
            return -1;
        }
    }
    return 0;
}

/* @p n floats to rank @p to (the send buffer on the device: @p sdev) and from rank @p from
 * (the receive buffer on the device: @p rdev), through @p h (3n floats). */
static int exchange(const char *what, int to, int from, size_t n, int sdev, int rdev, float *h)
{
    float *s = alloc(n * 4, sdev), *r = alloc(n * 4, rdev);
    coll_request_t *sreq = NULL, *rreq = NULL;
    coll_status_t sst, rst;
    int rc = s == NULL || r == NULL ? -1 : 0;

    for (size_t i = 0; i < n; i++) {
        h[i] = value(rank, to, i);
        h[n + i] = value(from, rank, i);
    }
    if (rc == 0 && put(s, sdev, h, n) == 0) {
        rst = coll_recv_async(comm, r, n, COLL_FLOAT32, from, NULL, &rreq);
        sst = coll_send_async(comm, s, n, COLL_FLOAT32, to, NULL, &sreq);
        rc = rank_dev_finish(what, rst, rreq, rdev ? "staged+p2p" : "p2p");
        rc = rank_dev_finish(what, sst, sreq, sdev ? "staged+p2p" : "p2p") == 0 ? rc : -1;
    } else {
        rc = -1;
    }
    if (rc == 0) {
        rc = get(h + 2 * n, r, rdev, n) == 0 ? check(what, h + 2 * n, h + n, 0, n) : -1;
    }
    if (rc == 0) {
        printf("rank %d: %s of %zu floats right\n", rank, what, n);
    }
    coll_mem_free(comm, r);
    coll_mem_free(comm, s);
    return rc;
}

/* The all-to-all of equal blocks of SMALL floats on device buffers, through @p h. */
static int alltoall(float *h)
{
    size_t n = SMALL * (size_t)world;
    float *s = alloc(n * 4, 1), *r = alloc(n * 4, 1);
    coll_request_t *req = NULL;
    int rc = s == NULL || r == NULL ? -1 : 0;

    for (size_t i = 0; i < n; i++) {
        h[i] = value(rank, (int)(i / SMALL), i % SMALL);
        h[n + i] = value((int)(i / SMALL), rank, i % SMALL);
    }
    if (rc == 0 && put(s, 1, h, n) == 0) {
        coll_status_t st = coll_alltoall_async(comm, s, r, SMALL, COLL_FLOAT32, NULL, &req);
        rc = rank_dev_finish("alltoall", st, req, "staged+direct");
    } else {
        rc = -1;
    }
    if (rc == 0) {
        rc = get(h + 2 * n, r, 1, n) == 0 ? check("alltoall", h + 2 * n, h + n, 0, n) : -1;
    }
    if (rc == 0) {
        printf("rank %d: alltoall of %d blocks of %d floats right\n", rank, world, SMALL);
    }
    coll_mem_free(comm, r);
    coll_mem_free(comm, s);
    return rc;
}

/* Floats rank @p from sends rank @p to in the alltoallv. */
static size_t vcount(int from, int to)
{
    return (size_t)(to + from + 1);
}

/* The alltoallv: this rank's counts and displacements (send blocks packed, receive blocks
 * GAP floats apart after a first gap), its send data in @p h, the receive buffer as expected
 * (the gaps keep the sentinel) in @p want; @return the receive buffer's floats. */
static size_t vplan(size_t *sc, size_t *sd, size_t *rc, size_t *rd, float *h, float *want)
{
    size_t so = 0, ro = GAP;

    for (int j = 0; j < world; j++) {
        sc[j] = vcount(rank, j);
        sd[j] = so;
        for (size_t i = 0; i < sc[j]; i++) {
            h[so + i] = value(rank, j, i);
        }
        so += sc[j];
        rc[j] = vcount(j, rank);
        rd[j] = ro;
        for (size_t i = ro - GAP; i < ro; i++) {
            want[i] = SENTINEL;
        }
        for (size_t i = 0; i < rc[j]; i++) {
            want[ro + i] = value(j, rank, i);
        }
        ro += rc[j] + GAP;
    }
    for (size_t i = ro - GAP; i < ro; i++) {
        want[i] = SENTINEL;
    }
    return ro;
}

/* The alltoallv on device buffers, through @p h (room for 3 x 16 x (2 world + GAP) floats). */
static int alltoallv(float *h)
{
    size_t sc[16], sd[16], rc[16], rd[16], cap = 16 * (2 * (size_t)world + GAP);
    size_t nr = vplan(sc, sd, rc, rd, h, h + cap);
    float *s = alloc(cap * 4, 1), *r = alloc(nr * 4, 1);
    coll_request_t *req = NULL;
    int ok = s == NULL || r == NULL ? -1 : 0;

    for (size_t i = 0; i < nr; i++) {
        h[2 * cap + i] = SENTINEL;
    }
    if (ok == 0 && put(s, 1, h, cap) == 0 && put(r, 1, h + 2 * cap, nr) == 0) {
        coll_status_t st = coll_alltoallv_async(comm, s, sc, sd, r, rc, rd, COLL_FLOAT32, NULL,
                                                &req);
        ok = rank_dev_finish("alltoallv", st, req, "staged+direct");
    } else {
        ok = -1;
    }
    if (ok == 0) {
        ok = get(h + 2 * cap, r, 1, nr) == 0 ? check("alltoallv", h + 2 * cap, h + cap, 0, nr)
                                             : -1;
    }
    if (ok == 0) {
        printf("rank %d: alltoallv of %zu floats received right, the gaps untouched\n", rank,
               nr);
    }
    coll_mem_free(comm, r);
    coll_mem_free(comm, s);
    return ok;
}

static int run_all(size_t count)
{
    size_t n = count > SMALL * (size_t)world ? count : SMALL * (size_t)world;
    float *h = malloc(3 * (n > 16 * 40 ? n : 16 * 40) * sizeof(float));
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    int rc = h == NULL ? -1 : 0;

    rc = rc == 0 ? exchange("ring device to device", next, prev, count, 1, 1, h) : rc;
    rc = rc == 0 && world % 2 == 0
             ? exchange("pair device to device", rank ^ 1, rank ^ 1, count, 1, 1, h)
             : rc;
    rc = rc == 0 ? exchange("ring device to host", next, prev, count, 1, 0, h) : rc;
    rc = rc == 0 ? exchange("ring host to device", next, prev, count, 0, 1, h) : rc;
    rc = rc == 0 ? alltoall(h) : rc;
    rc = rc == 0 ? alltoallv(h) : rc;
    free(h);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"count", required_argument, NULL, 'n'},
                                         {NULL, 0, NULL, 0}};
    size_t count = 100000;
    int c, rc;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c != 'n') {
            fprintf(stderr, "usage: staged_p2p_check [--count N]\n");
            return 2;
        }
        count = (size_t)atol(optarg);
    }
    if ((comm = rank_dev_open("staged_p2p_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rc = world <= 16 ? run_all(count) : -1;
    if (rc == 0) {
        printf("rank %d: done\n", rank);
    }
    rank_dev_close(comm);
    return rc == 0 ? 0 : 1;
}
