#include "engine/algos/p2p.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "engine/op.h"
#include "engine/submit.h"
#include "net/clientlink.h"
#include "net/transport.h"
#include "proto/tag.h"

/* A p2p operation keeps its own rank in desc.first_rank and the other one in desc.root. */
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

/* The pending local counterpart of @p op: the other side of the same message. */
static coll_op_t *find_local_peer(coll_job_t *job, const coll_op_t *op)
{
    coll_op_t *o, *tmp;
    coll_list_for_each_safe(o, tmp, &job->engine.ops, coll_op_t, link)
    {
        if (o != op && !o->done && o->desc.coll + op->desc.coll == COLL_KIND_SEND + COLL_KIND_RECV &&
            o->desc.key == op->desc.key && src_rank(o) == src_rank(op) &&
            dst_rank(o) == dst_rank(op)) {
            return o;
        }
    }
    return NULL;
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
        snprintf(err, sizeof(err), "rank %u sent %zu bytes to rank %u, which expected %zu",
                 src_rank(op), op_bytes(send), dst_rank(op), op_bytes(recv));
        coll_op_complete(send, COLL_ERR_MISMATCH, err);
        coll_op_complete(recv, COLL_ERR_MISMATCH, err);
        return;
    }
    memcpy(recv->out[recv->self], send->in[send->self], op_bytes(send));
    coll_op_complete(send, COLL_OK, "");
    coll_op_complete(recv, COLL_OK, "");
}

static coll_status_t p2p_start(coll_op_t *op)
{
    coll_job_t *job = op->job;
    uint32_t other = op->desc.root, node = job->rank_node[other];
    uint64_t tag = coll_tag_p2p(src_rank(op), dst_rank(op), op->desc.key);

    if (node == job->node_rank) {
        if (job->locals[job->rank_local[other]] == NULL) {
            char err[96];
            snprintf(err, sizeof(err), "rank %u has left the job", other);
            coll_op_complete(op, COLL_ERR_JOB, err);
            return COLL_OK;
        }
        match_local(job, op);
        return COLL_OK;
    }
    op->p2p_xfer = (coll_xfer_t){.op = op, .kind = COLL_TAG_P2P,
                                 .is_send = op->desc.coll == COLL_KIND_SEND};
    if (op->desc.coll == COLL_KIND_SEND) {
        return coll_op_send(op, node, tag, op->in[op->self], op_bytes(op), &op->p2p_xfer);
    }
    return coll_op_recv(op, node, tag, op->out[op->self], op_bytes(op), &op->p2p_xfer);
}

static void p2p_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    char err[200];

    if (x->status == UCS_OK && (x->is_send || x->length == x->expect)) {
        coll_op_complete(op, COLL_OK, "");
    } else if (x->status == UCS_OK || x->status == UCS_ERR_MESSAGE_TRUNCATED) {
        snprintf(err, sizeof(err), "rank %u expected %zu bytes from rank %u, %s %zu",
                 dst_rank(op), x->expect, src_rank(op),
                 x->status == UCS_OK ? "received" : "the message was longer than",
                 x->status == UCS_OK ? x->length : x->expect);
        coll_op_complete(op, COLL_ERR_MISMATCH, err);
    } else {
        snprintf(err, sizeof(err), "%s between ranks %u and %u failed: %s",
                 x->is_send ? "send" : "receive", src_rank(op), dst_rank(op),
                 ucs_status_string(x->status));
        coll_op_complete(op, COLL_ERR_PEER, err);
    }
}

/* Point-to-point transfers check their own sizes: no ring descriptor, errors stay theirs. */
static const coll_impl_t coll_impl_p2p = {
    .name = "p2p",
    .flags = COLL_IMPL_SELF_CHECK | COLL_IMPL_OWN_ERRORS,
    .start = p2p_start,
    .on_xfer = p2p_on_xfer,
};

void coll_p2p_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub)
{
    coll_desc_t d = {.magic = COLL_DESC_MAGIC, .version = COLL_WIRE_VERSION,
                     .coll = (uint16_t)sub->coll, .key = sub->key & 0x3fffffu,
                     .count = sub->count, .dtype = sub->dtype, .first_rank = s->rank,
                     .root = sub->peer, .world_size = job->world_size};
    coll_op_t *op = coll_op_create(job, &d);
    uint8_t *base = coll_pool_base(job->pool);
    coll_status_t st;

    if (op == NULL) {
        coll_session_complete(s, sub->req_id, COLL_ERR_NOMEM, "daemon out of memory", "");
        return;
    }
    op->self = s->local_rank;
    op->members[s->local_rank] =
        (coll_op_member_t){s, sub->req_id, sub->send_offset, sub->recv_offset};
    op->in[s->local_rank] = base + sub->send_offset;
    op->out[s->local_rank] = base + sub->recv_offset;
    op->impl = &coll_impl_p2p;
    op->desc_ok = 1;
    st = p2p_start(op);
    if (st != COLL_OK) {
        coll_op_complete(op, COLL_ERR_TRANSPORT, "posting the transfer failed");
    }
    coll_transport_drive(job);
}
