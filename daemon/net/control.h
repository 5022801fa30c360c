/**
 * @file control.h
 * @brief Sending and receiving the job messages between the daemons of a job
 *        (proto/jobmsg.h): abort, goodbye, heartbeat, blame query and blame.
 *
 * Receiving only records what arrived (UCX calls the handler inside its progress); the health
 * timer and coll_transport_drive() act on it outside UCX's call stack.
 */
#ifndef COLL_NET_CONTROL_H
#define COLL_NET_CONTROL_H

#include "core/job.h"
#include "proto/jobmsg.h"

/** @brief Install the control-message handler on @p job's worker. */
coll_status_t coll_control_init(coll_job_t *job);

/** @brief Tell every other node it has an endpoint to that the job failed with @p msg. */
void coll_control_abort(coll_job_t *job, coll_status_t status, const char *msg);

/** @brief Say goodbye to the nodes this node exchanged data with (clean end), naming the rank
 *         whose leaving ended this node's part (job->left). */
void coll_control_goodbye(coll_job_t *job);

/** @brief Send a heartbeat to @p node. */
void coll_control_heartbeat(coll_job_t *job, uint32_t node);

/** @brief Ask every other node which of its ranks have not submitted operation @p key. */
void coll_control_blame_query(coll_job_t *job, uint64_t key);

/** @return What other nodes answered about operation @p key (their ranks that have not
 *          submitted it), or NULL when none did. The text lives in the job. */
const char *coll_control_blamed(const coll_job_t *job, uint64_t key);

/** @brief Answer @p node: @p text names this node's ranks that did not submit @p key. */
void coll_control_blame(coll_job_t *job, uint32_t node, uint64_t key, const char *text);

#endif
