#include "proto/a2a.h"

/* The end, in elements, of the furthest non-empty block of rows @p counts / @p displs; -1 when
 * one's end in bytes overflows. */
static int row_end(const uint64_t *table, uint32_t world, unsigned counts, size_t esize,
                   uint64_t *end_p, uint32_t *bad_p)
{
    uint64_t end = 0, limit = UINT64_MAX / esize;

    for (uint32_t j = 0; j < world; j++) {
        uint64_t n = coll_a2a_at(table, world, counts, j);
        uint64_t d = coll_a2a_at(table, world, counts + 1, j);
        if (n == 0) {
            continue;
        }
        if (n > limit || d > limit - n) {
            *bad_p = j;
            return -1;
        }
        end = d + n > end ? d + n : end;
    }
    *end_p = end;
    return 0;
}

int coll_a2a_extent(const uint64_t *table, uint32_t world, size_t esize, uint64_t *send_p,
                    uint64_t *recv_p, uint32_t *bad_p)
{
    uint64_t se, re;

    if (row_end(table, world, COLL_A2A_SCOUNTS, esize, &se, bad_p) != 0 ||
        row_end(table, world, COLL_A2A_RCOUNTS, esize, &re, bad_p) != 0) {
        return -1;
    }
    *send_p = se;
    *recv_p = re;
    return 0;
}
