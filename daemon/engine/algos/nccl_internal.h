/**
 * @file nccl_internal.h
 * @brief What the three files of the NCCL path share: nccl_comm.c (a group's communicator: made,
 *        joined, ended with the job), nccl.c (the queue of operations and the loop's poll) and
 *        nccl_calls.c (each collective's work on the communicator's stream: the node's members
 *        combined, the NCCL call, the result delivered to the members). Not used outside
 *        them. Loop thread only.
 */
#ifndef COLL_ENGINE_ALGOS_NCCL_INTERNAL_H
#define COLL_ENGINE_ALGOS_NCCL_INTERNAL_H

#include <uv.h>

#include "base/list.h"
#include "core/dev_scratch.h"
#include "device/nccl.h"
#include "engine/algos/dev_combine.h"
#include "engine/dev_sync.h"
#include "engine/exec.h"
#include "engine/op.h"

/** A group's communicator (the world's: group 0), among the daemons of the group's nodes, one
 *  NCCL rank per group node in the group's node order (core/group.h). */
typedef struct coll_nccl_group {
    struct coll_nccl_group *next; /**< the job's next one (job->engine.nccl) */
    coll_job_t *job;
    uint32_t group;            /**< the group's id */
    uint32_t nnodes;           /**< NCCL ranks: the group's nodes */
    uint32_t node_rank;        /**< this node's NCCL rank: its place among them */
    const coll_nccl_ops_t *nccl;
    const coll_dev_ops_t *dev;
    int device;                /**< the daemon's index of the device it is on */
    int ready;                 /**< it finished joining */
    coll_nccl_comm_t comm;     /**< NULL before the id came and after the end */
    coll_dev_stream_t stream;  /**< its calls' and the local reduce's and copies' */
    const coll_exec_t *ex;     /**< device memory's executor; NULL: none (operations that
                                    need none only, nccl.c) */
    coll_exec_ctx_t ctx;       /**< the device and the stream, for the executor */
    coll_dev_event_t event;    /**< recorded after each call */
    uv_timer_t *timer;         /**< the poll; freed by its close callback */
    coll_list_t queue;         /**< coll__nccl_op_t in start order */
    int deferred;              /**< the job failed while its stream waited for ready words:
                                    the abort waits for the job's end (coll_nccl_job_free()) */
    coll_dev_sync_due_t *held; /**< those words and their values (nheld), stored then */
    uint32_t nheld;
} coll_nccl_group_t;

/** Where an operation is. */
typedef enum { COLL__NCCL_WAITING, COLL__NCCL_CALLED, COLL__NCCL_RUNNING } coll__nccl_phase_t;

/** An operation's state. */
typedef struct {
    coll_list_t link;            /**< in the job's queue while queued */
    int queued;
    coll_op_t *op;
    coll_nccl_group_t *ng;       /**< its group's communicator; NULL before it has one */
    coll__nccl_phase_t phase;
    int waited;                  /**< its stream waits on the device for the ranks' ready words
                                      (queued before its work); polled: 2 (the device layer
                                      refused the waits), 0 none needed */
    coll_nccl_id_t id;           /**< the communicator's, with the group's first NCCL operation */
    coll_dev_scratch_t scratch;  /**< the node's reduction where no output holds it */
    uint8_t *acc;                /**< where the node's reduction and NCCL's result are (a
                                      reduction's; set by coll__nccl_call()) */
    uint32_t nx;
    coll_xfer_t x[];             /**< the id's sends (the group's node 0) or its receive */
} coll__nccl_op_t;

/**
 * @brief Fail @p job on every node: @p what went wrong on this one in the NCCL path of group
 *        @p group (named in the message unless it is the world), @p why in the device layer's
 *        (or NCCL's) words.
 * @return @p st.
 */
coll_status_t coll__nccl_fail(coll_job_t *job, uint32_t group, coll_status_t st,
                              const char *what, const char *why);

/** @return 1 when @p op is an allreduce with a bitwise reduction (band, bor, bxor), which NCCL
 *          has not: the nodes' results are gathered (ncclAllGather) and reduced by the executor
 *          (nccl_calls.c). */
static inline int coll__nccl_bitwise(const coll_op_t *op)
{
    return op->desc.coll == COLL_KIND_ALLREDUCE && coll_devc_bitwise_op(op->desc.op);
}

/** @brief Start @p ng's poll (nccl.c) unless it runs: something is queued or joining. */
void coll__nccl_arm(coll_nccl_group_t *ng);

/**
 * @brief The communicator of @p op's group on this node, made now where the group has none
 *        (nccl_comm.c): its state on @p device, and the unique id exchanged in @p n's own
 *        transfers (the group's node 0 makes it, sends it to the group's other nodes and
 *        joins; the others post its receive and join when it came, coll__nccl_on_id()).
 *        Later operations of the group must be on the same device.
 * @param [out] ng_p The communicator (the job's, freed with it); set on COLL_OK only.
 * @return COLL_OK; any other status failed the job already, saying why (no NCCL, no stream,
 *         the id not made or not sent, another device than the group's communicator's).
 */
coll_status_t coll__nccl_group_get(coll__nccl_op_t *n, int device, coll_nccl_group_t **ng_p);

/** @brief @p n's receive of its group's unique id completed: join the communicator it names,
 *         unless the group has one already. Failures fail the job. */
void coll__nccl_on_id(coll__nccl_op_t *n);

/**
 * @brief Queue @p n's local phase (the members' inputs combined) and its NCCL call on the
 *        communicator's stream. Its descriptor check passed and the call before it is queued.
 * @return COLL_OK (the call queued: poll the communicator); COLL_ERR_NOMEM for scratch beyond
 *         the device's budget; the executor's or NCCL's error (coll_dev_error() says it).
 */
coll_status_t coll__nccl_call(coll_nccl_group_t *ng, coll__nccl_op_t *n);

/**
 * @brief Queue the delivery of @p n's result to the members' outputs after its NCCL call (an
 *        average finished, a wide result rounded to 16 bits, copies): call once the call is
 *        queued (comm_poll() said COLL_OK).
 * @return COLL_OK; the executor's error.
 */
coll_status_t coll__nccl_deliver(coll_nccl_group_t *ng, coll__nccl_op_t *n);

#endif
