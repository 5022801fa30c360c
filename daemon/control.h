/**
 * @file control.h
 * @brief Job control messages between the daemons of a job: abort (a failure every node must
 *        hear), goodbye (a node ended its part cleanly) and heartbeat (a node is alive). They are
 *        UCX active messages on the job's worker, tagged with the job's epoch: a message of
 *        another incarnation of the job is dropped.
 *
 * Receiving only records what arrived (UCX calls the handler inside its progress); the health
 * timer and coll_transport_drive() act on it outside UCX's call stack.
 */
#ifndef COLL_CONTROL_H
#define COLL_CONTROL_H

#include "job.h"

/** Active-message id of job control messages. */
#define COLL_AM_CONTROL 1u

/** Kinds of control message. A blame query carries an operation key (8 bytes) after the
 *  header; a blame, the key and then the text naming the sender's ranks that have not
 *  submitted that operation (blame.h). */
enum {
    COLL_CTL_ABORT = 1,
    COLL_CTL_GOODBYE = 2,
    COLL_CTL_HEARTBEAT = 3,
    COLL_CTL_BLAME_QUERY = 4,
    COLL_CTL_BLAME = 5,
};

/** "No node" in coll_control_msg_t.lost. */
#define COLL_CTL_NO_NODE UINT32_MAX

/** Fixed header of a control message (little-endian, as the data path); an abort's or a
 *  goodbye's text follows it. */
typedef struct {
    uint32_t type;   /**< COLL_CTL_* */
    int32_t status;  /**< abort: the failure, a coll_status_t */
    uint32_t node;   /**< sender's node rank */
    uint32_t lost;   /**< abort: a node the sender found lost; COLL_CTL_NO_NODE when none */
    uint64_t epoch;  /**< the job incarnation it belongs to */
} coll_control_msg_t;

/**
 * @brief Decode one control message of @p len bytes at @p data, untrusted, for a job of
 *        @p nnodes nodes and epoch @p epoch.
 * @param [out] m     The header, when accepted.
 * @param [out] text  An abort's, goodbye's or blame's text (not terminated) and its length, at
 *                    most @p text_max bytes (longer text is cut); empty for other kinds.
 * @param [out] key   A blame query's or blame's operation key (0 for other kinds).
 * @return 1 when the message is for this job and well formed: a known type, a sender node below
 *         @p nnodes, an abort status that is a coll_status_t error (else COLL_ERR_JOB), a lost
 *         node below @p nnodes or COLL_CTL_NO_NODE (else COLL_CTL_NO_NODE); 0 for a short
 *         message, another epoch, an unknown type or sender (to be dropped).
 */
int coll_control_decode(const void *data, size_t len, uint32_t nnodes, uint64_t epoch,
                        coll_control_msg_t *m, uint64_t *key, const char **text,
                        size_t *text_len, size_t text_max);

/** @brief Install the control-message handler on @p job's worker. */
coll_status_t coll_control_init(coll_job_t *job);

/** @brief Tell every other node (connecting where needed) that the job failed with @p msg. */
void coll_control_abort(coll_job_t *job, coll_status_t status, const char *msg);

/** @brief Say goodbye to the nodes this node exchanged data with (clean end), naming the rank
 *         whose leaving ended this node's part (job->left). */
void coll_control_goodbye(coll_job_t *job);

/** @brief Send a heartbeat to @p node. */
void coll_control_heartbeat(coll_job_t *job, uint32_t node);

/** @brief Ask every other node which of its ranks have not submitted operation @p key. */
void coll_control_blame_query(coll_job_t *job, uint64_t key);

/** @brief Answer @p node: @p text names this node's ranks that did not submit @p key. */
void coll_control_blame(coll_job_t *job, uint32_t node, uint64_t key, const char *text);

#endif
