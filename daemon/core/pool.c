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
    coll_pool_budget_t *budget; /* charged by coll_pool_set_budget(); NULL until then */
    int on_demand;              /* charged for its blocks rather than its size */
};

coll_status_t coll_pool_create(const char *name, size_t bytes, coll_pool_t **pool_p)
{
    return coll_pool_create_on(&coll_pool_memfd, name, bytes, pool_p);
}

coll_status_t coll_pool_create_on(const coll_pool_backend_t *be, const char *name, size_t bytes,
                                  coll_pool_t **pool_p)
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
    st = be->create(name, bytes, &pool->mem);
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

void coll_pool_set_budget(coll_pool_t *pool, coll_pool_budget_t *budget, int on_demand)
{
    COLL_ASSERT(pool->budget == NULL);
    pool->budget = budget;
    pool->on_demand = on_demand;
    budget->used += on_demand ? pool->used : pool->size;
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
        size_t charged = pool->on_demand ? pool->used : pool->size;
        COLL_ASSERT(pool->budget->used >= charged);
        pool->budget->used -= charged;
    }
    pool->be->destroy(pool->mem, pool->base, pool->size);
    free(pool->blocks);
    free(pool);
}

int coll_pool_fd(const coll_pool_t *pool)
{
    return pool->be->export_fd(pool->mem);
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
    if (pool->on_demand) {
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

static void remove_block(coll_pool_t *pool, size_t at)
{
    pool->used -= pool->blocks[at].len;
    if (pool->on_demand) {
        pool->budget->used -= pool->blocks[at].len;
    }
    memmove(&pool->blocks[at], &pool->blocks[at + 1], (pool->nblocks - at - 1) * sizeof(pool_block_t));
    pool->nblocks--;
    if (pool->on_demand) {
        punch_gap(pool, at);
    }
}

coll_status_t coll_pool_reserve(coll_pool_t *pool, size_t bytes)
{
    if (bytes > pool->size || pool->nblocks > 0) {
        return COLL_ERR_POOL_FULL;
    }
    return bytes == 0 ? COLL_OK : insert_block(pool, 0, (pool_block_t){0, bytes, pool});
}

coll_status_t coll_pool_alloc(coll_pool_t *pool, size_t bytes, const void *owner,
                              size_t *offset_p)
{
    size_t len, gap_start = 0;

    if (bytes == 0 || bytes > pool->size) {
        return bytes == 0 ? COLL_ERR_INVALID : COLL_ERR_POOL_FULL;
    }
    len = (bytes + COLL_POOL_ALIGN - 1) & ~(size_t)(COLL_POOL_ALIGN - 1);
    /* The limit may have been lowered below what is charged (a reload): then nothing fits. */
    if (pool->on_demand && (pool->budget->used > pool->budget->limit ||
                            len > pool->budget->limit - pool->budget->used)) {
        return COLL_ERR_POOL_FULL;
    }
    for (size_t i = 0; i <= pool->nblocks; i++) {
        size_t gap_end = i < pool->nblocks ? pool->blocks[i].offset : pool->size;
        if (gap_end - gap_start >= len) {
            coll_status_t st = insert_block(pool, i, (pool_block_t){gap_start, len, owner});
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
