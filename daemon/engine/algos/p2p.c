/*
 * Point-to-point messages between two ranks of a communicator (the world or a group).
 *
 * On one node the daemon copies from the sender's pool buffer into the receiver's once both have
 * submitted. Across nodes the data is one UCX tagged message, pool to pool, and the receiver
 * answers the sender with a small message (its status and the size it expected): the sender's
 * request completes only then, so that a size mismatch fails both sides, naming both sizes, and
 * a sender never reports success for data its peer's job could not take.
 *
 * A buffer in a device pool goes through the staged path (engine/dev_staged.h): a send's is
 * copied to a host copy first, and the message starts once that copy completed; a receive's
 * lands in a host copy, copied back before its rank is told. Each side stages its own buffer,
 * so a device buffer on one side meets a host buffer or a device buffer on the other alike.
 */
#include "engine/algos/p2p.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dev_pools.h"
#include "engine/dev_staged.h"
#include "engine/op.h"
#include "engine/submit.h"
#include "net/clientlink.h"
#include "net/transport.h"
#include "proto/tag.h"

/* The receiver's answer: its status (COLL_OK or COLL_ERR_MISMATCH) and the bytes it expected. */
typedef struct {
    int64_t status;
    int64_t expected;
} p2p_answer_t;

/* A remote transfer: the data message, the answer, how many of the two completed. */
typedef struct {
    coll_xfer_t data;
    coll_xfer_t answer_xfer;
    p2p_answer_t answer;
    int events;
} p2p_t;

/* A p2p operation keeps its own job rank in desc.first_rank and the other one in desc.root. */
static uint32_t src_rank(const coll_op_t *op)
{
    return op->desc.coll == COLL_KIND_SEND ? op->desc.first_rank : op->desc.root;
}

static uint32_t dst_rank(const coll_op_t *op)
{
    return op->desc.coll == COLL_KIND_SEND ? op->desc.root : op->desc.first_rank;
}

static size_t op_bytes(const coll_op_t *op)
{
    return (size_t)(op->desc.count * op->esize);
}

/* The pending local counterpart of @p op: the other side of the same message, started (a
 * staged send's host copy holds its data only then). */
static coll_op_t *find_local_peer(coll_job_t *job, const coll_op_t *op)
{
    coll_op_t *o, *tmp;
    coll_list_for_each_safe(o, tmp, &job->engine.ops, coll_op_t, link)
    {
        if (o != op && !o->done && o->desc_ok && o->grp == op->grp &&
            o->desc.coll + op->desc.coll == COLL_KIND_SEND + COLL_KIND_RECV &&
            o->desc.key == op->desc.key && src_rank(o) == src_rank(op) &&
            dst_rank(o) == dst_rank(op)) {
            return o;
        }
    }
    return NULL;
}

static void mismatch_text(const coll_op_t *op, size_t sent, size_t expected, char *buf,
                          size_t len)
{
    snprintf(buf, len, "rank %u sent %zu bytes to rank %u, which expected %zu", src_rank(op),
             sent, dst_rank(op), expected);
}

static void match_local(coll_job_t *job, coll_op_t *op)
{
    coll_op_t *peer = find_local_peer(job, op);
    coll_op_t *send = op->desc.coll == COLL_KIND_SEND ? op : peer;
    coll_op_t *recv = send == op ? peer : op;
    char err[200];

    if (peer == NULL) {
        return; /* the other side submits later */
    }
    if (op_bytes(send) != op_bytes(recv)) {
        mismatch_text(op, op_bytes(send), op_bytes(recv), err, sizeof(err));
        coll_op_complete(send, COLL_ERR_MISMATCH, err);
        coll_op_complete(recv, COLL_ERR_MISMATCH, err);
        return;
    }
    memcpy(recv->out[0], send->in[0], op_bytes(send));
    coll_op_complete(send, COLL_OK, "");
    coll_op_complete(recv, COLL_OK, "");
}

/* The data message's tag, and its answer's (both name the sender, the receiver's node gets the
 * data and the sender's the answer). */
static uint64_t data_tag(const coll_job_t *job, const coll_op_t *op)
{
    return coll_tag_p2p(op->grp->id, src_rank(op), job->rank_local[dst_rank(op)], op->desc.key);
}

static uint64_t answer_tag(const coll_job_t *job, const coll_op_t *op)
{
    return coll_tag_p2p_ack(op->grp->id, dst_rank(op), job->rank_local[src_rank(op)],
                            op->desc.key);
}

static coll_status_t remote_start(coll_job_t *job, coll_op_t *op, uint32_t node)
{
    p2p_t *p = calloc(1, sizeof(*p));
    int send = op->desc.coll == COLL_KIND_SEND;
    coll_status_t st;

    if (p == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = p;
    p->data = (coll_xfer_t){.op = op, .kind = COLL_TAG_P2P, .is_send = (uint8_t)send};
    p->answer_xfer = (coll_xfer_t){.op = op, .kind = COLL_TAG_P2P, .slot = 1};
    if (send) {
        st = coll_op_post_job_node(op, 0, node, answer_tag(job, op), &p->answer,
                                   sizeof(p->answer), &p->answer_xfer);
        if (st == COLL_OK) {
            st = coll_op_post_job_node(op, 1, node, data_tag(job, op),
                                       (void *)op->in[0], op_bytes(op), &p->data);
        }
        return st;
    }
    return coll_op_post_job_node(op, 0, node, data_tag(job, op), op->out[0], op_bytes(op),
                                 &p->data);
}

/* A message has no descriptor exchange: its side counts as agreed once it starts (its buffer,
 * or a staged send's host copy, ready), which a local peer waits for (find_local_peer()). */
static coll_status_t p2p_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    uint32_t other = op->desc.root, node = job->rank_node[other];

    op->desc_ok = 1;
    if (node != job->node_rank) {
        return remote_start(job, op, node);
    }
    if (job->locals[job->rank_local[other]] == NULL) {
        char err[96];
        snprintf(err, sizeof(err), "rank %u has left the job", other);
        coll_op_complete(op, COLL_ERR_JOB, err);
        return COLL_OK;
    }
    match_local(job, op);
    return COLL_OK;
}

/* The receiver got the data (or not all of it): answer the sender, then complete. */
static void on_received(coll_op_t *op, p2p_t *p, const coll_xfer_t *x)
{
    int ok = x->status == UCS_OK && x->length == x->expect;
    char err[200] = "";
    coll_status_t st;

    if (!ok && x->status == UCS_OK) {
        snprintf(err, sizeof(err), "rank %u expected %zu bytes from rank %u, received %zu bytes",
                 dst_rank(op), x->expect, src_rank(op), x->length);
    } else if (!ok) {
        snprintf(err, sizeof(err), "rank %u expected %zu bytes from rank %u, the message was "
                 "longer", dst_rank(op), x->expect, src_rank(op));
    }
    p->answer = (p2p_answer_t){ok ? COLL_OK : COLL_ERR_MISMATCH, (int64_t)x->expect};
    p->answer_xfer = (coll_xfer_t){.op = op, .kind = COLL_TAG_P2P, .is_send = 1, .slot = 1};
    st = coll_op_post_job_node(op, 1, op->job->rank_node[src_rank(op)],
                               answer_tag(op->job, op), &p->answer, sizeof(p->answer),
                               &p->answer_xfer);
    if (st != COLL_OK) {
        coll_job_fail(op->job, st, 1, "point-to-point: answering rank %u failed", src_rank(op));
        return;
    }
    coll_op_complete(op, ok ? COLL_OK : COLL_ERR_MISMATCH, err);
}

/* The sender's data left and the receiver answered. */
static void on_answered(coll_op_t *op, const p2p_t *p)
{
    char err[200];

    if (p->answer.status == COLL_OK && p->answer.expected == (int64_t)op_bytes(op)) {
        coll_op_complete(op, COLL_OK, "");
        return;
    }
    mismatch_text(op, op_bytes(op), (size_t)p->answer.expected, err, sizeof(err));
    coll_op_complete(op, COLL_ERR_MISMATCH, err);
}

static void p2p_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    p2p_t *p = op->algo_state;
    char err[200];

    if (x->status != UCS_OK && !(x == &p->data && !x->is_send &&
                                 x->status == UCS_ERR_MESSAGE_TRUNCATED)) {
        snprintf(err, sizeof(err), "%s between ranks %u and %u failed: %s",
                 x->slot ? "the receiver's answer" : x->is_send ? "send" : "receive",
                 src_rank(op), dst_rank(op), ucs_status_string(x->status));
        coll_op_complete(op, COLL_ERR_PEER, err);
        coll_transport_cancel(op->job, &p->answer_xfer); /* a sender's answer never comes */
    } else if (op->desc.coll == COLL_KIND_RECV) {
        if (x == &p->data) {
            on_received(op, p, x);
        }
    } else if (x->slot == 1 && x->length != sizeof(p->answer)) {
        snprintf(err, sizeof(err), "malformed answer of %zu bytes from rank %u", x->length,
                 dst_rank(op));
        coll_op_complete(op, COLL_ERR_PROTOCOL, err);
    } else if (++p->events == 2) {
        on_answered(op, p);
    }
}

static void p2p_cleanup(coll_op_t *op)
{
    free(op->algo_state);
    op->algo_state = NULL;
}

/* Point-to-point transfers check their own sizes: no ring descriptor, errors stay theirs. */
static const coll_impl_t coll_impl_p2p = {
    .name = "p2p",
    .flags = COLL_IMPL_SELF_CHECK | COLL_IMPL_OWN_ERRORS,
    .start = p2p_start,
    .on_xfer = p2p_on_xfer,
    .cleanup = p2p_cleanup,
};

/* Start @p op, completing it when its transfer cannot be posted. */
static void start_or_fail(coll_op_t *op)
{
    if (p2p_start(op) != COLL_OK) {
        coll_op_complete(op, COLL_ERR_TRANSPORT, "posting the transfer failed");
    }
}

/* A staged send's copy in completed (engine/dev_staged.h): the message starts. */
static void staged_ready(coll_op_t *op)
{
    coll_job_t *job = op->job;

    start_or_fail(op);
    coll_transport_drive(job);
}

void coll_p2p_submit(coll_job_t *job, coll_group_t *grp, coll_session_t *s,
                     const Coll__Wire__Submit *sub)
{
    uint32_t self = grp->local_of[s->local_rank];
    coll_desc_t d = {.magic = COLL_DESC_MAGIC, .version = COLL_WIRE_VERSION,
                     .coll = (uint16_t)sub->coll,
                     .key = sub->key & ((1ull << COLL_TAG_P2P_KEY_BITS) - 1),
                     .count = sub->count, .dtype = sub->dtype, .first_rank = s->rank,
                     .root = grp->ranks[sub->peer], .world_size = grp->size, .group = grp->id};
    coll_op_t *op = coll_op_create(job, grp, &d);
    uint8_t *base = coll_pool_base(coll_job_pool_by_id(job, sub->pool));
    coll_status_t st = COLL_OK;

    if (op == NULL) {
        coll_session_complete(s, sub->req_id, COLL_ERR_NOMEM, "daemon out of memory", "");
        return;
    }
    /* One buffer, the submitting member's, in[0] and out[0]; its member entry is its own. In a
     * device pool they are device addresses until staged. */
    op->members[self] = coll_op_member_of(s, sub, NULL);
    op->nbufs = 1;
    op->in[0] = base + sub->send_offset;
    op->out[0] = base + sub->recv_offset;
    op->impl = &coll_impl_p2p;
    coll_op_hold(op); /* staging may fail the job, which completes the operation */
    if (sub->pool != 0) {
        st = coll_dev_staged_p2p(op, &op->members[self], staged_ready);
    }
    if (st == COLL_OK) {
        start_or_fail(op);
    }
    coll_op_release(op);
    coll_transport_drive(job);
}
