/**
 * @file fake_net.h
 * @brief The layer below the engine, faked in one process for the engine's unit tests: several
 *        "nodes" (a daemon and a ready job each) whose transports deliver tagged messages to
 *        each other by copying, and a client link that records completions instead of writing
 *        to sockets. It implements the functions of net/transport.h and net/clientlink.h that
 *        the engine calls; nothing of the real net layer is linked.
 *
 * Delivery: a send is matched with a receive of the same tag posted at its node (in posting
 * order), or waits for one. EAGER completes a send when it is posted (its data copied then);
 * RENDEZVOUS completes it when a receive took it. Completions queue on job->net.events as the
 * real transport's do and reach the engine in fake_net_run(). A fault can be armed: the n-th
 * send of a node fails (UCS_ERR_CONNECTION_RESET), as when its peer died. A message longer
 * than the receive it meets completes that receive with UCS_ERR_MESSAGE_TRUNCATED, as UCX does.
 */
#ifndef FAKE_NET_H
#define FAKE_NET_H

#include "core/job.h"
#include "engine/op.h"

#define FAKE_MAX_NODES 8
#define FAKE_MAX_LOCAL 4
#define FAKE_MAX_DONE 256

typedef enum { FAKE_EAGER, FAKE_RENDEZVOUS } fake_mode_t;

/** A completion the engine sent to a local rank. */
typedef struct {
    uint32_t node, local_rank, req_id;
    coll_status_t status;
    char error[256];
    char algo[32];
    uint64_t wire_bytes, dense_bytes;
} fake_done_t;

/** One message the engine sent: who, which tag (kind, step, column), how many bytes, and a
 *  copy of its first bytes. */
typedef struct {
    uint32_t from, to;
    uint64_t tag;
    size_t len;
    float head[4];
} fake_sent_t;

/** A world of nodes (fake_net_init() zeroes it first). */
typedef struct {
    uint32_t nnodes, nlocal;
    fake_mode_t mode;
    coll_daemon_t d[FAKE_MAX_NODES];
    coll_job_t job[FAKE_MAX_NODES];
    coll_node_t nodes[FAKE_MAX_NODES][FAKE_MAX_NODES];
    uint32_t ranks[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    coll_session_t sess[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    coll_session_t *locals[FAKE_MAX_NODES][FAKE_MAX_LOCAL];
    uint32_t rank_node[FAKE_MAX_NODES * FAKE_MAX_LOCAL];
    uint32_t rank_local[FAKE_MAX_NODES * FAKE_MAX_LOCAL];
    coll_list_t posted[FAKE_MAX_NODES];   /**< receives waiting, by node */
    coll_list_t arrived[FAKE_MAX_NODES];  /**< sends waiting for a receive, by destination */
    fake_done_t done[FAKE_MAX_DONE];
    uint32_t ndone;
    fake_sent_t *sent;                    /**< every send, in posting order (grown) */
    size_t nsent, cap_sent;
    int fail_node;                        /**< -1: no fault armed */
    uint32_t fail_at_send;                /**< that node's n-th send (1-based) fails */
    uint32_t sends_of[FAKE_MAX_NODES];
    coll_status_t layout_status;          /**< the last answer to a layout registration */
} fake_world_t;

/**
 * @brief @p nnodes nodes of @p nlocal local ranks each (global rank = node * nlocal + local),
 *        jobs ready with @p segment_bytes segments, pipeline depth 2, and a pool of
 *        @p pool_bytes per node. Asserts on failure.
 */
void fake_net_init(fake_world_t *w, uint32_t nnodes, uint32_t nlocal, size_t segment_bytes,
                   size_t pool_bytes, fake_mode_t mode);

/** @brief Free every node's operations, staging and pool. */
void fake_net_free(fake_world_t *w);

/** @brief Hand every queued completion to the engine, node by node, until none is left. */
void fake_net_run(fake_world_t *w);

/** @return A buffer of @p bytes in @p node's pool owned by its local rank @p l (asserts). */
void *fake_net_alloc(fake_world_t *w, uint32_t node, uint32_t l, size_t bytes);

/** @return The completion of (node, local rank, req_id), or NULL when none came. */
const fake_done_t *fake_net_done(const fake_world_t *w, uint32_t node, uint32_t l,
                                 uint32_t req_id);

#endif
