/**
 * @file api.h
 * @brief What the API's files (communicators, allocations, collectives, compression) give the
 *        layers above them (groups, the parameter service, the bucketer, the 3D grid): a
 *        checked submission of the library's own, its buffers' offsets, its own allocations,
 *        keys of its own operations, leaving a group. Not installed.
 */
#ifndef COLL_CLIENT_API_API_H
#define COLL_CLIENT_API_API_H

#include <stddef.h>
#include <stdint.h>

#include "client/req/request.h"
#include "proto/desc.h"
#include "proto/submission.h"

/** The library's bound of the join wait when the job asks for no timeout (the daemon's default). */
#define COLL_DEFAULT_JOIN_MS 60000

/** @brief Tell the daemon that this rank leaves group @p group (GroupFree), unless the link is
 *         broken. Connection lock held. */
void coll__group_leave(coll_comm_t *k, uint32_t group);

/**
 * @brief Ask the daemon for an allocation of @p bytes in the pool for this rank, without
 *        listing it among the user's (the library's own buffers). Lock held; @p c the
 *        connection.
 * @param [out] offset_p Its pool offset.
 * @return COLL_OK; the daemon's refusal (COLL_ERR_POOL_FULL, with its message as the last
 *         error); the link's error or COLL_ERR_TIMEDOUT.
 */
coll_status_t coll__mem_alloc(coll_comm_t *c, size_t bytes, uint64_t *offset_p);

/**
 * @brief Send the allocation request @p m (its req_id filled in here) and wait for the
 *        daemon's answer, as coll__mem_alloc() does for any memory kind. Lock held; @p c the
 *        connection.
 * @param [out] pool_p   The pool it is in (0 the host pool, 1 + d device d's).
 * @param [out] offset_p Its offset in that pool.
 * @return As coll__mem_alloc(); a device's refusals too (COLL_ERR_UNSUPPORTED, ...).
 */
coll_status_t coll__mem_ask(coll_comm_t *c, Coll__Wire__MemAlloc *m, uint32_t *pool_p,
                            uint64_t *offset_p);

/**
 * @brief The key of a keyed collective the library makes itself (the bucketer's buckets, the
 *        parameter service's steps; python/collective/ddp.py makes its keys so): key
 *        space @p space (0..7) in bits 24-26, @p iteration mod 256 in bits 16-23, @p low (a
 *        bucket or a control code) in bits 0-15. All inside the 27 key bits a collective's tag
 *        carries (proto/tag.h), so at most one iteration of a key space may be in flight.
 */
static inline uint64_t coll__space_key(unsigned space, uint64_t iteration, unsigned low)
{
    return ((uint64_t)(space & 7u) << 24) | ((iteration & 0xFFu) << 16) | (low & 0xFFFFu);
}

/**
 * @brief Submit a checked operation @p m (key, kind, fields; req_id is filled in) and return
 *        its request, on @p c (the world or a group: m->group is set) over c->conn, for public
 *        function @p func (the one the caller called: every message begins with its name).
 *        c->conn->lock held.
 * @return COLL_INPROGRESS and the request; the code of the refused call with which this rank
 *         ended the job, once it did (coll__refuse()); COLL_ERR_INVALID (nothing submitted) when
 *         a request of @p c with a key the tags cannot tell from m's is still pending
 *         (coll__req_same_key(): that request then ends with COLL_ERR_INVALID too, whatever its
 *         outcome); COLL_ERR_NOMEM;
 *         the link's error and the shared-memory path's (coll__shm_post()); with @p stream (the
 *         CUDA stream whose queued work the operation's inputs wait for, *@p stream NULL being
 *         the default stream; @p stream NULL: none), those of coll__sync_take(), and
 *         COLL_ERR_INVALID for host buffers.
 */
coll_status_t coll__submit_msg(coll_comm_t *c, const char *func, coll_submission_t *m,
                               void *const *stream, coll_request_t **req_p);

/**
 * @brief A call that every rank makes (a collective, a split, a step of the parameter service)
 *        given NULL for @p arg (in @p func): the message on @p c, and the job ends, as for every
 *        refused submission, since the other ranks would wait for this one. Lock not held.
 * @return COLL_ERR_INVALID.
 */
coll_status_t coll__refuse_null(coll_comm_t *c, const char *func, const char *arg);

/**
 * @brief The one refusal of a call that every rank makes (a collective, its arguments checked
 *        before anything is submitted): the message (printf-style @p fmt, which names the
 *        function, the rank and the bad value) on @p c, and the job fails with it on every rank
 *        (an Abort to the daemon: the other ranks' operations end with COLL_ERR_JOB naming this
 *        rank instead of waiting for the job's timeout), and this rank's later submissions get
 *        @p st at once (coll__submit_msg()). coll__refuse_null() is its form for a NULL
 *        argument; a refusal in the submission itself ends the same way. Lock not held.
 * @return @p st.
 */
coll_status_t coll__refuse(coll_comm_t *c, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/**
 * @brief Whether compression @p z is valid (coll__compression_check()); if not, a message naming
 *        @p func, this rank and @p z's fields on @p c. Lock held.
 * @return COLL_OK, or COLL_ERR_INVALID.
 */
coll_status_t coll__compression_refused(coll_comm_t *c, const char *func,
                                        const coll_compression_t *z);

/**
 * @brief Offset of [p, p + len) in the job's pool. Lock held.
 * @return The offset, or -1 when the range is not inside the pool.
 */
int64_t coll__pool_offset(const coll_comm_t *c, const void *p, size_t len);

/**
 * @brief Offset of [p, p + len) in the job's host pool or in one of its device pools, whose id
 *        goes to *@p pool_p (0: the host pool, 1 + d: device d's; the wire's Submit.pool).
 *        Lock held.
 * @return The offset, or -1 when the range is inside none.
 */
int64_t coll__buffer_offset(const coll_comm_t *c, const void *p, size_t len, uint32_t *pool_p);

/**
 * @brief coll_mem_free() of a device allocation starting at @p ptr.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL when none starts there (no message set);
 *         COLL_ERR_BUSY when a pending request uses it; the link's error.
 */
coll_status_t coll__devmem_free(coll_comm_t *c, void *ptr);

/**
 * @brief coll_mem_query() of a device address.
 * @return COLL_OK; COLL_ERR_NOT_IN_POOL when @p ptr is in no device allocation of this rank.
 */
coll_status_t coll__devmem_query(const coll_comm_t *c, const void *ptr, coll_mem_info_t *info);

#endif
