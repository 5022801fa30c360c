/**
 * @file teardown.h
 * @brief Closing a job's transport (coll_transport_job_close(), net/transport.h): what
 *        net/transport.c and net/teardown.c share. Internal to daemon/net/.
 *
 * Every UCX request the transport made for a job has ended, or was released, before the job's
 * worker is destroyed: posted receives are cancelled, sends end with their endpoint's forced
 * close where UCX allows one, flushes and closes are waited for, all within a bounded time.
 * One kind UCX 1.13 cannot end: a rendezvous send whose peer died, over an endpoint without peer
 * error handling (a daemon on this kernel, ucx_error_mode auto or none), waits for an answer
 * that never comes, and neither ucp_request_cancel() (tag receives only) nor a forced close
 * (refused in error mode none) ends it. Such a send is released and handed to the engine as
 * cancelled when the close's deadline passes, counted in the log line that says so; the
 * worker's own check of its request pool (a UCX WARN line per request still out) is turned off
 * where such endpoints can exist (coll_teardown_worker_flags()), since that line is then this
 * count, and stays on with ucx_error_mode = peer.
 */
#ifndef COLL_NET_TEARDOWN_H
#define COLL_NET_TEARDOWN_H

#include <stdint.h>

#include "core/daemon.h"
#include "core/job.h"

/** @return The ucp_worker_params_t flags of a job's worker on daemon @p d: UCX's request-leak
 *          warning off unless every endpoint has peer error handling (see above). */
uint64_t coll_teardown_worker_flags(const coll_daemon_t *d);

/** @brief Hand every completed transfer (job->net.events) to the engine, releasing its UCX
 *         request (net/transport.c). */
void coll__transport_run_events(coll_job_t *job);

/** @brief Release the registration of the job's pool, if any (net/transport.c). */
void coll__transport_unregister_pool(coll_job_t *job);

#endif
