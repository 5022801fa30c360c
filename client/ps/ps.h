/**
 * @file ps.h
 * @brief The parameter service's client side shared by ps.c and ckpt.c (not installed).
 */
#ifndef COLL_CLIENT_PS_H
#define COLL_CLIENT_PS_H

#include <stddef.h>
#include <stdint.h>

#include "client/api/api.h"

/** Codes in the bucket field of the service's control operations' keys (ps.c). */
enum { COLL__PS_CODE_SAVE = 0xFFF2, COLL__PS_CODE_LOAD = 0xFFF3 };

struct coll_ps {
    coll_comm_t *comm;
    float *params;          /**< the rank's flat parameters (the user's, in the pool) */
    size_t count;           /**< elements */
    size_t num_layers, num_buckets;
    size_t *bucket_off;     /**< [num_buckets] first element of each bucket */
    size_t *bucket_count;   /**< [num_buckets] */
    uint64_t *bucket_steps; /**< [num_buckets] steps submitted */
    uint64_t fingerprint;   /**< of the registration (proto/ps_records.h) */
    unsigned key_space;
    coll_compression_t compression; /**< of every step (method NONE: exact) */
};

/** @return The key of the service's operation for @p step and bucket (or code) @p code. */
uint64_t coll__ps_key(const coll_ps_t *ps, uint64_t step, unsigned code);

/**
 * @brief Submit one of the service's control operations (coll_kind_t @p kind) with a uint8
 *        buffer of @p count bytes and key @p key, and wait for it. Takes the lock.
 * @param arg What the submission's layout field carries for the service: a registration's
 *            fingerprint, a save's or a load's step.
 * @return Its status.
 */
coll_status_t coll__ps_control(coll_ps_t *ps, uint32_t kind, const void *send, void *recv,
                               size_t count, uint64_t arg, uint64_t key);

#endif
