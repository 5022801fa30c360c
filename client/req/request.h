/**
 * @file request.h
 * @brief Requests: what a communicator submitted and waits for (collectives, allocations, group
 *        and layout registrations), matched by id to the daemon's answers, which reach them
 *        through the table they register in the link (coll__request_link_hooks). Every function
 *        is called with the connection's lock held. Not installed.
 */
#ifndef COLL_CLIENT_REQ_REQUEST_H
#define COLL_CLIENT_REQ_REQUEST_H

#include <stdint.h>

#include "client/link/link.h"
#include "proto/submission.h"

/** The requests' entries for the link: the daemon's messages, the completion ring and the
 *  shared-memory area's progress, what a waiter watches, failures. */
extern const coll__link_hooks_t coll__request_link_hooks;

/** @brief New request of @p kind of communicator @p owner, linked into its connection's
 *         pending list. Connection lock held. */
coll_request_t *coll__req_new(coll_comm_t *owner, coll_req_kind_t kind);

/**
 * @return The pending collective or point-to-point request of communicator @p owner that
 *         submission @p m would be confused with (one whose key the tags cannot tell from
 *         m's: the same collective key, or the same point-to-point direction, peer and key),
 *         or NULL. Connection lock held.
 */
coll_request_t *coll__req_same_key(const coll_comm_t *owner, const coll_submission_t *m);

/**
 * @return A pending collective request of connection @p c that reads or writes a byte of the
 *         range [@p off, @p off + @p bytes) of pool @p pool (0 the host pool), or NULL.
 *         Connection lock held.
 */
coll_request_t *coll__req_using(const coll_comm_t *c, uint32_t pool, uint64_t off,
                                uint64_t bytes);

/**
 * @brief Give the library's own allocation at @p offset of the host pool (not one in the
 *        user's list, such as an alltoallv's count table) back to the daemon; nothing when
 *        the link is broken (the daemon frees a rank's allocations when it leaves). Connection
 *        lock held.
 */
void coll__pool_give_back(coll_comm_t *c, uint64_t offset);

/** @brief Unlink and free. Lock held. */
void coll__req_release(coll_request_t *r);

/** @brief End a pending request with @p status (it moves to comm->done, or is freed when the
 *         user already freed it). Lock held. */
void coll__req_finish(coll_request_t *r, coll_status_t status);

/**
 * @brief Send @p msg, which carries the id of request @p r of @p c, on c's connection and wait
 *        up to @p timeout_ms for the daemon's answer to it. Connection lock held.
 * @return COLL_OK: r is answered (the answer's own status in r->status) and still the caller's,
 *         to read and coll__req_release(); otherwise the link's error or COLL_ERR_TIMEDOUT, and
 *         r is gone (released, or freed when a late answer comes).
 */
coll_status_t coll__req_exchange(coll_comm_t *c, coll_request_t *r, coll_client_msg_t *msg,
                                 int timeout_ms);

/** @brief Fail every pending request with @p status (the link broke). Lock held. */
void coll__req_fail_all(coll_comm_t *c, coll_status_t status);

/** @brief Free every request of communicator @p owner, pending or finished (its destroy).
 *         Connection lock held. */
void coll__req_free_owned(coll_comm_t *owner);

#endif
