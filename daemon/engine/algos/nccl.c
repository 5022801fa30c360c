/*
 * NCCL between the daemons of a job's group (nccl.h): the queue of its operations and the loop's
 * poll; the group's communicator is nccl_comm.c's, each collective's work on the stream
 * nccl_calls.c's.
 *
 * Each group (the world, or a split group of two nodes or more) has a communicator of its own
 * among the daemons of its nodes, made by its first NCCL operation (nccl_comm.c). A group's
 * operations queue in start order, which is the group's key order on every node, and each
 * one's NCCL call is issued only once the descriptor check passed (a mismatch never reaches
 * NCCL) and the one before it in the group completed; the groups' queues are independent. A
 * timer of the loop per communicator (every POLL_MS while anything is queued) polls it
 * (ncclCommGetAsyncError: joining, queued, a peer's failure) and the event recorded after the
 * call; nothing waits in the loop. An error fails the job, whose end aborts its communicators
 * (coll_nccl_job_end()), which ends the other daemons' waits in NCCL.
 *
 * Where a rank's ready word (dev_sync.h) is not there when the operation's turn comes, the
 * communicator's stream first waits for it on the device (gate()) and the work is queued behind
 * the wait at once; the loop polls the words only where the device layer refuses the waits. A
 * job failing while such a wait holds the stream defers the group's abort to the job's end
 * (nccl_comm.c) and parks the operation (coll_dev_sync_park()).
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
 * members, an average, a 16-bit sum or product, a bitwise allreduce) fails its job with
 * COLL_ERR_UNSUPPORTED and the reason (the module's name and why); the others need none.
 */
#include "engine/algos/nccl.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "common/assert.h"
#include "core/dev_pools.h"
#include "engine/algos/algos.h"
#include "engine/algos/nccl_internal.h"
#include "engine/dev_sync.h"

/* How often the loop polls the communicator and the event while operations are queued. */
#define POLL_MS 1

coll_status_t coll__nccl_fail(coll_job_t *job, uint32_t group, coll_status_t st,
                              const char *what, const char *why)
{
    char of[32] = "";

    if (group != 0) {
        snprintf(of, sizeof(of), " of group %u", group);
    }
    coll_job_fail(job, st, 1, "job %s: NCCL between the nodes%s, on node %u: %s: %s", job->id,
                  of, job->node_rank, what, why);
    return st;
}

static void tick(uv_timer_t *t);

void coll__nccl_arm(coll_nccl_group_t *ng)
{
    if (!uv_is_active((uv_handle_t *)ng->timer)) {
        uv_timer_start(ng->timer, tick, POLL_MS, POLL_MS);
    }
}

/* @p n's inputs may be read from its stream: its ranks' ready words there, or waited for on the
 * device (the communicator's stream waits for them before the local phase and the call, so
 * the work starts at the words, not at the loop's poll of them), or, where the device layer
 * refuses the waits, polled here until they are. @return COLL_OK; COLL_INPROGRESS (polled,
 * not there yet); the device layer's error (coll_dev_error() says it). */
static coll_status_t gate(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    char err[320] = "";
    coll_status_t st;

    if (n->waited == 2 || coll_dev_sync_ready(n->op)) {
        return coll_dev_sync_ready(n->op) ? COLL_OK : COLL_INPROGRESS;
    }
    st = coll_dev_sync_device_wait(n->op, ng->device, &ng->stream, 1, err, sizeof(err));
    n->waited = st == COLL_OK ? 1 : 2;
    if (st != COLL_OK && st != COLL_ERR_UNSUPPORTED) {
        coll__dev_fail(st, "%s", err);
        return st;
    }
    return st == COLL_OK ? COLL_OK : COLL_INPROGRESS;
}

/* Move @p n on: COLL_OK when it is done, COLL_INPROGRESS while not yet, or the error. */
static coll_status_t advance(coll_nccl_group_t *ng, coll__nccl_op_t *n)
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
        if ((st = gate(ng, n)) != COLL_OK || (st = coll__nccl_call(ng, n)) != COLL_OK) {
            return st;
        }
        n->phase = COLL__NCCL_CALLED;
        /* fall through */
    case COLL__NCCL_CALLED:
        if ((st = ng->nccl->comm_poll(ng->comm)) != COLL_OK ||  /* in progress until queued */
            (st = coll__nccl_deliver(ng, n)) != COLL_OK ||
            (st = ng->dev->event_record(ng->event, ng->stream)) != COLL_OK) {
            return st;
        }
        n->phase = COLL__NCCL_RUNNING;
        /* fall through */
    case COLL__NCCL_RUNNING:
        st = ng->dev->event_query(ng->event);
        if (st == COLL_INPROGRESS) {
            st = ng->nccl->comm_poll(ng->comm); /* a peer's failure while it runs */
            return st == COLL_OK ? COLL_INPROGRESS : st;
        }
        if (st != COLL_OK) { /* the device's error: sticky (core/devices.h) */
            coll_device_fault(&ng->job->d->devices.dev[ng->device], ng->device,
                              coll_dev_error());
            return st;
        }
        coll_dev_scratch_free(&n->scratch); /* the event covers the work on it */
        ng->job->d->devices.dev[ng->device].nccl_ops++;
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
    coll_nccl_group_t *ng = t->data;
    char what[48];
    coll_status_t st;

    if (ng->comm != NULL && !ng->ready) {
        if ((st = ng->nccl->comm_poll(ng->comm)) != COLL_OK) {
            if (st != COLL_INPROGRESS) {
                coll__nccl_fail(ng->job, ng->group, st, "joining the communicator",
                                coll_dev_error());
            }
            return;
        }
        ng->ready = 1;
        coll_info(COLL_SUB_ENGINE, "job %s: NCCL communicator of group %u ready: rank %u of %u, "
                  "device %d", ng->job->id, ng->group, ng->node_rank, ng->nnodes, ng->device);
    }
    while (ng->ready && !coll_list_empty(&ng->queue)) {
        coll__nccl_op_t *n = coll_container_of(ng->queue.next, coll__nccl_op_t, link);
        if ((st = advance(ng, n)) == COLL_INPROGRESS) {
            return;
        }
        if (st != COLL_OK) {
            snprintf(what, sizeof(what), "the %s failed",
                     coll_kind_name((coll_kind_t)n->op->desc.coll));
            coll__nccl_fail(ng->job, ng->group, st, what, coll_dev_error());
            return; /* the job's end emptied the queue */
        }
        dequeue(n);
        coll_op_algo_done(n->op);
    }
    if (ng->ready) {
        uv_timer_stop(t);
    }
}

/* The device of @p op's buffers: every member's in one device pool; several members, an average,
 * a 16-bit sum or product or a bitwise allreduce only with the executor of device memory, which
 * combines, serves and finishes (coll_devc_finishes(), coll__nccl_bitwise()). */
static coll_status_t op_device(coll_op_t *op, int *dev_p)
{
    uint32_t pool = coll_devc_one_pool(op);
    const coll_devices_t *ds = &op->job->d->devices;
    char why[COLL_DEV_TEXT_MAX + 128];

    if (pool == 0) {
        return coll__nccl_fail(
            op->job, op->grp->id, COLL_ERR_UNSUPPORTED, "the node's ranks' buffers",
            "NCCL needs every one in the same device pool (none in host memory)");
    }
    if ((op->nbufs > 1 || coll_devc_finishes(op) || coll__nccl_bitwise(op)) &&
        ds->exec == NULL) {
        snprintf(why, sizeof(why), "%s by the executor of device memory, and there is none: %s",
                 op->nbufs > 1 ? "several ranks on one device are combined"
                 : coll_devc_wide(op) ? "a 16-bit sum, average or product is kept in float32"
                 : coll__nccl_bitwise(op) ? "the nodes' blocks of a bitwise allreduce are reduced"
                                       : "an average is finished",
                 ds->exec_status);
        return coll__nccl_fail(op->job, op->grp->id, COLL_ERR_UNSUPPORTED,
                               "the node's ranks' buffers", why);
    }
    *dev_p = op->job->dev_pools[pool - 1]->device;
    return COLL_OK;
}

/* Every failure here fails the job itself, saying why, and returns COLL_OK: the job's failure
 * completed @p op, which may be gone. */
static coll_status_t nccl_start(coll_op_t *op)
{
    coll__nccl_op_t *n = calloc(1, sizeof(*n) + op->grp->nnodes * sizeof(coll_xfer_t));
    coll_nccl_group_t *ng;
    int device = -1;

    if (n == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = n;
    n->op = op;
    if (op_device(op, &device) != COLL_OK || coll__nccl_group_get(n, device, &ng) != COLL_OK) {
        return COLL_OK;
    }
    coll_list_push(&ng->queue, &n->link);
    n->queued = 1;
    coll__nccl_arm(ng);
    return COLL_OK;
}

static void nccl_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    if (!x->is_send && !op->done) {
        coll__nccl_on_id(op->algo_state);
    }
}

/* The scratch once the stream is done with it: one still held here belongs to an operation
 * freed before its event completed (its job failed, which aborted the communicator), whose
 * queued work is waited for first, off the normal path. */
static void free_scratch(coll__nccl_op_t *n)
{
    const coll_nccl_group_t *ng = n->ng;

    if (n->scratch.va != 0 && ng != NULL && ng->stream != NULL) {
        ng->dev->stream_sync(ng->stream);
    }
    coll_dev_scratch_free(&n->scratch);
}

/* A parked operation's release (coll_dev_sync_park()): its group's stream was drained and
 * destroyed before (coll_nccl_job_free() runs before coll_dev_sync_job_end()). */
static void release_parked(coll_job_t *job, void *state)
{
    coll__nccl_op_t *n = state;

    (void)job;
    coll_dev_scratch_free(&n->scratch);
    free(n);
}

/* An operation whose stream waited on the device for a ready word not there when its job
 * failed (its group's abort deferred, nccl_comm.c) is parked until the job ends here: syncing
 * the stream would block the loop until the word came, maybe never, and then on an NCCL call
 * whose peers are gone; its group's end (coll_nccl_job_free()) stores the words, aborts and
 * drains the stream. */
static void nccl_cleanup(coll_op_t *op)
{
    coll__nccl_op_t *n = op->algo_state;

    if (n == NULL) {
        return;
    }
    dequeue(n);
    op->algo_state = NULL;
    if (n->waited == 1 && n->ng->deferred && coll_dev_sync_park(op, release_parked, n)) {
        return;
    }
    free_scratch(n);
    free(n);
}

const coll_impl_t coll_impl_nccl = {
    .name = "nccl",
    .start = nccl_start,
    .on_xfer = nccl_on_xfer,
    .cleanup = nccl_cleanup,
};
