/*
 * The NCCL path's communicators (nccl_internal.h): one per (job, group) that ran an NCCL
 * operation on this node, the world's (group 0) among every node of the job, a split group's
 * among the nodes that hold its ranks. NCCL's ranks are the group's nodes in the group's own
 * node order (core/group.h: the job's nodes with a member, in the job's order), so a group's
 * node g is NCCL rank g on every node, and a root rank's node (grp->rank_node[]) is NCCL's root.
 *
 * A group's communicator is made by its first NCCL operation, as the world's is: the group's
 * node 0 makes the unique id and sends it to the group's other nodes in that operation's own
 * transfers (the job's authenticated endpoints, the group's tag, step 0); every node joins with
 * the non-blocking comm_init on the device of the operation's pool, polled from the loop. Each
 * has a stream, an event, a poll and a queue of its own, so the groups' operations never wait for
 * each other on a node: the nodes order one group's operations alike (its keys), but not two
 * groups' against each other, so one queue for all of them (or one communicator made after
 * another's) could wait on one node for what another node queued behind the other group's
 * operation, which waits for the first: a deadlock. Communicators of a job are made side by side
 * (NCCL's non-blocking init runs each on a thread of its own, and the loop waits for none), and
 * kept until the job ends, a group freed meanwhile included (its id is never used again in the
 * job, job/groups.c); then all are destroyed, or aborted when the job failed or an operation is
 * still in one (ncclCommAbort, which ends the other daemons' waits in NCCL): at once, but for a
 * group whose stream waits for a rank's ready word not there (defer()), aborted at the job's end
 * after the words are stored, its stream drained after (end_deferred()).
 */
#include <stdlib.h>

#include "base/log.h"
#include "common/assert.h"
#include "engine/dev_sync.h"
#include "engine/algos/nccl.h"
#include "engine/algos/nccl_internal.h"
#include "proto/tag.h"

/* The communicator of group @p group of @p job on this node, or NULL. */
static coll_nccl_group_t *find(const coll_job_t *job, uint32_t group)
{
    coll_nccl_group_t *ng = job->engine.nccl;

    while (ng != NULL && ng->group != group) {
        ng = ng->next;
    }
    return ng;
}

/* Join the communicator @p id names. */
static coll_status_t join(coll_nccl_group_t *ng, const coll_nccl_id_t *id)
{
    coll_status_t st = ng->nccl->comm_init(ng->device, (int)ng->nnodes, (int)ng->node_rank, id,
                                           &ng->comm);

    if (st != COLL_OK) {
        ng->comm = NULL;
        return coll__nccl_fail(ng->job, ng->group, st, "joining the communicator",
                               coll_dev_error());
    }
    coll__nccl_arm(ng);
    return COLL_OK;
}

/* The state of @p grp's communicator on @p device, made now and linked into the job (which frees
 * it, also after a failure here). */
static coll_status_t open_group(coll_job_t *job, const coll_group_t *grp, int device,
                                coll_nccl_group_t **ng_p)
{
    coll_nccl_group_t *ng = calloc(1, sizeof(*ng));
    const char *why;

    if (ng == NULL || (ng->timer = calloc(1, sizeof(*ng->timer))) == NULL) {
        free(ng);
        return coll__nccl_fail(job, grp->id, COLL_ERR_NOMEM, "no state",
                               "daemon out of memory");
    }
    ng->job = job;
    ng->group = grp->id;
    ng->nnodes = grp->nnodes;
    ng->node_rank = grp->node_rank;
    ng->device = device;
    ng->dev = job->d->devices.ops;
    ng->ex = job->d->devices.exec;
    ng->ctx = (coll_exec_ctx_t){.device = device};
    coll_list_init(&ng->queue);
    uv_timer_init(job->d->loop, ng->timer);
    ng->timer->data = ng;
    ng->next = job->engine.nccl;
    job->engine.nccl = ng;
    if (coll_nccl_open(&ng->nccl) != COLL_OK) {
        coll_nccl_probe(&why);
        return coll__nccl_fail(job, grp->id, COLL_ERR_UNSUPPORTED, "no NCCL", why);
    }
    if (ng->dev->stream_create(device, &ng->stream) != COLL_OK ||
        ng->dev->event_create(device, &ng->event) != COLL_OK) {
        return coll__nccl_fail(job, grp->id, COLL_ERR_IO, "no stream or event",
                               coll_dev_error());
    }
    ng->ctx.stream = ng->stream;
    *ng_p = ng;
    return COLL_OK;
}

/* The group's first NCCL operation @p n: the group's node 0 makes the id, sends it to the
 * group's other nodes and joins; the others receive it (coll__nccl_on_id() joins). */
static coll_status_t exchange_id(coll_nccl_group_t *ng, coll__nccl_op_t *n)
{
    coll_op_t *op = n->op;
    uint64_t tag = coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_AG, 0, 0);
    coll_status_t st;

    if (op->grp->node_rank != 0) {
        n->nx = 1;
        st = coll_op_recv(op, 0, tag, &n->id, sizeof(n->id), &n->x[0]);
        return st == COLL_OK ? st
                             : coll__nccl_fail(op->job, op->grp->id, st,
                                               "receiving the communicator's id",
                                               coll_strerror(st));
    }
    if ((st = ng->nccl->unique_id(&n->id)) != COLL_OK) {
        return coll__nccl_fail(op->job, op->grp->id, st, "making the communicator's id",
                               coll_dev_error());
    }
    for (uint32_t node = 1; node < op->grp->nnodes; node++) {
        if ((st = coll_op_send(op, node, tag, &n->id, sizeof(n->id), &n->x[n->nx++])) != COLL_OK) {
            return coll__nccl_fail(op->job, op->grp->id, st, "sending the communicator's id",
                                   coll_strerror(st));
        }
    }
    return join(ng, &n->id);
}

coll_status_t coll__nccl_group_get(coll__nccl_op_t *n, int device, coll_nccl_group_t **ng_p)
{
    coll_op_t *op = n->op;
    coll_nccl_group_t *ng = find(op->job, op->grp->id);
    coll_status_t st;

    if (ng == NULL) {
        if ((st = open_group(op->job, op->grp, device, &ng)) != COLL_OK) {
            return st;
        }
        n->ng = ng;
        if ((st = exchange_id(ng, n)) != COLL_OK) {
            return st;
        }
    } else if (ng->device != device) {
        return coll__nccl_fail(op->job, op->grp->id, COLL_ERR_UNSUPPORTED,
                               "the node's ranks' buffers",
                               "they are on another device than the group's communicator");
    }
    /* A group id names the same ranks, so the same nodes, for the job's life (job/groups.c). */
    COLL_ASSERT(ng->nnodes == op->grp->nnodes && ng->node_rank == op->grp->node_rank);
    n->ng = ng;
    *ng_p = ng;
    return COLL_OK;
}

void coll__nccl_on_id(coll__nccl_op_t *n)
{
    if (n->ng != NULL && n->ng->comm == NULL) {
        join(n->ng, &n->id);
    }
}

/* Whether @p ng's stream waits on the device for a ready word not there yet (its first queued
 * operation's, nccl.c's gate()): then its abort is deferred to the job's end, the words kept
 * in ng->held. An NCCL kernel queued behind the wait would start, once the word is there, on
 * the communicator ncclCommAbort freed. Without memory to keep the words, it is aborted now. */
static int defer(coll_nccl_group_t *ng)
{
    coll__nccl_op_t *n;

    if (ng->deferred || !ng->ready || coll_list_empty(&ng->queue)) {
        return ng->deferred;
    }
    n = coll_container_of(ng->queue.next, coll__nccl_op_t, link);
    if (n->waited != 1 || coll_dev_sync_ready(n->op) ||
        (ng->held = malloc(n->op->grp->nlocal * sizeof(*ng->held))) == NULL) {
        return 0;
    }
    ng->nheld = coll_dev_sync_due(n->op, ng->held);
    ng->deferred = 1;
    coll_info(COLL_SUB_ENGINE, "job %s: NCCL communicator of group %u waits for %u ranks' ready "
               "words: aborted when the job ends here", ng->job->id, ng->group, ng->nheld);
    return 1;
}

/* End @p ng: aborted when the job failed (at the job's end where its stream waits for ready
 * words, defer()), it never finished joining or an operation is still in it, destroyed
 * otherwise. */
static void end_group(coll_nccl_group_t *ng)
{
    if (ng->comm != NULL) {
        if (ng->job->error != COLL_OK || !ng->ready || !coll_list_empty(&ng->queue)) {
            if (!defer(ng)) {
                ng->nccl->comm_abort(ng->comm);
                ng->comm = NULL;
            }
        } else {
            ng->nccl->comm_destroy(ng->comm);
            ng->comm = NULL;
        }
    }
    ng->ready = 0;
    while (!coll_list_empty(&ng->queue)) {
        coll__nccl_op_t *n = coll_container_of(ng->queue.next, coll__nccl_op_t, link);
        coll_list_remove(&n->link);
        n->queued = 0;
    }
    uv_timer_stop(ng->timer);
}

void coll_nccl_job_end(coll_job_t *job)
{
    for (coll_nccl_group_t *ng = job->engine.nccl; ng != NULL; ng = ng->next) {
        end_group(ng);
    }
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

/* The job ends here (its ranks gone): a deferred group's words are stored, so its stream's
 * work starts (the record and query let the fake's stream get there; a GPU's goes on its own),
 * then the communicator is aborted, which the started NCCL call sees, then the stream drained,
 * so nothing on it runs on a freed communicator, and nothing waits for peers that are gone. */
static void end_deferred(coll_nccl_group_t *ng)
{
    coll_dev_sync_store(ng->held, ng->nheld);
    if (ng->dev->event_record(ng->event, ng->stream) == COLL_OK) {
        (void)ng->dev->event_query(ng->event);
    }
    ng->nccl->comm_abort(ng->comm);
    ng->comm = NULL;
    (void)ng->dev->stream_sync(ng->stream);
    free(ng->held);
    ng->held = NULL;
    ng->deferred = 0;
}

void coll_nccl_job_free(coll_job_t *job)
{
    coll_nccl_group_t *ng;

    coll_nccl_job_end(job);
    for (ng = job->engine.nccl; ng != NULL; ng = ng->next) {
        if (ng->deferred) {
            end_deferred(ng);
        }
    }
    while ((ng = job->engine.nccl) != NULL) {
        job->engine.nccl = ng->next;
        ng->dev->event_destroy(ng->event);
        ng->dev->stream_destroy(ng->stream);
        uv_close((uv_handle_t *)ng->timer, timer_closed);
        free(ng);
    }
}
