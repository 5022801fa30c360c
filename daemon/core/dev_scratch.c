/*
 * Scratch memory on a device (dev_scratch.h): created, reserved and mapped as a pool's chunk is
 * (core/pool_device.c), but in one piece and only in the daemon.
 */
#include "core/dev_scratch.h"

#include <string.h>

#include "common/assert.h"

/* Map @p mem of @p bytes into a range of its own on @p dev. */
static coll_status_t map(const coll_dev_ops_t *ops, int dev, size_t bytes, size_t gran,
                         coll_dev_mem_t mem, uint64_t *va_p)
{
    uint64_t va;
    coll_status_t st = ops->va_reserve(dev, bytes, gran, &va);

    if (st != COLL_OK) {
        return st;
    }
    if ((st = ops->map(dev, va, bytes, mem)) != COLL_OK) {
        ops->va_free(va, bytes);
        return st;
    }
    *va_p = va;
    return COLL_OK;
}

coll_status_t coll_dev_scratch_alloc(const coll_dev_ops_t *ops, int dev,
                                     coll_pool_budget_t *budget, size_t bytes,
                                     coll_dev_scratch_t *s)
{
    coll_dev_scratch_t n = {.ops = ops, .budget = budget};
    size_t gran;
    coll_status_t st = ops->granularity(dev, &gran);

    if (st != COLL_OK) {
        return st;
    }
    n.bytes = (bytes + gran - 1) / gran * gran;
    if (budget->used > budget->limit || n.bytes > budget->limit - budget->used) {
        return coll__dev_fail(COLL_ERR_NOMEM, "scratch of %zu bytes on device %d: beyond the "
                              "device's budget (device_pool_budget)", n.bytes, dev);
    }
    if ((st = ops->mem_create(dev, n.bytes, &n.mem)) != COLL_OK) {
        return st;
    }
    if ((st = map(ops, dev, n.bytes, gran, n.mem, &n.va)) != COLL_OK) {
        ops->mem_release(n.mem);
        return st;
    }
    budget->used += n.bytes;
    *s = n;
    return COLL_OK;
}

void coll_dev_scratch_free(coll_dev_scratch_t *s)
{
    if (s->va == 0) {
        return;
    }
    s->ops->unmap(s->va, s->bytes);
    s->ops->va_free(s->va, s->bytes);
    s->ops->mem_release(s->mem);
    COLL_ASSERT(s->budget->used >= s->bytes);
    s->budget->used -= s->bytes;
    memset(s, 0, sizeof(*s));
}
