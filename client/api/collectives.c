/*
 * The public collectives and point-to-point transfers: what each call reads and writes on this
 * rank (its spec, submitted by submit.c), the all-to-all's count table, the blocking allreduce.
 */
#include <stdlib.h>

#include "client/api/api.h"
#include "client/api/spec.h"
#include "proto/a2a.h"

static coll_status_t submit(coll_comm_t *c, const spec_t *s, const coll_op_params_t *params,
                            coll_request_t **req_p)
{
    return coll__submit_spec(c, s, NULL, params, req_p);
}

/* The allreduce of public function @p func (the one the caller called, for the messages). */
static coll_status_t allreduce(const char *func, coll_comm_t *comm, const void *sendbuf,
                               void *recvbuf, size_t count, coll_dtype_t dtype, coll_redop_t op,
                               const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = func, .coll = COLL_KIND_ALLREDUCE, .sendbuf = sendbuf,
                .recvbuf = recvbuf, .count = count, .send_elems = count, .recv_elems = count,
                .dtype = dtype, .redop = op, .peer = -1};

    return submit(comm, &s, params, req_p);
}

coll_status_t coll_allreduce_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, coll_dtype_t dtype, coll_redop_t op,
                                   const coll_op_params_t *params, coll_request_t **req_p)
{
    COLL_ARG_CHECK(NULL, comm);
    return allreduce(__func__, comm, sendbuf, recvbuf, count, dtype, op, params, req_p);
}

coll_status_t coll_reduce_scatter_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, coll_dtype_t dtype, coll_redop_t op,
                                        const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_REDUCE_SCATTER, .sendbuf = sendbuf,
                .recvbuf = recvbuf, .count = recvcount, .recv_elems = recvcount, .dtype = dtype,
                .redop = op, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    if (coll__blocks(comm, __func__, recvcount, &s.send_elems) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_allgather_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t sendcount, coll_dtype_t dtype,
                                   const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_ALLGATHER, .sendbuf = sendbuf,
                .recvbuf = recvbuf, .count = sendcount, .send_elems = sendcount, .dtype = dtype,
                .redop = COLL_SUM, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    if (coll__blocks(comm, __func__, sendcount, &s.recv_elems) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_broadcast_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                   size_t count, coll_dtype_t dtype, int root,
                                   const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_BROADCAST, .recvbuf = recvbuf,
                .count = count, .recv_elems = count, .dtype = dtype, .redop = COLL_SUM,
                .root = root, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    if (root == comm->rank) {
        s.sendbuf = sendbuf;
        s.send_elems = count;
    }
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_reduce_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t count, coll_dtype_t dtype, coll_redop_t op, int root,
                                const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_REDUCE, .sendbuf = sendbuf, .count = count,
                .send_elems = count, .dtype = dtype, .redop = op, .root = root, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    if (root == comm->rank) {
        s.recvbuf = recvbuf;
        s.recv_elems = count;
    }
    return submit(comm, &s, params, req_p);
}

/* Gather and scatter (@p s: function, kind, count, dtype and root): the root's buffer holds
 * world_size blocks, the others' one or none. */
static coll_status_t rooted_blocks(coll_comm_t *c, spec_t *s, const void *sendbuf,
                                   void *recvbuf, const coll_op_params_t *params,
                                   coll_request_t **req_p)
{
    int at_root = s->root == c->rank, gather = s->coll == COLL_KIND_GATHER;
    size_t all;

    if (coll__blocks(c, s->func, s->count, &all) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    s->sendbuf = gather || at_root ? sendbuf : NULL;
    s->recvbuf = !gather || at_root ? recvbuf : NULL;
    s->send_elems = gather ? s->count : at_root ? all : 0;
    s->recv_elems = !gather ? s->count : at_root ? all : 0;
    return submit(c, s, params, req_p);
}

coll_status_t coll_gather_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                size_t count, coll_dtype_t dtype, int root,
                                const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_GATHER, .count = count, .dtype = dtype,
                .redop = COLL_SUM, .root = root, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    return rooted_blocks(comm, &s, sendbuf, recvbuf, params, req_p);
}

coll_status_t coll_scatter_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                 size_t count, coll_dtype_t dtype, int root,
                                 const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_SCATTER, .count = count, .dtype = dtype,
                .redop = COLL_SUM, .root = root, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    return rooted_blocks(comm, &s, sendbuf, recvbuf, params, req_p);
}

/* @p t (the caller's until here) into @p table_p when its receive blocks are apart; freed and an
 * error (set) otherwise. */
static coll_status_t a2a_apart(coll_comm_t *c, const spec_t *s, uint64_t *t, uint64_t **table_p)
{
    uint32_t a = 0, b = 0;
    int apart = coll_a2a_recv_apart(t, (uint32_t)c->world_size, &a, &b);

    if (apart == 1) {
        *table_p = t;
        return COLL_OK;
    }
    free(t);
    if (apart < 0) {
        coll__set_error(c, "%s: rank %d: no memory for the count table", s->func, c->rank);
        return COLL_ERR_NOMEM;
    }
    coll__set_error(c, "%s: rank %d: the receive blocks from ranks %u and %u overlap "
                    "(rdispls and recvcounts): the blocks of a receive buffer must be apart",
                    s->func, c->rank, a, b);
    return COLL_ERR_INVALID;
}

/* The count table of an alltoallv's arguments in @p table_p (the caller frees it), and the
 * elements it reads and writes in @p s; an error (set) for a missing row, a block that
 * overflows or no memory. */
static coll_status_t a2a_table(coll_comm_t *c, const size_t *const rows[COLL_A2A_ROWS],
                               spec_t *s, uint64_t **table_p)
{
    static const char *const names[] = {"sendcounts", "sdispls", "recvcounts", "rdispls"};
    uint32_t ws = (uint32_t)c->world_size, bad = 0;
    size_t es = coll_dtype_size(s->dtype);
    uint64_t *t;

    for (unsigned i = 0; i < COLL_A2A_ROWS; i++) {
        if (rows[i] == NULL) {
            coll__set_error(c, "%s: rank %d: %s must not be NULL", s->func, c->rank, names[i]);
            return COLL_ERR_INVALID;
        }
    }
    if (es == 0) {
        coll__set_error(c, "%s: rank %d: dtype %d is not a coll_dtype_t", s->func, c->rank,
                        (int)s->dtype);
        return COLL_ERR_INVALID;
    }
    if ((t = malloc(coll_a2a_table_bytes(ws))) == NULL) {
        coll__set_error(c, "%s: rank %d: no memory for the count table", s->func, c->rank);
        return COLL_ERR_NOMEM;
    }
    for (size_t i = 0; i < (size_t)COLL_A2A_ROWS * ws; i++) {
        t[i] = rows[i / ws][i % ws];
    }
    if (coll_a2a_extent(t, ws, es, &s->send_elems, &s->recv_elems, &bad) != 0) {
        coll__set_error(c, "%s: rank %d: the block for rank %u overflows size_t (its count "
                        "and displacement in elements of %zu bytes)", s->func, c->rank, bad, es);
        free(t);
        return COLL_ERR_INVALID;
    }
    return a2a_apart(c, s, t, table_p);
}

/* An alltoallv (@p s: function, buffers and dtype) of the count @p rows. */
static coll_status_t a2a_submit(coll_comm_t *c, spec_t *s, const size_t *const rows[COLL_A2A_ROWS],
                                const coll_op_params_t *params, coll_request_t **req_p)
{
    uint64_t *table = NULL;
    coll_status_t st = a2a_table(c, rows, s, &table);

    if (st != COLL_OK) {
        return coll__refuse_call(c, st);
    }
    st = coll__submit_spec(c, s, table, params, req_p);
    free(table);
    return st;
}

coll_status_t coll_alltoallv_async(coll_comm_t *comm, const void *sendbuf,
                                   const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                   const size_t *recvcounts, const size_t *rdispls,
                                   coll_dtype_t dtype, const coll_op_params_t *params,
                                   coll_request_t **req_p)
{
    const size_t *const rows[COLL_A2A_ROWS] = {sendcounts, sdispls, recvcounts, rdispls};
    spec_t s = {.func = __func__, .coll = COLL_KIND_ALLTOALLV, .sendbuf = sendbuf,
                .recvbuf = recvbuf, .dtype = dtype, .redop = COLL_SUM, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    return a2a_submit(comm, &s, rows, params, req_p);
}

coll_status_t coll_alltoall_async(coll_comm_t *comm, const void *sendbuf, void *recvbuf,
                                  size_t count, coll_dtype_t dtype,
                                  const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_ALLTOALLV, .sendbuf = sendbuf,
                .recvbuf = recvbuf, .dtype = dtype, .redop = COLL_SUM, .peer = -1};
    size_t ws, all, *v;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    if (coll__blocks(comm, __func__, count, &all) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    ws = (size_t)comm->world_size;
    if ((v = malloc(2 * ws * sizeof(size_t))) == NULL) {
        return coll__refuse(comm, COLL_ERR_NOMEM, "%s: rank %d: no memory for the counts",
                            __func__, comm->rank);
    }
    for (size_t j = 0; j < ws; j++) {
        v[j] = count;
        v[ws + j] = j * count;
    }
    st = a2a_submit(comm, &s, (const size_t *const[COLL_A2A_ROWS]){v, v + ws, v, v + ws},
                    params, req_p);
    free(v);
    return st;
}

coll_status_t coll_barrier_async(coll_comm_t *comm, const coll_op_params_t *params,
                                 coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_BARRIER, .dtype = COLL_UINT8,
                .redop = COLL_SUM, .peer = -1};

    COLL_ARG_CHECK(NULL, comm);
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_send_async(coll_comm_t *comm, const void *buf, size_t count,
                              coll_dtype_t dtype, int peer, const coll_op_params_t *params,
                              coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_SEND, .sendbuf = buf, .count = count,
                .send_elems = count, .dtype = dtype, .redop = COLL_SUM, .peer = peer};

    COLL_ARG_CHECK(NULL, comm);
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_recv_async(coll_comm_t *comm, void *buf, size_t count, coll_dtype_t dtype,
                              int peer, const coll_op_params_t *params, coll_request_t **req_p)
{
    spec_t s = {.func = __func__, .coll = COLL_KIND_RECV, .recvbuf = buf, .count = count,
                .recv_elems = count, .dtype = dtype, .redop = COLL_SUM, .peer = peer};

    COLL_ARG_CHECK(NULL, comm);
    return submit(comm, &s, params, req_p);
}

coll_status_t coll_allreduce(coll_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
                             coll_dtype_t dtype, coll_redop_t op)
{
    coll_request_t *r;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    st = allreduce(__func__, comm, sendbuf, recvbuf, count, dtype, op, NULL, &r);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    return st;
}
