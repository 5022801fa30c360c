/*
 * This rank's mappings of the job's device pools (devmap.h): one range of device addresses per
 * pool, reserved at its first reply, and the pool's chunks imported from the fds a reply
 * carries and mapped into it in order (the driver's virtual memory management, as NVIDIA's
 * memMapIPCDrv sample imports what another process exported). The handles are released once
 * mapped: a chunk's memory lives while the mapping does, until the connection closes.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/devmap/devmap.h"
#include "client/base/base.h"
#include "client/link/link.h"

/* Free an allocation the daemon made that this rank could not map: it stays nobody's
 * otherwise until the rank leaves. */
static void give_back(coll_comm_t *c, const Coll__Wire__MemAllocReply *m)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__MemFree f = COLL__WIRE__MEM_FREE__INIT;

    f.offset = m->offset;
    f.pool = m->pool;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    msg.free = &f;
    (void)coll__send(c, &msg);
}

/* The pool's range, reserved at its first reply. */
static coll_status_t reserve(coll_comm_t *c, coll_devmap_t *map, const Coll__Wire__MemAllocReply *m)
{
    const coll_dev_ops_t *ops = c->devmem->ops;
    size_t gran = 0;
    coll_status_t st;

    if (map->device >= 0) {
        if (map->bytes != m->pool_bytes || map->device != (int)m->device) {
            coll__set_error(c, "collectived named device pool %u with %llu bytes on device %u, "
                            "mapped with %zu bytes on device %d", m->pool,
                            (unsigned long long)m->pool_bytes, m->device, map->bytes,
                            map->device);
            return COLL_ERR_PROTOCOL;
        }
        return COLL_OK;
    }
    if ((st = ops->granularity((int)m->device, &gran)) != COLL_OK ||
        (st = ops->va_reserve((int)m->device, m->pool_bytes, gran, &map->va)) != COLL_OK) {
        coll__set_error(c, "rank %d: reserving %llu bytes of addresses for the device pool: %s",
                        c->rank, (unsigned long long)m->pool_bytes, coll_dev_error());
        return st;
    }
    map->device = (int)m->device;
    map->bytes = m->pool_bytes;
    return COLL_OK;
}

/* Import and map chunk @p ch from @p fd where the last one ended. */
static coll_status_t map_chunk(coll_comm_t *c, coll_devmap_t *map, const Coll__Wire__PoolChunk *ch,
                               int fd)
{
    const coll_dev_ops_t *ops = c->devmem->ops;
    coll_dev_mem_t mem = 0;
    coll_status_t st;

    if (fd < 0 || ch->offset != map->mapped || map->nchunks == COLL_FRAME_MAX_FDS) {
        coll__set_error(c, "collectived sent a device pool chunk at %llu without its descriptor "
                        "or out of order (%zu bytes mapped)", (unsigned long long)ch->offset,
                        map->mapped);
        return COLL_ERR_PROTOCOL;
    }
    if ((st = ops->mem_import(map->device, fd, &mem)) != COLL_OK ||
        (st = ops->map(map->device, map->va + ch->offset, ch->bytes, mem)) != COLL_OK) {
        coll__set_error(c, "rank %d: mapping %llu bytes of the device pool on device %d: %s",
                        c->rank, (unsigned long long)ch->bytes, map->device, coll_dev_error());
        ops->mem_release(mem);
        return st;
    }
    ops->mem_release(mem);
    map->mapped += ch->bytes;
    map->chunk_end[map->nchunks++] = map->mapped;
    return COLL_OK;
}

static coll_status_t map_reply(coll_comm_t *c, const Coll__Wire__MemAllocReply *m, const int *fds)
{
    coll_devmap_t *map;
    coll_status_t st;

    if (c->devmem == NULL || m->pool == 0 || m->kind != COLL_MEMORY_CUDA) {
        coll__set_error(c, "collectived answered a device allocation nobody asked for");
        return COLL_ERR_PROTOCOL;
    }
    map = &c->devmem->map[m->pool - 1];
    if ((st = reserve(c, map, m)) != COLL_OK) {
        return st;
    }
    for (size_t i = 0; i < m->n_chunks; i++) {
        if ((st = map_chunk(c, map, m->chunks[i], fds[i])) != COLL_OK) {
            return st;
        }
    }
    if (m->offset > map->mapped || m->bytes > map->mapped - m->offset) {
        coll__set_error(c, "collectived returned a device allocation [%llu, +%llu) outside the "
                        "%zu bytes of its pool this rank mapped", (unsigned long long)m->offset,
                        (unsigned long long)m->bytes, map->mapped);
        return COLL_ERR_PROTOCOL;
    }
    return COLL_OK;
}

coll_status_t coll__devmap_reply(coll_comm_t *c, const Coll__Wire__MemAllocReply *m)
{
    int fds[COLL_FRAME_MAX_FDS];
    coll_status_t st = COLL_OK;

    for (size_t i = 0; i < m->n_chunks; i++) {
        fds[i] = coll__take_fd(c);
    }
    if (m->status == COLL_OK && (st = map_reply(c, m, fds)) != COLL_OK && m->pool != 0) {
        give_back(c, m);
    }
    for (size_t i = 0; i < m->n_chunks; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    return st;
}

int coll__devmap_find(const coll_comm_t *c, const void *p, size_t len, uint32_t *pool_p,
                      uint64_t *offset_p)
{
    uint64_t a = (uint64_t)(uintptr_t)p;

    for (uint32_t i = 0; c->devmem != NULL && i < COLL_DEV_MAX; i++) {
        const coll_devmap_t *map = &c->devmem->map[i];
        if (map->device >= 0 && a >= map->va && a - map->va <= map->mapped &&
            len <= map->mapped - (a - map->va)) {
            *pool_p = i + 1;
            *offset_p = a - map->va;
            return 1;
        }
    }
    return 0;
}

void *coll__devmap_ptr(const coll_comm_t *c, uint32_t pool, uint64_t offset)
{
    return (void *)(uintptr_t)(c->devmem->map[pool - 1].va + offset);
}

void coll__devmap_close(coll_comm_t *c)
{
    struct coll_devmem *dm = c->devmem;

    if (dm == NULL) {
        return;
    }
    for (int i = 0; i < COLL_DEV_MAX; i++) {
        coll_devmap_t *map = &dm->map[i];
        for (size_t k = 0; map->device >= 0 && k < map->nchunks; k++) {
            size_t start = k > 0 ? map->chunk_end[k - 1] : 0;
            dm->ops->unmap(map->va + start, map->chunk_end[k] - start);
        }
        if (map->device >= 0) {
            dm->ops->va_free(map->va, map->bytes);
        }
    }
    free(dm->allocs);
    free(dm);
    c->devmem = NULL;
}
