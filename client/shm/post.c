/*
 * The post protocol on this rank's side (proto/shm_area.h): every change this rank makes to a
 * post's words, its own posts' states and the home post's claim word, chunk count and node
 * word, is here, each with the invariant it relies on (COLL_ASSERT, checked in Debug and
 * sanitizer builds). The daemon's changes (TAKEN, the node word) are in daemon/engine/shm.c.
 *
 * A post goes where its key hashes to (the next free post after it when that one is taken), so
 * the other ranks, which look for the same key, usually find it at the first place they look.
 */
#include "client/shm/shm.h"

static coll_shm_post_t *home(const coll_shm_t *s, const coll_shm_op_t *op)
{
    return coll__shm_post_of(s, 0, op->peer_slot[0]);
}

/* The generation the home post's claim word carries for this operation. */
static uint64_t claim_gen(const coll_shm_op_t *op)
{
    return (uint64_t)(uint32_t)coll_shm_gen(op->peer_state[0]) << 32;
}

int coll__post_free_slot(const coll_shm_t *s, uint64_t key)
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

void coll__post_publish(coll_shm_t *s, coll_shm_op_t *op, uint32_t slot)
{
    coll_shm_post_t *p = coll__shm_post_of(s, s->self, slot);
    uint64_t was = atomic_load(&p->state), gen = coll_shm_gen(was) + 1;

    COLL_ASSERT(slot < COLL_SHM_SLOTS && coll_shm_phase(was) == COLL_SHM_FREE);

    extend_reach(s, op->rec.sub.key, slot);
    op->slot = slot;
    op->state = coll_shm_state(gen, COLL_SHM_POSTED);
    coll_shm_write_rec(p, &op->rec);
    atomic_store_explicit(&p->done_ns, 0, memory_order_relaxed); /* not completed */
    if (s->self == 0) { /* the home post: the operation's chunks start unclaimed */
        atomic_store_explicit(&p->claim, (uint64_t)(uint32_t)gen << 32, memory_order_relaxed);
        atomic_store_explicit(&p->chunks_done, 0, memory_order_relaxed);
        atomic_store_explicit(&p->node, 0, memory_order_relaxed);
        atomic_store_explicit(&p->direct_wait, 0, memory_order_relaxed);
    }
    /* Sequentially consistent: of two ranks posting at once, at least one sees the other. */
    atomic_store(&p->state, op->state);
    atomic_fetch_add_explicit(&coll__shm_area(s, s->self)->stats.posted, 1,
                              memory_order_relaxed);
}

void coll__post_release(coll_shm_t *s, const coll_shm_op_t *op)
{
    _Atomic uint64_t *state = &coll__shm_post_of(s, s->self, op->slot)->state;

    /* Only this rank frees its post: it is still the operation's, in some phase but FREE (the
     * daemon may move it from POSTED to TAKEN meanwhile). */
    COLL_ASSERT(coll_shm_gen(atomic_load(state)) == coll_shm_gen(op->state) &&
                coll_shm_phase(atomic_load(state)) != COLL_SHM_FREE);
    atomic_store(state, coll_shm_state(coll_shm_gen(op->state), COLL_SHM_FREE));
}

int coll__post_claim_hand_over(const coll_shm_t *s, const coll_shm_op_t *op)
{
    uint64_t want = claim_gen(op);

    COLL_ASSERT(op->agreed && op->route == COLL_SHM_ROUTE_DAEMON);
    return atomic_compare_exchange_strong(&home(s, op)->claim, &want, want + 1);
}

int64_t coll__post_claim(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t limit)
{
    coll_shm_post_t *h = home(s, op);
    uint64_t w = atomic_load(&h->claim);

    COLL_ASSERT(op->agreed && limit <= op->nchunks);
    for (;;) {
        uint32_t n = (uint32_t)w;
        if ((w & ~(uint64_t)UINT32_MAX) != claim_gen(op) || (n & COLL_SHM_CLOSED) ||
            n >= limit) {
            return -1;
        }
        if (atomic_compare_exchange_weak(&h->claim, &w, w + 1)) {
            return n;
        }
    }
}

uint32_t coll__post_chunk_done(const coll_shm_t *s, const coll_shm_op_t *op)
{
    uint32_t done = atomic_fetch_add(&home(s, op)->chunks_done, 1) + 1;

    COLL_ASSERT(done <= op->nchunks);
    return done;
}

/* The home post's timings and steps of the daemons' part, copied into local rank @p l's. */
static void copy_node_part(const coll_shm_t *s, const coll_shm_op_t *op, uint32_t l)
{
    const coll_shm_post_t *h = home(s, op);
    coll_shm_post_t *p = coll__shm_post_of(s, l, op->peer_slot[l]);

    p->peers_ns = h->peers_ns;
    p->reduced_ns = h->reduced_ns;
    if (l != 0) {
        *coll__shm_steps_of(s, l, op->peer_slot[l]) = *coll__shm_steps_of(s, 0, op->peer_slot[0]);
    }
}

void coll__post_complete(coll_shm_t *s, const coll_shm_op_t *op, uint64_t now, uint64_t node)
{
    COLL_ASSERT(op->agreed && atomic_load(&home(s, op)->chunks_done) == op->nchunks);
    COLL_ASSERT((node != 0) == (op->route == COLL_SHM_ROUTE_NODE));
    /* Every post's done_ns before any move: a rank moved first may post the key again at once,
     * and must see the others' posts of this operation, not moved yet, as completed
     * (coll__post_completed()). */
    for (uint32_t l = 0; l < s->nlocal; l++) {
        coll_shm_post_t *p = coll__shm_post_of(s, l, op->peer_slot[l]);
        p->ready_ns = op->ready_ns;
        atomic_store_explicit(&p->done_ns, now, memory_order_relaxed);
        if (node != 0) { /* every rank takes the daemons' part from its own post */
            copy_node_part(s, op, l);
            atomic_store_explicit(&p->node, node, memory_order_relaxed);
        }
    }
    for (uint32_t l = 0; l < s->nlocal; l++) {
        /* No move when its owner gave up on it meanwhile (a failed job, a lost daemon). */
        coll_shm_move(coll__shm_post_of(s, l, op->peer_slot[l]), op->peer_state[l],
                      COLL_SHM_DONE);
    }
}

int coll__post_completed(const coll_shm_t *s, uint32_t l, uint32_t slot)
{
    return atomic_load_explicit(&coll__shm_post_of(s, l, slot)->done_ns,
                                memory_order_acquire) != 0;
}

void coll__post_node_done(coll_shm_t *s, const coll_shm_op_t *op, uint64_t node,
                          uint64_t start_ns, uint64_t end_ns)
{
    coll_shm_post_t *h = home(s, op);

    COLL_ASSERT(op->agreed && op->direct && s->self == 0 && (node & COLL_SHM_NODE_DONE));
    h->peers_ns = start_ns;
    h->reduced_ns = end_ns;
    coll__shm_steps_of(s, 0, op->peer_slot[0])->n = 0;
    /* Release: the node buffer as the rounds left it is visible with the word. */
    atomic_store_explicit(&h->node, node, memory_order_release);
}

int coll__post_close_claims(const coll_shm_t *s, const coll_shm_op_t *op)
{
    coll_shm_post_t *h = home(s, op);
    uint64_t w = atomic_load(&h->claim);

    COLL_ASSERT(op->agreed && op->route != COLL_SHM_ROUTE_DAEMON);
    while ((w & ~(uint64_t)UINT32_MAX) == claim_gen(op) && !((uint32_t)w & COLL_SHM_CLOSED) &&
           !atomic_compare_exchange_weak(&h->claim, &w, w | COLL_SHM_CLOSED)) {
    }
    return (w & ~(uint64_t)UINT32_MAX) != claim_gen(op) ||
           atomic_load(&h->chunks_done) >= ((uint32_t)w & ~COLL_SHM_CLOSED);
}

void coll__post_fail_node(coll_shm_t *s, const coll_shm_op_t *op, uint64_t node)
{
    COLL_ASSERT(op->agreed && op->route == COLL_SHM_ROUTE_NODE && (node & COLL_SHM_NODE_DONE));
    for (uint32_t l = 0; l < s->nlocal; l++) {
        coll_shm_post_t *p = coll__shm_post_of(s, l, op->peer_slot[l]);
        uint64_t was = 0;
        int wrote = atomic_compare_exchange_strong(&p->node, &was, node);
        if (l == s->self || (!wrote && was != node)) {
            continue;
        }
        /* Undone only for an owner that gave its post up: one that another rank moved to
         * DONE meanwhile (failing the node too, after this rank's word) reads the word. */
        if (!coll_shm_move(p, op->peer_state[l], COLL_SHM_DONE) && wrote &&
            atomic_load(&p->state) !=
                coll_shm_state(coll_shm_gen(op->peer_state[l]), COLL_SHM_DONE)) {
            was = node;
            atomic_compare_exchange_strong(&p->node, &was, 0);
        }
        coll_ctl_notify(coll_ctl_of(s->base, l));
    }
}

