/*
 * Recursive doubling among the nodes' leaders (direct.h), the same schedule and arithmetic as
 * the daemons' (daemon/engine/algos/rd.c), so that both give bitwise the same result for the
 * same inputs. With p the largest power of two <= N and rem = N - p:
 *   fold:    among the first 2*rem nodes, each even node sends its partial result to the odd
 *            node after it and sits out;
 *   doubling: the p remaining nodes exchange their whole partial result with the node whose
 *            virtual rank differs in bit k, k = 0 .. log2(p)-1, and combine;
 *   unfold:  each odd node of the first 2*rem sends the result back to its even partner.
 *
 * Every message is a header (proto/direct.h) and the sender's partial. A message without the
 * job's token is dropped, never combined, and its receive posted again: the operation then
 * waits, and the job's timeout ends it. Descriptors are compared in every exchange and the
 * agreement flags ANDed; the pairings connect every node, so after the last exchange every
 * leader knows whether all descriptors were equal, and only then is the result written. A
 * partner whose descriptor differs is not combined (its count may differ).
 */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "client/direct/direct_impl.h"
#include "kernels/exec.h"
#include "proto/tag.h"

enum { PH_FOLD, PH_ROUND, PH_UNFOLD, PH_DONE };

static uint8_t *payload(uint8_t *msg)
{
    return msg + sizeof(coll_direct_hdr_t);
}

/* Two descriptors that differ: the first such pair is kept, for the error. */
static void disagree(coll_direct_op_t *x, const coll_desc_t *a, const coll_desc_t *b)
{
    if (x->agreed) {
        x->seen[0] = *a;
        x->seen[1] = *b;
        x->agreed = 0;
    }
}

/* Post the current exchange's receive. Always as a request (no immediate completion): UCX
 * 1.13 completes a receive whose message was already there without writing the length into
 * recv_info, and the length decides whether the message is taken. */
static coll_status_t post_recv(coll_comm_t *c, coll_direct_op_t *x)
{
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL};
    uint64_t tag = coll_tag_make(0, x->desc.key, COLL_TAG_RS, x->step, 0);
    void *req = ucp_tag_recv_nbx(c->direct->worker, x->theirs, x->theirs_len, tag, ~(uint64_t)0,
                                 &prm);

    if (UCS_PTR_IS_ERR(req) || req == NULL) {
        coll__set_error(c, "rank %d: posting a direct receive: %s", c->rank,
                        ucs_status_string(req == NULL ? UCS_ERR_NO_MESSAGE
                                                      : UCS_PTR_STATUS(req)));
        return COLL_ERR_TRANSPORT;
    }
    x->rreq = req;
    x->rlen = 0;
    return COLL_OK;
}

static coll_status_t post_send(coll_comm_t *c, coll_direct_op_t *x)
{
    coll_direct_hdr_t *h = (coll_direct_hdr_t *)(void *)x->mine;
    ucp_request_param_t prm = {.op_attr_mask = 0};
    uint64_t tag = coll_tag_make(0, x->desc.key, COLL_TAG_RS, x->step, 0);
    ucs_status_t st;
    ucp_ep_h ep = coll__direct_ep(c, x->peer, &st);
    void *req;

    h->agreed = x->agreed;
    memcpy(h->seen, x->seen, sizeof(h->seen));
    req = ep != NULL ? ucp_tag_send_nbx(ep, x->mine, sizeof(*h) + x->bytes, tag, &prm)
                     : UCS_STATUS_PTR(st);
    if (UCS_PTR_IS_ERR(req)) {
        coll__set_error(c, "rank %d: sending to node %u's leader on the direct path: %s", c->rank,
                        x->peer, ucs_status_string(UCS_PTR_STATUS(req)));
        return COLL_ERR_TRANSPORT;
    }
    x->sreq = req;
    x->sent = req == NULL;
    return COLL_OK;
}

/* Exchange with node @p peer at @p step: send, receive, or both. */
static coll_status_t exchange(coll_comm_t *c, coll_direct_op_t *x, uint32_t peer, uint32_t step,
                              int send, int recv)
{
    coll_status_t st = COLL_OK;

    x->peer = peer;
    x->step = step;
    x->sent = !send;
    x->received = !recv;
    if (recv) {
        st = post_recv(c, x);
    }
    if (send && st == COLL_OK) {
        st = post_send(c, x);
    }
    return st;
}

/* The partner's message, whose token checked out: its agreement, and its partial combined into
 * this leader's when the descriptors are equal. */
static void combine_theirs(coll_direct_op_t *x)
{
    const coll_direct_hdr_t *h = (const coll_direct_hdr_t *)(const void *)x->theirs;
    const void *src[2] = {payload(x->mine), payload(x->theirs)};

    if (!h->agreed) {
        disagree(x, &h->seen[0], &h->seen[1]);
    }
    if (!coll_desc_equal(&h->desc, &x->desc) || x->rlen != sizeof(*h) + x->bytes) {
        disagree(x, &h->desc, &x->desc);
        return;
    }
    coll_exec_get(COLL_MEM_HOST)->reduce(&(coll_reduce_args_t){
        .dtype = (coll_dtype_t)x->desc.dtype, .op = (coll_redop_t)x->desc.op,
        .world_size = x->desc.world_size, .dst = payload(x->mine), .src = src, .nsrc = 2,
        .count = x->desc.count});
}

/* The result, every descriptor equal: into the buffer, an average divided (rd.c's finish). */
static void finish(coll_direct_op_t *x)
{
    const void *src = payload(x->mine);

    if (x->agreed && x->desc.count > 0) {
        coll_exec_get(COLL_MEM_HOST)->reduce(&(coll_reduce_args_t){
            .dtype = (coll_dtype_t)x->desc.dtype, .op = (coll_redop_t)x->desc.op,
            .world_size = x->desc.world_size, .finalize = 1, .dst = x->buf, .src = &src,
            .nsrc = 1, .count = x->desc.count});
    }
    x->phase = PH_DONE;
}

static coll_status_t next_round(coll_comm_t *c, coll_direct_op_t *x)
{
    if ((1u << x->round) < x->pl.p) {
        uint32_t partner = coll_rd_partner(&x->pl, x->round);
        return exchange(c, x, partner, COLL_RD_STEP_ROUND0 + x->round, 1, 1);
    }
    if (coll_rd_folds(&x->pl)) { /* an odd node of the fold gives the result back */
        x->phase = PH_UNFOLD;
        return exchange(c, x, x->pl.r - 1, COLL_RD_STEP_UNFOLD, 1, 0);
    }
    finish(x);
    return COLL_OK;
}

/* The current exchange completed: combine and go on. */
static coll_status_t step_done(coll_comm_t *c, coll_direct_op_t *x)
{
    switch (x->phase) {
    case PH_FOLD:
        if (x->pl.vrank < 0) { /* sat out: wait for the result */
            x->phase = PH_UNFOLD;
            return exchange(c, x, x->pl.r + 1, COLL_RD_STEP_UNFOLD, 0, 1);
        }
        combine_theirs(x);
        x->phase = PH_ROUND;
        return next_round(c, x);
    case PH_ROUND:
        combine_theirs(x);
        x->round++;
        return next_round(c, x);
    default:
        if (x->pl.vrank < 0) { /* the result and the agreement of the odd partner */
            const coll_direct_hdr_t *h = (const coll_direct_hdr_t *)(const void *)x->theirs;
            if (!h->agreed) {
                disagree(x, &h->seen[0], &h->seen[1]);
            } else if (x->rlen == sizeof(*h) + x->bytes && coll_desc_equal(&h->desc, &x->desc)) {
                memcpy(payload(x->mine), payload(x->theirs), x->bytes);
            } else {
                disagree(x, &h->desc, &x->desc);
            }
        }
        finish(x);
        return COLL_OK;
    }
}

coll_status_t coll__direct_start(coll_comm_t *c, coll_direct_op_t *x, const coll_desc_t *desc,
                                 void *buf, uint64_t token, uint64_t max_bytes)
{
    size_t es = coll_dtype_size((coll_dtype_t)desc->dtype);
    coll_direct_hdr_t *h;

    *x = (coll_direct_op_t){.desc = *desc, .buf = buf, .bytes = desc->count * es,
                            .token = token, .agreed = 1, .started = 1,
                            .start_ns = coll__now_ns()};
    /* Room for the bound: a partner with a larger count is a mismatch, not a truncation. */
    x->theirs_len = sizeof(*h) + (max_bytes > x->bytes ? max_bytes : x->bytes);
    x->mine = malloc(sizeof(*h) + x->bytes);
    x->theirs = malloc(x->theirs_len);
    if (x->mine == NULL || x->theirs == NULL) {
        coll__direct_end(c, x);
        return COLL_ERR_NOMEM;
    }
    h = (coll_direct_hdr_t *)(void *)x->mine;
    *h = (coll_direct_hdr_t){.token = token, .node = desc->node, .desc = *desc};
    memcpy(payload(x->mine), buf, x->bytes);
    x->pl = coll_rd_plan(c->node_count, desc->node);
    if (coll_rd_folds(&x->pl)) {
        x->phase = PH_FOLD;
        return x->pl.vrank < 0 ? exchange(c, x, x->pl.r + 1, COLL_RD_STEP_FOLD, 1, 0)
                               : exchange(c, x, x->pl.r - 1, COLL_RD_STEP_FOLD, 0, 1);
    }
    x->phase = PH_ROUND;
    return next_round(c, x);
}

/* Whether what the receive brought carries the job's token. */
static int token_ok(const coll_direct_op_t *x)
{
    return x->rlen >= sizeof(coll_direct_hdr_t) &&
           ((const coll_direct_hdr_t *)(const void *)x->theirs)->token == x->token;
}

/* A message without the job's token: dropped, counted, its receive posted again. */
static coll_status_t refuse(coll_comm_t *c, coll_direct_op_t *x)
{
    char nm[48];

    if (x->refused++ == 0) {
        coll_desc_name(&x->desc, nm, sizeof(nm));
        coll__debug(COLL__DEBUG_WARN, "rank %d of job %s: %s: dropped a direct message of %zu "
                    "bytes without the job's token", c->rank, c->job, nm, x->rlen);
    }
    return post_recv(c, x);
}

/* Take the completions of the current exchange's send and receive. A message too long for the
 * receive is no partner's (theirs has room for the job's bound): taken as one without the
 * token. */
static coll_status_t reap(coll_comm_t *c, coll_direct_op_t *x)
{
    ucp_tag_recv_info_t info;
    ucs_status_t st = UCS_OK;

    if (x->sreq != NULL && (st = ucp_request_check_status(x->sreq)) != UCS_INPROGRESS) {
        ucp_request_free(x->sreq);
        x->sreq = NULL;
        x->sent = st == UCS_OK;
    }
    if (st == UCS_OK && x->rreq != NULL &&
        (st = ucp_tag_recv_request_test(x->rreq, &info)) != UCS_INPROGRESS) {
        ucp_request_free(x->rreq);
        x->rreq = NULL;
        x->arrived = st == UCS_OK || st == UCS_ERR_MESSAGE_TRUNCATED;
        x->rlen = st == UCS_OK ? info.length : 0;
        st = x->arrived ? UCS_OK : st;
    }
    if (st != UCS_OK && st != UCS_INPROGRESS) {
        coll__set_error(c, "rank %d: a direct message with node %u's leader failed: %s",
                        c->rank, x->peer, ucs_status_string(st));
        return COLL_ERR_TRANSPORT;
    }
    return COLL_OK;
}

static coll_status_t mismatch(coll_comm_t *c, const coll_direct_op_t *x)
{
    char a[200], b[200], nm[48];

    coll_desc_format(&x->seen[0], a, sizeof(a));
    coll_desc_format(&x->seen[1], b, sizeof(b));
    coll_desc_name(&x->desc, nm, sizeof(nm));
    coll__set_error(c, "%s: node %u (rank %u) submitted %s but node %u (rank %u) submitted %s",
                    nm, x->seen[0].node, x->seen[0].first_rank, a, x->seen[1].node,
                    x->seen[1].first_rank, b);
    return COLL_ERR_MISMATCH;
}

coll_status_t coll__direct_test(coll_comm_t *c, coll_direct_op_t *x, uint64_t spin_ns)
{
    uint64_t end = coll__now_ns() + spin_ns;
    coll_status_t st = COLL_OK;

    while (x->phase != PH_DONE && st == COLL_OK) {
        ucp_worker_progress(c->direct->worker);
        if ((st = reap(c, x)) != COLL_OK) {
            break;
        }
        if (x->arrived) { /* taken only with the job's token */
            x->arrived = 0;
            x->received = token_ok(x);
            st = x->received ? COLL_OK : refuse(c, x);
        }
        if (st == COLL_OK && x->sent && x->received) {
            st = step_done(c, x);
            continue;
        }
        if (coll__now_ns() >= end) {
            return st == COLL_OK ? COLL_INPROGRESS : st;
        }
        /* The leader we wait for may be runnable on this CPU: without the yield a spin holds
         * it off until the tick (4 ms at 250 Hz; 4x1 on 2 CPUs ran 105 us an allreduce
         * instead of 40). */
        sched_yield();
    }
    return st != COLL_OK ? st : x->agreed ? COLL_OK : mismatch(c, x);
}

void coll__direct_end(coll_comm_t *c, coll_direct_op_t *x)
{
    coll_direct_t *d = c->direct;

    if (x->rreq != NULL) {
        ucp_request_cancel(d->worker, x->rreq);
        for (int k = 0; k < 1000 && ucp_request_check_status(x->rreq) == UCS_INPROGRESS; k++) {
            ucp_worker_progress(d->worker);
        }
        ucp_request_free(x->rreq);
    }
    for (int k = 0; x->sreq != NULL && k < 1000 &&
                    ucp_request_check_status(x->sreq) == UCS_INPROGRESS; k++) {
        ucp_worker_progress(d->worker);
    }
    if (x->sreq != NULL && ucp_request_check_status(x->sreq) == UCS_INPROGRESS) {
        coll__direct_keep(d, x->mine); /* UCX still reads it: freed with the worker */
        x->mine = NULL;
    }
    if (x->sreq != NULL) {
        ucp_request_free(x->sreq);
    }
    free(x->mine);
    free(x->theirs);
    *x = (coll_direct_op_t){0};
}
