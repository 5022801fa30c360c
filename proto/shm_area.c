#include "proto/shm_area.h"

#include <stddef.h>
#include <string.h>

_Static_assert(sizeof(coll_shm_rec_t) % sizeof(uint64_t) == 0 &&
                   offsetof(coll_shm_rec_t, sub.key) == 0, "copied in whole words, the key first");

/* The record is copied word by word with relaxed atomics: a reader may copy it while its
 * owner rewrites it (a seqlock), which must not be a data race for the compiler (or for
 * ThreadSanitizer, when the ranks are threads of a test). */
void coll_shm_write_rec(coll_shm_post_t *p, const coll_shm_rec_t *d)
{
    uint64_t w[sizeof(*d) / sizeof(uint64_t)];

    memcpy(w, d, sizeof(w));
    /* After the FREE state: a reader that sees a word of the new record sees FREE (or a
     * later state) when it reads the state again (the seqlock writer's fence). */
    atomic_thread_fence(memory_order_release);
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        __atomic_store_n(&p->rec_words[i], w[i], __ATOMIC_RELAXED);
    }
}

static void read_rec(const coll_shm_post_t *p, coll_shm_rec_t *d)
{
    uint64_t w[sizeof(*d) / sizeof(uint64_t)];

    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        w[i] = __atomic_load_n(&p->rec_words[i], __ATOMIC_RELAXED);
    }
    memcpy(d, w, sizeof(w));
}

int coll_shm_read(const coll_shm_post_t *p, uint32_t phase, uint64_t *state_p,
                  coll_shm_rec_t *d)
{
    uint64_t s = atomic_load(&p->state);

    if (coll_shm_phase(s) != phase) {
        return 0;
    }
    /* A seqlock read: the owner writes the record only while the post is FREE, so a copy
     * taken between two equal reads of a non-FREE state is the record of that state. */
    read_rec(p, d);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&p->state, memory_order_relaxed) != s) {
        return 0;
    }
    *state_p = s;
    return 1;
}

int coll_shm_find(const coll_shm_rank_t *r, uint64_t key, uint32_t phase, uint32_t *slot_p,
                  uint64_t *state_p, coll_shm_rec_t *d)
{
    uint32_t reach = atomic_load(&r->reach);

    for (uint32_t i = 0, at = coll_shm_slot_of(key); i <= reach && i < COLL_SHM_SLOTS; i++) {
        const coll_shm_post_t *p = &r->post[(at + i) % COLL_SHM_SLOTS];
        /* The key first, unsynchronised: only a candidate is read consistently. */
        if (__atomic_load_n(&p->rec_words[0], __ATOMIC_RELAXED) == key &&
            coll_shm_read(p, phase, state_p, d) && d->sub.key == key) {
            *slot_p = (at + i) % COLL_SHM_SLOTS;
            return 1;
        }
    }
    return 0;
}

int coll_shm_move(coll_shm_post_t *p, uint64_t from, uint32_t phase)
{
    return atomic_compare_exchange_strong(&p->state, &from,
                                          coll_shm_state(coll_shm_gen(from), phase));
}
