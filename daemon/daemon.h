/**
 * @file daemon.h
 * @brief The daemon object: one per process, owned by the loop thread.
 *
 * Threads: the daemon runs one libuv loop thread that does everything: client sessions, control
 * links, UCX progress (each job worker's event fd is polled by the loop) and the collective
 * engine. A daemon shares its node's cores with the trainers; on a machine with fewer cores than
 * busy threads a hand-off between threads costs a scheduler tick, so the engine works on the
 * thread that is woken by the transport and does bounded work per event (one pipeline segment).
 */
#ifndef COLL_DAEMON_H
#define COLL_DAEMON_H

#include <uv.h>
#include <ucp/api/ucp.h>

#include "auth.h"
#include "collective.h"
#include "config.h"
#include "list.h"

typedef struct coll_daemon {
    uv_loop_t *loop;
    coll_config_t cfg;
    uv_pipe_t listener;     /**< client socket */
    uv_tcp_t control;       /**< control listener for peer daemons */
    char control_addr[80];  /**< bound control address, host:port */
    const struct coll_link_ops *control_ops; /**< what accepted control links call (link.h) */
    uv_prepare_t prepare;   /**< before the loop blocks: drain control blocks (doorbell.c) */
    uv_check_t check;       /**< after it woke */
    uv_signal_t sig_int;
    uv_signal_t sig_term;
    ucp_context_h ucp;
    coll_auth_t auth;       /**< peer authentication key (auth.h) */
    uint64_t pool_bytes;    /**< bytes of every job's pool together (pool_budget) */
    uint64_t pool_budget;   /**< effective pool_budget */
    struct coll_workers *workers; /**< kernel threads (workers.h), NULL when none */
    struct coll_service *service; /**< counters, status server, systemd (service.h); or NULL */
    coll_list_t sessions;   /**< coll_session_t */
    coll_list_t jobs;       /**< coll_job_t */
    coll_list_t peer_links; /**< coll_peer_link_t, both directions (link.h) */
    coll_list_t rdvs;       /**< coll_rdv_t: rendezvous this daemon serves as root */
    char hostname[64];
    uint8_t kernel_id[24];  /**< boot id and pid namespace (COLL_WIRE_KERNEL_ID_BYTES) */
    int listening;          /**< the client socket file is ours to remove */
    int stopping;
} coll_daemon_t;

/**
 * @brief Open the listeners and the UCX context.
 * @return COLL_OK, or an error after logging what failed (socket path, address).
 */
coll_status_t coll_daemon_start(coll_daemon_t *d, uv_loop_t *loop);

/** @brief Begin an orderly stop: close listeners, sessions and jobs; the loop then ends. */
void coll_daemon_stop(coll_daemon_t *d);

/** @brief Free what outlives the loop (UCX context). Call after uv_run() returned. */
void coll_daemon_cleanup(coll_daemon_t *d);

#endif
