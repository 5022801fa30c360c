/**
 * @file rdv.h
 * @brief Job rendezvous over control links (link.h), as torchrun's MASTER_ADDR store.
 *
 * Node side: once all local ranks of a job joined, the daemon connects to the job's root daemon
 * and sends NodeJoin (its ranks and its job worker's UCX address). Root side: the root collects
 * NodeJoins per job until the ranks 0..world_size-1 are all present, orders the nodes by lowest
 * rank (the ring order) and answers every node with the whole table. A job is its id and its
 * digest (the job token's, or its ranks' uid's: base/auth.h): NodeJoins of one id and another
 * digest gather apart and never meet. Disagreements (world size, a rank claimed twice) fail the
 * rendezvous on every node with a message naming them. A node whose UCX worker address does
 * not pass the check (net/ucx_address.h) is refused alone, logged and counted, before any
 * address reaches UCX on any node.
 *
 * Refusals: a node that refuses a job (its pool budget, no memory for the pool) tells the root
 * (coll_rdv_refuse()), which fails the rendezvous on every node at once with that node's
 * reason, and answers the job's later NodeJoins with it too, for as long as the job's timeout
 * (a NodeJoin of another digest gathers apart).
 */
#ifndef COLL_RDV_H
#define COLL_RDV_H

#include "core/daemon.h"
#include "core/job.h"
#include "proto/wire.h"

/** @brief Start the control listener at d->cfg.listen; fills d->control_addr. */
coll_status_t coll_rdv_listen(coll_daemon_t *d);

/** @brief The rendezvous' part of a new job: its retry timer (one uv handle more in
 *         job->handles). */
void coll_rdv_job_init(coll_job_t *job);

/** @brief Close what coll_rdv_job_init() made (the job is being freed). */
void coll_rdv_job_close(coll_job_t *job);

/** @brief Node side: register @p job at its root (retrying while the root is not up yet). */
void coll_rdv_join(coll_job_t *job);

/** @brief Node side: stop @p job's rendezvous and its retries (no callback into the job
 *         follows). */
void coll_rdv_cancel(coll_job_t *job);

/**
 * @brief Node side: tell the root of the job that rank @p j->rank's JoinJob asked for (named
 *        with @p digest, base/auth.h) that this node refuses it with @p status and @p why (fire
 *        and forget: a root that cannot be reached is logged, and the other nodes then find out
 *        at the timeout). Nothing is sent by a daemon that talks to no peer.
 */
void coll_rdv_refuse(coll_daemon_t *d, const Coll__Wire__JoinJob *j, const uint8_t *digest,
                     coll_status_t status, const char *why);

/**
 * @brief Root side: what the rendezvous of @p job (its id and digest) gathering here has, in
 *        words ("2 of 4 ranks have registered here: node01 (2 ranks)"), for a rank that waits.
 * @return 1 when this daemon gathers that job's rendezvous (@p buf written), 0 otherwise.
 */
int coll_rdv_describe(coll_daemon_t *d, const coll_job_t *job, char *buf, size_t len);

/** @brief Close the listener, every control link and every rendezvous (shutdown). */
void coll_rdv_close_all(coll_daemon_t *d);

#endif
