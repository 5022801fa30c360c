/**
 * @file p2p.h
 * @brief Point-to-point send and receive between two ranks of a communicator (the job's world
 *        or a group): a local copy when both are on this node, otherwise one UCX tagged message
 *        from the sender's pool buffer straight into the receiver's (zero copy on both sides),
 *        which the receiver answers with its status.
 */
#ifndef COLL_P2P_H
#define COLL_P2P_H

#include "core/job.h"
#include "core/session.h"

/**
 * @brief Handle a checked Submit of kind SEND or RECV of a local member of @p grp (its peer is a
 *        rank of @p grp). Matching is by (group, source, destination, key). When the sizes of
 *        the send and the receive differ, both fail with COLL_ERR_MISMATCH naming both sizes;
 *        other transfer errors fail the request with COLL_ERR_PEER.
 */
void coll_p2p_submit(coll_job_t *job, coll_group_t *grp, coll_session_t *s,
                     const Coll__Wire__Submit *sub);

#endif
