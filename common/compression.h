/**
 * @file compression.h
 * @brief Internals of compression specs shared by the client library, the daemon and the tools
 *        (the public parser and formatter are in collective.h).
 */
#ifndef COLL_COMMON_COMPRESSION_H
#define COLL_COMMON_COMPRESSION_H

#include <stdint.h>

#include <collective.h>

/**
 * @return A TopK ratio in millionths (COLL_COMPRESS_RATIO_UNITS), rounded to nearest and at
 *         least 1: what travels, and what every node computes k from. Pure.
 */
uint32_t coll__compress_ratio_units(double ratio);

/**
 * @brief Check a spec's fields: a known method, known flags, a TopK ratio in (0, 1], a
 *        PowerSGD rank in 1..COLL_COMPRESS_MAX_RANK, and no flags or warm-up with NONE
 *        (the bucket is not checked: any value is valid).
 * @return COLL_OK or COLL_ERR_INVALID. Pure.
 */
coll_status_t coll__compression_check(const coll_compression_t *c);

#endif
