/*
 * Allreduces of a multi-node job in the local ranks' shared-memory area (route NODE): which
 * ones, local rank 0's node buffers, the hand-over of the reduced buffer to the daemon and the
 * word by which the daemon says that its inter-node phase ended (proto/shm_area.h).
 *
 * The node sum goes to a buffer of its own, not to local rank 0's output: nothing may write
 * an output before the daemons checked the descriptors across nodes, and an input in place is
 * still needed by the reduce. Local rank 0 keeps COLL_SHM_NODE_BUFS of them, allocated in the
 * pool before its first allreduce (by api/collectives.c, which may ask the daemon: shm/ sits
 * below the requests); a collective that finds none free goes to the daemon whole, which
 * gives the same result (the daemons' descriptors and algorithms do not depend on the route).
 */
#include <stdio.h>
#include <string.h>

#include "client/shm/shm.h"

/* An allreduce whose partial results between the nodes keep the dtype, of at most @p max
 * bytes, with no forced algorithm, on several nodes. */
static int node_reducible(const coll_shm_t *s, const coll_submission_t *d, uint64_t max)
{
    return s->nnodes > 1 && d->coll == COLL_KIND_ALLREDUCE && d->algo == COLL_ALGO_AUTO &&
           coll_shm_node_reducible(d->dtype, d->redop) && max > 0 &&
           d->count <= max / coll_dtype_size((coll_dtype_t)d->dtype);
}

int coll__shm_direct(const coll_shm_t *s, const coll_submission_t *d)
{
    return node_reducible(s, d, s->hdr->direct_max_bytes);
}

int coll__shm_node_route(const coll_shm_t *s, const coll_submission_t *d)
{
    return coll__shm_direct(s, d) ||
           (s->nlocal > 1 && node_reducible(s, d, s->hdr->node_max_bytes));
}

/* Node buffers local rank 0 keeps: with the direct path one per post, so that a direct
 * allreduce always finds one (every node must run it alike); otherwise a few. */
static uint32_t node_nbufs(const coll_shm_t *s)
{
    return s->hdr->direct_max_bytes > 0 ? COLL_SHM_SLOTS : COLL_SHM_NODE_BUFS;
}

uint64_t coll__shm_node_wanted(const coll_shm_t *s, uint32_t coll)
{
    uint64_t max = s->hdr->node_max_bytes > s->hdr->direct_max_bytes ? s->hdr->node_max_bytes
                                                                     : s->hdr->direct_max_bytes;

    if (s->self != 0 || s->nnodes < 2 || (s->nlocal < 2 && s->hdr->direct_max_bytes == 0) ||
        coll != COLL_KIND_ALLREDUCE || max == 0 || s->node_off != 0 || s->node_none) {
        return 0;
    }
    return ((max + 63) & ~(uint64_t)63) * node_nbufs(s);
}

void coll__shm_node_provide(coll_shm_t *s, uint64_t off, uint64_t bytes)
{
    s->node_off = off;
    s->node_nbufs = node_nbufs(s);
    s->node_bytes = bytes / s->node_nbufs;
    s->node_none = off == 0;
}

uint64_t coll__shm_node_get(const coll_comm_t *c, const coll_submission_t *d, uint32_t slot)
{
    coll_shm_t *s = c->shm;

    if (s->node_off == 0 || d->count * coll_dtype_size((coll_dtype_t)d->dtype) > s->node_bytes) {
        return 0; /* none (yet), or a daemon restarted with a larger crossover */
    }
    if (s->node_nbufs == COLL_SHM_SLOTS) {
        return s->node_off + slot * s->node_bytes;
    }
    for (uint32_t i = 0; i < COLL_SHM_NODE_BUFS; i++) {
        if (!(s->node_busy & (1u << i))) {
            s->node_busy |= 1u << i;
            return s->node_off + i * s->node_bytes;
        }
    }
    return 0;
}

void coll__shm_node_put(coll_shm_t *s, uint64_t off)
{
    if (off != 0 && s->node_off != 0 && s->node_nbufs == COLL_SHM_NODE_BUFS &&
        off >= s->node_off && off < s->node_off + COLL_SHM_NODE_BUFS * s->node_bytes) {
        s->node_busy &= ~(1u << ((off - s->node_off) / s->node_bytes));
    }
}

uint64_t coll__shm_node_word(const coll_shm_t *s, const coll_shm_op_t *op)
{
    const coll_shm_post_t *h = coll__shm_post_of(s, 0, op->peer_slot[0]);
    uint64_t w = atomic_load_explicit(&h->node, memory_order_acquire);

    return (w & COLL_SHM_NODE_DONE) && (w >> 32) == (uint32_t)coll_shm_gen(op->peer_state[0])
               ? w
               : 0;
}

int coll__shm_node_with_daemon(const coll_shm_t *s, const coll_shm_op_t *op)
{
    const coll_shm_post_t *h;

    if (op->route != COLL_SHM_ROUTE_NODE || !op->agreed) {
        return 0;
    }
    h = coll__shm_post_of(s, 0, op->peer_slot[0]);
    return atomic_load_explicit(&h->chunks_done, memory_order_relaxed) >= op->nchunks / 2 &&
           coll__shm_node_word(s, op) == 0;
}

void coll__shm_hand_over(coll_comm_t *c, const coll_shm_op_t *op, uint32_t flags)
{
    coll_submission_t m = {.key = op->rec.sub.key, .coll = op->rec.sub.coll,
                           .req_id = op->req->id, .flags = flags};

    (void)coll__submit_send(c, &m); /* a broken link fails every request anyway */
}

int coll__shm_direct_waiting(const coll_shm_t *s, const coll_shm_op_t *op)
{
    return op->direct && s->self == 0 && op->rounds.started && !op->rounds_over;
}

/* The rounds of @p op ended with @p st: the node word and the wake-up, or the job's failure. */
static void direct_ended(coll_comm_t *c, coll_shm_op_t *op, coll_status_t st)
{
    coll_shm_t *s = c->shm;
    char why[sizeof(c->conn->last_error)];

    op->rounds_over = 1;
    if (st == COLL_OK) {
        coll__post_node_done(s, op, coll_shm_node_word(coll_shm_gen(op->peer_state[0]), COLL_OK,
                                                       COLL_ALGO_DIRECT),
                             op->rounds.start_ns, coll__now_ns());
        for (uint32_t l = 1; l < s->nlocal; l++) {
            coll_ctl_notify(coll_ctl_of(s->base, l));
        }
    } else {
        /* Every rank of every node fails with the reason, through the daemons. */
        snprintf(why, sizeof(why), "%s", c->conn->last_error);
        coll__abort(c, st, why);
    }
    coll__direct_end(c->conn, &op->rounds);
}

/* The rounds ran past the job's timeout (a leader gone, stopped, or sending without the job's
 * token): the reason, for coll__abort(). */
static coll_status_t direct_late(coll_comm_t *c, const coll_shm_op_t *op)
{
    char nm[48];

    coll_desc_name(&op->desc, nm, sizeof(nm));
    coll__set_error(c, "rank %d: %s: the direct rounds with node %u's leader did not complete "
                    "within the job's timeout (%llu ms); %llu messages without the job's token "
                    "were dropped", c->rank, nm, op->rounds.peer,
                    (unsigned long long)c->job_timeout_ms,
                    (unsigned long long)op->rounds.refused);
    return COLL_ERR_TIMEDOUT;
}

void coll__shm_direct_progress(coll_comm_t *c, coll_shm_op_t *op)
{
    coll_shm_t *s = c->shm;
    const coll_shm_post_t *h = coll__shm_post_of(s, 0, op->peer_slot[0]);
    coll_desc_t desc = op->desc;
    uint64_t refused = op->rounds.refused;
    coll_status_t st;

    if (op->rounds_over || !op->agreed ||
        atomic_load_explicit(&h->chunks_done, memory_order_acquire) < op->nchunks / 2) {
        return;
    }
    if (!op->rounds.started) {
        desc.node = c->node_rank;
        desc.first_rank = (uint32_t)c->rank;
        st = coll__direct_start(c->conn, &op->rounds, &desc, s->base + op->node_off,
                                s->hdr->direct_token, s->hdr->direct_max_bytes);
        if (st != COLL_OK) {
            direct_ended(c, op, st);
            return;
        }
    }
    st = coll__direct_test(c->conn, &op->rounds, s->spin_ns);
    if (op->rounds.refused > refused) { /* the daemon counts and logs them */
        atomic_fetch_add_explicit(&coll__shm_area(s, 0)->stats.direct_refused,
                                  op->rounds.refused - refused, memory_order_relaxed);
    }
    if (st == COLL_INPROGRESS && c->job_timeout_ms > 0 &&
        coll__now_ns() - op->rounds.start_ns > c->job_timeout_ms * 1000000ull) {
        st = direct_late(c, op);
    }
    if (st != COLL_INPROGRESS) {
        direct_ended(c, op, st);
    }
}
