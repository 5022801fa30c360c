/**
 * @file ps.h
 * @brief The parameter service's face to the other layers (docs/parameter-service.md): the
 *        hooks through which the engine hands it the service's operations, the end of a job's
 *        service, and what /status and /metrics show of it. The layer sits above the engine
 *        (whose operations carry its steps, engine/stage.h) and below the job layer and admin,
 *        which free and show it. Loop thread only.
 */
#ifndef COLL_PS_PS_H
#define COLL_PS_PS_H

#include <stdint.h>

#include "core/job.h"
#include "engine/stage.h"

/** The hooks of the service's operations, for d->stage_hooks (daemon.c installs them). */
extern const coll_stage_hooks_t coll_ps_hooks;

/** @brief Free the job's service, if it has one (its state goes with the pool). */
void coll_ps_job_free(coll_job_t *job);

/** What a job's service is, for /status and /metrics. */
typedef struct {
    const char *optimizer;       /**< "sgd", "adamw", "lars", "lamb" */
    uint64_t params;             /**< registered parameters (every node's) */
    uint32_t layers, buckets;
    uint64_t step;               /**< steps every bucket has done */
    uint64_t shard_params;       /**< parameters of this node's shard */
    uint64_t state_bytes;        /**< this node's optimizer state */
    uint64_t state_bytes_total;  /**< the whole model's, every node's together */
    uint64_t bucket_steps;       /**< bucket steps completed on this node */
    uint64_t exchange_bytes;     /**< bytes this node sent in the exchanges of sums */
    double lr;                   /**< the learning rate of the next step */
} coll_ps_info_t;

/** @brief Describe the job's service. @return 1 when it has one (@p info filled), 0 if not. */
int coll_ps_job_info(const coll_job_t *job, coll_ps_info_t *info);

#endif
