/**
 * @file a2a.h
 * @brief The count table of one rank's all-to-all with per-rank sizes (COLL_KIND_ALLTOALLV):
 *        where it lies and how it reads. The library writes it into the job's pool and names it
 *        in the submission's @c layout field (which an all-to-all has no other use for); the
 *        daemon copies it from there at submission, after checking that it lies in the rank's
 *        own allocations, and never reads the pool's copy again.
 *
 * Four rows of world_size little-endian uint64_t, in elements of the operation's dtype, as
 * MPI_Alltoallv counts them: the counts the rank sends to each rank, their displacements in
 * its send buffer, the counts it receives from each rank, their displacements in its receive
 * buffer.
 */
#ifndef COLL_PROTO_A2A_H
#define COLL_PROTO_A2A_H

#include <stddef.h>
#include <stdint.h>

/** The rows of a count table. */
enum {
    COLL_A2A_SCOUNTS = 0, /**< elements sent to each rank */
    COLL_A2A_SDISPLS = 1, /**< their displacement in the send buffer */
    COLL_A2A_RCOUNTS = 2, /**< elements received from each rank */
    COLL_A2A_RDISPLS = 3, /**< their displacement in the receive buffer */
    COLL_A2A_ROWS = 4
};

/** @return Bytes of the count table of a communicator of @p world ranks. */
static inline size_t coll_a2a_table_bytes(uint32_t world)
{
    return (size_t)COLL_A2A_ROWS * world * sizeof(uint64_t);
}

/** @return Entry @p j of row @p row of @p table (of @p world ranks). */
static inline uint64_t coll_a2a_at(const uint64_t *table, uint32_t world, unsigned row,
                                   uint32_t j)
{
    return table[(size_t)row * world + j];
}

/**
 * @brief The elements the rank of @p table reads from its send buffer and writes to its
 *        receive buffer: the end of its furthest block with a count above 0 (a block of 0
 *        elements touches nothing, whatever its displacement).
 * @param [in] esize Bytes of an element (above 0).
 * @param [out] bad_p On failure, the rank whose entry is wrong.
 * @return 0, or -1 when a block's end in bytes overflows 64 bits (nothing set but *bad_p).
 */
int coll_a2a_extent(const uint64_t *table, uint32_t world, size_t esize, uint64_t *send_p,
                    uint64_t *recv_p, uint32_t *bad_p);

/**
 * @brief Whether the non-empty blocks of @p table's receive rows (of @p world ranks, ends
 *        checked by coll_a2a_extent()) are apart: a receive buffer's blocks may not overlap
 *        (their order of arrival would decide the result). Send blocks may.
 * @param [out] a_p, b_p When they are not, two ranks whose blocks overlap (a < b).
 * @return 1 apart, 0 not (the pair set), -1 no memory.
 */
int coll_a2a_recv_apart(const uint64_t *table, uint32_t world, uint32_t *a_p, uint32_t *b_p);

#endif
