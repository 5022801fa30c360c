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
#ifndef COLL_CORE_DAEMON_H
#define COLL_CORE_DAEMON_H

#include <ucp/api/ucp.h>
#include <uv.h>

#include <collective.h>

#include "base/auth.h"
#include "base/config.h"
#include "base/list.h"
#include "core/devices.h"
#include "core/hooks.h"
#include "core/pool.h"
#include "core/stats.h"

typedef struct coll_daemon {
    uv_loop_t *loop;
    coll_config_t cfg;
    struct coll_acceptor *clients; /**< the client socket's (net/accept.h), or NULL */
    struct coll_acceptor *control; /**< the control listener's, or NULL (no peers) */
    char control_addr[80];  /**< bound control address, host:port */
    const struct coll_link_hooks *control_hooks; /**< what accepted control links call
                                                      (net/link.h) */
    uv_prepare_t prepare;   /**< before the loop blocks: drain control blocks (job/doorbell.c) */
    uv_check_t check;       /**< after it woke */
    uv_signal_t sig_int;
    uv_signal_t sig_term;
    uv_signal_t sig_hup;          /**< reopens the log and reloads (daemon.c) */
    ucp_context_h ucp;
    coll_auth_t auth;       /**< peer authentication key (base/auth.h) */
    coll_pool_budget_t pool_budget; /**< effective pool_budget and what jobs' pools hold of it */
    coll_devices_t devices; /**< the device layer, each device and its pools' budget */
    struct coll_workers *workers; /**< kernel threads (engine/workers.h), NULL when none */
    struct coll_admin *admin; /**< status server, systemd (admin/admin.h); or NULL */
    coll_stats_t stats;     /**< what the engine and the job layer counted (core/stats.h) */
    const coll_job_hooks_t *job_hooks; /**< installed by the job layer (core/hooks.h) */
    struct coll_cost_params *cost; /**< the cost model's constants (engine/cost.h,
                                        cost_params), NULL: none, the fixed crossovers */
    const struct coll_stage_hooks *stage_hooks; /**< the parameter service's operations
                                                     (engine/stage.h); NULL: refused */
    coll_list_t sessions;   /**< coll_session_t */
    coll_list_t jobs;       /**< coll_job_t */
    coll_list_t peer_links; /**< coll_peer_link_t, both directions (net/link.h) */
    coll_list_t rdvs;       /**< coll_rdv_t: rendezvous this daemon serves as root */
    coll_list_t barred_jobs; /**< job names refused for a while: two formations met
                                  (job/formation.c) */
    char hostname[64];
    uint8_t kernel_id[24];  /**< boot id and pid namespace (COLL_WIRE_KERNEL_ID_BYTES) */
    int listening;          /**< the client socket file is ours to remove */
    int stopping;
} coll_daemon_t;

#endif
