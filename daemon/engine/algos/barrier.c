/*
 * Dissemination barrier among the nodes of a group (Hensgen, Finkel & Manber 1988, "Two
 * algorithms for barrier synchronization"): in round k node r signals node r + 2^k and waits
 * for node r - 2^k; after ceil(log2 N) rounds every node has heard, directly or through others,
 * from every node. The operation starts on a node only once all its local ranks entered, so
 * completion means every rank of the job entered. The signal is the node's descriptor, checked
 * on arrival.
 */
#include <stdlib.h>

#include "engine/algos/algos.h"
#include "engine/op.h"
#include "net/transport.h"
#include "proto/tag.h"

/* ceil(log2(COLL_TAG_MAX_NODES)) */
#define MAX_ROUNDS 12

typedef struct {
    uint32_t rounds;
    uint32_t round;        /* the round whose signal is awaited */
    coll_desc_t peer;      /* the signal received */
    coll_xfer_t recv;
    coll_xfer_t send[MAX_ROUNDS]; /* a send may still be in flight when the next round starts */
    uint32_t sends_done;
} barrier_t;

static coll_status_t signal_round(coll_op_t *op, barrier_t *b)
{
    const coll_group_t *grp = op->grp;
    uint32_t n = grp->nnodes, dist = 1u << b->round;
    uint64_t tag = coll_tag_make(grp->id, op->desc.key, COLL_TAG_RS, b->round, 0);
    coll_xfer_t *send = &b->send[b->round];
    coll_status_t st;

    b->recv = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .step = b->round};
    *send = (coll_xfer_t){.op = op, .kind = COLL_TAG_RS, .is_send = 1, .step = b->round};
    st = coll_op_recv(op, (grp->node_rank + n - dist % n) % n, tag, &b->peer, sizeof(b->peer),
                      &b->recv);
    if (st == COLL_OK) {
        st = coll_op_send(op, (grp->node_rank + dist) % n, tag, &op->desc, sizeof(op->desc),
                          send);
    }
    return st;
}

static void barrier_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    barrier_t *b = op->algo_state;
    coll_status_t st;

    if (x->is_send) {
        /* The send buffer is the operation's descriptor: nothing to wait for but the count. */
        if (++b->sends_done == b->rounds && b->round == b->rounds) {
            coll_op_algo_done(op);
        }
        return;
    }
    if (!coll_op_check_msg(op, x, &b->peer)) {
        return;
    }
    if (++b->round < b->rounds) {
        if ((st = signal_round(op, b)) != COLL_OK) {
            coll_job_fail(op->job, st, 1, "barrier: posting a transfer failed");
        }
    } else if (b->sends_done == b->rounds) {
        coll_op_algo_done(op);
    }
}

static coll_status_t barrier_start(coll_op_t *op)
{
    barrier_t *b = calloc(1, sizeof(*b));

    if (b == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = b;
    while ((1u << b->rounds) < op->grp->nnodes) {
        b->rounds++;
    }
    return signal_round(op, b);
}

const coll_impl_t coll_impl_barrier = {
    .name = "dissemination",
    .flags = COLL_IMPL_SELF_CHECK,
    .start = barrier_start,
    .on_xfer = barrier_on_xfer,
    .cleanup = coll_op_free_algo_state,
};
