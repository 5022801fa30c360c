/**
 * @file peerwatch.h
 * @brief Instant detection of a dead peer daemon on the same kernel: a pidfd per such peer,
 *        polled by the loop, readable once that process exited.
 *
 * Heartbeats (health.h) find any lost node within half the job's timeout, and UCX's peer error
 * mode finds a broken connection to another host; a daemon killed on the same machine (several
 * daemons per host, as in tests, or a second daemon for a second set of GPUs) is found here at
 * once instead. A peer is watched when its NodeJoin carried this kernel's boot id and pid
 * namespace (coll_node_t.same_kernel). A peer that said goodbye first is not lost.
 */
#ifndef COLL_PEERWATCH_H
#define COLL_PEERWATCH_H

#include "core/job.h"

/**
 * @brief Watch every other node of @p job that runs on this kernel. A peer whose pidfd cannot
 *        be opened (gone already, no pidfd support) is left to the heartbeats, with a debug
 *        line. Adds one uv handle per watched node to job->handles.
 */
void coll_peerwatch_start(coll_job_t *job);

/** @brief Stop and close every watch of @p job (each handle's close callback releases it). */
void coll_peerwatch_stop(coll_job_t *job);

#endif
