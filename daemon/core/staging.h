/**
 * @file staging.h
 * @brief Per-job cache of staging blocks for segments in flight (receive and accumulate
 *        buffers of the ring). Blocks are allocated the first time an operation needs them and
 *        reused by later ones, so the data path allocates nothing in steady state. Blocks are
 *        host memory (COLL_MEM_HOST, kernels/mem_kind.h).
 */
#ifndef COLL_STAGING_H
#define COLL_STAGING_H

#include <stdint.h>

#include "core/job.h"

/**
 * @brief A block of job->engine.staging_bytes, 64-byte aligned.
 * @return The block, or NULL when memory is exhausted.
 */
uint8_t *coll_staging_get(coll_job_t *job);

/** @brief Return a block to the job's cache. Safe with NULL. */
void coll_staging_put(coll_job_t *job, uint8_t *block);

/** @brief Free every cached block (job teardown). */
void coll_staging_release_all(coll_job_t *job);

#endif
