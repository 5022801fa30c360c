/*
 * Posting collectives in the local ranks' shared-memory area (proto/shm_area.h), and the posts'
 * life on this rank's side: a free post for each collective, the checks before it is
 * published, its release when the request ends, and the bounded poll of a waiter.
 *
 * A post goes where its key hashes to (the next free post after it when that one is taken), so
 * the other ranks, which look for the same key, usually find it at the first place they look.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/shm/shm.h"

/* How long a waiter polls before it sleeps, unless COLL_SPIN_US says otherwise: a peer on
 * another core answers within a few microseconds. With more local ranks than CPUs the waiter
 * yields its CPU between polls, so that the rank it waits for can run (docs/benchmarks.md,
 * "Latency"). */
#define COLL_SHM_SPIN_NS_DEFAULT 20000u
/* The longest COLL_SPIN_US accepted. */
#define COLL_SHM_SPIN_US_MAX 10000u

/* COLL_SPIN_US (microseconds, 0 .. COLL_SHM_SPIN_US_MAX) into *ns_p; -1 with the reason in
 * the communicator's error when it is not such a number. */
static int spin_ns_from_env(coll_comm_t *c, uint64_t *ns_p)
{
    const char *v = getenv("COLL_SPIN_US");
    char *end;
    unsigned long us;

    if (v == NULL || v[0] == '\0') {
        *ns_p = COLL_SHM_SPIN_NS_DEFAULT;
        return 0;
    }
    errno = 0;
    us = strtoul(v, &end, 10);
    if (v[0] == '-' || *end != '\0' || errno != 0 || us > COLL_SHM_SPIN_US_MAX) {
        coll__set_error(c, "COLL_SPIN_US=%s is not a number of microseconds from 0 to %u", v,
                        COLL_SHM_SPIN_US_MAX);
        return -1;
    }
    *ns_p = us * 1000u;
    return 0;
}

/* CPUs this process may run on. */
static uint32_t cpus(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof(set), &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 1;
}

coll_status_t coll__shm_open(coll_comm_t *c, uint64_t shm_bytes, uint64_t max_bytes)
{
    coll_shm_t *s;
    uint64_t spin_ns;

    if (c->ctl == NULL || shm_bytes != COLL_SHM_TOTAL(c->local_size) ||
        COLL_POOL_PREFIX(c->local_size) > c->pool_bytes) {
        return COLL_OK; /* a daemon without the area: every collective goes to it */
    }
    if (spin_ns_from_env(c, &spin_ns) < 0) {
        return COLL_ERR_INVALID;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    s->base = c->pool;
    s->exec = coll_exec_get(COLL_MEM_HOST);
    s->hdr = coll_shm_hdr_of(c->pool, (uint32_t)c->local_size);
    s->self = (uint32_t)c->local_rank;
    s->nlocal = (uint32_t)c->local_size;
    s->nnodes = c->node_count;
    s->max_bytes = max_bytes;
    s->spin_ns = spin_ns;
    s->oversubscribed = s->nlocal > cpus();
    /* On several nodes the daemon takes part in every allreduce reduced here (route NODE): a
     * polling rank takes the CPU from it or from the rank it waits for (docs/benchmarks.md,
     * "Allreduces reduced in shared memory between nodes"). */
    s->crowded = s->nnodes > 1 && s->nlocal + 1 > cpus();
    s->ops.next = s->ops.prev = &s->ops;
    c->shm = s;
    return COLL_OK;
}

void coll__shm_close(coll_comm_t *c)
{
    coll_shm_t *s = c->shm;

    if (s == NULL) {
        return;
    }
    while (s->spare != NULL) {
        coll_shm_op_t *op = s->spare;
        s->spare = op->next;
        free(op);
    }
    free(s);
    c->shm = NULL;
}

static coll_shm_op_t *op_new(coll_shm_t *s)
{
    coll_shm_op_t *op = s->spare;
    size_t l = s->nlocal;

    if (op != NULL) {
        s->spare = op->next;
    } else if ((op = malloc(sizeof(*op) + l * (sizeof(uint32_t) + 3 * sizeof(uint64_t)))) ==
               NULL) {
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    op->peer_state = (uint64_t *)(op + 1);
    op->in_off = op->peer_state + l;
    op->out_off = op->in_off + l;
    op->peer_slot = (uint32_t *)(op->out_off + l);
    return op;
}

/* A free post of this rank's ring for @p key; its slot, or -1 when every one is in use. */
static int free_slot(const coll_shm_t *s, uint64_t key)
{
    const coll_shm_rank_t *me = coll__shm_area(s, s->self);
    uint32_t h = coll_shm_slot_of(key);

    for (uint32_t i = 0; i < COLL_SHM_SLOTS; i++) {
        uint32_t slot = (h + i) % COLL_SHM_SLOTS;
        if (coll_shm_phase(atomic_load(&me->post[slot].state)) == COLL_SHM_FREE) {
            return (int)slot;
        }
    }
    return -1;
}

/* [off, off + len) inside one of this rank's allocations (len 0: anywhere in the pool). */
static int owned(const coll_comm_t *c, uint64_t off, uint64_t len)
{
    if (len == 0) {
        return 1;
    }
    for (size_t i = 0; i < c->nallocs; i++) {
        const coll_alloc_t *a = &c->allocs[i];
        if (off >= a->offset && off - a->offset <= a->bytes && len <= a->bytes - (off - a->offset)) {
            return 1;
        }
    }
    return 0;
}

/* The peers run this rank's buffers only through its post: they must be its own. */
static coll_status_t check_buffers(coll_comm_t *c, const coll_submission_t *d)
{
    uint64_t se, re, es = coll_dtype_size((coll_dtype_t)d->dtype);

    coll_kind_extent((coll_kind_t)d->coll, d->count, (uint32_t)c->world_size, (uint32_t)c->rank,
                     d->root, &se, &re);
    if (!owned(c, d->send_offset, se * es) || !owned(c, d->recv_offset, re * es)) {
        coll__set_error(c, "rank %d: %s buffer is not one of this rank's allocations in the "
                        "pool; allocate it with coll_mem_alloc()", c->rank,
                        owned(c, d->send_offset, se * es) ? "receive" : "send");
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
        return h->status < 0 ? (coll_status_t)h->status : COLL_ERR_JOB;
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

    while ((*slot_p = free_slot(c->shm, key)) < 0 && st == COLL_OK) {
        c->shm->slot_freed = 0;
        st = coll__wait_flag(c, &c->shm->slot_freed, timeout);
    }
    if (st == COLL_ERR_TIMEDOUT) {
        coll__set_error(c, "rank %d: %u collectives in flight, none completed within the job's "
                        "timeout", c->rank, COLL_SHM_SLOTS);
    }
    return st;
}

static coll_status_t check_post(coll_comm_t *c, const coll_submission_t *d)
{
    coll_status_t st = check_job(c);

    if (st == COLL_OK && route_of(c, d) != COLL_SHM_ROUTE_DAEMON) {
        st = check_buffers(c, d); /* the other local ranks read and write them */
    }
    return st;
}

/* Let the other ranks' searches reach slot @p slot of key @p key (before it is published). */
static void extend_reach(coll_shm_t *s, uint64_t key, uint32_t slot)
{
    _Atomic uint32_t *reach = &coll__shm_area(s, s->self)->reach;
    uint32_t d = (slot + COLL_SHM_SLOTS - coll_shm_slot_of(key)) % COLL_SHM_SLOTS;

    /* With nothing else in flight no post lies further: the reach may shrink. */
    if (s->ops.next == &s->ops ? atomic_load_explicit(reach, memory_order_relaxed) != d
                               : atomic_load_explicit(reach, memory_order_relaxed) < d) {
        atomic_store(reach, d);
    }
}

/* Publish @p op's record in post @p slot of this rank's ring. */
static void publish(coll_shm_t *s, coll_shm_op_t *op, uint32_t slot)
{
    coll_shm_post_t *p = coll__shm_post_of(s, s->self, slot);
    uint64_t gen = coll_shm_gen(atomic_load(&p->state)) + 1;

    extend_reach(s, op->rec.sub.key, slot);
    op->slot = slot;
    op->state = coll_shm_state(gen, COLL_SHM_POSTED);
    coll_shm_write_rec(p, &op->rec);
    if (s->self == 0) { /* the home post: the operation's chunks start unclaimed */
        atomic_store_explicit(&p->claim, (uint64_t)(uint32_t)gen << 32, memory_order_relaxed);
        atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
        atomic_store_explicit(&p->node, 0, memory_order_relaxed);
    }
    /* Sequentially consistent: of two ranks posting at once, at least one sees the other. */
    atomic_store(&p->state, op->state);
    atomic_fetch_add_explicit(&coll__shm_area(s, s->self)->stats.posted, 1,
                              memory_order_relaxed);
}

/* The route of @p d; local rank 0 names a route-NODE collective's node buffer in its post
 * (none free: the collective goes to the daemon whole, and the others read that there). */
static coll_shm_route_t take_route(coll_comm_t *c, coll_shm_rec_t *d)
{
    coll_shm_route_t route = route_of(c, &d->sub);

    if (route == COLL_SHM_ROUTE_NODE && c->shm->self == 0 &&
        (d->node_off = coll__shm_node_get(c, &d->sub)) == 0) {
        route = COLL_SHM_ROUTE_DAEMON;
    }
    return route;
}

coll_status_t coll__shm_post(coll_comm_t *c, coll_request_t *r, const coll_submission_t *m)
{
    coll_shm_t *s = c->shm;
    coll_shm_rec_t d = {.sub = *m, .post_ns = r->timing.submit_ns};
    coll_shm_op_t *op;
    coll_status_t st;
    coll_shm_route_t route;
    int slot = -1;

    coll__link_check(c->conn, r->timing.submit_ns);
    st = check_post(c, &d.sub);
    route = st == COLL_OK ? take_route(c, &d) : COLL_SHM_ROUTE_DAEMON;
    if (st == COLL_OK) {
        st = wait_slot(c, d.sub.key, &slot);
    }
    if (st == COLL_OK && (st = check_job(c)) == COLL_OK && (op = op_new(s)) == NULL) {
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
    op->nchunks = coll__shm_nchunks(&d.sub, s->nlocal) * (route == COLL_SHM_ROUTE_NODE ? 2 : 1);
    publish(s, op, (uint32_t)slot);
    op->next = &s->ops;
    op->prev = s->ops.prev;
    s->ops.prev->next = op;
    s->ops.prev = op;
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
    atomic_store(&coll__shm_post_of(s, s->self, op->slot)->state,
                 coll_shm_state(coll_shm_gen(op->state), COLL_SHM_FREE));
    coll__shm_node_put(s, op->rec.node_off);
    s->slot_freed = 1;
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->next = s->spare;
    s->spare = op;
    r->shm_op = NULL;
}

void coll__shm_watch(coll_comm_t *c, coll__link_watch_t *w)
{
    coll_shm_t *s = c->shm;

    w->n = 0;
    w->spin_ns = s != NULL && !s->crowded ? s->spin_ns : 0;
    w->yield = s != NULL && s->oversubscribed;
    for (coll_shm_op_t *op = s != NULL ? s->ops.next : NULL; op != NULL && op != &s->ops &&
                                                           w->n < COLL_LINK_WATCH_MAX;
         op = op->next) {
        if (op->route != COLL_SHM_ROUTE_DAEMON && !coll__shm_node_with_daemon(s, op)) {
            w->word[w->n] = &coll__shm_post_of(s, s->self, op->slot)->state;
            w->seen[w->n++] = op->state;
        }
    }
}
