/*
 * Buffers in the job's shared pool. The daemon allocates (it checks every buffer a collective
 * names against the rank's allocations); the library keeps a copy of the list to answer
 * coll_mem_free() without a round trip. Allocations belong to the connection: every
 * communicator split from the world uses the same pool and may free them.
 */
#include <stdlib.h>

#include "client/api/api.h"
#include "client/devmap/devmap.h"
#include "proto/desc.h"

/* An allocation answer is local work for the daemon; this only bounds a daemon that hangs. */
#define COLL_ALLOC_TIMEOUT_MS 30000

static coll_status_t remember(coll_comm_t *c, uint64_t offset, uint64_t bytes)
{
    if (c->nallocs == c->cap_allocs) {
        size_t cap = c->cap_allocs ? 2 * c->cap_allocs : 16;
        coll_alloc_t *a = realloc(c->allocs, cap * sizeof(*a));
        if (a == NULL) {
            return COLL_ERR_NOMEM;
        }
        c->allocs = a;
        c->cap_allocs = cap;
    }
    c->allocs[c->nallocs++] = (coll_alloc_t){.offset = offset, .bytes = bytes};
    return COLL_OK;
}

coll_status_t coll__mem_ask(coll_comm_t *c, Coll__Wire__MemAlloc *m, uint32_t *pool_p,
                            uint64_t *offset_p)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    coll_request_t *r = coll__req_new(c, COLL_REQ_ALLOC);
    coll_status_t st;

    if (r == NULL) {
        return COLL_ERR_NOMEM;
    }
    m->req_id = r->id;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_ALLOC;
    msg.alloc = m;
    st = coll__req_exchange(c, r, &msg, COLL_ALLOC_TIMEOUT_MS);
    if (st == COLL_OK) {
        st = r->status;
        *pool_p = r->pool;
        *offset_p = r->offset;
        coll__req_release(r);
    }
    return st;
}

coll_status_t coll__mem_alloc(coll_comm_t *c, size_t bytes, uint64_t *offset_p)
{
    Coll__Wire__MemAlloc m = COLL__WIRE__MEM_ALLOC__INIT;
    uint32_t pool;

    m.bytes = bytes;
    return coll__mem_ask(c, &m, &pool, offset_p);
}

coll_status_t coll_mem_alloc(coll_comm_t *comm, size_t bytes, void **ptr_p)
{
    coll_comm_t *c;
    uint64_t offset = 0;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, ptr_p);
    c = comm->conn;
    if (bytes == 0) {
        coll__set_error(c, "coll_mem_alloc of 0 bytes");
        return COLL_ERR_INVALID;
    }
    pthread_mutex_lock(&c->lock);
    st = coll__mem_alloc(c, bytes, &offset);
    if (st == COLL_OK) {
        st = remember(c, offset, bytes);
    }
    if (st == COLL_OK) {
        *ptr_p = c->pool + offset;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Allocation @p i goes back to the daemon, unless a pending request still uses it: the
 * operation would then write into whatever the pool gives out next. */
static coll_status_t release(coll_comm_t *c, size_t i)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__MemFree f = COLL__WIRE__MEM_FREE__INIT;
    const coll_alloc_t *a = &c->allocs[i];
    const coll_request_t *r = coll__req_using(c, 0, a->offset, a->bytes);
    char nm[48];

    if (r != NULL) {
        coll_desc_name(&(coll_desc_t){.coll = (uint16_t)r->coll, .key = r->key}, nm, sizeof(nm));
        coll__set_error(c, "coll_mem_free: rank %d's buffer at %p is in use by its pending %s; "
                        "free it once the request completed", c->rank,
                        (void *)(c->pool + a->offset), nm);
        return COLL_ERR_BUSY;
    }
    f.offset = a->offset;
    c->allocs[i] = c->allocs[--c->nallocs];
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    msg.free = &f;
    return coll__send(c, &msg);
}

coll_status_t coll_mem_free(coll_comm_t *comm, void *ptr)
{
    coll_comm_t *c;
    coll_status_t st = COLL_ERR_NOT_IN_POOL;

    COLL_ARG_CHECK(NULL, comm);
    if (ptr == NULL) { /* as free(NULL) */
        return COLL_OK;
    }
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->nallocs; i++) {
        if (c->pool + c->allocs[i].offset == (uint8_t *)ptr) {
            st = release(c, i);
            break;
        }
    }
    if (st == COLL_ERR_NOT_IN_POOL && (st = coll__devmem_free(c, ptr)) == COLL_ERR_NOT_IN_POOL) {
        coll__set_error(c, "coll_mem_free: %p is not an allocation of this rank", ptr);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}
