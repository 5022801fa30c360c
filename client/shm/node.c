/*
 * Allreduces of a multi-node job in the local ranks' shared-memory area (route NODE): which
 * ones, local rank 0's node buffers, the hand-over of the reduced buffer to the daemon and the
 * word by which the daemon says that its inter-node phase ended (proto/shm_area.h).
 *
 * The node sum goes to a buffer of its own, not to local rank 0's output: nothing may write
 * an output before the daemons checked the descriptors across nodes, and an input in place is
 * still needed by the reduce. Local rank 0 keeps two sets of them in one allocation, made in the
 * pool when it joins, before the job's own allocations can fill it (by api/comm.c, which may
 * ask the daemon: shm/ sits below the requests): one of direct_max_bytes per post of its ring for the direct path (the
 * post's own: a direct allreduce always has one, as it must, since every node runs it alike),
 * then COLL_SHM_NODE_BUFS of node_max_bytes for the daemons' path; a collective of the daemons'
 * path that finds none free goes to the daemon whole, which gives the same result (the daemons'
 * descriptors and algorithms do not depend on the route).
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

/* Cache-line multiple of at least @p bytes. */
static uint64_t lines(uint64_t bytes)
{
    return (bytes + 63) & ~(uint64_t)63;
}

/* Bytes of each of the direct path's buffers (one per post, so that a direct allreduce always
 * finds one: every node must run it alike), 0 without the path. */
static uint64_t direct_buf_bytes(const coll_shm_t *s)
{
    return s->nnodes > 1 ? lines(s->hdr->direct_max_bytes) : 0;
}

/* Bytes of each of the daemons' path's few buffers, 0 where it reduces nothing here. */
static uint64_t daemon_buf_bytes(const coll_shm_t *s)
{
    return s->nnodes > 1 && s->nlocal > 1 && !s->node_direct_only
               ? lines(s->hdr->node_max_bytes)
               : 0;
}

int coll__shm_node_direct_only(coll_shm_t *s)
{
    if (s->node_direct_only || direct_buf_bytes(s) == 0 || daemon_buf_bytes(s) == 0) {
        return 0;
    }
    s->node_direct_only = 1;
    return 1;
}

uint64_t coll__shm_node_wanted(const coll_shm_t *s)
{
    if (s->self != 0 || s->node_off != 0 || s->node_none) {
        return 0;
    }
    return direct_buf_bytes(s) * COLL_SHM_SLOTS + daemon_buf_bytes(s) * COLL_SHM_NODE_BUFS;
}

void coll__shm_node_provide(coll_shm_t *s, uint64_t off, uint64_t bytes)
{
    (void)bytes; /* what coll__shm_node_wanted() asked: the layout follows from the header */
    s->node_off = off;
    s->direct_bytes = direct_buf_bytes(s);
    s->node_bytes = daemon_buf_bytes(s);
    s->node_none = off == 0;
}

void coll__shm_node_announce(coll_shm_t *s)
{
    if (s->self != 0 || s->nnodes < 2) {
        return;
    }
    atomic_store_explicit(&s->hdr->node_taken, 1, memory_order_release);
    for (uint32_t l = 1; l < s->nlocal; l++) {
        coll_ctl_notify(coll_ctl_of(s->base, l));
    }
}

coll_status_t coll__shm_node_wait(coll_comm_t *c, int timeout_ms)
{
    const coll_shm_hdr_t *h = c->shm->hdr;
    uint64_t end = coll__now_ns() + (uint64_t)timeout_ms * 1000000ull, now;
    uint32_t seen;

    if (c->shm->self == 0 || c->shm->nnodes < 2) {
        return COLL_OK;
    }
    for (;;) {
        seen = atomic_load_explicit(&c->ctl->events, memory_order_acquire);
        if (atomic_load_explicit(&h->node_taken, memory_order_acquire) ||
            atomic_load(&h->failed) || atomic_load(&h->left)) {
            return COLL_OK;
        }
        now = coll__now_ns();
        if (timeout_ms >= 0 && now >= end) {
            coll__set_error(c, "rank %d: local rank 0 did not take its node buffers within the "
                            "job's timeout (%d ms)", c->rank, timeout_ms);
            return COLL_ERR_TIMEDOUT;
        }
        coll_ctl_wait(c->ctl, seen, timeout_ms < 0 ? -1 : (int)((end - now) / 1000000 + 1));
    }
}

/* Where the daemons' path's buffers begin: after the direct path's. */
static uint64_t daemon_bufs(const coll_shm_t *s)
{
    return s->node_off + s->direct_bytes * COLL_SHM_SLOTS;
}

uint64_t coll__shm_node_get(const coll_comm_t *c, const coll_submission_t *d, uint32_t slot)
{
    coll_shm_t *s = c->shm;
    uint64_t bytes = d->count * coll_dtype_size((coll_dtype_t)d->dtype);

    if (s->node_off == 0) {
        return 0; /* none (yet) */
    }
    if (coll__shm_direct(s, d)) {
        return bytes <= s->direct_bytes ? s->node_off + slot * s->direct_bytes : 0;
    }
    for (uint32_t i = 0; i < COLL_SHM_NODE_BUFS && s->node_bytes > 0 && bytes <= s->node_bytes;
         i++) {
        if (!(s->node_busy & (1u << i))) {
            s->node_busy |= 1u << i;
            return daemon_bufs(s) + i * s->node_bytes;
        }
    }
    return 0; /* all in use, or a daemon restarted with a larger crossover */
}

void coll__shm_node_put(coll_shm_t *s, uint64_t off)
{
    uint64_t first = daemon_bufs(s);

    if (off != 0 && s->node_off != 0 && s->node_bytes > 0 && off >= first &&
        off < first + COLL_SHM_NODE_BUFS * s->node_bytes) {
        s->node_busy &= ~(1u << ((off - first) / s->node_bytes));
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

    (void)coll__submit_send(c, &m, NULL); /* a broken link fails every request anyway */
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

/* How long a leader whose rounds failed on UCX (a partner leader gone, its endpoint closed)
 * waits for the job's failure to come through the daemons, with its first cause (a mismatch
 * found on the partner's node, a rank or daemon that died: the partner's leader exits after
 * either), before it fails the job with the UCX error itself (a link between the leaders
 * only). Far inside the job timeout + 2 s that bounds every failure. */
#define DIRECT_GRACE_NS (1000ull * 1000000ull)

/* The rounds of @p op failed on UCX with @p st: ended now, the job failed after the grace. */
static void direct_failed(coll_comm_t *c, coll_shm_op_t *op, coll_status_t st)
{
    op->rounds_over = 1;
    op->rounds_st = st;
    op->rounds_fail_ns = coll__now_ns();
    snprintf(op->rounds_why, sizeof(op->rounds_why), "%s", c->conn->last_error);
    coll__direct_end(c->conn, &op->rounds);
}

/* The job fails with COLL_ERR_JOB naming the rank that left (@p why: what the rounds saw). */
static void direct_abort_left(coll_comm_t *c, const char *why)
{
    const coll_shm_hdr_t *h = c->shm->hdr;
    char msg[COLL_SHM_MSG_BYTES];

    snprintf(msg, sizeof(msg), "%.*s left job %s; its collectives cannot run without it (%.200s)",
             COLL_SHM_LEFT_BYTES - 1, h->peer_left_msg, c->job, why);
    coll__abort(c, COLL_ERR_JOB, msg);
    coll__set_error(c, "%s", msg);
}

/* After direct_failed(): the job failed with the UCX error once the grace ran out, or at once
 * with the cause when a rank of another node left the job (its daemon's goodbye): a partner
 * leader that left ends its endpoints, and every rank should hear who left. */
static void direct_grace(coll_comm_t *c, coll_shm_op_t *op)
{
    if (atomic_load(&c->shm->hdr->peer_left)) {
        op->rounds_fail_ns = 0;
        direct_abort_left(c, op->rounds_why);
    } else if (coll__now_ns() - op->rounds_fail_ns > DIRECT_GRACE_NS) {
        op->rounds_fail_ns = 0;
        coll__abort(c, op->rounds_st, op->rounds_why);
        coll__set_error(c, "%s", op->rounds_why);
    }
}

/* Rounds still waiting the grace after a rank of another node left the job (its daemon's
 * goodbye; a leader that only destroyed its communicator leaves its endpoints up): 1 when the
 * job should fail with the leave. Not at once: a partner that completed its rounds and then
 * left may still have its last message on the way. */
static int direct_left(coll_comm_t *c, coll_shm_op_t *op)
{
    uint64_t now;

    if (!atomic_load(&c->shm->hdr->peer_left)) {
        return 0;
    }
    now = coll__now_ns();
    if (op->left_ns == 0) {
        op->left_ns = now;
    }
    return now - op->left_ns > DIRECT_GRACE_NS;
}

/* The rounds ran past the job's timeout (a leader gone, stopped, or sending without the job's
 * token): the reason, for coll__abort(). */
static coll_status_t direct_late(coll_comm_t *c, const coll_shm_op_t *op)
{
    char nm[48];

    coll_desc_name(&op->desc, nm, sizeof(nm));
    coll__set_error(c, "rank %d: %s: the direct rounds with node %u's leader did not complete "
                    "within the job's timeout (%llu ms) and 1 s more; %llu messages without the job's token "
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

    if (op->rounds_fail_ns != 0) {
        direct_grace(c, op);
        return;
    }
    if (op->rounds_over || !op->agreed ||
        atomic_load_explicit(&h->chunks_done, memory_order_acquire) < op->nchunks / 2) {
        return;
    }
    if (!op->rounds.started) {
        desc.node = c->node_rank;
        desc.first_rank = (uint32_t)c->rank;
        st = coll__direct_start(c->conn, &op->rounds, &desc, s->base + op->node_off,
                                s->hdr->direct_token, s->hdr->direct_max_bytes);
        if (st == COLL_ERR_TRANSPORT) { /* a partner gone: the grace, as for later rounds */
            direct_failed(c, op, st);
            return;
        }
        if (st != COLL_OK) {
            direct_ended(c, op, st);
            return;
        }
    }
    st = coll__direct_test(c->conn, &op->rounds, s->spin_ns);
    /* Whom the rounds wait for, for the daemon's blame if they stall. */
    atomic_store_explicit(&coll__shm_post_of(s, 0, op->peer_slot[0])->direct_wait,
                          st == COLL_INPROGRESS ? op->rounds.peer + 1 : 0, memory_order_relaxed);
    if (op->rounds.refused > refused) { /* the daemon counts and logs them */
        atomic_fetch_add_explicit(&coll__shm_area(s, 0)->stats.direct_refused,
                                  op->rounds.refused - refused, memory_order_relaxed);
    }
    /* The daemons' timeout comes first, with its blame (shm_watch.c); this one only bounds a
     * wait they cannot see end (the partner leader's messages lost). */
    if (st == COLL_INPROGRESS && direct_left(c, op)) {
        op->rounds_over = 1;
        direct_abort_left(c, "the direct rounds waited 1 s more");
        coll__direct_end(c->conn, &op->rounds);
        return;
    }
    if (st == COLL_INPROGRESS && c->job_timeout_ms > 0 &&
        coll__now_ns() - op->rounds.start_ns > c->job_timeout_ms * 1000000ull + DIRECT_GRACE_NS) {
        st = direct_late(c, op);
    }
    if (st == COLL_ERR_TRANSPORT) {
        direct_failed(c, op, st);
    } else if (st != COLL_INPROGRESS) {
        direct_ended(c, op, st);
    }
}
