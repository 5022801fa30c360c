/*
 * The device backend of a pool (pool.h): a range of device addresses reserved at create, and
 * physical allocations (the device layer's, device/dev.h) mapped behind it as the pool's
 * allocations reach further, each exported once as a file descriptor that travels to the
 * local ranks (SCM_RIGHTS), which import and map it at the same offset of a range of their own.
 *
 * Why chunks and not one allocation: the driver's physical memory is taken whole when it is
 * created (no sparse allocation, unlike a memfd on tmpfs), so a pool of the device's budget
 * made at once would hold that memory for the job's life whatever it allocates. The range costs
 * nothing; only what is mapped is memory. A chunk grows the pool by what the allocation needs,
 * and by at least an eighth of what the pool holds, so a pool of n bytes has O(log n) chunks,
 * all of which fit one reply to a rank (COLL_FRAME_MAX_FDS).
 *
 * Nothing is given back before the pool is destroyed: every local rank maps every chunk it was
 * sent, and a chunk's memory lives while any mapping of it does, so unmapping it here would
 * return nothing to the device. Freed allocations are reused by the pool's allocator.
 */
#include <stdlib.h>
#include <unistd.h>

#include "base/log.h"
#include "core/pool.h"
#include "device/dev.h"
#include "proto/frame.h"

typedef struct {
    size_t offset, bytes;
    coll_dev_mem_t mem;
    int fd; /* exported once; the ranks get duplicates */
} dev_chunk_t;

/* The backend's state. */
typedef struct {
    const coll_dev_ops_t *ops;
    int dev;
    size_t gran;       /* the device's granularity: every size and offset is a multiple */
    size_t bytes;      /* the reservation */
    uint64_t va;       /* its start, 0 until mapped */
    size_t committed;  /* [0, committed) is backed */
    uint32_t peers;    /* bit d: device d was granted access to every chunk (device_grant()) */
    size_t nchunks;
    dev_chunk_t chunks[COLL_FRAME_MAX_FDS];
} devpool_t;

static size_t round_up(size_t n, size_t to)
{
    return (n + to - 1) / to * to;
}

static coll_status_t device_create(int device, const char *name, size_t bytes, void **mem_p)
{
    const coll_dev_ops_t *ops;
    devpool_t *d;
    coll_status_t st = coll_dev_open(&ops);
    size_t gran = 0;

    if (st != COLL_OK) {
        coll_error(COLL_SUB_POOL, "device pool %s: %s", name, coll_dev_status());
        return st;
    }
    if ((st = ops->granularity(device, &gran)) != COLL_OK) {
        coll_error(COLL_SUB_POOL, "device pool %s on device %d: %s", name, device,
                   coll_dev_error());
        return st;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    d->ops = ops;
    d->dev = device;
    d->gran = gran;
    d->bytes = round_up(bytes, gran);
    *mem_p = d;
    return COLL_OK;
}

static coll_status_t device_map(void *mem, size_t bytes, uint8_t **base_p)
{
    devpool_t *d = mem;
    coll_status_t st = d->ops->va_reserve(d->dev, d->bytes, d->gran, &d->va);

    if (st != COLL_OK) {
        coll_error(COLL_SUB_POOL, "reserving %zu bytes of addresses on device %d: %s", d->bytes,
                   d->dev, coll_dev_error());
        d->va = 0;
        return st;
    }
    *base_p = (uint8_t *)(uintptr_t)d->va;
    return COLL_OK;
}

/* How far to grow for [0, end): what it needs, else an eighth of what is held, within the
 * range; only what it needs when the room allows no more. 0: no room. */
static size_t growth(const devpool_t *d, size_t end, size_t room)
{
    size_t need = round_up(end - d->committed, d->gran);
    size_t want = round_up(d->committed / 8, d->gran);

    want = want > need ? want : need;
    if (want > d->bytes - d->committed) {
        want = d->bytes - d->committed;
    }
    return want <= room ? want : need <= room ? need : 0;
}

/* Grant every device of @p peers access to chunk @p c. */
static coll_status_t grant_chunk(const devpool_t *d, const dev_chunk_t *c, uint32_t peers)
{
    coll_status_t st = COLL_OK;

    for (int p = 0; p < COLL_DEV_MAX && st == COLL_OK; p++) {
        if (peers & (1u << p)) {
            st = d->ops->grant(p, d->va + c->offset, c->bytes);
        }
    }
    return st;
}

/* Create, export and map one chunk of @p bytes at the end of what is backed, for the pool's
 * device and its peers. */
static coll_status_t add_chunk(devpool_t *d, size_t bytes)
{
    dev_chunk_t *c = &d->chunks[d->nchunks];
    coll_status_t st;
    int mapped = 0;

    c->offset = d->committed;
    c->bytes = bytes;
    c->mem = 0;
    c->fd = -1;
    if ((st = d->ops->mem_create(d->dev, bytes, &c->mem)) != COLL_OK ||
        (st = d->ops->mem_export(c->mem, &c->fd)) != COLL_OK ||
        (st = d->ops->map(d->dev, d->va + c->offset, bytes, c->mem)) != COLL_OK ||
        (mapped = 1, st = grant_chunk(d, c, d->peers)) != COLL_OK) {
        coll_error(COLL_SUB_POOL, "growing a pool on device %d by %zu bytes: %s", d->dev, bytes,
                   coll_dev_error());
        if (mapped) {
            d->ops->unmap(d->va + c->offset, bytes);
        }
        if (c->fd >= 0) {
            close(c->fd);
        }
        d->ops->mem_release(c->mem);
        return st;
    }
    d->nchunks++;
    d->committed += bytes;
    return COLL_OK;
}

static coll_status_t device_commit(void *mem, size_t end, size_t room, size_t *grown_p)
{
    devpool_t *d = mem;
    size_t bytes;
    coll_status_t st;

    *grown_p = 0;
    if (end <= d->committed) {
        return COLL_OK;
    }
    if (end > d->bytes || (bytes = growth(d, end, room)) == 0) {
        return COLL_ERR_POOL_FULL;
    }
    if (d->nchunks == COLL_FRAME_MAX_FDS) {
        coll_warn(COLL_SUB_POOL, "a pool on device %d has %u chunks, the most one reply to a "
                  "rank carries: it does not grow further", d->dev, COLL_FRAME_MAX_FDS);
        return COLL_ERR_POOL_FULL;
    }
    st = add_chunk(d, bytes);
    if (st == COLL_OK) {
        *grown_p = bytes;
    }
    return st;
}

static int device_chunk(const void *mem, size_t i, coll_pool_chunk_t *c)
{
    const devpool_t *d = mem;

    if (i >= d->nchunks) {
        return 0;
    }
    *c = (coll_pool_chunk_t){d->chunks[i].offset, d->chunks[i].bytes, d->chunks[i].fd};
    return 1;
}

static coll_status_t device_grant(void *mem, int peer)
{
    devpool_t *d = mem;
    coll_status_t st = COLL_OK;

    if (peer < 0 || peer >= COLL_DEV_MAX) {
        return coll__dev_fail(COLL_ERR_INVALID, "grant of a pool on device %d to device %d: "
                              "no such device", d->dev, peer);
    }
    for (size_t i = 0; i < d->nchunks && st == COLL_OK; i++) {
        st = grant_chunk(d, &d->chunks[i], 1u << peer);
    }
    if (st != COLL_OK) {
        coll_error(COLL_SUB_POOL, "granting device %d access to a pool on device %d: %s", peer,
                   d->dev, coll_dev_error());
        return st;
    }
    d->peers |= 1u << peer;
    return COLL_OK;
}

static void device_destroy(void *mem, uint8_t *base, size_t bytes)
{
    devpool_t *d = mem;

    for (size_t i = 0; i < d->nchunks; i++) {
        d->ops->unmap(d->va + d->chunks[i].offset, d->chunks[i].bytes);
        d->ops->mem_release(d->chunks[i].mem);
        close(d->chunks[i].fd);
    }
    if (base != NULL) {
        d->ops->va_free(d->va, d->bytes);
    }
    free(d);
}

const coll_pool_backend_t coll_pool_device = {
    .name = "device", .kind = COLL_MEM_CUDA,
    .create = device_create,
    .map = device_map,
    .commit = device_commit,
    .punch = NULL, /* the ranks map every chunk until the job ends */
    .chunk = device_chunk,
    .destroy = device_destroy,
    .grant = device_grant,
};
