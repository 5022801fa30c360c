/**
 * @file spec.h
 * @brief A call that every rank makes, as the API's files give it to submit.c: what it reads
 *        and writes on this rank (its spec), its submission, its refusal. Not installed.
 */
#ifndef COLL_CLIENT_API_SPEC_H
#define COLL_CLIENT_API_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "client/req/request.h"

/** What one call asks for, before it becomes a Submit. */
typedef struct {
    const char *func;   /* the public function called, for the messages */
    coll_kind_t coll;
    const void *sendbuf;
    void *recvbuf;
    size_t count;       /* elements per rank */
    size_t send_elems;  /* elements read from sendbuf (0: not read) */
    size_t recv_elems;  /* elements written to recvbuf (0: not written) */
    coll_dtype_t dtype;
    coll_redop_t redop;
    int root;
    int peer;
} spec_t;

/**
 * @brief Check call @p s (its dtype, reduction, root, peer, compression of @p params, buffers,
 *        key) and submit it on @p c; an alltoallv with its count @p table (NULL for every other
 *        kind), copied into the pool for the daemon. Lock not held. A refused call ends the job
 *        (coll__refuse()).
 * @return COLL_INPROGRESS and the request in *@p req_p; COLL_ERR_INVALID (a NULL @p req_p, a
 *         bad value, a key in flight or from another thread), COLL_ERR_NOT_IN_POOL, and the
 *         errors of coll__submit_msg() and of the table's allocation; the message names
 *         s->func, the rank and the value.
 */
coll_status_t coll__submit_spec(coll_comm_t *c, const spec_t *s, const uint64_t *table,
                                const coll_op_params_t *params, coll_request_t **req_p);

/**
 * @brief @p count elements times world_size blocks in *@p all_p; refused (coll__refuse(),
 *        naming @p func) when that overflows size_t. Lock not held.
 * @return COLL_OK, or COLL_ERR_INVALID.
 */
coll_status_t coll__blocks(coll_comm_t *c, const char *func, size_t count, size_t *all_p);

/**
 * @brief The refusal (coll__refuse()) of a call whose message is set already. Lock not held.
 * @return @p st.
 */
coll_status_t coll__refuse_call(coll_comm_t *c, coll_status_t st);

#endif
