/**
 * @file admin.h
 * @brief The administration layer's face (daemon/admin/: what the node's administrator sees of
 *        the daemon): the status server, the sockets' group, and systemd's notifications
 *        (READY, STATUS, WATCHDOG, STOPPING).
 *
 * daemon.c calls coll_admin_start() once every other listener is up, coll_admin_stop() when
 * the daemon stops and coll_admin_cleanup() after the loop ended. Loop thread only.
 */
#ifndef COLL_ADMIN_H
#define COLL_ADMIN_H

#include <uv.h>

#include <collective.h>

#include "core/daemon.h"

struct coll_status_server;

/** The administration layer's state of one daemon (d->admin). */
typedef struct coll_admin {
    coll_daemon_t *d;
    struct coll_status_server *server; /**< NULL when both status listeners are off */
    uv_timer_t tick;                   /**< watchdog pings and STATUS= updates */
    int tick_open;
    uint64_t watchdog_usec;            /**< WatchdogSec in microseconds, 0 when off */
    char status_line[160];             /**< the last STATUS= sent */
} coll_admin_t;

/**
 * @brief Start the administration layer: counters, group and mode of the sockets, status
 *        listeners, and READY=1 to systemd (when started by it).
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_IO or COLL_ERR_INVALID when a status listener cannot
 *         be opened or the group cannot be set (logged).
 */
coll_status_t coll_admin_start(coll_daemon_t *d);

/**
 * @brief The daemon stops: STOPPING=1 to systemd, close the status listeners and connections
 *        and remove the status socket. Safe when coll_admin_start() failed or never ran.
 */
void coll_admin_stop(coll_daemon_t *d);

/** @brief Free the layer's state once the loop ended. Safe at any state. */
void coll_admin_cleanup(coll_daemon_t *d);

/** @return The bound TCP status address ("host:port"), "" when off. */
const char *coll_admin_tcp_addr(const coll_admin_t *svc);

/**
 * @brief Give @p path the configured socket group and mode 0660.
 * @return COLL_OK (also when the default group does not exist: logged at info);
 *         COLL_ERR_IO when chown or chmod fail (logged).
 */
coll_status_t coll_admin_own_socket(coll_daemon_t *d, const char *path);

#endif
