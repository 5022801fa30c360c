/**
 * @file direct.h
 * @brief The direct path between nodes: in the leader rank of each node (local rank 0) of a job
 *        over several nodes, its own UCX context and worker, the endpoints to the other
 *        nodes' leaders (their addresses handed out by the daemons at the rendezvous), and the
 *        recursive doubling of a small allreduce among the leaders (proto/direct.h), which
 *        takes the daemons off the data path between nodes as the shared-memory area takes
 *        them off it inside a node. The worker is in worker.c, the handshake at the join in
 *        connect.c, the rounds in rounds.c.
 *        Internal to libcollective; every function is called with the connection's lock held.
 */
#ifndef COLL_CLIENT_DIRECT_DIRECT_H
#define COLL_CLIENT_DIRECT_DIRECT_H

#include <stddef.h>
#include <stdint.h>

#include "client/link/link.h"
#include "proto/desc.h"
#include "proto/direct.h"
#include "proto/rd_plan.h"

/** One allreduce's rounds among the leaders: the leader's own record, embedded in the area's
 *  record of the collective (shm/shm.h). Zeroed: not started. */
typedef struct coll_direct_op {
    coll_desc_t desc;          /* this node's descriptor (node and first_rank its own) */
    uint8_t *buf;              /* the partial result in, the result out (a node buffer) */
    uint64_t bytes;            /* of the payload */
    uint8_t *mine, *theirs;    /* header + payload: what this leader sends, what it got */
    size_t theirs_len;         /* room in theirs */
    coll_rd_plan_t pl;         /* its part in the doubling (the daemons' schedule) */
    int phase;                 /* fold, rounds, unfold, done */
    uint32_t round;            /* doubling round */
    uint32_t peer, step;       /* the current exchange */
    void *sreq, *rreq;         /* UCX requests in flight, NULL when done or none */
    int sent, received;        /* the current exchange's halves are complete (a receive: with
                                  a message carrying the job's token) */
    int arrived;               /* the receive completed, its message not yet checked */
    size_t rlen;               /* bytes the receive brought (0: too many for it) */
    uint32_t agreed;           /* every descriptor seen so far equal */
    coll_desc_t seen[2];       /* the first two that differed */
    uint64_t start_ns;         /* when the rounds started (CLOCK_MONOTONIC) */
    uint64_t token;            /* the job's direct token */
    uint64_t refused;          /* messages dropped for a wrong token */
    int started;
} coll_direct_op_t;

/**
 * @brief Before the join: in local rank 0 of a job over several nodes (local size below the
 *        world size), create the leader's UCX context and worker, from the UCX_* environment.
 *        A leader without one (UCX refused) joins without an address, and the root runs the
 *        job without the direct path (said on stderr at COLL_DEBUG=WARN).
 * @param [out] addr_p, len_p The worker's address, owned by the connection until
 *        coll__direct_close(); NULL and 0 without a worker.
 * @return COLL_OK (with or without a worker); COLL_ERR_NOMEM.
 */
coll_status_t coll__direct_open(coll_comm_t *c, const void **addr_p, size_t *len_p);

/**
 * @brief After the join: the leaders' addresses by node rank (@p n of them, the job's node
 *        count), checked by the daemons (net/ucx_address.h), copied. Endpoints are created on
 *        first use.
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_PROTOCOL when this rank has no worker or @p n is
 *         not the communicator's node count (the message says which).
 */
coll_status_t coll__direct_peers(coll_comm_t *c, const void *const *addrs, const size_t *lens,
                                 size_t n);

/**
 * @brief After the join, in a leader with coll__direct_ready(): the handshake with the leaders
 *        this node exchanges with in recursive doubling (connect.c), so that every connection
 *        between leaders is made while all of them are alive. Blocks, waiting on the worker's
 *        event fd, until every partner's hello carrying the job's token (@p hdr, the area's
 *        header) arrived and every hello sent completed, the job failed (the header's flag), or
 *        @p timeout_ms passed.
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_TRANSPORT when UCX failed a hello; the job's error
 *         and message (the header's) when it failed meanwhile; COLL_ERR_TIMEDOUT (the message
 *         says how many partners did not answer).
 */
coll_status_t coll__direct_connect(coll_comm_t *c, const coll_shm_hdr_t *hdr, uint64_t timeout_ms);

/** @return 1 when this rank can run the direct path's rounds (a worker and every leader's
 *          address), 0 otherwise. */
int coll__direct_ready(const coll_comm_t *c);

/** @brief Destroy the endpoints, the worker and the context (after every operation ended).
 *         Safe without them. */
void coll__direct_close(coll_comm_t *c);

/**
 * @brief Start the rounds of allreduce @p desc (coll__shm_desc(): every node's must be equal;
 *        its node and first_rank this node's) on @p buf, this node's partial result of
 *        @p desc's count, which ends as the result (an average divided by the world size).
 *        Tagged by the descriptor's key; every message carries @p token, the job's; a receive
 *        has room for @p max_bytes of payload (the job's direct_max_bytes).
 * @return COLL_OK (the rounds run: coll__direct_test()); COLL_ERR_NOMEM;
 *         COLL_ERR_TRANSPORT when UCX refused a message (the message says why).
 */
coll_status_t coll__direct_start(coll_comm_t *c, coll_direct_op_t *x, const coll_desc_t *desc,
                                 void *buf, uint64_t token, uint64_t max_bytes);

/**
 * @brief Move @p x's rounds on: progress the worker (polling, yielding the CPU between two
 *        polls, for at most @p spin_ns while a message is due), take what arrived, send the
 *        next round.
 * @return COLL_INPROGRESS; COLL_OK once the result is in the buffer, every node's descriptor
 *         equal; COLL_ERR_MISMATCH when they were not (the communicator's message names both,
 *         and nothing was written); COLL_ERR_TRANSPORT when UCX failed a message.
 */
coll_status_t coll__direct_test(coll_comm_t *c, coll_direct_op_t *x, uint64_t spin_ns);

/** @brief End @p x wherever it is: cancel its receive, let its send go, free its buffers.
 *         Safe on a record not started or already ended. */
void coll__direct_end(coll_comm_t *c, coll_direct_op_t *x);

/**
 * @return The worker's event fd, armed (ucp_worker_arm), for a waiter to poll while rounds
 *         run; -1 without a worker; COLL_DIRECT_BUSY when events are pending (progress now,
 *         do not sleep).
 */
int coll__direct_arm(coll_comm_t *c);

/** coll__direct_arm(): events are pending. */
#define COLL_DIRECT_BUSY (-2)

#endif
