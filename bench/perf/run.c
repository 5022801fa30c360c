/*
 * coll-perf's communicator and buffers, one operation of the measured collective, and the
 * tool's own collectives (barriers, statistics of the times).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perf/perf.h"

#define POOL_ALIGN 4096
#define POOL_SLACK (1u << 20)
/* What local rank 0 of a multi-node job takes of the pool at its first allreduce: a node
 * buffer of direct_max_bytes per post (64 x 64 KiB by default) and 4 of shm_node_max_bytes. */
#define POOL_NODE_BUFFERS (8u << 20)

static int g_rank = -1;

void perf_die(const char *fmt, ...)
{
    va_list ap;
    if (g_rank >= 0) {
        fprintf(stderr, "coll-perf: rank %d: ", g_rank);
    } else {
        fprintf(stderr, "coll-perf: ");
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

void perf_die_st(const perf_ctx_t *c, const char *what, coll_status_t st)
{
    perf_die("%s: %s (%s): %s", what, coll_err_name(st), coll_strerror(st),
             coll_comm_last_error(c->comm));
}

/* The ranks on this node, as far as the environment tells before joining: for the pool. */
static long local_ranks(void)
{
    static const char *const vars[] = {"COLL_LOCAL_SIZE", "LOCAL_WORLD_SIZE",
                                       "OMPI_COMM_WORLD_LOCAL_SIZE",
                                       "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        long n = v != NULL ? strtol(v, NULL, 10) : 0; /* "4(x2)": 4 */
        if (n > 0) {
            return n;
        }
    }
    return 1;
}

/* Whether something set this process's rank: COLL_*, torchrun, mpirun, srun (collective.h). */
static int launched(void)
{
    return getenv("COLL_RANK") || getenv("RANK") || getenv("OMPI_COMM_WORLD_RANK") ||
           (getenv("SLURM_PROCID") && getenv("SLURM_STEP_ID"));
}

/* Without a launcher, a job of one rank of its own; without COLL_POOL_SIZE, room for every
 * local rank's two buffers and local rank 0's node buffers. */
static void comm_params(const perf_opts_t *o, coll_comm_params_t *p, char *job, size_t len)
{
    size_t per_rank = (o->maxb + POOL_ALIGN - 1) / POOL_ALIGN * POOL_ALIGN * 2 + POOL_SLACK;

    memset(p, 0, sizeof(*p));
    if (getenv("COLL_POOL_SIZE") == NULL) {
        p->field_mask |= COLL_COMM_PARAM_POOL_SIZE;
        p->pool_bytes = (uint64_t)local_ranks() * per_rank + POOL_SLACK + POOL_NODE_BUFFERS;
    }
    if (!launched()) {
        snprintf(job, len, "coll-perf-%d", (int)getpid());
        p->field_mask |= COLL_COMM_PARAM_RANK | COLL_COMM_PARAM_LOCAL_RANK;
        p->rank = p->local_rank = 0;
        p->world_size = p->local_size = 1;
        if (getenv("COLL_JOB") == NULL) {
            p->field_mask |= COLL_COMM_PARAM_JOB;
            p->job = job;
        }
    }
}

static void *pool_alloc(perf_ctx_t *c, size_t bytes)
{
    void *p = NULL;
    coll_status_t st = coll_mem_alloc(c->comm, bytes, &p);
    if (st != COLL_OK) {
        perf_die("coll_mem_alloc(%zu bytes): %s: %s (set COLL_POOL_SIZE larger)", bytes,
                 coll_err_name(st), coll_comm_last_error(c->comm));
    }
    return p;
}

void perf_ctx_open(perf_ctx_t *c, const perf_opts_t *o)
{
    coll_comm_params_t params;
    coll_status_t st;
    char job[64];

    memset(c, 0, sizeof(*c));
    comm_params(o, &params, job, sizeof(job));
    if ((st = coll_comm_create(&params, &c->comm)) != COLL_OK) {
        perf_die("joining the job: %s (%s): %s", coll_err_name(st), coll_strerror(st),
                 coll_comm_last_error(NULL));
    }
    c->rank = g_rank = coll_comm_rank(c->comm);
    c->world = coll_comm_world_size(c->comm);
    c->local_size = coll_comm_local_size(c->comm);
    c->esize = coll_dtype_size(o->dtype);
    c->timeout_ms = o->timeout_ms;
    if (o->root >= c->world) {
        perf_die("root %d is not a rank of this job (world size %d)", o->root, c->world);
    }
    if (o->coll == PERF_SENDRECV && c->world < 2) {
        perf_die("sendrecv needs at least 2 ranks");
    }
    c->send = pool_alloc(c, o->maxb > 0 ? o->maxb : 1);
    c->recv = pool_alloc(c, o->maxb > 0 ? o->maxb : 1);
    c->tsend = pool_alloc(c, sizeof(double));
    c->trecv = pool_alloc(c, sizeof(double) * (size_t)c->world);
    c->wsend = pool_alloc(c, sizeof(int64_t));
    c->wrecv = pool_alloc(c, sizeof(int64_t));
}

/* ---- operations ---------------------------------------------------------------------------- */

static coll_status_t wait_free(perf_ctx_t *c, coll_request_t *req, int keep_algo)
{
    coll_status_t st = coll_req_wait(req, c->timeout_ms);
    if (keep_algo) {
        const char *a = coll_req_algo(req);
        snprintf(c->algo, sizeof(c->algo), "%s", a != NULL && a[0] != '\0' ? a : "-");
    }
    coll_req_free(req);
    return st;
}

/* Waits for a just-submitted request when there is one (@p st COLL_INPROGRESS). */
static coll_status_t finish(perf_ctx_t *c, coll_status_t st, coll_request_t *req, int keep_algo)
{
    if (st == COLL_OK && keep_algo) {
        snprintf(c->algo, sizeof(c->algo), "-");
    }
    return st == COLL_INPROGRESS ? wait_free(c, req, keep_algo) : st;
}

/* In place as nccl-tests lays it out: the output buffer only; reduce-scatter's output is the
 * rank's block of its input, all-gather's input the rank's block of its output. */
void perf_op_buffers(const perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace,
                     void **sb, void **rb)
{
    size_t block = count / (size_t)c->world * c->esize;

    *sb = inplace ? c->recv : c->send;
    *rb = c->recv;
    if (inplace && o->coll == PERF_REDUCE_SCATTER) {
        *rb = c->recv + (size_t)c->rank * block;
    } else if (inplace && o->coll == PERF_ALLGATHER) {
        *sb = c->recv + (size_t)c->rank * block;
    }
}

static coll_status_t sendrecv(perf_ctx_t *c, const perf_opts_t *o, size_t count,
                              const coll_op_params_t *p)
{
    int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world;
    coll_request_t *rreq = NULL, *sreq = NULL;
    coll_status_t rs, ss;

    rs = coll_recv_async(c->comm, c->recv, count, o->dtype, prev, p, &rreq);
    if (rs != COLL_INPROGRESS && rs != COLL_OK) {
        return rs;
    }
    ss = coll_send_async(c->comm, c->send, count, o->dtype, next, p, &sreq);
    ss = finish(c, ss, sreq, 0);
    rs = finish(c, rs, rreq, 1);
    return ss != COLL_OK ? ss : rs;
}

coll_status_t perf_run_op(perf_ctx_t *c, const perf_opts_t *o, size_t count, int inplace)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_ALGO, .algo = o->algo};
    size_t block = count / (size_t)c->world;
    coll_request_t *req = NULL;
    coll_status_t st;
    void *sb, *rb;

    perf_op_buffers(c, o, count, inplace, &sb, &rb);
    switch (o->coll) {
    case PERF_ALLREDUCE:
        st = coll_allreduce_async(c->comm, sb, rb, count, o->dtype, o->op, &p, &req);
        break;
    case PERF_REDUCE_SCATTER:
        st = coll_reduce_scatter_async(c->comm, sb, rb, block, o->dtype, o->op, &p, &req);
        break;
    case PERF_ALLGATHER:
        st = coll_allgather_async(c->comm, sb, rb, block, o->dtype, &p, &req);
        break;
    case PERF_BROADCAST:
        st = coll_broadcast_async(c->comm, sb, rb, count, o->dtype, o->root, &p, &req);
        break;
    case PERF_REDUCE:
        st = coll_reduce_async(c->comm, sb, rb, count, o->dtype, o->op, o->root, &p, &req);
        break;
    case PERF_BARRIER:
        st = coll_barrier_async(c->comm, &p, &req);
        break;
    default:
        return sendrecv(c, o, count, &p);
    }
    return finish(c, st, req, 1);
}

/* ---- the tool's own collectives ------------------------------------------------------------ */

/* They let the daemons choose the algorithm, so that --algo or COLL_ALGO cannot make them
 * unsupported. */
static const coll_op_params_t auto_algo = {.field_mask = COLL_OP_PARAM_ALGO,
                                           .algo = COLL_ALGO_AUTO};

void perf_barrier(perf_ctx_t *c)
{
    coll_request_t *req = NULL;
    coll_status_t st = coll_barrier_async(c->comm, &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        perf_die_st(c, "barrier", st);
    }
}

double perf_max_over_ranks(perf_ctx_t *c, double v)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->tsend = v;
    st = coll_allreduce_async(c->comm, c->tsend, c->trecv, 1, COLL_FLOAT64, COLL_MAX,
                              &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        perf_die_st(c, "allreduce of the time", st);
    }
    return c->trecv[0];
}

long long perf_sum_over_ranks(perf_ctx_t *c, int64_t v)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->wsend = v;
    st = coll_allreduce_async(c->comm, c->wsend, c->wrecv, 1, COLL_INT64, COLL_SUM, &auto_algo,
                              &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        perf_die_st(c, "allreduce of #wrong", st);
    }
    return (long long)*c->wrecv;
}

void perf_gather_times(perf_ctx_t *c, double t)
{
    coll_request_t *req = NULL;
    coll_status_t st;
    *c->tsend = t;
    st = coll_allgather_async(c->comm, c->tsend, c->trecv, 1, COLL_FLOAT64, &auto_algo, &req);
    if ((st = finish(c, st, req, 0)) != COLL_OK) {
        perf_die_st(c, "allgather of the times", st);
    }
}
