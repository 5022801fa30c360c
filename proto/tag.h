/**
 * @file tag.h
 * @brief The 64-bit UCX tag of a data-path message between the daemons of a job.
 *
 * Each job has its own UCX worker, so a tag only has to tell apart the messages of one job. Its
 * communicators (the world, group 0, and the groups split from it, core/group.h) share that
 * worker: every tag carries the group, so two groups' transfers never match each other.
 *   bits 63..62  kind: descriptor, reduce-scatter, all-gather or point-to-point
 *   bits 61..50  group (0: the job's world communicator; at most 4095 others)
 * A collective's tag then holds
 *   bits 49..22  operation key: its low 27 bits, and bit 39 (the library's call-order numbers)
 *                as bit 27 (keys in flight on one communicator differ in these)
 *   bits 21..10  ring step (so at most 4096 nodes)
 *   bits  9..0   pipeline column modulo 1024 (at most 64 columns are in flight)
 * and a point-to-point message's
 *   bits 49..30  source rank in the job
 *   bits 29..24  destination's local rank on its node (the message goes to that node)
 *   bit  23      1 for the receiver's answer to the sender (coll_tag_p2p_ack()), 0 for the data
 *   bits 22..0   key (low 23 bits)
 * A stage's messages (the parameter service's exchange of sums, engine/stage.h) have kind 0
 * like the descriptor, column 1 + their round and the sending node as the step
 * (coll_tag_stage()); the descriptor's column is 0. The direct gather and scatter
 * (engine/algos/direct.c) put a node in the step and a local member in the column: kind
 * all-gather, column 0 for a node's descriptor and 1 + i for the block of its local member i;
 * kind reduce-scatter, column 0 for the root's verdict to the node. The all-to-all
 * (engine/algos/alltoallv.c) sends a node's counts with kind reduce-scatter, the node as the
 * step, column 0, and the block of group rank a for local member i of another node with kind
 * all-gather, a as the step (so at most 4096 ranks), i as the column.
 */
#ifndef COLL_PROTO_TAG_H
#define COLL_PROTO_TAG_H

#include <stdint.h>

/** Message kinds. */
enum { COLL_TAG_DESC = 0, COLL_TAG_RS = 1, COLL_TAG_AG = 2, COLL_TAG_P2P = 3 };

/** Largest node count the tag layout can address. */
#define COLL_TAG_MAX_NODES 4096u

/** Largest group id the tag layout can carry (group 0 is the world). */
#define COLL_TAG_MAX_GROUP 4095u

/** Bits of a point-to-point key that its tag carries. */
#define COLL_TAG_P2P_KEY_BITS 23u

/** Match every bit. */
#define COLL_TAG_MASK_ALL UINT64_MAX

/** The 28 key bits of a collective's tag: the key's low 27 bits and its bit 39 as bit 27. */
static inline uint64_t coll_tag_key(uint64_t key)
{
    return (key & ((1ull << 27) - 1)) | ((key >> 39) & 1u) << 27;
}

/** Tag of a message of a collective of @p group. */
static inline uint64_t coll_tag_make(uint32_t group, uint64_t key, unsigned kind, uint32_t step,
                                     uint64_t column)
{
    return (uint64_t)(kind & 3u) << 62 | (uint64_t)(group & 0xfffu) << 50 |
           coll_tag_key(key) << 22 | (uint64_t)(step & 0xfffu) << 10 | (column & 0x3ffu);
}

/** @return The kind of a data-path tag (COLL_TAG_*). */
static inline unsigned coll_tag_kind(uint64_t tag)
{
    return (unsigned)(tag >> 62);
}

/** @return The group of a data-path tag. */
static inline uint32_t coll_tag_group(uint64_t tag)
{
    return (uint32_t)(tag >> 50) & 0xfffu;
}

/** @return The ring step of a collective's tag. */
static inline uint32_t coll_tag_step(uint64_t tag)
{
    return (uint32_t)(tag >> 10) & 0xfffu;
}

/** Tag of round @p round (0 .. 1022) of a stage's exchange of @p group, sent by node @p from. */
static inline uint64_t coll_tag_stage(uint32_t group, uint64_t key, uint32_t round,
                                      uint32_t from)
{
    return coll_tag_make(group, key, COLL_TAG_DESC, from, 1u + round);
}

/** Tag of a point-to-point message of @p group from job rank @p src (< 2^20) to the rank of
 *  local rank @p dst_local (< 64) on its node. */
static inline uint64_t coll_tag_p2p(uint32_t group, uint32_t src, uint32_t dst_local,
                                    uint64_t key)
{
    return (uint64_t)COLL_TAG_P2P << 62 | (uint64_t)(group & 0xfffu) << 50 |
           (uint64_t)(src & 0xfffffu) << 30 | (uint64_t)(dst_local & 0x3fu) << 24 |
           (key & ((1ull << COLL_TAG_P2P_KEY_BITS) - 1));
}

/** Tag of the receiver's answer to the message of coll_tag_p2p(@p group, @p src, ...,
 *  @p key): it goes from job rank @p dst (the receiver) to the sender, local rank
 *  @p src_local on its node. */
static inline uint64_t coll_tag_p2p_ack(uint32_t group, uint32_t dst, uint32_t src_local,
                                        uint64_t key)
{
    return coll_tag_p2p(group, dst, src_local, key) | 1ull << 23;
}

#endif
