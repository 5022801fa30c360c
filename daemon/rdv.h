/**
 * @file rdv.h
 * @brief Job rendezvous over TCP control links (as torchrun's MASTER_ADDR store).
 *
 * Node side: once all local ranks of a job joined, the daemon connects to the job's root daemon
 * and sends NodeJoin (its ranks and its job worker's UCX address). Root side: the root collects
 * NodeJoins per job until the ranks 0..world_size-1 are all present, orders the nodes by lowest
 * rank (the ring order) and answers every node with the whole table. Disagreements (world size,
 * a rank claimed twice) fail the rendezvous on every node with a message naming them.
 */
#ifndef COLL_RDV_H
#define COLL_RDV_H

#include "daemon.h"
#include "frame.h"
#include "job.h"

/** A TCP control link, either direction. */
typedef struct coll_peer_link {
    uv_tcp_t tcp;                 /**< first member */
    coll_daemon_t *d;
    coll_list_t link;             /**< in d->peer_links */
    coll_frame_reader_t reader;
    char peer[256];               /**< remote address, for messages */
    int closing;
    int closed;                   /**< the handle's close callback ran */
    int auth_state;               /**< where the peer authentication stands (rdv.c) */
    uint8_t nonce[32];            /**< the challenge this side sent */
    int resolving;                /**< a name lookup for this link is pending */
    /* node side */
    coll_job_t *job;              /**< the job waiting for its rendezvous */
    uv_connect_t connect;
    /* root side */
    struct coll_rdv *rdv;
    Coll__Wire__NodeJoin *join;   /**< the node's request, kept until the rendezvous ends */
    coll_list_t rdv_link;         /**< in rdv->members */
} coll_peer_link_t;

/** @brief Start the control listener at d->cfg.listen; fills d->control_addr. */
coll_status_t coll_rdv_listen(coll_daemon_t *d);

/** @brief Node side: register @p job at its root (retrying while the root is not up yet). */
void coll_rdv_join(coll_job_t *job);

/** @brief Close a control link (idempotent). */
void coll_rdv_link_close(coll_peer_link_t *l);

/** @brief Close the listener and every control link (shutdown). */
void coll_rdv_close_all(coll_daemon_t *d);

#endif
