/**
 * @file metrics.h
 * @brief GET /metrics: the daemon's counters in the Prometheus text exposition format
 *        (admin/metrics.c), from core/stats.h and the live job table.
 */
#ifndef COLL_ADMIN_METRICS_H
#define COLL_ADMIN_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "core/daemon.h"

/**
 * @brief The daemon's metrics in the Prometheus text exposition format 0.0.4.
 * @param [out] len_p Length of the text.
 * @return The text (free() it), or NULL when out of memory.
 */
char *coll_report_metrics(coll_daemon_t *d, size_t *len_p);

/**
 * @brief Write the standard process_* families of Prometheus' client libraries for this
 *        process to @p f (admin/metrics_process.c): process_cpu_seconds_total,
 *        process_{virtual,resident}_memory_bytes, process_virtual_memory_max_bytes,
 *        process_start_time_seconds, process_open_fds, process_max_fds. A family whose /proc
 *        file cannot be read is left out.
 */
void coll_metrics_process(FILE *f);

/** @brief Write the HELP and TYPE lines of family @p name (@p type "gauge", "counter"...). */
void coll_metrics_family(FILE *f, const char *name, const char *type, const char *help);

/** @brief Write @p v as a label value: backslash, double quote and newline escaped. */
void coll_metrics_label(FILE *f, const char *v);

#endif
