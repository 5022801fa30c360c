/*
 * An operation's transfers: posting them (the algorithm's, its features' and the engine's
 * own), the descriptor check with the previous node of the group's ring, and where each
 * completion goes. The transport hands every completion to on_xfer(); the transfer keeps its
 * operation alive while the engine handles it.
 */
#include "engine/op.h"

#include <stdio.h>

#include "common/assert.h"
#include "engine/feature.h"
#include "engine/shm.h"
#include "net/transport.h"
#include "proto/tag.h"

coll_status_t coll__op_post_desc(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    uint32_t next = (grp->node_rank + 1) % grp->nnodes;
    uint32_t prev = (grp->node_rank + grp->nnodes - 1) % grp->nnodes;
    uint64_t tag = coll_tag_make(grp->id, op->desc.key, COLL_TAG_DESC, 0, 0);
    coll_status_t st;

    if (grp->nnodes == 1) {
        op->desc_ok = 1;
        op->t_peers_ns = op->t_start_ns;
        return COLL_OK;
    }
    op->desc_recv = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC};
    op->desc_send = (coll_xfer_t){.op = op, .kind = COLL_TAG_DESC, .is_send = 1};
    st = coll_op_recv(op, prev, tag, &op->peer_desc, sizeof(op->peer_desc), &op->desc_recv);
    if (st == COLL_OK) {
        st = coll_op_send(op, next, tag, &op->desc, sizeof(op->desc), &op->desc_send);
    }
    return st;
}

int coll_op_check_desc(coll_op_t *op, const coll_desc_t *p, uint32_t from)
{
    coll_job_t *job = op->job;
    char a[200], b[200], nm[64];

    if (coll_desc_equal(p, &op->desc)) {
        return 1;
    }
    coll_desc_format(p, a, sizeof(a));
    coll_desc_format(&op->desc, b, sizeof(b));
    coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                  "%s: node %u (ranks from %u) submitted %s but node %u (ranks from %u) "
                  "submitted %s",
                  coll__op_name(op, nm, sizeof(nm)), from, job->nodes[from].ranks[0], a,
                  job->node_rank, job->ranks[0], b);
    return 0;
}

int coll_op_check_msg(coll_op_t *op, const coll_xfer_t *x, const coll_desc_t *peer)
{
    char nm[48];

    if (x->length < sizeof(*peer)) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: node %u sent %zu bytes, less than a "
                      "descriptor", coll__op_name(op, nm, sizeof(nm)), x->peer, x->length);
        return 0;
    }
    if (!coll_op_check_desc(op, peer, x->peer)) {
        return 0;
    }
    if (x->length != x->expect) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: node %u sent %zu bytes, %zu expected",
                      coll__op_name(op, nm, sizeof(nm)), x->peer, x->length, x->expect);
        return 0;
    }
    return 1;
}

static void desc_check(coll_op_t *op)
{
    coll_list_t *e;
    char nm[64];

    if (op->desc_recv.length != sizeof(op->peer_desc)) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                      "%s: malformed descriptor from node %u", coll__op_name(op, nm, sizeof(nm)),
                      op->desc_recv.peer);
        return;
    }
    if (!coll_op_check_desc(op, &op->peer_desc, op->desc_recv.peer)) {
        return;
    }
    op->desc_ok = 1;
    op->t_peers_ns = uv_hrtime();
    if (op->impl->on_desc != NULL) {
        op->impl->on_desc(op);
    }
    while (!op->done && (e = coll_list_pop(&op->parked)) != NULL) {
        op->impl->on_xfer(op, coll_container_of(e, coll_xfer_t, link));
    }
    coll__op_maybe_complete(op);
}

void coll_op_xfer_failed(coll_op_t *op, coll_xfer_t *x)
{
    coll_job_t *job = op->job;
    char nm[48];

    coll_node_lost(&job->nodes[x->peer], "%s failed: %s", x->is_send ? "a send to it" :
                   "a receive from it", ucs_status_string(x->status));
    coll_job_fail(job, COLL_ERR_PEER, 1,
                  "%s: %s node %u (%s, ranks from %u) failed: %s (is its daemon alive?)",
                  coll__op_name(op, nm, sizeof(nm)), x->is_send ? "send to" : "receive from",
                  x->peer, job->nodes[x->peer].host, job->nodes[x->peer].ranks[0],
                  ucs_status_string(x->status));
}

void coll_op_wrong_length(coll_op_t *op, const coll_xfer_t *x)
{
    char nm[64];

    coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                  "%s: expected %zu bytes from node %u, got %zu (ranks disagree on the count)",
                  coll__op_name(op, nm, sizeof(nm)), x->expect, x->peer, x->length);
}

/* A failed transfer: more bytes than posted mean the data outran the descriptor of a larger
 * count; anything else, a lost node. */
static void failed(coll_op_t *op, coll_xfer_t *x)
{
    char nm[64];

    if (!x->is_send && x->status == UCS_ERR_MESSAGE_TRUNCATED) {
        coll_job_fail(op->job, COLL_ERR_MISMATCH, 1,
                      "%s: node %u sent more than the %zu bytes expected (ranks disagree on "
                      "the count)", coll__op_name(op, nm, sizeof(nm)), x->peer, x->expect);
    } else {
        coll_op_xfer_failed(op, x);
    }
}

/* The descriptor exchange: the engine's own, whatever the algorithm. */
static void desc_xfer(coll_op_t *op, coll_xfer_t *x)
{
    if (x->status != UCS_OK) {
        coll_op_xfer_failed(op, x);
    } else if (x == &op->desc_recv) {
        desc_check(op);
    }
}

/* A transfer a feature posted (feature.h), whatever the algorithm. */
static void feature_xfer(coll_op_t *op, coll_xfer_t *x)
{
    const coll_op_feature_t *f = coll_op_feature_of(x);

    if (x->status != UCS_OK) {
        failed(op, x);
        return;
    }
    f->on_xfer(op, coll_op_feature_state(op, f), x);
    coll__op_maybe_complete(op);
}

static void dispatch(coll_op_t *op, coll_xfer_t *x)
{
    /* A node that said goodbye had received everything it needed: a send to it that fails
     * because its endpoint closed was delivered. */
    if (x->status != UCS_OK && x->is_send && op->job->nodes[x->peer].left) {
        x->status = UCS_OK;
    }
    if (x == &op->desc_recv || x == &op->desc_send) {
        desc_xfer(op, x);
    } else if (x->feature != 0) {
        feature_xfer(op, x);
    } else if (op->impl->flags & COLL_IMPL_OWN_ERRORS) {
        op->impl->on_xfer(op, x);
    } else if (x->status != UCS_OK) {
        failed(op, x);
    } else if (x->is_send) {
        op->impl->on_xfer(op, x);
    } else if (x->length != x->expect && !(op->impl->flags & COLL_IMPL_SELF_CHECK)) {
        coll_op_wrong_length(op, x);
    } else if (!op->desc_ok && !(op->impl->flags & COLL_IMPL_SELF_CHECK)) {
        coll_list_push(&op->parked, &x->link);
    } else {
        op->impl->on_xfer(op, x);
    }
}

/* A transfer completed (or failed): the transport's callback. The transfer keeps the
 * operation alive while the engine handles it, even if the operation completes or fails
 * meanwhile. */
static void on_xfer(coll_xfer_t *x)
{
    coll_op_t *op = x->op;

    coll_list_remove(&x->posted);
    if (!op->done) {
        dispatch(op, x);
    }
    COLL_ASSERT(op->inflight > 0);
    op->inflight--;
    coll_op_maybe_free(op);
}

/* A rank on another node left: the direct path's rounds of this node's leader read it in the
 * area's header (rounds that still wait for that node fail the job naming it). */
static void on_node_left(coll_job_t *job, const char *who)
{
    if (job->state == COLL_JOB_READY && job->pool != NULL) {
        coll_shm_peer_left(job, who);
    }
}

static const coll_transport_hooks_t engine_transport = {.on_xfer = on_xfer,
                                                        .on_node_left = on_node_left};

coll_status_t coll_engine_job_open(coll_job_t *job)
{
    return coll_transport_job_open(job, &engine_transport);
}

void coll_engine_job_close(coll_job_t *job)
{
    coll_op_fail_all(job); /* cancels receives */
    coll_transport_job_close(job);
}

static coll_status_t posted(coll_op_t *op, coll_xfer_t *x, coll_status_t st)
{
    if (st == COLL_OK) {
        coll_list_push(&op->posted, &x->posted);
        op->inflight++;
    }
    return st;
}

coll_status_t coll_op_post_job_node(coll_op_t *op, int send, uint32_t node, uint64_t tag,
                                    void *buf, size_t len, coll_xfer_t *x)
{
    x->op = op;
    return posted(op, x, send ? coll_transport_send(op->job, node, tag, buf, len, x)
                              : coll_transport_recv(op->job, node, tag, buf, len, x));
}

coll_status_t coll_op_send(coll_op_t *op, uint32_t node, uint64_t tag, const void *buf,
                           size_t len, coll_xfer_t *x)
{
    if (x->kind != COLL_TAG_DESC) {
        op->sent_bytes += len;
    }
    return coll_op_post_job_node(op, 1, op->grp->nodes[node], tag, (void *)buf, len, x);
}

coll_status_t coll_op_recv(coll_op_t *op, uint32_t from, uint64_t tag, void *buf, size_t len,
                           coll_xfer_t *x)
{
    return coll_op_post_job_node(op, 0, op->grp->nodes[from], tag, buf, len, x);
}
