/*
 * Direct rooted collectives with a block per rank: gather and scatter. The root's node
 * exchanges each remote rank's block with that rank's node in one tagged message, and copies
 * its own local ranks' blocks through the pool.
 *
 * Agreement first. Every other node sends its descriptor to the root's node, which compares
 * each with its own before it writes or sends a byte of data: a gather's root posts its
 * receives, and a scatter's root its sends, only once every node agreed, and then tells every
 * other node so (its descriptor back, the verdict). A node completes only with the verdict, so
 * ranks that disagree on count, datatype or root fail with COLL_ERR_MISMATCH on every rank
 * (the failure reaches the nodes that agreed with their neighbours too), with no output
 * written (a gather's other nodes send their blocks at once; what the root never receives is
 * dropped with the job's worker). The engine's own check with the previous node still runs;
 * descriptors and verdicts that arrive before it passed wait for it (parked, op.h).
 *
 * Messages (proto/tag.h): the descriptor of node n has kind COLL_TAG_AG, step n, column 0; the
 * verdict to node n kind COLL_TAG_RS, step n, column 0; the block of the rank that is local
 * member i of node n kind COLL_TAG_AG, step n, column 1 + i.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/algos/algos.h"
#include "engine/op.h"
#include "net/transport.h"
#include "proto/tag.h"

typedef struct {
    uint32_t root_node;  /* group node of the root */
    uint32_t descs_left; /* the root's node: descriptors still to come */
    uint32_t pending;    /* transfers posted and not completed */
    int agreed;          /* every node's descriptor equals the root's (its verdict came) */
    size_t block;        /* bytes of one rank's block */
    coll_desc_t *descs;  /* [nnodes] the root's node: each node's descriptor; another node:
                            the verdict at the root's index */
    coll_xfer_t *xfers;  /* [nnodes] descriptors by node, [nnodes] verdicts by node, then
                            [size] blocks by rank */
} direct_t;

static int gathers(const coll_op_t *op)
{
    return op->desc.coll == COLL_KIND_GATHER;
}

static uint64_t tag(const coll_op_t *op, uint32_t node, uint32_t column)
{
    return coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_AG, node, column);
}

static uint64_t verdict_tag(const coll_op_t *op, uint32_t node)
{
    return coll_tag_make(op->grp->id, op->desc.key, COLL_TAG_RS, node, 0);
}

static coll_status_t post(coll_op_t *op, direct_t *d, coll_xfer_t *x, int send, uint32_t node,
                          uint64_t t, void *buf, size_t len)
{
    /* The first 2 nnodes transfers carry descriptors: not counted as data (coll_op_send()). */
    int desc = x < d->xfers + 2 * op->grp->nnodes;

    coll_status_t st;

    *x = (coll_xfer_t){.op = op, .kind = desc ? COLL_TAG_DESC : COLL_TAG_AG,
                       .is_send = (uint8_t)send};
    st = send ? coll_op_send(op, node, t, buf, len, x) : coll_op_recv(op, node, t, buf, len, x);
    if (st == COLL_OK) {
        d->pending++;
    }
    return st;
}

/* Block of group rank @p r in the root's buffer (its output for a gather, input for scatter). */
static uint8_t *root_block(const coll_op_t *op, const direct_t *d, uint32_t r)
{
    uint32_t root_local = op->grp->rank_local[op->desc.root];
    uint8_t *base = gathers(op) ? (uint8_t *)op->out[root_local]
                                : (uint8_t *)op->in[root_local];
    return base + (size_t)r * d->block;
}

/* The root's node: every local rank's block through the pool. */
static void copy_local(coll_op_t *op, const direct_t *d)
{
    for (uint32_t l = 0; l < op->grp->nlocal && d->block > 0; l++) {
        uint8_t *blk = root_block(op, d, coll_group_rank_of_local(op->grp, l));
        void *dst = gathers(op) ? blk : op->out[l];
        const void *src = gathers(op) ? op->in[l] : blk;
        if (dst != src) {
            memcpy(dst, src, d->block);
        }
    }
}

/* The root's node, once every node agreed: the verdict to the others, its local blocks, then
 * the remote ranks'. */
static coll_status_t root_agreed(coll_op_t *op, direct_t *d)
{
    const coll_group_t *grp = op->grp;
    uint32_t nn = grp->nnodes;
    coll_status_t st = COLL_OK;

    d->agreed = 1;
    for (uint32_t n = 0; n < nn && st == COLL_OK; n++) {
        if (n != grp->node_rank) {
            st = post(op, d, &d->xfers[nn + n], 1, n, verdict_tag(op, n), &op->desc,
                      sizeof(op->desc));
        }
    }
    copy_local(op, d);
    for (uint32_t r = 0; r < grp->size && st == COLL_OK && d->block > 0; r++) {
        uint32_t n = grp->rank_node[r];
        if (n != grp->node_rank) {
            st = post(op, d, &d->xfers[2 * nn + r], !gathers(op), n,
                      tag(op, n, 1 + grp->rank_local[r]), root_block(op, d, r), d->block);
        }
    }
    return st;
}

/* Another node: the root's verdict awaited, its descriptor to the root's node, and its
 * blocks (a gather's at once; a scatter's receives, which only the agreed root answers). */
static coll_status_t member_start(coll_op_t *op, direct_t *d)
{
    const coll_group_t *grp = op->grp;
    uint32_t me = grp->node_rank, rn = d->root_node, nn = grp->nnodes;
    coll_status_t st = post(op, d, &d->xfers[nn + rn], 0, rn, verdict_tag(op, me),
                            &d->descs[rn], sizeof(d->descs[rn]));

    if (st == COLL_OK) {
        st = post(op, d, &d->xfers[me], 1, rn, tag(op, me, 0), &op->desc, sizeof(op->desc));
    }
    for (uint32_t l = 0; l < grp->nlocal && st == COLL_OK && d->block > 0; l++) {
        uint32_t r = coll_group_rank_of_local(grp, l);
        void *buf = gathers(op) ? (void *)op->in[l] : op->out[l];
        st = post(op, d, &d->xfers[2 * nn + r], gathers(op), rn, tag(op, me, 1 + l), buf,
                  d->block);
    }
    return st;
}

static coll_status_t root_start(coll_op_t *op, direct_t *d)
{
    const coll_group_t *grp = op->grp;
    coll_status_t st = COLL_OK;

    d->descs_left = grp->nnodes - 1;
    for (uint32_t n = 0; n < grp->nnodes && st == COLL_OK; n++) {
        if (n != grp->node_rank) {
            st = post(op, d, &d->xfers[n], 0, n, tag(op, n, 0), &d->descs[n],
                      sizeof(d->descs[n]));
        }
    }
    return st != COLL_OK || d->descs_left > 0 ? st : root_agreed(op, d);
}

static void maybe_done(coll_op_t *op, const direct_t *d)
{
    if (d->pending == 0 && d->agreed && !op->done) {
        coll_op_algo_done(op);
    }
}

static coll_status_t direct_start(coll_op_t *op)
{
    const coll_group_t *grp = op->grp;
    uint32_t nx = 2 * grp->nnodes + grp->size;
    direct_t *d = calloc(1, sizeof(*d) + nx * sizeof(coll_xfer_t) +
                                grp->nnodes * sizeof(coll_desc_t));
    coll_status_t st;

    if (d == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = d;
    d->xfers = (coll_xfer_t *)(d + 1);
    d->descs = (coll_desc_t *)(d->xfers + nx);
    d->root_node = grp->rank_node[op->desc.root];
    d->block = (size_t)(op->desc.count * op->esize);
    st = grp->node_rank == d->root_node ? root_start(op, d) : member_start(op, d);
    if (st == COLL_OK) {
        maybe_done(op, d);
    }
    return st;
}

/* A descriptor (at the root's node) or the verdict (elsewhere) arrived. */
static void on_desc_msg(coll_op_t *op, direct_t *d, uint32_t n, uint32_t from)
{
    if (!coll_op_check_desc(op, &d->descs[n], from)) {
        return; /* the job failed, naming both descriptors */
    }
    if (n == d->root_node) {
        d->agreed = 1;
    } else if (--d->descs_left == 0 && root_agreed(op, d) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "direct: posting a transfer failed");
        return;
    }
    maybe_done(op, d);
}

static void direct_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    direct_t *d = op->algo_state;
    size_t i = (size_t)(x - d->xfers), nn = op->grp->nnodes;

    d->pending--;
    if (i < 2 * nn && !x->is_send) {
        on_desc_msg(op, d, (uint32_t)(i % nn), x->peer);
    } else {
        maybe_done(op, d);
    }
}

const coll_impl_t coll_impl_direct = {
    .name = "direct",
    .start = direct_start,
    .on_xfer = direct_on_xfer,
    .cleanup = coll_op_free_algo_state,
};

/* On one node the root's node is every node: no message, the blocks through the pool. */
const coll_impl_t coll_impl_direct_local = {
    .name = "local",
    .start = direct_start,
    .cleanup = coll_op_free_algo_state,
};
