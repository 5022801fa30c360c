/**
 * @file daemon.h
 * @brief The composition root: starts every layer in order, installs the job layer's hooks,
 *        and stops them again (daemon.c). Only main.c uses it.
 */
#ifndef COLL_DAEMON_ROOT_H
#define COLL_DAEMON_ROOT_H

#include "core/daemon.h"

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
