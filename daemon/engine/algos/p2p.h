/**
 * @file p2p.h
 * @brief Point-to-point send and receive between two ranks of a job: a local copy when both are
 *        on this node, otherwise one UCX tagged message from the sender's pool buffer straight
 *        into the receiver's (zero copy on both sides).
 */
#ifndef COLL_P2P_H
#define COLL_P2P_H

#include "core/job.h"
#include "core/session.h"

/**
 * @brief Handle a checked Submit of kind SEND or RECV. Matching is by (source, destination,
 *        key). A receive whose size differs from the message fails with COLL_ERR_MISMATCH
 *        (naming both sizes); other transfer errors fail the request with COLL_ERR_PEER.
 */
void coll_p2p_submit(coll_job_t *job, coll_session_t *s, const Coll__Wire__Submit *sub);

#endif
