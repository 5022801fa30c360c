/*
 * mpi-lat: coll-lat's measurement for MPI_Allreduce (lat-common.h: the same sizes, samples,
 * percentiles and columns), so that bench/latency.sh compares Open MPI with collectived in one
 * run. Not built by CMake (MPI is optional); latency.sh builds it:
 *
 *   mpicc -O2 -o mpi-lat bench/mpi-lat.c
 *   mpirun --allow-run-as-root --oversubscribe -np 4 ./mpi-lat -e 64K
 */
#include <mpi.h>

#include "lat-common.h"

typedef struct {
    int rank, world, inplace;
    float *send, *recv;
    double *mine, *all;
} ctx_t;

static double one(ctx_t *c, size_t count)
{
    double t0 = lat_now_s();
    MPI_Allreduce(c->inplace ? MPI_IN_PLACE : c->send, c->recv, (int)count, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD);
    return lat_now_s() - t0;
}

static void run_size(ctx_t *c, const lat_opts_t *o, size_t bytes)
{
    size_t count = bytes / sizeof(float);
    double first;
    int n;

    for (int i = 0; i < o->warmup; i++) {
        one(c, count);
    }
    first = one(c, count);
    n = lat_iters(o, first);
    MPI_Bcast(&n, 1, MPI_INT, 0, MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        c->mine[i] = one(c, count);
    }
    MPI_Gather(c->mine, n, MPI_DOUBLE, c->all, n, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (c->rank != 0) {
        return;
    }
    for (int i = 0; i < n; i++) {
        double sum = 0;
        for (int q = 0; q < c->world; q++) {
            sum += c->all[(size_t)q * n + i];
        }
        c->mine[i] = sum / c->world;
    }
    lat_line(bytes, c->mine, n, "mpi");
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ctx_t c;
    lat_opts_t o;
    char host[64];
    int nodes = 1;

    MPI_Init(&argc, &argv);
    if (lat_parse(argc, argv, "mpi-lat", &o) != 0) {
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &c.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c.world);
    c.inplace = o.inplace;
    c.send = calloc(o.maxb / sizeof(float) + 1, sizeof(float));
    c.recv = calloc(o.maxb / sizeof(float) + 1, sizeof(float));
    c.mine = calloc((size_t)o.iters, sizeof(double));
    c.all = calloc((size_t)o.iters * c.world, sizeof(double));
    if (c.send == NULL || c.recv == NULL || c.mine == NULL || c.all == NULL) {
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    gethostname(host, sizeof(host));
    if (c.rank == 0) {
        lat_header("open-mpi", c.world, nodes, 0, o.inplace);
        printf("# host %s; the transport is what mpirun was given (latency.sh says)\n", host);
    }
    for (size_t b = o.minb; b <= o.maxb; b *= (size_t)o.factor) {
        run_size(&c, &o, b);
    }
    MPI_Finalize();
    return 0;
}
