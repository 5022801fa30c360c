/*
 * Compression on a communicator: its default spec, and the layouts (tensor shapes of a bucket)
 * the daemon needs for PowerSGD, registered with one round trip each.
 */
#include <stdlib.h>
#include <string.h>

#include "client/api/api.h"
#include "common/compression.h"

/* Registering a layout is local work for the daemon; this only bounds a daemon that hangs. */
#define COLL_LAYOUT_TIMEOUT_MS 30000

coll_status_t coll__compression_refused(coll_comm_t *c, const char *func,
                                        const coll_compression_t *z)
{
    if (coll__compression_check(z) == COLL_OK) {
        return COLL_OK;
    }
    coll__set_error(c, "%s: rank %d: invalid compression (method %d, ratio %g, rank %u, flags "
                    "%#x, warm-up %u): see coll_compression_t", func, c->rank, (int)z->method,
                    z->ratio, z->rank, z->flags, z->warmup);
    return COLL_ERR_INVALID;
}

coll_status_t coll_comm_set_compression(coll_comm_t *comm, const coll_compression_t *c)
{
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, c);
    pthread_mutex_lock(&comm->conn->lock);
    st = coll__compression_refused(comm, __func__, c);
    if (st == COLL_OK) {
        comm->compression = *c;
    }
    pthread_mutex_unlock(&comm->conn->lock);
    return st;
}

coll_status_t coll_comm_compression(coll_comm_t *comm, coll_compression_t *out)
{
    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, out);
    pthread_mutex_lock(&comm->conn->lock);
    *out = comm->compression;
    pthread_mutex_unlock(&comm->conn->lock);
    return COLL_OK;
}

static coll_status_t check_shapes(coll_comm_t *c, uint64_t layout, size_t n,
                                  const uint64_t *shapes)
{
    if (layout == 0 || n < 1 || n > COLL_LAYOUT_MAX_TENSORS) {
        coll__set_error(c, "coll_layout_register: layout %llu with %zu tensors (a non-zero "
                        "layout of 1 .. %d tensors)", (unsigned long long)layout, n,
                        COLL_LAYOUT_MAX_TENSORS);
        return COLL_ERR_INVALID;
    }
    for (size_t t = 0; t < n; t++) {
        uint64_t rows = shapes[2 * t], cols = shapes[2 * t + 1];
        if (rows == 0 || cols == 0 || rows > UINT64_MAX / 16 / cols) {
            coll__set_error(c, "coll_layout_register: tensor %zu of %llu x %llu", t,
                            (unsigned long long)rows, (unsigned long long)cols);
            return COLL_ERR_INVALID;
        }
    }
    return COLL_OK;
}

/* Send the Layout and wait for its answer. Lock held. */
static coll_status_t request_layout(coll_comm_t *c, uint64_t layout, size_t n,
                                    const uint64_t *shapes)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Layout l = COLL__WIRE__LAYOUT__INIT;
    coll_request_t *r = coll__req_new(c, COLL_REQ_LAYOUT);
    coll_status_t st;

    if (r == NULL) {
        return COLL_ERR_NOMEM;
    }
    l.req_id = r->id;
    l.layout = layout;
    l.n_shape = 2 * n;
    l.shape = (uint64_t *)shapes;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_LAYOUT;
    msg.layout = &l;
    st = coll__req_exchange(c, r, &msg, COLL_LAYOUT_TIMEOUT_MS);
    if (st == COLL_OK) {
        st = r->status;
        coll__req_release(r);
    }
    return st;
}

coll_status_t coll_layout_register(coll_comm_t *comm, uint64_t layout, size_t ntensors,
                                   const uint64_t *shapes)
{
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, shapes);
    pthread_mutex_lock(&comm->lock);
    st = check_shapes(comm, layout, ntensors, shapes);
    if (st == COLL_OK) {
        st = request_layout(comm, layout, ntensors, shapes);
    }
    pthread_mutex_unlock(&comm->lock);
    return st;
}
