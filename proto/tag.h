/**
 * @file tag.h
 * @brief The 64-bit UCX tag of a data-path message between the daemons of a job.
 *
 * Each job has its own UCX worker, so a tag only has to tell apart the messages of one job:
 *   bits 63..24  operation key (low 40 bits; keys in flight differ in them)
 *   bits 23..22  kind: descriptor, reduce-scatter or all-gather
 *   bits 21..10  ring step (so at most 4096 nodes)
 *   bits  9..0   pipeline column modulo 1024 (at most 64 columns are in flight)
 * A stage's messages (the parameter service's exchange of sums, engine/stage.h) have kind 0
 * like the descriptor, column 1 + their round and the sending node as the step
 * (coll_tag_stage()); the descriptor's column is 0.
 * Point-to-point messages have kind 3 and carry ranks instead:
 *   bits 63..44  source rank, 43..24 destination rank, 23..22 kind 3, 21..0 key (low 22 bits)
 */
#ifndef COLL_PROTO_TAG_H
#define COLL_PROTO_TAG_H

#include <stdint.h>

/** Message kinds. */
enum { COLL_TAG_DESC = 0, COLL_TAG_RS = 1, COLL_TAG_AG = 2, COLL_TAG_P2P = 3 };

/** Largest node count the tag layout can address. */
#define COLL_TAG_MAX_NODES 4096u

/** Match every bit. */
#define COLL_TAG_MASK_ALL UINT64_MAX

static inline uint64_t coll_tag_make(uint64_t key, unsigned kind, uint32_t step, uint64_t column)
{
    return (key & ((1ull << 40) - 1)) << 24 | (uint64_t)(kind & 3u) << 22 |
           (uint64_t)(step & 0xfffu) << 10 | (column & 0x3ffu);
}

/** @return The kind of a data-path tag (COLL_TAG_*). */
static inline unsigned coll_tag_kind(uint64_t tag)
{
    return (unsigned)(tag >> 22) & 3u;
}

/** @return The ring step of a collective's tag. */
static inline uint32_t coll_tag_step(uint64_t tag)
{
    return (uint32_t)(tag >> 10) & 0xfffu;
}

/** Tag of round @p round (0 .. 1022) of a stage's exchange, sent by node @p from. */
static inline uint64_t coll_tag_stage(uint64_t key, uint32_t round, uint32_t from)
{
    return coll_tag_make(key, COLL_TAG_DESC, from, 1u + round);
}

/** Tag of a point-to-point message from rank @p src to rank @p dst (ranks < 2^20). */
static inline uint64_t coll_tag_p2p(uint32_t src, uint32_t dst, uint64_t key)
{
    return (uint64_t)(src & 0xfffffu) << 44 | (uint64_t)(dst & 0xfffffu) << 24 |
           (uint64_t)COLL_TAG_P2P << 22 | (key & 0x3fffffu);
}

#endif
