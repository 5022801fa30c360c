/**
 * @file devices.h
 * @brief What /status and /metrics say about devices (admin/devices.c): the device layer and its
 *        driver, or why there is none; NCCL; each device with its pools' budget and what they
 *        hold; each job's pools on the devices. Schema: docs/operations.md.
 */
#ifndef COLL_ADMIN_DEVICES_H
#define COLL_ADMIN_DEVICES_H

#include <jansson.h>
#include <stdio.h>

#include "core/daemon.h"
#include "core/job.h"

/** @return The "devices" object of /status (a new reference). */
json_t *coll_report_devices(const coll_daemon_t *d);

/** @return The "device_pools" array of a job in /status (a new reference), one per device. */
json_t *coll_report_job_devices(const coll_job_t *job);

/** @brief Write the device families of /metrics to @p f. */
void coll_metrics_devices(FILE *f, coll_daemon_t *d);

#endif
