/**
 * @file report.h
 * @brief What /status (admin/status_json.h) and /metrics (admin/metrics.h) both report: state
 *        names, the daemon's uptime, a job's pending operations (admin/report.c).
 */
#ifndef COLL_ADMIN_REPORT_H
#define COLL_ADMIN_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/daemon.h"
#include "core/job.h"

struct coll_op;

/** @return 1 when @p op is still waiting or running (not done), 0 otherwise. */
int coll_report_op_pending(const struct coll_op *op);

/**
 * @brief The operations of @p job not done yet: the daemon's, and the collectives waiting in
 *        the local ranks' shared-memory area.
 * @param [out] oldest_ns_p Age of the oldest at @p now_ns, 0 when none.
 * @return How many.
 */
uint32_t coll_report_pending(const coll_job_t *job, uint64_t now_ns, uint64_t *oldest_ns_p);

/** @return Name of a job state: "gathering", "rendezvous", "ready", "failed". */
const char *coll_report_job_state(coll_job_state_t state);

/** @return Seconds since the daemon started. */
double coll_report_uptime(const coll_daemon_t *d);

#endif
