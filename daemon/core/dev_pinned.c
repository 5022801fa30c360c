/*
 * The cache of page-locked host buffers (dev_pinned.h). Sizes in powers of two make a buffer of
 * one operation fit the next operation of the same size exactly, at the price of up to half of
 * a buffer unused; the idle buffers of a device are an array kept oldest first, so eviction and
 * the idle timer look at the front and a take of the same size finds the warmest one from the
 * back.
 */
#include "core/dev_pinned.h"

#include <stdlib.h>
#include <string.h>

#include "common/assert.h"

size_t coll_pinned_size(const coll_pinned_t *pc, size_t bytes)
{
    size_t cap = COLL_PINNED_MIN_BYTES;

    while (cap < bytes && cap <= SIZE_MAX / 2) {
        cap *= 2;
    }
    if (cap < bytes || cap > pc->limit) {
        cap = (bytes + 63) / 64 * 64; /* never kept: no need to round it to a class */
    }
    return cap;
}

/* Drop idle buffer @p k of @p c from the cache, freed. */
static void evict(coll_pinned_t *pc, int dev, coll_pinned_dev_t *c, uint32_t k)
{
    COLL_ASSERT(k < c->n && c->held >= c->slot[k].bytes);
    pc->ops->host_free(dev, c->slot[k].p);
    c->held -= c->slot[k].bytes;
    c->n--;
    memmove(&c->slot[k], &c->slot[k + 1], (c->n - k) * sizeof(c->slot[0]));
}

/* Free device @p dev's idle buffers from the oldest until they fit the bounds with a buffer of
 * @p room more bytes (0: none; room > limit: free all of them). */
static void make_room(coll_pinned_t *pc, int dev, uint64_t room)
{
    coll_pinned_dev_t *c = &pc->dev[dev];

    while (c->n > 0 && ((room > 0 && c->n == COLL_PINNED_SLOTS) || room > pc->limit ||
                        c->held + room > pc->limit)) {
        evict(pc, dev, c, 0);
    }
}

/* Free every idle buffer older than idle_ms; @return the loop time the next one will be due
 * (0: none left). */
static uint64_t expire(coll_pinned_t *pc, uint64_t now)
{
    uint64_t next = 0;

    for (int d = 0; d < COLL_DEV_MAX; d++) {
        coll_pinned_dev_t *c = &pc->dev[d];
        while (c->n > 0 && now - c->slot[0].since_ms >= pc->idle_ms) {
            evict(pc, d, c, 0);
        }
        if (c->n > 0 && (next == 0 || c->slot[0].since_ms + pc->idle_ms < next)) {
            next = c->slot[0].since_ms + pc->idle_ms;
        }
    }
    return next;
}

static void idle_tick(uv_timer_t *t)
{
    coll_pinned_t *pc = t->data;
    uint64_t now = uv_now(pc->loop), next = expire(pc, now);

    if (next != 0) {
        uv_timer_start(t, idle_tick, next > now ? next - now : 1, 0);
    }
}

/* Arm the idle timer when it is not (a buffer just went idle). */
static void arm(coll_pinned_t *pc)
{
    if (pc->timer == NULL) {
        if ((pc->timer = calloc(1, sizeof(*pc->timer))) == NULL) {
            return; /* buffers then wait for a take, a reload or shutdown */
        }
        uv_timer_init(pc->loop, pc->timer);
        pc->timer->data = pc;
    }
    if (!uv_is_active((uv_handle_t *)pc->timer)) {
        uv_timer_start(pc->timer, idle_tick, pc->idle_ms > 0 ? pc->idle_ms : 1, 0);
    }
}

void coll_pinned_configure(coll_pinned_t *pc, uv_loop_t *loop, uint64_t limit,
                           uint64_t idle_ms)
{
    pc->loop = loop;
    pc->limit = limit;
    pc->idle_ms = idle_ms;
    for (int d = 0; d < COLL_DEV_MAX; d++) {
        make_room(pc, d, 0);
    }
}

coll_status_t coll_pinned_take(coll_pinned_t *pc, int dev, size_t bytes, void **p_p,
                               size_t *cap_p)
{
    coll_pinned_dev_t *c = &pc->dev[dev];
    size_t cap = coll_pinned_size(pc, bytes);
    coll_status_t st;

    for (uint32_t k = c->n; k-- > 0;) {
        if (c->slot[k].bytes == cap) {
            *p_p = c->slot[k].p;
            *cap_p = cap;
            c->held -= cap;
            c->n--;
            memmove(&c->slot[k], &c->slot[k + 1], (c->n - k) * sizeof(c->slot[0]));
            c->hits++;
            c->used += cap;
            return COLL_OK;
        }
    }
    c->misses++;
    st = pc->ops->host_alloc(dev, cap, p_p);
    if (st == COLL_ERR_NOMEM && c->n > 0) { /* idle buffers of other sizes hold what it needs */
        make_room(pc, dev, UINT64_MAX);
        st = pc->ops->host_alloc(dev, cap, p_p);
    }
    if (st == COLL_OK) {
        *cap_p = cap;
        c->used += cap;
    }
    return st;
}

void coll_pinned_give(coll_pinned_t *pc, int dev, void *p, size_t cap)
{
    coll_pinned_dev_t *c = &pc->dev[dev];

    COLL_ASSERT(c->used >= cap);
    c->used -= cap;
    if (cap > pc->limit || pc->loop == NULL) {
        pc->ops->host_free(dev, p);
        return;
    }
    make_room(pc, dev, cap);
    c->slot[c->n++] = (coll_pinned_slot_t){p, cap, uv_now(pc->loop)};
    c->held += cap;
    arm(pc);
}

static void timer_closed(uv_handle_t *h)
{
    free(h);
}

void coll_pinned_close(coll_pinned_t *pc)
{
    pc->limit = 0;
    for (int d = 0; d < COLL_DEV_MAX; d++) {
        make_room(pc, d, 0);
    }
    if (pc->timer != NULL) {
        uv_timer_stop(pc->timer);
        uv_close((uv_handle_t *)pc->timer, timer_closed);
        pc->timer = NULL;
    }
}
