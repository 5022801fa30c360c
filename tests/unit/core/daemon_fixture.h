/**
 * @file daemon_fixture.h
 * @brief Unit-test helper of the layers above core (net, job): a daemon object (core/daemon.h)
 *        on a libuv loop of its own, configured by the defaults of the configuration table
 *        (--config none), with a node secret of fixed bytes and nothing started: no listener,
 *        no client socket, no UCX context, no hooks. What a test needs beyond that it starts
 *        itself. Loop thread only: the test's.
 */
#ifndef COLL_TEST_DAEMON_FIXTURE_H
#define COLL_TEST_DAEMON_FIXTURE_H

#include <stdint.h>

#include "core/daemon.h"

/**
 * @brief Fill @p d (zeroed first) for @p loop, which the caller initialised (several daemons may
 *        share one): the default configuration at log level warn, listen 127.0.0.1:0, the lists
 *        empty, the counters zero, the node secret's key bytes (i * 7 + @p key_seed) with
 *        authentication on. Fails the test (cmocka) when the configuration does not load.
 */
void daemon_fixture_init(coll_daemon_t *d, uv_loop_t *loop, uint8_t key_seed);

/** @brief Free @p d's configuration. */
void daemon_fixture_fini(coll_daemon_t *d);

/** @brief Close every handle left on @p loop, run it until they are closed, close it. */
void daemon_fixture_close_loop(uv_loop_t *loop);

/**
 * @brief Run @p loop until @p done(@p arg) returns non-zero or @p ms milliseconds pass (a bound,
 *        never a measurement).
 * @return The last value of @p done: 0 when the bound passed first.
 */
int daemon_fixture_run_until(uv_loop_t *loop, int (*done)(void *), void *arg, unsigned ms);

#endif
