/*
 * Posting a collective in the local ranks' shared-memory area (proto/shm_area.h): the checks
 * before it is published (the job, this rank's buffers), its route, a free post (waiting for
 * one while the ring is full), and its end when the request ends. The post's words themselves
 * change only in post.c.
 */
#include <stdio.h>

#include "client/shm/shm.h"

/* [off, off + len) inside one of this rank's allocations (len 0: anywhere in the pool). */
static int owned(const coll_comm_t *c, uint64_t off, uint64_t len)
{
    if (len == 0) {
        return 1;
    }
    for (size_t i = 0; i < c->nallocs; i++) {
        const coll_alloc_t *a = &c->allocs[i];
        if (off >= a->offset && off - a->offset <= a->bytes &&
            len <= a->bytes - (off - a->offset)) {
            return 1;
        }
    }
    return 0;
}

/* The peers run this rank's buffers only through its post: they must be its own. */
static coll_status_t check_buffers(coll_comm_t *c, const char *func, const coll_submission_t *d)
{
    uint64_t se, re, es = coll_dtype_size((coll_dtype_t)d->dtype);

    coll_kind_extent((coll_kind_t)d->coll, d->count, (uint32_t)c->world_size, (uint32_t)c->rank,
                     d->root, &se, &re);
    if (!owned(c, d->send_offset, se * es) || !owned(c, d->recv_offset, re * es)) {
        coll__set_error(c, "%s: rank %d: the %s buffer is not one of this rank's allocations "
                        "in the pool (it reaches past one); allocate it with coll_mem_alloc()",
                        func, c->rank, owned(c, d->send_offset, se * es) ? "receive" : "send");
        return COLL_ERR_NOT_IN_POOL;
    }
    return COLL_OK;
}

static coll_shm_route_t route_of(const coll_comm_t *c, const coll_submission_t *d)
{
    uint64_t bytes = d->count * coll_dtype_size((coll_dtype_t)d->dtype);

    if (coll__shm_node_route(c->shm, d)) {
        return COLL_SHM_ROUTE_NODE;
    }
    if (d->coll == COLL_KIND_REDUCE_SCATTER || d->coll == COLL_KIND_ALLGATHER) {
        bytes *= (uint64_t)c->world_size;
    }
    return c->shm->nnodes == 1 && d->algo == COLL_ALGO_AUTO && c->shm->max_bytes > 0 &&
                   bytes <= c->shm->max_bytes
               ? COLL_SHM_ROUTE_LOCAL
               : COLL_SHM_ROUTE_DAEMON;
}

/* Whether the job can still take this collective: its daemon there, not failed, every local
 * rank still in it. */
static coll_status_t check_job(coll_comm_t *c)
{
    coll_shm_hdr_t *h = c->shm->hdr;

    if (c->conn->broken != COLL_OK) {
        return c->conn->broken; /* the message says why */
    }
    if (atomic_load_explicit(&h->failed, memory_order_acquire)) {
        coll__set_error(c, "job %s failed earlier: %.*s", c->job, COLL_SHM_MSG_BYTES - 1, h->msg);
        return coll_shm_failed_status(h, (uint32_t)c->conn->rank);
    }
    if (atomic_load(&h->left)) {
        coll__set_error(c, "%.*s left job %s; its collectives cannot run without it (rank %d "
                        "submitted the next one)", COLL_SHM_LEFT_BYTES - 1, h->left_msg, c->job,
                        c->rank);
        return COLL_ERR_JOB;
    }
    return COLL_OK;
}

/* Wait for a post to free up (the other ranks complete what this rank posted before). */
static coll_status_t wait_slot(coll_comm_t *c, uint64_t key, int *slot_p)
{
    int timeout = c->job_timeout_ms ? (int)c->job_timeout_ms + COLL_DAEMON_SLACK_MS : -1;
    coll_status_t st = COLL_OK;

    while ((*slot_p = coll__post_free_slot(c->shm, key)) < 0 && st == COLL_OK) {
        c->shm->slot_freed = 0;
        st = coll__wait_flag(c, &c->shm->slot_freed, timeout);
    }
    if (st == COLL_ERR_TIMEDOUT) {
        coll__set_error(c, "rank %d: %u collectives in flight, none completed within the job's "
                        "timeout", c->rank, COLL_SHM_SLOTS);
    }
    return st;
}

static coll_status_t check_post(coll_comm_t *c, const char *func, const coll_submission_t *d)
{
    coll_status_t st = check_job(c);

    if (st == COLL_OK && route_of(c, d) != COLL_SHM_ROUTE_DAEMON) {
        st = check_buffers(c, func, d); /* the other local ranks read and write them */
    }
    return st;
}

/* Local rank 0 names a route-NODE collective's node buffer in its post (@p slot's with the
 * direct path; none free: the collective goes to the daemon whole, and the others read that
 * there). A direct one cannot: the other nodes' leaders run it anyway, so the job fails now,
 * with the reason, rather than by its timeout. */
static coll_status_t take_node_buffer(coll_comm_t *c, coll_shm_rec_t *d, uint32_t slot,
                                      coll_shm_route_t *route)
{
    char msg[300];

    if (*route != COLL_SHM_ROUTE_NODE || c->shm->self != 0 ||
        (d->node_off = coll__shm_node_get(c, &d->sub, slot)) != 0) {
        return COLL_OK;
    }
    *route = COLL_SHM_ROUTE_DAEMON;
    if (!coll__shm_direct(c->shm, &d->sub)) {
        return COLL_OK;
    }
    snprintf(msg, sizeof(msg), "rank %d: no node buffers for the direct path between the nodes' "
             "leaders (the pool has no room for them): give the job a larger pool or the root "
             "daemon direct_max_bytes = 0", c->rank);
    coll__abort(c, COLL_ERR_POOL_FULL, msg);
    coll__set_error(c, "%s", msg);
    return COLL_ERR_POOL_FULL;
}

coll_status_t coll__shm_post(coll_comm_t *c, const char *func, coll_request_t *r,
                             const coll_submission_t *m)
{
    coll_shm_t *s = c->shm;
    coll_shm_rec_t d = {.sub = *m, .post_ns = r->timing.submit_ns};
    coll_shm_op_t *op;
    coll_status_t st;
    coll_shm_route_t route;
    int slot = -1;

    coll__link_check(c->conn, r->timing.submit_ns);
    st = check_post(c, func, &d.sub);
    route = st == COLL_OK ? route_of(c, &d.sub) : COLL_SHM_ROUTE_DAEMON;
    if (st == COLL_OK) {
        st = wait_slot(c, d.sub.key, &slot);
    }
    if (st == COLL_OK) {
        st = take_node_buffer(c, &d, (uint32_t)slot, &route);
    }
    if (st == COLL_OK && (st = check_job(c)) == COLL_OK && (op = coll__shm_op_new(s)) == NULL) {
        st = COLL_ERR_NOMEM;
    }
    if (st != COLL_OK) {
        coll__shm_node_put(s, d.node_off);
        return st;
    }
    op->req = r;
    op->rec = d;
    coll__shm_desc(c, &d.sub, &op->desc);
    op->route = route;
    op->direct = route == COLL_SHM_ROUTE_NODE && coll__shm_direct(s, &d.sub);
    op->nchunks = coll__shm_nchunks(&d.sub, s->nlocal) * (route == COLL_SHM_ROUTE_NODE ? 2 : 1);
    coll__post_publish(s, op, (uint32_t)slot);
    coll__shm_op_add(s, op);
    r->shm_op = op;
    if (c->reading) {
        coll_ctl_notify(c->ctl); /* the thread that waits watches this post too from now on */
    }
    coll__shm_progress(c);
    return COLL_OK;
}

void coll__shm_forget(coll_request_t *r)
{
    coll_shm_op_t *op = r->shm_op;
    coll_shm_t *s = r->comm->shm;

    if (op == NULL) {
        return;
    }
    if (op->rounds.started) {
        coll__direct_end(r->comm->conn, &op->rounds); /* its receives cancelled */
    }
    coll__post_release(s, op);
    coll__shm_node_put(s, op->rec.node_off);
    s->slot_freed = 1;
    coll__shm_op_free(s, op);
    r->shm_op = NULL;
}
