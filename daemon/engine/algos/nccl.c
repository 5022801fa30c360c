/*
 * NCCL between the daemons of a job (nccl.h), hierarchical as the host's algorithms are: the
 * node's ranks' buffers combined (an allreduce's inputs reduced into the first member's output,
 * a reduce-scatter's into a scratch buffer of the whole, an all-gather's inputs put at their
 * blocks of the first member's output), one NCCL call among the daemons (one NCCL rank per
 * node; allreduce, reduce-scatter, all-gather, broadcast), the result copied to the other
 * members' outputs.
 *
 * The communicator is the job's, made by its first NCCL operation: node 0 makes the unique id
 * and sends it to every other node in that operation's own transfers (the job's authenticated
 * endpoints); each node joins (non-blocking) on the device of the operation's pool. The
 * operations queue in start order, which is key order on every node, and each one's NCCL call
 * is issued only once the descriptor check passed (a mismatch never reaches NCCL) and the one
 * before it completed. A timer of the loop (every POLL_MS while anything is queued) polls the
 * communicator (ncclCommGetAsyncError: joining, queued, a peer's failure) and the event recorded
 * after the call; nothing waits in the loop. An error fails the job, whose end aborts the
 * communicator (coll_nccl_job_end()), which ends the other daemons' waits in NCCL.
 *
 * The node's several ranks are combined and served on the device, on the communicator's
 * stream, through the executor of device memory (core/dev_exec.h: the CUDA module; over the fake
 * device layer, whose memory is host memory, the host's entries): one reduce_async over every
 * member's input (coll_combine_locals_args()) or copy_async of each input to its block before
 * the NCCL call, and copy_async of the result to the other members after it, queued once the
 * call is (comm_poll) and before the event is recorded, so the event covers all of it and
 * nothing is copied on the host. A reduce-scatter's scratch is device memory of its own
 * (core/dev_scratch.h), charged to the device's budget and freed with the operation. Where
 * there is no executor, an operation of several members fails its job with
 * COLL_ERR_UNSUPPORTED and the reason (the module's name and why); one of one member needs none.
 */
#include "engine/algos/nccl.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "core/dev_pools.h"
#include "core/dev_scratch.h"
#include "device/nccl.h"
#include "engine/algos/algos.h"
#include "engine/combine.h"
#include "proto/tag.h"

/* How often the loop polls the communicator and the event while operations are queued. */
#define POLL_MS 1

/* The job's communicator. */
typedef struct coll_nccl_job {
    coll_job_t *job;
    const coll_nccl_ops_t *nccl;
    const coll_dev_ops_t *dev;
    int device;                /* the daemon's index of the device it is on */
    int ready;                 /* it finished joining */
    coll_nccl_comm_t comm;     /* NULL before the id came and after the end */
    coll_dev_stream_t stream;  /* its calls' and the local reduce's and copies' */
    const coll_exec_t *ex;     /* device memory's executor; NULL: none (one member only) */
    coll_exec_ctx_t ctx;       /* the device and the stream, for the executor */
    coll_dev_event_t event;    /* recorded after each call */
    uv_timer_t *timer;         /* the poll; freed by its close callback */
    coll_list_t queue;         /* nccl_op_t in start order */
} coll_nccl_job_t;

/* Where an operation is. */
typedef enum { OP_WAITING, OP_CALLED, OP_RUNNING } phase_t;

/* An operation's state. */
typedef struct {
    coll_list_t link;     /* in the job's queue while queued */
    int queued;
    coll_op_t *op;
    phase_t phase;
    coll_nccl_id_t id;    /* the communicator's, with the job's first NCCL operation */
    coll_dev_scratch_t scratch; /* a reduce-scatter's reduction of several members */
    uint32_t nx;
    coll_xfer_t x[];      /* the id's sends (node 0) or its receive */
} nccl_op_t;

/* Every node holds the same number of consecutive ranks, in node order. */
static int blocks_by_node(const coll_group_t *grp)
{
    uint32_t per = grp->size / grp->nnodes;

    for (uint32_t r = 0; r < grp->size; r++) {
        if (grp->rank_node[r] != r / per || grp->rank_local[r] != r % per) {
            return 0;
        }
    }
    return per * grp->nnodes == grp->size;
}

int coll_nccl_fits(const coll_group_t *grp, unsigned coll, unsigned dtype, unsigned op)
{
    int dt = dtype == COLL_FLOAT32 || dtype == COLL_FLOAT64 || dtype == COLL_FLOAT16 ||
             dtype == COLL_BFLOAT16 || dtype == COLL_INT8 || dtype == COLL_UINT8 ||
             dtype == COLL_INT32 || dtype == COLL_INT64;
    int redop = op == COLL_SUM || op == COLL_PROD || op == COLL_MIN || op == COLL_MAX;

    switch (coll) {
    case COLL_KIND_ALLREDUCE: return dt && redop;
    case COLL_KIND_REDUCE_SCATTER: return dt && redop && blocks_by_node(grp);
    case COLL_KIND_ALLGATHER: return dt && blocks_by_node(grp);
    case COLL_KIND_BROADCAST: return dt;
    default: return 0;
    }
}

/* Fail @p job on every node: @p what went wrong on this one, in the device layer's words. */
static coll_status_t fail(coll_job_t *job, coll_status_t st, const char *what, const char *why)
{
    coll_job_fail(job, st, 1, "job %s: NCCL between the nodes, on node %u: %s: %s", job->id,
                  job->node_rank, what, why);
    return st;
}

static void tick(uv_timer_t *t);

static void arm(coll_nccl_job_t *nj)
{
    if (!uv_is_active((uv_handle_t *)nj->timer)) {
        uv_timer_start(nj->timer, tick, POLL_MS, POLL_MS);
    }
}

/* Join the communicator @p id names. */
static coll_status_t join(coll_nccl_job_t *nj, const coll_nccl_id_t *id)
{
    coll_job_t *job = nj->job;
    coll_status_t st = nj->nccl->comm_init(nj->device, (int)job->world->nnodes,
                                           (int)job->world->node_rank, id, &nj->comm);

    if (st != COLL_OK) {
        nj->comm = NULL;
        return fail(job, st, "joining the communicator", coll_dev_error());
    }
    arm(nj);
    return COLL_OK;
}

static uint8_t *at(void *buf, uint64_t elems, const coll_op_t *op)
{
    return (uint8_t *)buf + elems * op->esize;
}

static uint64_t addr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

/* The job's device, for its counters. */
static coll_device_t *device_of(coll_nccl_job_t *nj)
{
    return &nj->job->d->devices.dev[nj->device];
}

/* Queue a copy between two device buffers on the stream, unless they are one. */
static coll_status_t copy_unless_same(coll_nccl_job_t *nj, void *dst, const void *src, size_t len)
{
    coll_status_t st;

    if (dst == src) {
        return COLL_OK;
    }
    if ((st = nj->ex->copy_async(&nj->ctx, dst, src, len)) == COLL_OK) {
        device_of(nj)->kernel_copies++;
    }
    return st;
}

/* Queue the reduction of every member's input (elements [0, @p len)) into @p dst. */
static coll_status_t reduce_locals(coll_nccl_job_t *nj, coll_op_t *op, uint64_t len, void *dst)
{
    const void *src[COLL_COMBINE_MAX_SRC];
    coll_reduce_args_t a;
    coll_status_t st;

    coll_combine_locals_args(op, 0, len, dst, NULL, 1, src, &a);
    if ((st = nj->ex->reduce_async(&nj->ctx, &a)) == COLL_OK) {
        device_of(nj)->kernel_reduces++;
    }
    return st;
}

/* A reduce-scatter's NCCL call. Several members: their inputs reduced into a scratch buffer of
 * the whole on the device, reduced in place between the nodes, each node's ranks' blocks
 * contiguous (coll_nccl_fits()). */
static coll_status_t reduce_scatter(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t cnt = op->desc.count, l = op->grp->nlocal, all = cnt * op->grp->size;
    uint64_t mine = op->grp->node_rank * l * cnt; /* this node's blocks, elements in */
    coll_status_t st;
    void *scratch;

    if (l == 1) {
        return nj->nccl->reduce_scatter(addr(op->in[0]), addr(op->out[0]), cnt,
                                        (coll_dtype_t)op->desc.dtype, (coll_redop_t)op->desc.op,
                                        nj->comm, nj->stream);
    }
    st = coll_dev_scratch_alloc(nj->dev, nj->device, &device_of(nj)->budget, all * op->esize,
                                &n->scratch);
    scratch = (void *)(uintptr_t)n->scratch.va;
    if (st != COLL_OK || (st = reduce_locals(nj, op, all, scratch)) != COLL_OK) {
        return st;
    }
    return nj->nccl->reduce_scatter(addr(scratch), addr(at(scratch, mine, op)), l * cnt,
                                    (coll_dtype_t)op->desc.dtype, (coll_redop_t)op->desc.op,
                                    nj->comm, nj->stream);
}

/* An all-gather's NCCL call: the members' inputs put at their ranks' blocks of the first
 * member's output, which NCCL completes in place (each node's blocks contiguous). */
static coll_status_t allgather(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint64_t cnt = op->desc.count, l = grp->nlocal;
    const void *send = op->in[0];
    coll_status_t st;

    if (l > 1) {
        for (uint32_t m = 0; m < l; m++) {
            st = copy_unless_same(nj, at(op->out[0], coll_group_rank_of_local(grp, m) * cnt, op),
                                  op->in[m], cnt * op->esize);
            if (st != COLL_OK) {
                return st;
            }
        }
        send = at(op->out[0], grp->node_rank * l * cnt, op);
    }
    return nj->nccl->allgather(addr(send), addr(op->out[0]), l * cnt,
                               (coll_dtype_t)op->desc.dtype, nj->comm, nj->stream);
}

/* @p n's NCCL call, into the first member's output (a reduce-scatter: see there), after the
 * members' local phase queued on the same stream. */
static coll_status_t call(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_op_t *op = n->op;
    const coll_group_t *grp = op->grp;
    uint32_t root = grp->rank_node[op->desc.root];
    const void *send = op->in[0];
    coll_dtype_t dt = (coll_dtype_t)op->desc.dtype;
    coll_status_t st;

    switch (op->desc.coll) {
    case COLL_KIND_REDUCE_SCATTER:
        return reduce_scatter(nj, n);
    case COLL_KIND_ALLGATHER:
        return allgather(nj, n);
    case COLL_KIND_BROADCAST:
        send = root == grp->node_rank ? op->in[grp->rank_local[op->desc.root]] : op->out[0];
        return nj->nccl->broadcast(addr(send), addr(op->out[0]), op->desc.count, dt, (int)root,
                                   nj->comm, nj->stream);
    default:
        if (grp->nlocal > 1) {
            if ((st = reduce_locals(nj, op, op->desc.count, op->out[0])) != COLL_OK) {
                return st;
            }
            send = op->out[0];
        }
        return nj->nccl->allreduce(addr(send), addr(op->out[0]), op->desc.count, dt,
                                   (coll_redop_t)op->desc.op, nj->comm, nj->stream);
    }
}

/* Queue the result's copies to the members' outputs after the NCCL call: from the first
 * member's (a reduce-scatter's: from the scratch buffer), with several members only. */
static coll_status_t copy_out(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t cnt = op->desc.count;
    int rs = op->desc.coll == COLL_KIND_REDUCE_SCATTER;
    size_t len = (op->desc.coll == COLL_KIND_ALLGATHER ? cnt * op->grp->size : cnt) * op->esize;
    void *scratch = (void *)(uintptr_t)n->scratch.va;
    coll_status_t st = COLL_OK;

    if (op->grp->nlocal == 1) {
        return COLL_OK; /* NCCL wrote the one member's output */
    }
    for (uint32_t l = rs ? 0 : 1; l < op->grp->nlocal && st == COLL_OK; l++) {
        st = copy_unless_same(nj, op->out[l],
                              rs ? at(scratch, coll_group_rank_of_local(op->grp, l) * cnt, op)
                                 : op->out[0], len);
    }
    return st;
}

/* Move @p n on: COLL_OK when it is done, COLL_INPROGRESS while not yet, or the error. */
static coll_status_t advance(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_status_t st;

    switch (n->phase) {
    case OP_WAITING:
        if (!n->op->desc_ok) {
            return COLL_INPROGRESS;
        }
        if (n->op->desc.count == 0) {
            return COLL_OK;
        }
        if ((st = call(nj, n)) != COLL_OK) {
            return st;
        }
        n->phase = OP_CALLED;
        /* fall through */
    case OP_CALLED:
        if ((st = nj->nccl->comm_poll(nj->comm)) != COLL_OK ||  /* in progress until queued */
            (st = copy_out(nj, n)) != COLL_OK ||
            (st = nj->dev->event_record(nj->event, nj->stream)) != COLL_OK) {
            return st;
        }
        n->phase = OP_RUNNING;
        /* fall through */
    case OP_RUNNING:
        st = nj->dev->event_query(nj->event);
        if (st == COLL_INPROGRESS) {
            st = nj->nccl->comm_poll(nj->comm); /* a peer's failure while it runs */
            return st == COLL_OK ? COLL_INPROGRESS : st;
        }
        if (st != COLL_OK) {
            return st;
        }
        coll_dev_scratch_free(&n->scratch); /* the event covers the work on it */
        device_of(nj)->nccl_ops++;
        return COLL_OK;
    }
    return COLL_ERR_INVALID;
}

static void dequeue(nccl_op_t *n)
{
    if (n->queued) {
        coll_list_remove(&n->link);
        n->queued = 0;
    }
}

/* The loop's poll: the communicator joining, then the queued operations in order. */
static void tick(uv_timer_t *t)
{
    coll_nccl_job_t *nj = t->data;
    coll_status_t st;

    if (nj->comm != NULL && !nj->ready) {
        if ((st = nj->nccl->comm_poll(nj->comm)) != COLL_OK) {
            if (st != COLL_INPROGRESS) {
                fail(nj->job, st, "joining the communicator", coll_dev_error());
            }
            return;
        }
        nj->ready = 1;
    }
    while (nj->ready && !coll_list_empty(&nj->queue)) {
        nccl_op_t *n = coll_container_of(nj->queue.next, nccl_op_t, link);
        if ((st = advance(nj, n)) == COLL_INPROGRESS) {
            return;
        }
        if (st != COLL_OK) {
            fail(nj->job, st, "an allreduce failed", coll_dev_error());
            return; /* the job's end emptied the queue */
        }
        dequeue(n);
        coll_op_algo_done(n->op);
    }
    if (nj->ready) {
        uv_timer_stop(t);
    }
}

/* The job's communicator state on @p device, made now. */
static coll_status_t job_open(coll_job_t *job, int device, coll_nccl_job_t **nj_p)
{
    coll_nccl_job_t *nj = calloc(1, sizeof(*nj));
    const char *why;

    if (nj == NULL || (nj->timer = calloc(1, sizeof(*nj->timer))) == NULL) {
        free(nj);
        return fail(job, COLL_ERR_NOMEM, "no state", "daemon out of memory");
    }
    nj->job = job;
    nj->device = device;
    nj->dev = job->d->devices.ops;
    nj->ex = job->d->devices.exec;
    nj->ctx = (coll_exec_ctx_t){.device = device};
    coll_list_init(&nj->queue);
    uv_timer_init(job->d->loop, nj->timer);
    nj->timer->data = nj;
    job->engine.nccl = nj;
    if (coll_nccl_open(&nj->nccl) != COLL_OK) {
        coll_nccl_probe(&why);
        return fail(job, COLL_ERR_UNSUPPORTED, "no NCCL", why);
    }
    if (nj->dev->stream_create(device, &nj->stream) != COLL_OK ||
        nj->dev->event_create(device, &nj->event) != COLL_OK) {
        return fail(job, COLL_ERR_IO, "no stream or event", coll_dev_error());
    }
    nj->ctx.stream = nj->stream;
    *nj_p = nj;
    return COLL_OK;
}

/* The device of @p op's buffers: every member's in one device pool; several members only with
 * the executor of device memory, which combines and serves them. */
static coll_status_t op_device(coll_op_t *op, int *dev_p)
{
    uint32_t pool = op->members[0].pool;
    const coll_devices_t *ds = &op->job->d->devices;
    char why[COLL_DEV_TEXT_MAX + 96];

    for (uint32_t l = 0; l < op->nbufs; l++) {
        if (op->members[l].pool != pool || pool == 0) {
            return fail(op->job, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers",
                        "NCCL needs every one in the same device pool (none in host memory)");
        }
    }
    if (op->nbufs > 1 && ds->exec == NULL) {
        snprintf(why, sizeof(why), "several ranks on one device are combined by the executor of "
                 "device memory, and there is none: %s", ds->exec_status);
        return fail(op->job, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers", why);
    }
    *dev_p = op->job->dev_pools[pool - 1]->device;
    return COLL_OK;
}

/* The job's first NCCL operation: node 0 makes the id, sends it to the others and joins; the
 * others receive it (nccl_on_xfer() joins). */
static coll_status_t exchange_id(coll_nccl_job_t *nj, nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_AG, 0, 0);
    coll_status_t st;

    if (op->grp->node_rank != 0) {
        n->nx = 1;
        st = coll_op_recv(op, 0, tag, &n->id, sizeof(n->id), &n->x[0]);
        return st == COLL_OK ? st : fail(op->job, st, "receiving the communicator's id",
                                         coll_strerror(st));
    }
    if ((st = nj->nccl->unique_id(&n->id)) != COLL_OK) {
        return fail(op->job, st, "making the communicator's id", coll_dev_error());
    }
    for (uint32_t node = 1; node < op->grp->nnodes; node++) {
        if ((st = coll_op_send(op, node, tag, &n->id, sizeof(n->id), &n->x[n->nx++])) != COLL_OK) {
            return fail(op->job, st, "sending the communicator's id", coll_strerror(st));
        }
    }
    return join(nj, &n->id);
}

/* Every failure here fails the job itself, saying why, and returns COLL_OK: the job's failure
 * completed @p op, which may be gone. */
static coll_status_t nccl_start(coll_op_t *op)
{
    coll_nccl_job_t *nj = op->job->engine.nccl;
    nccl_op_t *n = calloc(1, sizeof(*n) + op->grp->nnodes * sizeof(coll_xfer_t));
    int device = -1;

    if (n == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = n;
    n->op = op;
    if (op_device(op, &device) != COLL_OK) {
        return COLL_OK;
    }
    if (nj == NULL) {
        if (job_open(op->job, device, &nj) != COLL_OK || exchange_id(nj, n) != COLL_OK) {
            return COLL_OK;
        }
    } else if (nj->device != device) {
        fail(op->job, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers",
             "they are on another device than the job's communicator");
        return COLL_OK;
    }
    coll_list_push(&nj->queue, &n->link);
    n->queued = 1;
    arm(nj);
    return COLL_OK;
}

static void nccl_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    nccl_op_t *n = op->algo_state;

    if (!x->is_send && !op->done && op->job->engine.nccl->comm == NULL) {
        join(op->job->engine.nccl, &n->id);
    }
}

/* The scratch once the stream is done with it: one still held here belongs to an operation
 * freed before its event completed (its job failed, which aborted the communicator), whose
 * queued work is waited for first, off the normal path. */
static void free_scratch(coll_op_t *op, nccl_op_t *n)
{
    coll_nccl_job_t *nj = op->job->engine.nccl;

    if (n->scratch.va != 0 && nj != NULL && nj->stream != NULL) {
        nj->dev->stream_sync(nj->stream);
    }
    coll_dev_scratch_free(&n->scratch);
}

static void nccl_cleanup(coll_op_t *op)
{
    nccl_op_t *n = op->algo_state;

    if (n != NULL) {
        dequeue(n);
        free_scratch(op, n);
        free(n);
        op->algo_state = NULL;
    }
}

const coll_impl_t coll_impl_nccl = {
    .name = "nccl",
    .start = nccl_start,
    .on_xfer = nccl_on_xfer,
    .cleanup = nccl_cleanup,
};

void coll_nccl_job_end(coll_job_t *job)
{
    coll_nccl_job_t *nj = job->engine.nccl;

    if (nj == NULL) {
        return;
    }
    if (nj->comm != NULL) {
        if (job->error != COLL_OK || !nj->ready || !coll_list_empty(&nj->queue)) {
            nj->nccl->comm_abort(nj->comm);
        } else {
            nj->nccl->comm_destroy(nj->comm);
        }
        nj->comm = NULL;
    }
    nj->ready = 0;
    while (!coll_list_empty(&nj->queue)) {
        dequeue(coll_container_of(nj->queue.next, nccl_op_t, link));
    }
    uv_timer_stop(nj->timer);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void coll_nccl_job_free(coll_job_t *job)
{
    coll_nccl_job_t *nj = job->engine.nccl;

    if (nj == NULL) {
        return;
    }
    coll_nccl_job_end(job);
    nj->dev->event_destroy(nj->event);
    nj->dev->stream_destroy(nj->stream);
    uv_close((uv_handle_t *)nj->timer, timer_closed);
    free(nj);
    job->engine.nccl = NULL;
}
