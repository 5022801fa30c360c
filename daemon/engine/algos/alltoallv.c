/*
 * All-to-all with per-rank sizes (MPI_Alltoallv): pairwise exchange between nodes. Node i sends
 * node j the blocks of its local ranks for j's local ranks, one tagged message per pair of
 * ranks with a count above 0, each straight from the sender's send buffer into the receiver's
 * receive buffer; blocks between ranks of one node are copied through the pool. A one-node job
 * does it all with copies.
 *
 * Agreement first. Every node sends every other node a header: its descriptor, then the send
 * and receive counts of each of its local ranks (their count tables' first and third rows).
 * Once every header came (and the engine's check with the previous node passed: receives are
 * parked until then), each node holds every rank's counts and checks the whole matrix: what
 * rank a sends rank b is what b expects from a, for every pair. Every node checks the same
 * matrix, so all reach the same verdict without another round: on a difference each fails the
 * job with COLL_ERR_MISMATCH naming the first pair, before any data is posted or copied, so no
 * receive buffer is written. Displacements stay with the rank's own node.
 *
 * Messages (proto/tag.h): node n's header kind COLL_TAG_RS, step n, column 0; the block of
 * group rank a for the rank that is local member i of its node kind COLL_TAG_AG, step a (the
 * submission check keeps an all-to-all's group within the step's 4096), column i.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine/algos/algos.h"
#include "engine/op.h"
#include "net/transport.h"
#include "proto/a2a.h"
#include "proto/tag.h"

typedef struct {
    uint32_t pending;     /* transfers posted and not completed */
    uint32_t hdrs_left;   /* other nodes' headers still to come */
    int checked;          /* every rank's counts agree: the data is posted */
    const uint64_t **row; /* [size] each rank's send counts, then its receive counts */
    uint8_t **hdr;        /* [nnodes] each node's header (this node's: the one it sends) */
    coll_xfer_t *xfers;   /* [nnodes] header sends by node, [nnodes] header receives by node,
                             then the blocks */
    uint32_t nx;          /* transfers used */
} a2a_t;

static size_t hdr_bytes(const coll_group_t *grp, uint32_t n)
{
    return sizeof(coll_desc_t) + (size_t)grp->node_nranks[n] * 2 * grp->size * sizeof(uint64_t);
}

/* Count @p j of row @p row of local member @p l's table. */
static uint64_t at(const coll_op_t *op, uint32_t l, unsigned row, uint32_t j)
{
    return coll_a2a_at(op->members[l].table, op->grp->size, row, j);
}

static coll_status_t post(coll_op_t *op, a2a_t *a, coll_xfer_t *x, int send, uint32_t node,
                          uint64_t tag, void *buf, size_t len)
{
    int hdr = x < a->xfers + 2 * op->grp->nnodes;
    coll_status_t st;

    *x = (coll_xfer_t){.op = op, .kind = hdr ? COLL_TAG_DESC : COLL_TAG_AG,
                       .is_send = (uint8_t)send};
    st = send ? coll_op_send(op, node, tag, buf, len, x) : coll_op_recv(op, node, tag, buf, len, x);
    if (st == COLL_OK) {
        a->pending++;
    }
    return st;
}

/* This node's header: its descriptor, then each local member's send and receive counts. */
static void fill_header(coll_op_t *op, a2a_t *a)
{
    const coll_group_t *grp = op->grp;
    uint8_t *h = a->hdr[grp->node_rank];
    size_t row = grp->size * sizeof(uint64_t);

    memcpy(h, &op->desc, sizeof(op->desc));
    for (uint32_t l = 0; l < grp->nlocal; l++) {
        uint8_t *p = h + sizeof(coll_desc_t) + 2 * l * row;
        memcpy(p, op->members[l].table + (size_t)COLL_A2A_SCOUNTS * grp->size, row);
        memcpy(p + row, op->members[l].table + (size_t)COLL_A2A_RCOUNTS * grp->size, row);
    }
}

static coll_status_t post_headers(coll_op_t *op, a2a_t *a)
{
    const coll_group_t *grp = op->grp;
    uint32_t me = grp->node_rank, nn = grp->nnodes;
    coll_status_t st = COLL_OK;

    for (uint32_t n = 0; n < nn && st == COLL_OK; n++) {
        if (n == me) {
            continue;
        }
        st = post(op, a, &a->xfers[nn + n], 0, n,
                  coll_tag_make(grp->id, op->desc.key, COLL_TAG_RS, n, 0), a->hdr[n],
                  hdr_bytes(grp, n));
        if (st == COLL_OK) {
            st = post(op, a, &a->xfers[n], 1, n,
                      coll_tag_make(grp->id, op->desc.key, COLL_TAG_RS, me, 0), a->hdr[me],
                      hdr_bytes(grp, me));
        }
    }
    return st;
}

/* Every pair agrees; otherwise the job fails naming the first pair that does not. */
static int counts_agree(coll_op_t *op, const a2a_t *a)
{
    uint32_t size = op->grp->size;
    char nm[64];

    for (uint32_t s = 0; s < size; s++) {
        for (uint32_t r = 0; r < size; r++) {
            uint64_t sent = a->row[s][r], expected = a->row[r][size + s];
            if (sent != expected) {
                coll_desc_name(&op->desc, nm, sizeof(nm));
                coll_job_fail(op->job, COLL_ERR_MISMATCH, 1, "%s: rank %u sends %" PRIu64
                              " elements to rank %u, which expects %" PRIu64 " from it",
                              nm, s, sent, r, expected);
                return 0;
            }
        }
    }
    return 1;
}

/* The blocks local member @p l sends: copied to local ranks, sent to the others. */
static coll_status_t send_blocks(coll_op_t *op, a2a_t *a, uint32_t l)
{
    const coll_group_t *grp = op->grp;
    uint32_t me = coll_group_rank_of_local(grp, l);
    coll_status_t st = COLL_OK;

    for (uint32_t r = 0; r < grp->size && st == COLL_OK; r++) {
        size_t len = (size_t)at(op, l, COLL_A2A_SCOUNTS, r) * op->esize;
        const uint8_t *src = (const uint8_t *)op->in[l] +
                             (size_t)at(op, l, COLL_A2A_SDISPLS, r) * op->esize;
        uint32_t rl = grp->rank_local[r];
        if (len == 0) {
            continue;
        }
        if (grp->rank_node[r] == grp->node_rank) {
            memcpy((uint8_t *)op->out[rl] + (size_t)at(op, rl, COLL_A2A_RDISPLS, me) * op->esize,
                   src, len);
        } else {
            st = post(op, a, &a->xfers[a->nx++], 1, grp->rank_node[r],
                      coll_tag_make(grp->id, op->desc.key, COLL_TAG_AG, me, rl), (void *)src,
                      len);
        }
    }
    return st;
}

/* The blocks local member @p l receives from ranks of other nodes. */
static coll_status_t recv_blocks(coll_op_t *op, a2a_t *a, uint32_t l)
{
    const coll_group_t *grp = op->grp;
    coll_status_t st = COLL_OK;

    for (uint32_t s = 0; s < grp->size && st == COLL_OK; s++) {
        size_t len = (size_t)at(op, l, COLL_A2A_RCOUNTS, s) * op->esize;
        if (len > 0 && grp->rank_node[s] != grp->node_rank) {
            st = post(op, a, &a->xfers[a->nx++], 0, grp->rank_node[s],
                      coll_tag_make(grp->id, op->desc.key, COLL_TAG_AG, s, l),
                      (uint8_t *)op->out[l] + (size_t)at(op, l, COLL_A2A_RDISPLS, s) * op->esize,
                      len);
        }
    }
    return st;
}

static void maybe_done(coll_op_t *op, const a2a_t *a)
{
    if (a->pending == 0 && a->checked && !op->done) {
        coll_op_algo_done(op);
    }
}

/* Every header is in: check the matrix, then move the blocks. */
static coll_status_t exchange(coll_op_t *op, a2a_t *a)
{
    coll_status_t st = COLL_OK;

    if (!counts_agree(op, a)) {
        return COLL_OK; /* the job failed */
    }
    a->checked = 1;
    for (uint32_t l = 0; l < op->grp->nlocal && st == COLL_OK; l++) {
        st = recv_blocks(op, a, l);
    }
    for (uint32_t l = 0; l < op->grp->nlocal && st == COLL_OK; l++) {
        st = send_blocks(op, a, l);
    }
    if (st == COLL_OK) {
        maybe_done(op, a);
    }
    return st;
}

/* The state, its headers and its transfers in one allocation; each rank's rows point into the
 * headers. */
static a2a_t *a2a_new(const coll_group_t *grp)
{
    uint32_t nn = grp->nnodes, size = grp->size;
    size_t nx = 2 * (size_t)nn + 2 * (size_t)grp->nlocal * size, hdrs = 0;
    a2a_t *a;
    uint8_t *p;

    for (uint32_t n = 0; n < nn; n++) {
        hdrs += hdr_bytes(grp, n);
    }
    a = calloc(1, sizeof(*a) + nx * sizeof(coll_xfer_t) + size * sizeof(uint64_t *) +
                      nn * sizeof(uint8_t *) + hdrs);
    if (a == NULL) {
        return NULL;
    }
    a->xfers = (coll_xfer_t *)(a + 1);
    a->row = (const uint64_t **)(a->xfers + nx);
    a->hdr = (uint8_t **)(a->row + size);
    p = (uint8_t *)(a->hdr + nn);
    for (uint32_t n = 0; n < nn; p += hdr_bytes(grp, n), n++) {
        a->hdr[n] = p;
        for (uint32_t i = 0; i < grp->node_nranks[n]; i++) {
            a->row[grp->node_ranks[n][i]] =
                (const uint64_t *)(const void *)(p + sizeof(coll_desc_t)) + 2 * (size_t)i * size;
        }
    }
    a->nx = 2 * nn;
    return a;
}

static coll_status_t a2a_start(coll_op_t *op)
{
    a2a_t *a = a2a_new(op->grp);
    coll_status_t st;

    if (a == NULL) {
        return COLL_ERR_NOMEM;
    }
    op->algo_state = a;
    fill_header(op, a);
    a->hdrs_left = op->grp->nnodes - 1;
    st = post_headers(op, a);
    if (st == COLL_OK && a->hdrs_left == 0) {
        st = exchange(op, a);
    }
    return st;
}

/* Another node's header arrived: its descriptor and exact length checked, then the matrix
 * once it is the last. */
static void on_header(coll_op_t *op, a2a_t *a, const coll_xfer_t *x, uint32_t n)
{
    if (!coll_op_check_msg(op, x, (const coll_desc_t *)(const void *)a->hdr[n])) {
        return; /* the job failed */
    }
    if (--a->hdrs_left == 0 && exchange(op, a) != COLL_OK) {
        coll_job_fail(op->job, COLL_ERR_TRANSPORT, 1, "alltoallv: posting a transfer failed");
    }
}

static void a2a_on_xfer(coll_op_t *op, coll_xfer_t *x)
{
    a2a_t *a = op->algo_state;
    size_t i = (size_t)(x - a->xfers), nn = op->grp->nnodes;

    a->pending--;
    if (i >= nn && i < 2 * nn) {
        on_header(op, a, x, (uint32_t)(i - nn));
        if (op->done) {
            return;
        }
    }
    maybe_done(op, a);
}

const coll_impl_t coll_impl_alltoallv = {
    .name = "direct",
    .start = a2a_start,
    .on_xfer = a2a_on_xfer,
    .cleanup = coll_op_free_algo_state,
};
