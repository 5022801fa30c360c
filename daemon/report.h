/**
 * @file report.h
 * @brief What the status server answers: the daemon's state as JSON (GET /status) and its
 *        counters in the Prometheus text exposition format (GET /metrics).
 *
 * Both are built on the loop thread from the live job, operation and session tables, so they
 * are consistent snapshots. JSON schema: docs/operations.md.
 */
#ifndef COLL_REPORT_H
#define COLL_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "daemon.h"
#include "job.h"

struct coll_op;

/**
 * @brief The daemon's state as a JSON document: version, uptime, node, jobs with their members,
 *        operations waiting or running (age, missing ranks, nodes waited on), peers, pool.
 * @param [out] len_p Length of the text.
 * @return The text (free() it), or NULL when out of memory.
 */
char *coll_report_status(coll_daemon_t *d, size_t *len_p);

/**
 * @brief The daemon's metrics in the Prometheus text exposition format 0.0.4.
 * @param [out] len_p Length of the text.
 * @return The text (free() it), or NULL when out of memory.
 */
char *coll_report_metrics(coll_daemon_t *d, size_t *len_p);

/** @return 1 when @p op is still waiting or running (not done), 0 otherwise. */
int coll_report_op_pending(const struct coll_op *op);

/**
 * @brief The operations of @p job not done yet.
 * @param [out] oldest_ns_p Age of the oldest at @p now_ns, 0 when none.
 * @return How many.
 */
uint32_t coll_report_pending(const coll_job_t *job, uint64_t now_ns, uint64_t *oldest_ns_p);

/** @return Name of a job state: "gathering", "rendezvous", "ready", "failed". */
const char *coll_report_job_state(coll_job_state_t state);

/** @return Seconds since the daemon's service started (0 without one). */
double coll_report_uptime(const coll_daemon_t *d);

#endif
