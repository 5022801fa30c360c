/*
 * NCCL between the daemons of a job (nccl.h): the job's communicator, the queue of its
 * operations and the loop's poll; each collective's work on the stream is nccl_calls.c's.
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
 * device layer, whose memory is host memory, the host's entries): the local phase before the
 * NCCL call, the delivery to the members (an average finished, a 16-bit result rounded, copies)
 * queued once the call is (comm_poll) and before the event is recorded, so the event covers all
 * of it and nothing is copied on the host. Scratch (a reduce-scatter's of several members, the
 * float32 reduction of a 16-bit sum, average or product, a reduce's node reduction off the
 * root's node) is device memory of its own (core/dev_scratch.h), charged to the device's budget
 * and freed with the operation. Where there is no executor, an operation that needs one (several
 * members, an average, a 16-bit sum or product) fails its job with COLL_ERR_UNSUPPORTED and the
 * reason (the module's name and why); the others need none.
 */
#include "engine/algos/nccl.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "core/dev_pools.h"
#include "engine/algos/algos.h"
#include "engine/algos/nccl_internal.h"
#include "proto/tag.h"

/* How often the loop polls the communicator and the event while operations are queued. */
#define POLL_MS 1

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

/* Move @p n on: COLL_OK when it is done, COLL_INPROGRESS while not yet, or the error. */
static coll_status_t advance(coll_nccl_job_t *nj, coll__nccl_op_t *n)
{
    coll_status_t st;

    switch (n->phase) {
    case COLL__NCCL_WAITING:
        if (!n->op->desc_ok) {
            return COLL_INPROGRESS;
        }
        if (n->op->desc.count == 0) {
            return COLL_OK;
        }
        if ((st = coll__nccl_call(nj, n)) != COLL_OK) {
            return st;
        }
        n->phase = COLL__NCCL_CALLED;
        /* fall through */
    case COLL__NCCL_CALLED:
        if ((st = nj->nccl->comm_poll(nj->comm)) != COLL_OK ||  /* in progress until queued */
            (st = coll__nccl_deliver(nj, n)) != COLL_OK ||
            (st = nj->dev->event_record(nj->event, nj->stream)) != COLL_OK) {
            return st;
        }
        n->phase = COLL__NCCL_RUNNING;
        /* fall through */
    case COLL__NCCL_RUNNING:
        st = nj->dev->event_query(nj->event);
        if (st == COLL_INPROGRESS) {
            st = nj->nccl->comm_poll(nj->comm); /* a peer's failure while it runs */
            return st == COLL_OK ? COLL_INPROGRESS : st;
        }
        if (st != COLL_OK) {
            return st;
        }
        coll_dev_scratch_free(&n->scratch); /* the event covers the work on it */
        nj->job->d->devices.dev[nj->device].nccl_ops++;
        return COLL_OK;
    }
    return COLL_ERR_INVALID;
}

static void dequeue(coll__nccl_op_t *n)
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
    char what[48];
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
        coll__nccl_op_t *n = coll_container_of(nj->queue.next, coll__nccl_op_t, link);
        if ((st = advance(nj, n)) == COLL_INPROGRESS) {
            return;
        }
        if (st != COLL_OK) {
            snprintf(what, sizeof(what), "the %s failed",
                     coll_kind_name((coll_kind_t)n->op->desc.coll));
            fail(nj->job, st, what, coll_dev_error());
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

/* The device of @p op's buffers: every member's in one device pool; several members, an average
 * or a 16-bit sum or product only with the executor of device memory, which combines, serves
 * and finishes (coll__nccl_finishes()). */
static coll_status_t op_device(coll_op_t *op, int *dev_p)
{
    uint32_t pool = op->members[0].pool;
    const coll_devices_t *ds = &op->job->d->devices;
    char why[COLL_DEV_TEXT_MAX + 128];

    for (uint32_t l = 0; l < op->nbufs; l++) {
        if (op->members[l].pool != pool || pool == 0) {
            return fail(op->job, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers",
                        "NCCL needs every one in the same device pool (none in host memory)");
        }
    }
    if ((op->nbufs > 1 || coll__nccl_finishes(op)) && ds->exec == NULL) {
        snprintf(why, sizeof(why), "%s by the executor of device memory, and there is none: %s",
                 op->nbufs > 1 ? "several ranks on one device are combined"
                 : coll__nccl_wide(op) ? "a 16-bit sum, average or product is kept in float32"
                                       : "an average is finished",
                 ds->exec_status);
        return fail(op->job, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers", why);
    }
    *dev_p = op->job->dev_pools[pool - 1]->device;
    return COLL_OK;
}

/* The job's first NCCL operation: node 0 makes the id, sends it to the others and joins; the
 * others receive it (nccl_on_xfer() joins). */
static coll_status_t exchange_id(coll_nccl_job_t *nj, coll__nccl_op_t *n)
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
    coll__nccl_op_t *n = calloc(1, sizeof(*n) + op->grp->nnodes * sizeof(coll_xfer_t));
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
    coll__nccl_op_t *n = op->algo_state;

    if (!x->is_send && !op->done && op->job->engine.nccl->comm == NULL) {
        join(op->job->engine.nccl, &n->id);
    }
}

/* The scratch once the stream is done with it: one still held here belongs to an operation
 * freed before its event completed (its job failed, which aborted the communicator), whose
 * queued work is waited for first, off the normal path. */
static void free_scratch(coll_op_t *op, coll__nccl_op_t *n)
{
    coll_nccl_job_t *nj = op->job->engine.nccl;

    if (n->scratch.va != 0 && nj != NULL && nj->stream != NULL) {
        nj->dev->stream_sync(nj->stream);
    }
    coll_dev_scratch_free(&n->scratch);
}

static void nccl_cleanup(coll_op_t *op)
{
    coll__nccl_op_t *n = op->algo_state;

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
        dequeue(coll_container_of(nj->queue.next, coll__nccl_op_t, link));
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
