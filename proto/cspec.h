/**
 * @file cspec.h
 * @brief A compression spec (collective.h, coll_compression_t) in the 64 bits that the wire's
 *        Submit.compression, the control block's submission record and the data-path
 *        descriptor carry; its warm-up and bucket travel in fields of their own.
 *
 * Bits: 0-7 method (coll_compress_method_t), 8-15 flags (COLL_COMPRESS_NO_EF), 16-31 the
 * PowerSGD rank (0 for other methods), 32-51 the TopK ratio in millionths (0 for other
 * methods), 52-63 zero. NONE is 0. The daemon checks an unpacked spec with
 * coll__compression_check() (common/compression.h) and refuses a submission that fails it.
 */
#ifndef COLL_PROTO_CSPEC_H
#define COLL_PROTO_CSPEC_H

#include <stdint.h>

#include <collective.h>

/** @return The 64-bit form of @p c, whose TopK ratio is already in millionths @p ratio_units. */
static inline uint64_t coll_cspec_pack(const coll_compression_t *c, uint32_t ratio_units)
{
    uint64_t topk = c->method == COLL_COMPRESS_TOPK, psgd = c->method == COLL_COMPRESS_POWERSGD;
    return (uint64_t)(c->method & 0xffu) | (uint64_t)(c->flags & 0xffu) << 8 |
           (psgd ? (uint64_t)(c->rank & 0xffffu) << 16 : 0) |
           (topk ? (uint64_t)(ratio_units & 0xfffffu) << 32 : 0);
}

/**
 * @brief The spec of @p v into @p c (warm-up and bucket 0), the ratio as a double of the
 *        millionths. @return 1 when bits 52-63 are zero, 0 otherwise (then @p c is undefined).
 */
static inline int coll_cspec_unpack(uint64_t v, coll_compression_t *c)
{
    c->method = (coll_compress_method_t)(v & 0xffu);
    c->flags = (unsigned)(v >> 8) & 0xffu;
    c->rank = (unsigned)(v >> 16) & 0xffffu;
    c->ratio = (double)((v >> 32) & 0xfffffu) / COLL_COMPRESS_RATIO_UNITS;
    c->warmup = 0;
    c->bucket = 0;
    return (v >> 52) == 0;
}

/** @return The TopK ratio of a packed spec in millionths. */
static inline uint32_t coll_cspec_ratio_units(uint64_t v)
{
    return (uint32_t)(v >> 32) & 0xfffffu;
}

#endif
