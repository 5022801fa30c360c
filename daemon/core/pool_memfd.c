/*
 * The memfd backend of a pool (pool.h): a sealed-size memfd that the daemon maps and sends to
 * every local rank (SCM_RIGHTS), sparse on tmpfs, whose freed pages are punched out.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/log.h"
#include "core/pool.h"

/* The backend's state: the file and its size. */
typedef struct {
    int fd;
    size_t bytes;
} memfd_t;

static coll_status_t memfd_create_pool(int device, const char *name, size_t bytes, void **mem_p)
{
    memfd_t *m = malloc(sizeof(*m));

    if (m == NULL) {
        return COLL_ERR_NOMEM;
    }
    m->fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (m->fd < 0) {
        coll_error(COLL_SUB_POOL, "memfd_create(%s): %m", name);
        goto err_free;
    }
    if (ftruncate(m->fd, (off_t)bytes) < 0) {
        coll_error(COLL_SUB_POOL, "ftruncate of pool %s to %zu bytes: %m", name, bytes);
        goto err_close;
    }
    /* Clients map the same file: sealing the size means none of them can shrink it under us. */
    if (fcntl(m->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        coll_error(COLL_SUB_POOL, "sealing pool %s: %m", name);
        goto err_close;
    }
    m->bytes = bytes;
    *mem_p = m;
    return COLL_OK;

err_close:
    close(m->fd);
err_free:
    free(m);
    return COLL_ERR_NOMEM;
}

static coll_status_t memfd_map(void *mem, size_t bytes, uint8_t **base_p)
{
    const memfd_t *m = mem;
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);

    if (base == MAP_FAILED) {
        coll_error(COLL_SUB_POOL, "mmap of a pool (%zu bytes): %m", bytes);
        return COLL_ERR_NOMEM;
    }
    *base_p = base;
    return COLL_OK;
}

static void memfd_punch(void *mem, size_t offset, size_t len)
{
    const memfd_t *m = mem;

    if (fallocate(m->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)offset,
                  (off_t)len) < 0) {
        coll_warn(COLL_SUB_POOL, "giving back %zu bytes of a pool (fallocate): %m; they stay "
                  "taken until the job ends", len);
    }
}

/* One chunk, the whole file. */
static int memfd_chunk(const void *mem, size_t i, coll_pool_chunk_t *c)
{
    const memfd_t *m = mem;

    if (i > 0) {
        return 0;
    }
    *c = (coll_pool_chunk_t){0, m->bytes, m->fd};
    return 1;
}

static void memfd_destroy(void *mem, uint8_t *base, size_t bytes)
{
    memfd_t *m = mem;

    if (base != NULL) {
        munmap(base, bytes);
    }
    close(m->fd);
    free(m);
}

const coll_pool_backend_t coll_pool_memfd = {
    .name = "memfd", .kind = COLL_MEM_HOST,
    .create = memfd_create_pool,
    .map = memfd_map,
    .commit = NULL, /* tmpfs takes a page when it is first written */
    .punch = memfd_punch,
    .chunk = memfd_chunk,
    .destroy = memfd_destroy,
};
