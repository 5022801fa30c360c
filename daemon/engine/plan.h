/**
 * @file plan.h
 * @brief How an operation of @c count elements is cut into per-node chunks and pipeline segments.
 *
 * The ring (Patarasuk & Yuan 2009) gives node c the chunk c. Chunks are a whole number of
 * 64-byte lines long (the last ones may be shorter or empty), so every piece a kernel or a copy
 * touches starts on a cache line, as NCCL aligns its chunks. Each chunk is cut into @c nseg
 * segments of @c seg_elems (the tail of a chunk may be short or empty); segment j of every
 * chunk forms pipeline column j, and the columns advance independently.
 * All counts and offsets are in elements and are 64-bit: counts above 2^31 work.
 */
#ifndef COLL_PLAN_H
#define COLL_PLAN_H

#include <stddef.h>
#include <stdint.h>

/** A chunk or segment: element offset and length. */
typedef struct {
    uint64_t off;
    uint64_t len;
} coll_range_t;

/** Chunking of one operation. Pure data: same inputs give the same plan on every node. */
typedef struct {
    uint64_t count;       /**< elements of the whole buffer */
    uint32_t nnodes;      /**< chunks */
    uint64_t chunk_elems; /**< nominal chunk length, a multiple of the line */
    uint64_t seg_elems;   /**< nominal segment length, a multiple of the line */
    uint64_t nseg;        /**< segments per chunk (0 when count is 0) */
    /* Blocked plans (reduce-scatter, all-gather): the buffer is world_size blocks of
     * block_elems, block k belonging to rank k; chunk c is the blocks of node c's ranks. */
    int blocked;
    uint64_t block_elems;          /**< elements per rank */
    uint64_t seg_per_block;        /**< segments per block */
    const uint32_t *const *ranks;  /**< ranks of each node, by local rank (borrowed) */
    const uint32_t *nranks;        /**< ranks per node (borrowed) */
} coll_plan_t;

/** A piece of a chunk: its element range, and in a blocked plan whose block it is in. */
typedef struct {
    uint64_t off;       /**< element offset in the buffer */
    uint64_t len;       /**< elements; 0 for a column the chunk does not have */
    uint32_t local;     /**< blocked: the owning rank's local index on the chunk's node */
    uint64_t block_off; /**< blocked: element offset inside that rank's block */
} coll_piece_t;

/**
 * @brief Plan @p count elements of @p esize bytes over @p nnodes chunks with segments of at most
 *        @p segment_bytes (rounded down to whole lines, at least one line).
 */
void coll_plan_init(coll_plan_t *plan, uint64_t count, uint32_t nnodes, size_t esize,
                    size_t segment_bytes);

/** @return Chunk @p c (0 <= c < nnodes); may be empty. */
coll_range_t coll_plan_chunk(const coll_plan_t *plan, uint32_t c);

/** @return Segment @p j (0 <= j < nseg) of chunk @p c; may be empty. Even plans only. */
coll_range_t coll_plan_segment(const coll_plan_t *plan, uint32_t c, uint64_t j);

/**
 * @brief Plan a buffer of @p nnodes' ranks' blocks of @p block_elems each: chunk c holds the
 *        blocks of node c's @p nranks[c] ranks @p ranks[c] in local order, each block cut into
 *        segments that never cross a block boundary. nseg covers the node with the most ranks;
 *        nodes with fewer have empty trailing columns. The arrays are borrowed.
 */
void coll_plan_init_blocked(coll_plan_t *plan, uint64_t block_elems, uint32_t nnodes,
                            size_t esize, size_t segment_bytes, const uint32_t *const *ranks,
                            const uint32_t *nranks);

/** @return Piece @p j (0 <= j < nseg) of chunk @p c, for even and blocked plans alike. */
coll_piece_t coll_plan_piece(const coll_plan_t *plan, uint32_t c, uint64_t j);

#endif
