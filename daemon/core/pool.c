#include "core/pool.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/assert.h"
#include "base/log.h"

typedef struct {
    size_t offset;
    size_t len;
    const void *owner;
} pool_block_t;

/* Allocations are kept sorted by offset in an array: a job holds tens of buckets, so a linear
 * first-fit scan is cheaper than a tree and the code stays obvious. */
struct coll_pool {
    const coll_pool_backend_t *be; /* the memory behind the pool */
    void *mem;                     /* its state */
    uint8_t *base;
    size_t size;
    size_t used;
    pool_block_t *blocks;
    size_t nblocks;
    size_t cap;
    size_t held;                /* what a committing backend took (pool.h, commit) */
    coll_pool_budget_t *budget; /* charged by coll_pool_set_budget(); NULL until then */
    int on_demand;              /* charged for its blocks (or what its backend took) rather
                                   than its size */
};

coll_status_t coll_pool_create(const char *name, size_t bytes, coll_pool_t **pool_p)
{
    return coll_pool_create_on(&coll_pool_memfd, 0, name, bytes, pool_p);
}

coll_status_t coll_pool_create_on(const coll_pool_backend_t *be, int device, const char *name,
                                  size_t bytes, coll_pool_t **pool_p)
{
    coll_pool_t *pool;
    coll_status_t st;

    if (bytes == 0) {
        return COLL_ERR_INVALID;
    }
    pool = calloc(1, sizeof(*pool));
    if (pool == NULL) {
        return COLL_ERR_NOMEM;
    }
    pool->be = be;
    st = be->create(device, name, bytes, &pool->mem);
    if (st != COLL_OK) {
        goto err_free;
    }
    st = be->map(pool->mem, bytes, &pool->base);
    if (st != COLL_OK) {
        goto err_destroy;
    }
    pool->size = bytes;
    *pool_p = pool;
    return COLL_OK;

err_destroy:
    be->destroy(pool->mem, NULL, bytes);
err_free:
    free(pool);
    return st;
}

/* An on-demand pool over a backend that takes memory as it is touched is charged for its
 * allocations; one whose backend commits memory, for what it committed. */
static int charges_blocks(const coll_pool_t *pool)
{
    return pool->on_demand && pool->be->commit == NULL;
}

size_t coll_pool_charged(const coll_pool_t *pool)
{
    return !pool->on_demand ? pool->size : charges_blocks(pool) ? pool->used : pool->held;
}

void coll_pool_set_budget(coll_pool_t *pool, coll_pool_budget_t *budget, int on_demand)
{
    COLL_ASSERT(pool->budget == NULL);
    pool->budget = budget;
    pool->on_demand = on_demand;
    budget->used += coll_pool_charged(pool);
}

int coll_pool_on_demand(const coll_pool_t *pool)
{
    return pool->on_demand;
}

void coll_pool_destroy(coll_pool_t *pool)
{
    if (pool == NULL) {
        return;
    }
    if (pool->budget != NULL) {
        size_t charged = coll_pool_charged(pool);
        COLL_ASSERT(pool->budget->used >= charged);
        pool->budget->used -= charged;
    }
    pool->be->destroy(pool->mem, pool->base, pool->size);
    free(pool->blocks);
    free(pool);
}

int coll_pool_fd(const coll_pool_t *pool)
{
    coll_pool_chunk_t c;

    return pool->be->chunk(pool->mem, 0, &c) ? c.fd : -1;
}

int coll_pool_chunk(const coll_pool_t *pool, size_t i, coll_pool_chunk_t *c)
{
    return pool->be->chunk(pool->mem, i, c);
}

coll_status_t coll_pool_grant(coll_pool_t *pool, int peer)
{
    return pool->be->grant != NULL ? pool->be->grant(pool->mem, peer) : COLL_ERR_UNSUPPORTED;
}

size_t coll_pool_allocations(const coll_pool_t *pool)
{
    size_t n = 0;

    for (size_t i = 0; i < pool->nblocks; i++) {
        n += pool->blocks[i].owner != pool;
    }
    return n;
}

coll_mem_kind_t coll_pool_kind(const coll_pool_t *pool)
{
    return pool->be->kind;
}

uint8_t *coll_pool_base(const coll_pool_t *pool)
{
    return pool->base;
}

size_t coll_pool_size(const coll_pool_t *pool)
{
    return pool->size;
}

size_t coll_pool_free_bytes(const coll_pool_t *pool)
{
    return pool->size - pool->used;
}

static coll_status_t insert_block(coll_pool_t *pool, size_t at, pool_block_t b)
{
    if (pool->nblocks == pool->cap) {
        size_t cap = pool->cap ? pool->cap * 2 : 16;
        pool_block_t *blocks = realloc(pool->blocks, cap * sizeof(*blocks));
        if (blocks == NULL) {
            return COLL_ERR_NOMEM;
        }
        pool->blocks = blocks;
        pool->cap = cap;
    }
    memmove(&pool->blocks[at + 1], &pool->blocks[at], (pool->nblocks - at) * sizeof(b));
    pool->blocks[at] = b;
    pool->nblocks++;
    pool->used += b.len;
    if (charges_blocks(pool)) {
        pool->budget->used += b.len;
    }
    return COLL_OK;
}

/* Give the whole pages of the free gap around index @p at back to the backend (tmpfs frees
 * them, and a later touch maps zeroed pages again). Pages shared with a neighbouring block stay. */
static void punch_gap(coll_pool_t *pool, size_t at)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t start = at > 0 ? pool->blocks[at - 1].offset + pool->blocks[at - 1].len : 0;
    size_t end = at < pool->nblocks ? pool->blocks[at].offset : pool->size;

    start = (start + page - 1) / page * page;
    end = end / page * page;
    if (end > start) {
        pool->be->punch(pool->mem, start, end - start);
    }
}

static coll_status_t commit_to(coll_pool_t *pool, size_t end);

static void remove_block(coll_pool_t *pool, size_t at)
{
    pool->used -= pool->blocks[at].len;
    if (charges_blocks(pool)) {
        pool->budget->used -= pool->blocks[at].len;
    }
    memmove(&pool->blocks[at], &pool->blocks[at + 1], (pool->nblocks - at - 1) * sizeof(pool_block_t));
    pool->nblocks--;
    if (pool->on_demand && pool->be->punch != NULL) {
        punch_gap(pool, at);
    }
}

coll_status_t coll_pool_reserve(coll_pool_t *pool, size_t bytes)
{
    if (bytes > pool->size || pool->nblocks > 0) {
        return COLL_ERR_POOL_FULL;
    }
    if (bytes > 0 && pool->be->commit != NULL) {
        coll_status_t st = commit_to(pool, bytes);
        if (st != COLL_OK) {
            return st;
        }
    }
    return bytes == 0 ? COLL_OK : insert_block(pool, 0, (pool_block_t){0, bytes, pool});
}

/* Room left in the budget; the limit may have been lowered below what is charged (a reload):
 * then there is none. */
static size_t budget_room(const coll_pool_t *pool)
{
    const coll_pool_budget_t *b = pool->budget;

    if (b == NULL) {
        return SIZE_MAX;
    }
    return b->used > b->limit ? 0 : b->limit - b->used;
}

/* A committing backend backs the pool up to @p end, within the budget, before a block there. */
static coll_status_t commit_to(coll_pool_t *pool, size_t end)
{
    size_t grown = 0;
    coll_status_t st = pool->be->commit(pool->mem, end, pool->on_demand ? budget_room(pool)
                                                                        : SIZE_MAX, &grown);

    if (st == COLL_OK) {
        pool->held += grown;
        if (pool->on_demand) {
            pool->budget->used += grown;
        }
    }
    return st;
}

/* Place a block of @p len bytes for @p owner in the first gap that holds it. */
static coll_status_t place(coll_pool_t *pool, size_t len, const void *owner, size_t *offset_p)
{
    size_t gap_start = 0;

    for (size_t i = 0; i <= pool->nblocks; i++) {
        size_t gap_end = i < pool->nblocks ? pool->blocks[i].offset : pool->size;
        if (gap_end - gap_start >= len) {
            coll_status_t st = pool->be->commit != NULL ? commit_to(pool, gap_start + len)
                                                        : COLL_OK;
            if (st == COLL_OK) {
                st = insert_block(pool, i, (pool_block_t){gap_start, len, owner});
            }
            if (st == COLL_OK) {
                *offset_p = gap_start;
            }
            return st;
        }
        if (i < pool->nblocks) {
            gap_start = pool->blocks[i].offset + pool->blocks[i].len;
        }
    }
    return COLL_ERR_POOL_FULL;
}

coll_status_t coll_pool_alloc(coll_pool_t *pool, size_t bytes, const void *owner,
                              size_t *offset_p)
{
    size_t len;

    if (bytes == 0 || bytes > pool->size) {
        return bytes == 0 ? COLL_ERR_INVALID : COLL_ERR_POOL_FULL;
    }
    len = (bytes + COLL_POOL_ALIGN - 1) & ~(size_t)(COLL_POOL_ALIGN - 1);
    if (charges_blocks(pool) && len > budget_room(pool)) {
        return COLL_ERR_POOL_FULL;
    }
    return place(pool, len, owner, offset_p);
}

/* Index of the last block starting at or before @p offset, or nblocks when none. */
static size_t find_block(const coll_pool_t *pool, uint64_t offset)
{
    size_t lo = 0, hi = pool->nblocks;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pool->blocks[mid].offset <= offset) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo == 0 ? pool->nblocks : lo - 1;
}

coll_status_t coll_pool_free(coll_pool_t *pool, size_t offset, const void *owner)
{
    size_t i = find_block(pool, offset);
    if (i == pool->nblocks || pool->blocks[i].offset != offset || pool->blocks[i].owner != owner) {
        return COLL_ERR_NOT_IN_POOL;
    }
    remove_block(pool, i);
    return COLL_OK;
}

void coll_pool_free_owner(coll_pool_t *pool, const void *owner)
{
    size_t i = 0;
    while (i < pool->nblocks) {
        if (pool->blocks[i].owner == owner) {
            remove_block(pool, i);
        } else {
            i++;
        }
    }
}

int coll_pool_range_owned(const coll_pool_t *pool, uint64_t offset, uint64_t len,
                          const void *owner)
{
    size_t i = find_block(pool, offset);
    const pool_block_t *b;

    if (i == pool->nblocks) {
        return 0;
    }
    b = &pool->blocks[i];
    if (len == 0 && b->offset == offset && b->owner != owner && i > 0) {
        b = &pool->blocks[i - 1]; /* an empty range may sit at the end of the previous block */
    }
    /* offset >= b->offset holds by construction; compare lengths without overflow. */
    return b->owner == owner && offset - b->offset <= b->len &&
           len <= b->len - (offset - b->offset);
}
