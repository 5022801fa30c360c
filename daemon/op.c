/*
 * Operations: matching the local ranks' submissions by key, the descriptor check with the
 * previous node of the ring, completion and failure.
 *
 * Submissions are matched by key, not by arrival order, so local ranks (and nodes) that submit
 * buckets in different orders do not deadlock: every operation whose local ranks are all in
 * starts at once and runs beside the others.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "op.h"
#include "tag.h"
#include "transport.h"

static coll_op_t *op_find(coll_job_t *job, uint64_t key)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        if (!op->done && op->desc.key == key) {
            return op;
        }
    }
    return NULL;
}

static void desc_from_submit(coll_job_t *job, const Coll__Wire__Submit *sub, coll_desc_t *d)
{
    memset(d, 0, sizeof(*d));
    d->magic = COLL_DESC_MAGIC;
    d->version = COLL_WIRE_VERSION;
    d->coll = (uint16_t)sub->coll;
    d->key = sub->key;
    d->count = sub->count;
    d->dtype = sub->dtype;
    d->op = sub->op;
    d->seg_bytes = (uint32_t)job->d->cfg.segment_size;
    d->world_size = job->world_size;
    d->node = job->node_rank;
    d->first_rank = job->ranks[0];
}

static coll_op_t *op_create(coll_job_t *job, const coll_desc_t *desc)
{
    uint32_t l = job->local_size;
    coll_op_t *op = calloc(1, sizeof(*op) + l * (sizeof(coll_op_member_t) + 2 * sizeof(void *)));

    if (op == NULL) {
        return NULL;
    }
    op->job = job;
    op->desc = *desc;
    op->esize = coll_dtype_size((coll_dtype_t)desc->dtype);
    op->members = (coll_op_member_t *)(op + 1);
    op->in = (const void **)(op->members + l);
    op->out = (void **)(op->in + l);
    coll_list_init(&op->posted);
    coll_list_init(&op->parked);
    coll_plan_init(&op->plan, desc->count, job->nnodes, op->esize, job->d->cfg.segment_size);
    coll_list_push(&job->ops, &op->link);
    return op;
}

/* Check one submission's buffers: inside the session's own allocations, and either the same
 * buffer (in place) or disjoint. Returns an error for the request, with a message. */
static coll_status_t check_buffers(coll_job_t *job, coll_session_t *s,
                                   const Coll__Wire__Submit *sub, char *err, size_t len)
{
    uint64_t nbytes = sub->count * coll_dtype_size((coll_dtype_t)sub->dtype);

    if (!coll_pool_range_owned(job->pool, sub->send_offset, nbytes, s) ||
        !coll_pool_range_owned(job->pool, sub->recv_offset, nbytes, s)) {
        snprintf(err, len,
                 "rank %u: buffers [%" PRIu64 ", +%" PRIu64 ") / [%" PRIu64 ", +%" PRIu64
                 ") are not inside this rank's allocations in the pool of job %s",
                 s->rank, sub->send_offset, nbytes, sub->recv_offset, nbytes, job->id);
        return COLL_ERR_NOT_IN_POOL;
    }
    if (sub->send_offset != sub->recv_offset && sub->send_offset < sub->recv_offset + nbytes &&
        sub->recv_offset < sub->send_offset + nbytes) {
        snprintf(err, len, "rank %u: send and receive buffers overlap partially", s->rank);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

static void fail_local_mismatch(coll_op_t *op, coll_session_t *s, const coll_desc_t *mine)
{
    char a[128], b[128], who[32] = "an earlier rank";
    uint32_t l;

    /* The operation's descriptor came from the first local rank that submitted it. */
    for (l = 0; l < op->job->local_size; l++) {
        if (op->members[l].session != NULL && op->members[l].session != s) {
            snprintf(who, sizeof(who), "rank %u", op->job->ranks[l]);
            break;
        }
    }
    coll_desc_format(&op->desc, a, sizeof(a));
    coll_desc_format(mine, b, sizeof(b));
    coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                  "operation key %" PRIu64 ": %s submitted %s but rank %u submitted %s",
                  mine->key, who, a, s->rank, b);
}

static void op_start(coll_op_t *op);

void coll_op_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub)
{
    char err[640];
    coll_desc_t desc;
    coll_op_t *op;
    coll_status_t st;

    if (job->state == COLL_JOB_FAILED) {
        snprintf(err, sizeof(err), "job %s failed earlier: %.400s", job->id, job->errmsg);
        coll_session_complete(s, sub->req_id, job->error, err, "");
        return;
    }
    if (job->state != COLL_JOB_READY) {
        coll_session_complete(s, sub->req_id, COLL_ERR_PROTOCOL, "submit before the job is ready",
                              "");
        return;
    }
    st = check_buffers(job, s, sub, err, sizeof(err));
    if (st != COLL_OK) {
        coll_session_complete(s, sub->req_id, st, err, "");
        return;
    }
    desc_from_submit(job, sub, &desc);
    op = op_find(job, sub->key);
    if (op == NULL && (op = op_create(job, &desc)) == NULL) {
        coll_session_complete(s, sub->req_id, COLL_ERR_NOMEM, "daemon out of memory", "");
        return;
    }
    if (op->members[s->local_rank].session != NULL) {
        snprintf(err, sizeof(err), "rank %u submitted operation key %" PRIu64 " twice", s->rank,
                 sub->key);
        coll_session_complete(s, sub->req_id, COLL_ERR_INVALID, err, "");
        return;
    }
    op->members[s->local_rank] = (coll_op_member_t){s, sub->req_id, sub->send_offset,
                                                    sub->recv_offset};
    op->nsubmitted++;
    if (!coll_desc_equal(&op->desc, &desc)) {
        fail_local_mismatch(op, s, &desc);
    } else if (op->nsubmitted == job->local_size) {
        op_start(op);
    }
}

static coll_status_t desc_exchange(coll_op_t *op)
{
    coll_job_t *job = op->job;
    uint32_t next = (job->node_rank + 1) % job->nnodes;
    uint32_t prev = (job->node_rank + job->nnodes - 1) % job->nnodes;
    uint64_t tag = coll_tag_make(op->desc.key, COLL_TAG_DESC, 0, 0);
    coll_status_t st;

    op->desc_recv = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC};
    op->desc_send = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC, .is_send = 1};
    st = coll_transport_recv(job, prev, tag, &op->peer_desc, sizeof(op->peer_desc), &op->desc_recv);
    if (st == COLL_OK) {
        st = coll_transport_send(job, next, tag, &op->desc, sizeof(op->desc), &op->desc_send);
    }
    return st;
}

static void op_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    uint8_t *base = coll_pool_base(job->pool);
    coll_status_t st = COLL_OK;

    for (uint32_t l = 0; l < job->local_size; l++) {
        op->in[l] = base + op->members[l].send_off;
        op->out[l] = base + op->members[l].recv_off;
    }
    if (job->nnodes == 1) {
        op->desc_ok = 1;
        op->algo = &coll_algo_local;
    } else {
        op->algo = &coll_algo_ring;
        st = desc_exchange(op);
    }
    coll_debug(COLL_SUB_JOB, "job %s: key %" PRIu64 " count %" PRIu64 " starts (%s)", job->id,
               op->desc.key, op->desc.count, op->algo->name);
    if (st == COLL_OK) {
        st = op->algo->start(op);
    }
    if (st != COLL_OK) {
        coll_job_fail(job, st, 1, "starting operation key %" PRIu64 ": %s", op->desc.key,
                      coll_strerror(st));
    }
    coll_transport_drive(job);
}

void coll_op_complete(coll_op_t *op, coll_status_t status, const char *error)
{
    if (op->done) {
        return;
    }
    op->done = 1;
    for (uint32_t l = 0; l < op->job->local_size; l++) {
        coll_op_member_t *m = &op->members[l];
        if (m->session != NULL) {
            coll_session_complete(m->session, m->req_id, status, error,
                                  op->algo != NULL ? op->algo->name : "");
            m->session = NULL;
        }
    }
    coll_op_maybe_free(op);
}

void coll_op_algo_done(coll_op_t *op)
{
    op->algo_done = 1;
    if (op->desc_ok) {
        coll_op_complete(op, COLL_OK, "");
    }
}

static void desc_check(coll_op_t *op)
{
    coll_job_t *job = op->job;
    coll_desc_t *p = &op->peer_desc;
    coll_list_t *e;
    char a[128], b[128];

    if (op->desc_recv.length != sizeof(*p) || !coll_desc_equal(p, &op->desc)) {
        coll_desc_format(p, a, sizeof(a));
        coll_desc_format(&op->desc, b, sizeof(b));
        coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                      "operation key %" PRIu64 ": node %u (ranks from %u) submitted %s but "
                      "node %u (ranks from %u) submitted %s",
                      op->desc.key, p->node, p->first_rank, a, job->node_rank, job->ranks[0], b);
        return;
    }
    op->desc_ok = 1;
    while (!op->done && (e = coll_list_pop(&op->parked)) != NULL) {
        op->algo->on_xfer(op, coll_container_of(e, coll_xfer_t, link));
    }
    if (!op->done && op->algo_done) {
        coll_op_complete(op, COLL_OK, "");
    }
}

static void dispatch(coll_op_t *op, coll_xfer_t *x)
{
    coll_job_t *job = op->job;

    /* A node that said goodbye had received everything it needed: a send to it that fails
     * because its endpoint closed was delivered. */
    if (x->status != UCS_OK && x->is_send && job->nodes[x->peer].left) {
        x->status = UCS_OK;
    }
    if (x->status != UCS_OK) {
        coll_job_fail(job, COLL_ERR_TRANSPORT, 1, "%s of operation key %" PRIu64 " failed: %s",
                      x->is_send ? "send" : "receive", op->desc.key,
                      ucs_status_string(x->status));
    } else if (x == &op->desc_recv) {
        desc_check(op);
    } else if (x == &op->desc_send) {
        return;
    } else if (x->is_send) {
        op->algo->on_xfer(op, x);
    } else if (x->length != x->expect) {
        coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                      "operation key %" PRIu64 ": expected %zu bytes from the previous node, "
                      "got %zu (ranks disagree on the count)",
                      op->desc.key, x->expect, x->length);
    } else if (!op->desc_ok) {
        coll_list_push(&op->parked, &x->link);
    } else {
        op->algo->on_xfer(op, x);
    }
}

void coll_op_on_xfer(coll_xfer_t *x)
{
    coll_op_t *op = x->op;

    /* The transfer keeps the operation alive while the engine handles it, even if the
     * operation completes or fails meanwhile. */
    if (!op->done) {
        dispatch(op, x);
    }
    op->inflight--;
    coll_op_maybe_free(op);
}

void coll_op_fail_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        coll_xfer_t *x, *xtmp;
        coll_list_for_each_safe(x, xtmp, &op->posted, coll_xfer_t, posted)
        {
            if (!x->is_send) {
                coll_transport_cancel(job, x);
            }
        }
        coll_op_complete(op, job->error, job->errmsg);
    }
}

void coll_op_maybe_free(coll_op_t *op)
{
    if (!op->done || op->inflight > 0) {
        return;
    }
    coll_list_remove(&op->link);
    if (op->algo != NULL && op->algo->cleanup != NULL) {
        op->algo->cleanup(op);
    }
    free(op);
}

void coll_op_free_all(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &job->ops, coll_op_t, link)
    {
        op->done = 1;
        op->inflight = 0; /* the worker is gone: nothing will complete any more */
        coll_op_maybe_free(op);
    }
}
