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
#include "client/shm/shm.h"

int coll__shm_node_route(const coll_shm_t *s, const coll_submission_t *d)
{
    uint64_t max = s->hdr->node_max_bytes;

    return s->nnodes > 1 && s->nlocal > 1 && d->coll == COLL_KIND_ALLREDUCE &&
           d->algo == COLL_ALGO_AUTO && coll_shm_node_reducible(d->dtype, d->redop) && max > 0 &&
           d->count <= max / coll_dtype_size((coll_dtype_t)d->dtype);
}

uint64_t coll__shm_node_wanted(const coll_shm_t *s, uint32_t coll)
{
    uint64_t max = s->hdr->node_max_bytes;

    if (s->self != 0 || s->nnodes < 2 || s->nlocal < 2 || coll != COLL_KIND_ALLREDUCE ||
        max == 0 || s->node_off != 0 || s->node_none) {
        return 0;
    }
    return ((max + 63) & ~(uint64_t)63) * COLL_SHM_NODE_BUFS;
}

void coll__shm_node_provide(coll_shm_t *s, uint64_t off, uint64_t bytes)
{
    s->node_off = off;
    s->node_bytes = bytes / COLL_SHM_NODE_BUFS;
    s->node_none = off == 0;
}

uint64_t coll__shm_node_get(const coll_comm_t *c, const coll_submission_t *d)
{
    coll_shm_t *s = c->shm;

    if (s->node_off == 0 || d->count * coll_dtype_size((coll_dtype_t)d->dtype) > s->node_bytes) {
        return 0; /* none (yet), or a daemon restarted with a larger crossover */
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
    if (off != 0 && s->node_off != 0 && off >= s->node_off &&
        off < s->node_off + COLL_SHM_NODE_BUFS * s->node_bytes) {
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
