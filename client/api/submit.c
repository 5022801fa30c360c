/*
 * A call that every rank makes, from its spec to the daemon: its checks against the pool and the
 * communicator (buffers, dtype, reduction, root, peer, compression), its key, its record (the
 * Submit) and its request; or its refusal, which ends the job on every rank.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/api/api.h"
#include "client/api/spec.h"
#include "client/devmap/devmap.h"
#include "client/shm/shm.h"
#include "common/compression.h"
#include "kernels/reduce.h"
#include "proto/a2a.h"
#include "proto/cspec.h"

/* Offset of [p, p + len) in the pool, or -1 when it is not inside. */
int64_t coll__pool_offset(const coll_comm_t *c, const void *p, size_t len)
{
    const uint8_t *b = p;
    if (c->pool == NULL || b < c->pool || (size_t)(b - c->pool) > c->pool_bytes ||
        len > c->pool_bytes - (size_t)(b - c->pool)) {
        return -1;
    }
    return b - c->pool;
}

int64_t coll__buffer_offset(const coll_comm_t *c, const void *p, size_t len, uint32_t *pool_p)
{
    int64_t off = coll__pool_offset(c, p, len);
    uint64_t doff;

    *pool_p = 0;
    if (off < 0 && coll__devmap_find(c, p, len, pool_p, &doff)) {
        off = (int64_t)doff;
    }
    return off;
}

static coll_status_t check_buffers(coll_comm_t *comm, const spec_t *s, coll_submission_t *m)
{
    const coll_comm_t *c = comm->conn;
    size_t es = coll_dtype_size(s->dtype);
    int sends = s->send_elems > 0 || s->sendbuf != NULL;
    int recvs = s->recv_elems > 0 || s->recvbuf != NULL;
    int64_t so = 0, ro = 0;
    uint32_t sp = 0, rp = 0;

    if (s->send_elems > SIZE_MAX / es || s->recv_elems > SIZE_MAX / es) {
        coll__set_error(comm, "%s: rank %d: count %zu of %s (%zu bytes) overflows size_t",
                        s->func, comm->rank, s->count, coll_dtype_name(s->dtype), es);
        return COLL_ERR_INVALID;
    }
    if ((s->send_elems > 0 && s->sendbuf == NULL) || (s->recv_elems > 0 && s->recvbuf == NULL)) {
        int send = s->send_elems > 0 && s->sendbuf == NULL;
        coll__set_error(comm, "%s: rank %d: the %s buffer must not be NULL for %zu elements",
                        s->func, comm->rank, send ? "send" : "receive",
                        send ? s->send_elems : s->recv_elems);
        return COLL_ERR_INVALID;
    }
    if (sends) {
        so = coll__buffer_offset(c, s->sendbuf, s->send_elems * es, &sp);
    }
    if (recvs) {
        ro = coll__buffer_offset(c, s->recvbuf, s->recv_elems * es, &rp);
    }
    if (so < 0 || ro < 0) {
        coll__set_error(comm, "%s: rank %d: the %s buffer %p (%zu bytes) is not inside the "
                        "job's pool; allocate it with coll_mem_alloc()", s->func, comm->rank,
                        so < 0 ? "send" : "receive", so < 0 ? s->sendbuf : (const void *)s->recvbuf,
                        (so < 0 ? s->send_elems : s->recv_elems) * es);
        return COLL_ERR_NOT_IN_POOL;
    }
    if (sends && recvs && sp != rp) {
        coll__set_error(comm, "%s: rank %d: the send and receive buffers are in different "
                        "pools (host memory and a device's, or two devices')", s->func,
                        comm->rank);
        return COLL_ERR_INVALID;
    }
    m->pool = sends ? sp : rp;
    /* Before anything is posted: on the shared-memory path no daemon looks at the buffers. */
    if (!coll_kind_overlap_ok((coll_kind_t)s->coll, (uint32_t)comm->rank, (uint64_t)so,
                              s->send_elems * es, (uint64_t)ro, s->recv_elems * es)) {
        coll__set_error(comm, "%s: rank %d: send buffer [%lld, +%zu) and receive buffer "
                        "[%lld, +%zu) overlap: %s", s->func, comm->rank, (long long)so,
                        s->send_elems * es, (long long)ro, s->recv_elems * es,
                        s->coll == COLL_KIND_ALLTOALLV
                            ? "an alltoallv has no in-place form, its buffers must be apart"
                            : "only the in-place form of this collective may");
        return COLL_ERR_INVALID;
    }
    m->send_offset = (uint64_t)so;
    m->recv_offset = (uint64_t)ro;
    return COLL_OK;
}

static coll_status_t check_spec(coll_comm_t *c, const spec_t *s)
{
    int p2p = s->coll == COLL_KIND_SEND || s->coll == COLL_KIND_RECV;

    if (coll_dtype_size(s->dtype) == 0) {
        coll__set_error(c, "%s: rank %d: dtype %d is not a coll_dtype_t", s->func, c->rank,
                        (int)s->dtype);
        return COLL_ERR_INVALID;
    }
    if ((unsigned)s->redop >= COLL_REDOP_COUNT) {
        coll__set_error(c, "%s: rank %d: reduction %d is not a coll_redop_t", s->func, c->rank,
                        (int)s->redop);
        return COLL_ERR_INVALID;
    }
    if (!coll_reduce_op_fits(s->dtype, s->redop)) {
        coll__set_error(c, "%s: rank %d: reduction %s does not apply to %s: the bitwise "
                        "reductions (band, bor, bxor) take the integer dtypes (int8, uint8, "
                        "int32, int64)", s->func, c->rank, coll_redop_name(s->redop),
                        coll_dtype_name(s->dtype));
        return COLL_ERR_INVALID;
    }
    if (s->root < 0 || s->root >= c->world_size) {
        coll__set_error(c, "%s: rank %d: root %d is not a rank of the %s (size %d)", s->func,
                        c->rank, s->root, c->group ? "group" : "job", c->world_size);
        return COLL_ERR_INVALID;
    }
    if (p2p && (s->peer < 0 || s->peer >= c->world_size || s->peer == c->rank)) {
        coll__set_error(c, "%s: rank %d: peer %d is not another rank of the %s (size %d)",
                        s->func, c->rank, s->peer, c->group ? "group" : "job", c->world_size);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

/* Without a key: collectives by call order, point-to-point by call order per peer, of the
 * thread that created the communicator. Another thread's order is unknown to the other ranks,
 * which would pair its operations with whatever came at the same place in theirs. */
static coll_status_t assign_key(coll_comm_t *c, const spec_t *s, const coll_op_params_t *params,
                                uint64_t *key_p)
{
    uint32_t **seq;

    if (params != NULL && (params->field_mask & COLL_OP_PARAM_KEY)) {
        *key_p = params->key;
        return COLL_OK;
    }
    if (!pthread_equal(pthread_self(), c->owner)) {
        coll__set_error(c, "%s: rank %d: an operation without a key from a thread other than "
                        "the one that created the communicator; give each concurrent operation "
                        "a key (coll_op_params_t.key), or submit from that thread", s->func,
                        c->rank);
        return COLL_ERR_INVALID;
    }
    if (s->coll != COLL_KIND_SEND && s->coll != COLL_KIND_RECV) {
        *key_p = (1ull << 39) | (c->next_seq++ & ((1ull << 39) - 1));
        return COLL_OK;
    }
    seq = s->coll == COLL_KIND_SEND ? &c->send_seq : &c->recv_seq;
    if (*seq == NULL && (*seq = calloc((size_t)c->world_size, sizeof(**seq))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    *key_p = (*seq)[s->peer]++;
    return COLL_OK;
}

/* A key (or a point-to-point key, direction and peer) already in flight: the tags could not
 * tell the two operations apart. Both fail, and the job with them (the caller aborts it). */
static coll_status_t check_key(coll_comm_t *c, const char *func, const coll_submission_t *m)
{
    coll_request_t *r = coll__req_same_key(c, m);
    char nm[48];

    if (r == NULL) {
        return COLL_OK;
    }
    r->key_reused = 1;
    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)m->coll, .key = m->key}, nm, sizeof(nm));
    coll__set_error(c, "%s: rank %d submitted %s while an operation of that key was still in "
                    "flight; keys must be unique among the operations in flight, so both fail",
                    func, c->rank, nm);
    return COLL_ERR_INVALID;
}

/* The pool bytes the operation reads and writes, for coll_mem_free() (coll__req_using()). */
static void note_buffers(const coll_comm_t *c, const coll_submission_t *m, coll_request_t *r)
{
    uint64_t se, re, es = coll_dtype_size((coll_dtype_t)m->dtype);

    coll_kind_extent((coll_kind_t)m->coll, m->count, (uint32_t)c->world_size, (uint32_t)c->rank,
                     m->root, &se, &re);
    r->pool = m->pool;
    r->send_off = m->send_offset;
    r->send_bytes = se * es;
    r->recv_off = m->recv_offset;
    r->recv_bytes = re * es;
}

coll_status_t coll__submit_msg(coll_comm_t *c, const char *func, coll_submission_t *m,
                               void *const *stream, coll_request_t **req_p)
{
    coll_request_t *r;
    coll_status_t st;

    /* The shared-memory path may not know yet of the Abort this rank sent: it must not run. */
    if (c->conn->ended != COLL_OK) {
        coll__set_error(c, "job %s failed earlier: %s", c->job, c->conn->ended_msg);
        return c->conn->ended;
    }
    if ((st = check_key(c, func, m)) != COLL_OK) {
        return st;
    }
    if (stream != NULL && m->pool == 0) {
        coll__set_error(c, "%s: rank %d: a stream orders operations on device buffers; these "
                        "are in the host pool", func, c->rank);
        return COLL_ERR_INVALID;
    }
    if ((r = coll__req_new(c, COLL_REQ_COLLECTIVE)) == NULL) {
        return COLL_ERR_NOMEM;
    }
    m->req_id = r->id;
    r->coll = (uint32_t)m->coll;
    r->dtype = m->dtype;
    r->redop = m->redop;
    r->key = m->key;
    r->count = m->count;
    r->peer = m->peer;
    note_buffers(c, m, r);
    r->bucket = -1;
    r->timing.submit_ns = coll__now_ns();
    m->group = c->group;
    if (m->pool != 0 && (st = coll__sync_take(c->conn, r, stream)) != COLL_OK) {
        coll__req_release(r);
        return st;
    }
    /* Collectives of the world without compression on host buffers meet in the local ranks'
     * shared-memory area first (shm/shm.h); groups, compression and the rest go to the daemon. */
    st = c->shm != NULL && m->coll < COLL_KIND_SEND && m->compression == 0 && m->pool == 0
             ? coll__shm_post(c, func, r, m)
             : coll__submit_send(c->conn, m, &r->sync);
    if (st != COLL_OK) {
        coll__req_release(r);
        return st;
    }
    *req_p = r;
    return COLL_INPROGRESS;
}

/* The spec travels packed (proto/cspec.h); it was checked when it was set. */
static void set_compression(coll_submission_t *m, const coll_compression_t *z)
{
    m->compression = coll_cspec_pack(z, coll__compress_ratio_units(z->ratio));
    m->bucket = z->bucket;
    m->warmup = z->warmup;
}

/* The fields of coll_op_params_t a mask may name. */
#define PARAM_FIELDS                                                                           \
    (COLL_OP_PARAM_KEY | COLL_OP_PARAM_ALGO | COLL_OP_PARAM_LAYOUT |                           \
     COLL_OP_PARAM_COMPRESSION | COLL_OP_PARAM_STREAM)

/* The call's parameters must name only fields there are, an algorithm there is and a valid
 * compression: the daemon would refuse the submission, and its refusal names no cause here. */
static coll_status_t check_params(coll_comm_t *c, const spec_t *s, const coll_op_params_t *params)
{
    if (params == NULL) {
        return COLL_OK;
    }
    if (params->field_mask & ~(uint64_t)PARAM_FIELDS) {
        coll__set_error(c, "%s: rank %d: field_mask %#llx names fields there are not (bits "
                        "%#llx; see COLL_OP_PARAM_*)", s->func, c->rank,
                        (unsigned long long)params->field_mask,
                        (unsigned long long)(params->field_mask & ~(uint64_t)PARAM_FIELDS));
        return COLL_ERR_INVALID;
    }
    if ((params->field_mask & COLL_OP_PARAM_ALGO) &&
        ((int)params->algo < 0 || (int)params->algo >= COLL_ALGO_COUNT)) {
        coll__set_error(c, "%s: rank %d: algo %d is not a coll_algo_t (0 .. %d)", s->func,
                        c->rank, (int)params->algo, COLL_ALGO_COUNT - 1);
        return COLL_ERR_INVALID;
    }
    if (params->field_mask & COLL_OP_PARAM_COMPRESSION) {
        return coll__compression_refused(c, s->func, &params->compression);
    }
    return COLL_OK;
}

/* The record of call @p s with @p params, its buffers placed by check_buffers(). */
static void fill(const coll_comm_t *c, const spec_t *s, const coll_op_params_t *params,
                 coll_submission_t *m)
{
    uint64_t mask = params != NULL ? params->field_mask : 0;

    m->coll = s->coll;
    m->dtype = (uint32_t)s->dtype;
    m->redop = (uint32_t)s->redop;
    m->count = s->count;
    m->root = (uint32_t)s->root;
    m->peer = (uint32_t)(s->peer < 0 ? 0 : s->peer);
    m->algo = (mask & COLL_OP_PARAM_ALGO) ? params->algo : c->algo;
    m->layout = (mask & COLL_OP_PARAM_LAYOUT) ? params->layout : 0;
    set_compression(m, (mask & COLL_OP_PARAM_COMPRESSION) ? &params->compression
                                                          : &c->compression);
}

/* An alltoallv's count table into the pool, where the daemon copies it from at submission:
 * the submission names it in its layout field and runs uncompressed. */
static coll_status_t put_table(coll_comm_t *k, const uint64_t *table, uint32_t world,
                               coll_submission_t *m)
{
    size_t bytes = coll_a2a_table_bytes(world);
    coll_status_t st = coll__mem_alloc(k, bytes, &m->layout);

    if (st == COLL_OK) {
        memcpy(k->pool + m->layout, table, bytes);
    }
    return st;
}

/* The one end of a refused call, its message set: the other ranks would wait for it, so the
 * job fails for them too, with that message, and this rank's later submissions get @p st at once
 * (coll__submit_msg()). Also for COLL_ERR_JOB: a local rank that left is seen in the
 * shared-memory area before the daemon fails the job, and the other nodes learn it from this
 * Abort (the daemon ignores one for a job that failed already). Nothing happens when this rank
 * ended the job already or the link is gone. Lock held; returns @p st. */
static coll_status_t refuse_locked(coll_comm_t *c, coll_status_t st)
{
    coll_comm_t *k = c->conn;

    if (k->ended == COLL_OK && k->broken == COLL_OK) {
        k->ended = st;
        snprintf(k->ended_msg, sizeof(k->ended_msg), "%s", k->last_error);
        coll__abort(k, st, k->last_error);
    }
    return st;
}

coll_status_t coll__refuse_call(coll_comm_t *c, coll_status_t st)
{
    pthread_mutex_lock(&c->conn->lock);
    refuse_locked(c, st);
    pthread_mutex_unlock(&c->conn->lock);
    return st;
}

coll_status_t coll__refuse(coll_comm_t *c, coll_status_t st, const char *fmt, ...)
{
    char text[sizeof(c->conn->last_error)];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&c->conn->lock);
    coll__set_error(c, "%s", text);
    refuse_locked(c, st);
    pthread_mutex_unlock(&c->conn->lock);
    return st;
}

coll_status_t coll__refuse_null(coll_comm_t *c, const char *func, const char *arg)
{
    coll__arg_null(c, func, arg);
    return coll__refuse_call(c, COLL_ERR_INVALID);
}

coll_status_t coll__blocks(coll_comm_t *c, const char *func, size_t count, size_t *all_p)
{
    size_t ws = (size_t)c->world_size;

    *all_p = count * ws;
    if (ws > 0 && count > SIZE_MAX / ws) {
        return coll__refuse(c, COLL_ERR_INVALID, "%s: rank %d: count %zu overflows size_t in "
                            "%zu blocks, one per rank", func, c->rank, count, ws);
    }
    return COLL_OK;
}

coll_status_t coll__submit_spec(coll_comm_t *c, const spec_t *s, const uint64_t *table,
                                  const coll_op_params_t *params, coll_request_t **req_p)
{
    coll_submission_t m = {0}, t = {0};
    coll_comm_t *k = c->conn;
    coll_status_t st;

    if (req_p == NULL) {
        return coll__refuse_null(c, s->func, "req_p");
    }
    pthread_mutex_lock(&k->lock);
    st = check_spec(c, s);
    if (st == COLL_OK) {
        st = check_params(c, s, params);
    }
    if (st == COLL_OK) {
        st = check_buffers(c, s, &m);
    }
    if (st == COLL_OK) {
        st = assign_key(c, s, params, &m.key);
    }
    if (st == COLL_OK && table != NULL) {
        st = put_table(k, table, (uint32_t)c->world_size, &t);
    }
    if (st == COLL_OK) {
        fill(c, s, params, &m);
        if (table != NULL) {
            m.layout = t.layout;
            m.compression = m.bucket = m.warmup = 0;
        }
        /* A stream of NULL is CUDA's default stream, not none: the mask says whether. */
        st = coll__submit_msg(c, s->func, &m, (params != NULL && (params->field_mask &
                                                          COLL_OP_PARAM_STREAM))
                                         ? &params->stream : NULL, req_p);
    }
    if (st == COLL_INPROGRESS && table != NULL) {
        (*req_p)->table_off = t.layout;
        (*req_p)->send_bytes = s->send_elems * coll_dtype_size(s->dtype);
        (*req_p)->recv_bytes = s->recv_elems * coll_dtype_size(s->dtype);
    } else if (t.layout != 0) {
        coll__pool_give_back(k, t.layout);
    }
    if (st != COLL_INPROGRESS) {
        refuse_locked(c, st);
    }
    pthread_mutex_unlock(&k->lock);
    return st;
}
