/**
 * @file status_json.h
 * @brief GET /status: the daemon's state as JSON (admin/status_json.c), built on the loop thread
 *        from the live job, operation and session tables, so it is a consistent snapshot.
 *        Schema: docs/operations.md.
 */
#ifndef COLL_ADMIN_STATUS_JSON_H
#define COLL_ADMIN_STATUS_JSON_H

#include <stddef.h>

#include "core/daemon.h"

/**
 * @brief The daemon's state as a JSON document: version, uptime, node, jobs with their members,
 *        operations waiting or running (age, missing ranks, nodes waited on), peers, pool.
 * @param [out] len_p Length of the text.
 * @return The text (free() it), or NULL when out of memory.
 */
char *coll_report_status(coll_daemon_t *d, size_t *len_p);

#endif
