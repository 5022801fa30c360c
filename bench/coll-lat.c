/*
 * coll-lat: latency of collectived's allreduce per size, p50/p90/p99 over iterations (the
 * conventions of lat-common.h, shared with mpi-lat.c). Run as every rank of a job:
 *
 *   tools/collective-launch --nodes 2 --ranks-per-node 2 -- build/bench/coll-lat -e 64K
 *
 * With -p it also prints where one operation's time goes, from coll_req_timing(): "arrive"
 * (submit to every local rank in: the wait for the other local ranks, and on the daemon's path
 * the hand-off to it), "peers" (to the other nodes' descriptors checked), "reduce" (to the end
 * of the algorithm), "notify" (from there to this rank seeing the completion: the wake-up).
 * Medians over iterations, averaged over ranks. bench/latency.sh runs it against Open MPI.
 *
 * Exit status: 0, 1 on an error, 2 on a usage error.
 */
#include <collective.h>

#include "lat-common.h"

#define NPHASES 4

typedef struct {
    coll_comm_t *comm;
    int rank, world, nodes, inplace;
    float *send, *recv;
    double *mine, *all;       /* per-iteration times: this rank's, every rank's */
    double *phase[NPHASES];   /* this rank's phase times per iteration (-p) */
    double *pmine, *pall;     /* phase medians: this rank's, every rank's */
    char algo[32];
} ctx_t;

static void die(const ctx_t *c, const char *what, coll_status_t st)
{
    fprintf(stderr, "coll-lat: rank %d: %s: %s: %s\n", c->rank, what, coll_err_name(st),
            c->comm != NULL ? coll_comm_last_error(c->comm) : "");
    exit(1);
}

/* One allreduce of @p count floats; its time, and with @p it >= 0 its phases. */
static double one(ctx_t *c, size_t count, int it)
{
    coll_request_t *r;
    coll_req_timing_t t;
    double t0 = lat_now_s(), dt;
    coll_status_t st = coll_allreduce_async(c->comm, c->inplace ? c->recv : c->send, c->recv,
                                            count, COLL_FLOAT32, COLL_SUM, NULL, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
    }
    dt = lat_now_s() - t0;
    if (st != COLL_OK) {
        die(c, "allreduce", st);
    }
    snprintf(c->algo, sizeof(c->algo), "%s", coll_req_algo(r));
    if (it >= 0 && c->phase[0] != NULL && coll_req_timing(r, &t) == COLL_OK) {
        double v[NPHASES] = {(double)(t.ready_ns - t.submit_ns), (double)(t.peers_ns - t.ready_ns),
                             (double)(t.done_ns - t.peers_ns), (double)(t.complete_ns - t.done_ns)};
        for (int p = 0; p < NPHASES; p++) {
            c->phase[p][it] = v[p] / 1e9;
        }
    }
    coll_req_free(r);
    return dt;
}

static void allgather(ctx_t *c, const double *in, double *out, size_t n)
{
    coll_request_t *r;
    coll_status_t st = coll_allgather_async(c->comm, in, out, n, COLL_FLOAT64, NULL, &r);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        die(c, "allgather of the times", st);
    }
}

/* The same number of iterations on every rank: rank 0's choice, broadcast. */
static int agree_iters(ctx_t *c, int n)
{
    coll_request_t *r;
    c->mine[0] = n;
    coll_status_t st = coll_broadcast_async(c->comm, c->mine, c->mine, 1, COLL_FLOAT64, 0, NULL,
                                            &r);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        die(c, "broadcast of the iteration count", st);
    }
    return (int)c->mine[0];
}

static void print_phases(ctx_t *c, int n)
{
    for (int p = 0; p < NPHASES; p++) {
        qsort(c->phase[p], (size_t)n, sizeof(double), lat_cmp);
        c->pmine[p] = lat_pct(c->phase[p], n, 50);
    }
    allgather(c, c->pmine, c->pall, NPHASES);
    for (int p = 0; p < NPHASES && c->rank == 0; p++) {
        double sum = 0;
        for (int q = 0; q < c->world; q++) {
            sum += c->pall[q * NPHASES + p];
        }
        printf(" %7.2f", sum / c->world * 1e6);
    }
}

static void run_size(ctx_t *c, const lat_opts_t *o, size_t bytes)
{
    size_t count = bytes / sizeof(float);
    int n;

    for (int i = 0; i < o->warmup; i++) {
        one(c, count, -1);
    }
    n = agree_iters(c, lat_iters(o, one(c, count, -1)));
    for (int i = 0; i < n; i++) {
        c->mine[i] = one(c, count, i);
    }
    allgather(c, c->mine, c->all, (size_t)n);
    if (c->rank == 0) { /* the sample of iteration i: the mean over ranks */
        for (int i = 0; i < n; i++) {
            double sum = 0;
            for (int q = 0; q < c->world; q++) {
                sum += c->all[(size_t)q * n + i];
            }
            c->mine[i] = sum / c->world;
        }
        lat_line(bytes, c->mine, n, c->algo);
    }
    if (o->phases) {
        print_phases(c, n);
    }
    if (c->rank == 0) {
        printf("\n");
        fflush(stdout);
    }
}

static void alloc(ctx_t *c, void **p, size_t bytes)
{
    coll_status_t st = coll_mem_alloc(c->comm, bytes, p);
    if (st != COLL_OK) {
        die(c, "coll_mem_alloc", st);
    }
    memset(*p, 0, bytes);
}

int main(int argc, char **argv)
{
    ctx_t c = {.rank = -1};
    lat_opts_t o;
    coll_status_t st;

    if (lat_parse(argc, argv, "coll-lat", &o) != 0) {
        return 2;
    }
    if ((st = coll_comm_create(NULL, &c.comm)) != COLL_OK) {
        return 1; /* the library said why */
    }
    c.rank = coll_comm_rank(c.comm);
    c.world = coll_comm_world_size(c.comm);
    c.nodes = c.world / coll_comm_local_size(c.comm);
    c.inplace = o.inplace;
    alloc(&c, (void **)&c.send, o.maxb);
    alloc(&c, (void **)&c.recv, o.maxb);
    alloc(&c, (void **)&c.mine, (size_t)o.iters * sizeof(double));
    alloc(&c, (void **)&c.all, (size_t)o.iters * sizeof(double) * c.world);
    alloc(&c, (void **)&c.pmine, NPHASES * sizeof(double));
    alloc(&c, (void **)&c.pall, NPHASES * sizeof(double) * c.world);
    for (int p = 0; p < NPHASES && o.phases; p++) {
        c.phase[p] = calloc((size_t)o.iters, sizeof(double));
    }
    if (c.rank == 0) {
        lat_header("collectived", c.world, c.nodes, o.phases, o.inplace);
        if (c.nodes > 1) {
            printf("# allreduces reduced in shared memory around the daemons up to %llu bytes "
                   "(coll_comm_shm_node_max_bytes)\n",
                   (unsigned long long)coll_comm_shm_node_max_bytes(c.comm));
        } else {
            printf("# shared-memory path up to %llu bytes (coll_comm_shm_max_bytes)\n",
                   (unsigned long long)coll_comm_shm_max_bytes(c.comm));
        }
    }
    for (size_t b = o.minb; b <= o.maxb; b *= (size_t)o.factor) {
        run_size(&c, &o, b);
    }
    for (int p = 0; p < NPHASES; p++) {
        free(c.phase[p]);
    }
    coll_comm_destroy(c.comm);
    return 0;
}
