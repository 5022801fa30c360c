/*
 * Allocations in the job's device pools (collective.h coll_mem_alloc_on(), coll_mem_query()):
 * the device layer opened for the first one, the device named to the daemon by its UUID, the
 * reply's chunks mapped as it is dispatched (devmap.c), and this rank's list of them for
 * coll_mem_free() and coll_mem_query().
 */
#include <stdlib.h>
#include <string.h>

#include "client/api/api.h"
#include "client/devmap/devmap.h"
#include "kernels/mem_kind.h"

_Static_assert((int)COLL_MEMORY_HOST == (int)COLL_MEM_HOST &&
                   (int)COLL_MEMORY_CUDA == (int)COLL_MEM_CUDA,
               "the public memory kinds are the daemon's");

/* A layer by name, as the user sets it. */
static const char *layer_words(const char *layer)
{
    return strcmp(layer, "fake") == 0   ? "the fake (COLL_DEVICE_FAKE set)"
           : strcmp(layer, "cuda") == 0 ? "the CUDA driver's (COLL_DEVICE_FAKE unset)"
                                        : layer;
}

/* COLL_ERR_UNSUPPORTED when this process selected another device layer than its daemon (the
 * join reply's), which would refuse the allocation, or fail it as "no driver" on one side. */
static coll_status_t same_layer(coll_comm_t *c)
{
    const char *mine = coll_dev_layer();

    if (c->daemon_layer[0] == '\0' || strcmp(mine, c->daemon_layer) == 0) {
        return COLL_OK;
    }
    coll__set_error(c, "rank %d: its device layer is %s, its daemon's %s: set COLL_DEVICE_FAKE "
                    "alike for the daemon and its ranks (this process: %s; the daemon: %s)",
                    c->rank, layer_words(mine), layer_words(c->daemon_layer), coll_dev_status(),
                    c->daemon_devices);
    return COLL_ERR_UNSUPPORTED;
}

/* The device layer and what device @p device of this process is. */
static coll_status_t open_device(coll_comm_t *c, int device, coll_dev_info_t *info)
{
    const coll_dev_ops_t *ops;
    coll_status_t st;

    if ((st = same_layer(c)) != COLL_OK) {
        return st;
    }
    if (coll_dev_open(&ops) != COLL_OK) {
        coll__set_error(c, "rank %d: no device memory in this process: %s", c->rank,
                        coll_dev_status());
        return COLL_ERR_UNSUPPORTED;
    }
    if (device >= ops->count()) {
        coll__set_error(c, "rank %d: no such device: CUDA device %d, of %d in this process (%s)",
                        c->rank, device, ops->count(), coll_dev_status());
        return COLL_ERR_UNSUPPORTED;
    }
    if ((st = ops->info(device, info)) != COLL_OK) {
        coll__set_error(c, "rank %d: device %d: %s", c->rank, device, coll_dev_error());
        return st;
    }
    if (c->devmem == NULL) {
        if ((c->devmem = calloc(1, sizeof(*c->devmem))) == NULL) {
            return COLL_ERR_NOMEM;
        }
        c->devmem->ops = ops;
        for (int i = 0; i < COLL_DEV_MAX; i++) {
            c->devmem->map[i].device = -1;
        }
    }
    return COLL_OK;
}

/* Ask the daemon; the reply's chunks are mapped when it is dispatched (devmap.c). */
static coll_status_t ask(coll_comm_t *c, size_t bytes, int device, const coll_dev_info_t *info,
                         coll_devalloc_t *a)
{
    Coll__Wire__MemAlloc m = COLL__WIRE__MEM_ALLOC__INIT;

    m.bytes = bytes;
    m.kind = COLL_MEM_CUDA;
    m.device = (uint32_t)device;
    m.device_uuid.data = (uint8_t *)info->uuid;
    m.device_uuid.len = COLL_DEV_UUID_BYTES;
    m.layer = (char *)c->devmem->ops->name;
    a->bytes = bytes;
    return coll__mem_ask(c, &m, &a->pool, &a->offset);
}

static coll_status_t remember(struct coll_devmem *dm, const coll_devalloc_t *a)
{
    if (dm->nallocs == dm->cap) {
        size_t cap = dm->cap ? 2 * dm->cap : 16;
        coll_devalloc_t *p = realloc(dm->allocs, cap * sizeof(*p));
        if (p == NULL) {
            return COLL_ERR_NOMEM;
        }
        dm->allocs = p;
        dm->cap = cap;
    }
    dm->allocs[dm->nallocs++] = *a;
    return COLL_OK;
}

/* At the first device allocation: the stream words of device requests (devmap/sync.c). */
static coll_status_t sync_words(coll_comm_t *c)
{
    uint64_t off = 0;
    coll_status_t st;

    if (c->sync != NULL) {
        return COLL_OK;
    }
    st = coll__mem_alloc(c, COLL_SYNC_WORDS_BYTES, &off);
    return coll__sync_open(c, c->devmem->ops, st, off);
}

static coll_status_t alloc_device(coll_comm_t *c, size_t bytes, int device, void **ptr_p)
{
    coll_dev_info_t info;
    coll_devalloc_t a;
    coll_status_t st = open_device(c, device, &info);

    if (st == COLL_OK) {
        st = ask(c, bytes, device, &info, &a);
    }
    if (st == COLL_OK) {
        st = remember(c->devmem, &a);
    }
    if (st == COLL_OK) {
        *ptr_p = coll__devmap_ptr(c, a.pool, a.offset);
        st = sync_words(c);
    }
    return st;
}

coll_status_t coll_mem_alloc_on(coll_comm_t *comm, size_t bytes, coll_memory_t kind, int device,
                                void **ptr_p)
{
    coll_comm_t *c;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, ptr_p);
    c = comm->conn;
    if (kind == COLL_MEMORY_HOST && device == 0) {
        return coll_mem_alloc(comm, bytes, ptr_p);
    }
    if (kind != COLL_MEMORY_CUDA || device < 0 || bytes == 0) {
        coll__set_error(c, "coll_mem_alloc_on of %zu bytes of memory kind %d on device %d: %s",
                        bytes, (int)kind, device, bytes == 0 ? "0 bytes" : "no such kind or "
                        "device (host memory is on device 0)");
        return COLL_ERR_INVALID;
    }
    pthread_mutex_lock(&c->lock);
    st = alloc_device(c, bytes, device, ptr_p);
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* The device allocation @p ptr lies in (from its start only with @p start), or -1. */
static long find_alloc(const coll_comm_t *c, const void *ptr, int start, uint64_t *offset_p)
{
    uint32_t pool;
    uint64_t off;

    if (c->devmem == NULL || !coll__devmap_find(c, ptr, 0, &pool, &off)) {
        return -1;
    }
    for (size_t i = 0; i < c->devmem->nallocs; i++) {
        const coll_devalloc_t *a = &c->devmem->allocs[i];
        if (a->pool == pool && (start ? off == a->offset
                                      : off >= a->offset && off - a->offset < a->bytes)) {
            *offset_p = off;
            return (long)i;
        }
    }
    return -1;
}

coll_status_t coll__devmem_free(coll_comm_t *c, void *ptr)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__MemFree f = COLL__WIRE__MEM_FREE__INIT;
    uint64_t off;
    long i = find_alloc(c, ptr, 1, &off);
    coll_devalloc_t a;

    if (i < 0) {
        return COLL_ERR_NOT_IN_POOL;
    }
    a = c->devmem->allocs[i];
    if (coll__req_using(c, a.pool, a.offset, a.bytes) != NULL) {
        coll__set_error(c, "coll_mem_free: rank %d's device buffer at %p is in use by a pending "
                        "request; free it once the request completed", c->rank, ptr);
        return COLL_ERR_BUSY;
    }
    c->devmem->allocs[i] = c->devmem->allocs[--c->devmem->nallocs];
    f.offset = a.offset;
    f.pool = a.pool;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    msg.free = &f;
    return coll__send(c, &msg);
}

coll_status_t coll__devmem_query(const coll_comm_t *c, const void *ptr, coll_mem_info_t *info)
{
    uint64_t off;
    long i = find_alloc(c, ptr, 0, &off);
    uint32_t pool;

    if (i < 0) {
        return COLL_ERR_NOT_IN_POOL;
    }
    pool = c->devmem->allocs[i].pool;
    info->kind = COLL_MEMORY_CUDA;
    info->device = c->devmem->map[pool - 1].device;
    info->offset = off;
    info->pool_base = coll__devmap_ptr(c, pool, 0);
    return COLL_OK;
}

/* The host allocation of this rank that @p ptr lies in. */
static int query_host(const coll_comm_t *c, const void *ptr, coll_mem_info_t *info)
{
    const uint8_t *p = ptr;

    for (size_t i = 0; c->pool != NULL && i < c->nallocs; i++) {
        const uint8_t *start = c->pool + c->allocs[i].offset;
        if (p >= start && (uint64_t)(p - start) < c->allocs[i].bytes) {
            info->kind = COLL_MEMORY_HOST;
            info->device = 0;
            info->offset = (uint64_t)(p - c->pool);
            info->pool_base = c->pool;
            return 1;
        }
    }
    return 0;
}

coll_status_t coll_mem_query(coll_comm_t *comm, const void *ptr, coll_mem_info_t *info)
{
    coll_comm_t *c;
    coll_status_t st = COLL_OK;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, info);
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    if (!query_host(c, ptr, info) && (st = coll__devmem_query(c, ptr, info)) != COLL_OK) {
        coll__set_error(c, "coll_mem_query: %p is not inside an allocation of rank %d", ptr,
                        c->rank);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}
