#include "proto/a2a.h"

#include <stdlib.h>

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

/* A non-empty receive block: where it starts and ends, whose it is. */
typedef struct {
    uint64_t lo, hi;
    uint32_t rank;
} block_t;

static int by_start(const void *a, const void *b)
{
    const block_t *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

int coll_a2a_recv_apart(const uint64_t *table, uint32_t world, uint32_t *a_p, uint32_t *b_p)
{
    block_t *b = malloc((world > 0 ? world : 1) * sizeof(*b));
    uint32_t n = 0;
    int apart = 1;

    if (b == NULL) {
        return -1;
    }
    for (uint32_t j = 0; j < world; j++) {
        uint64_t c = coll_a2a_at(table, world, COLL_A2A_RCOUNTS, j);
        uint64_t d = coll_a2a_at(table, world, COLL_A2A_RDISPLS, j);
        if (c > 0) {
            b[n++] = (block_t){d, d + c, j};
        }
    }
    qsort(b, n, sizeof(*b), by_start);
    for (uint32_t k = 1; k < n && apart; k++) {
        if (b[k].lo < b[k - 1].hi) {
            *a_p = b[k - 1].rank < b[k].rank ? b[k - 1].rank : b[k].rank;
            *b_p = b[k - 1].rank < b[k].rank ? b[k].rank : b[k - 1].rank;
            apart = 0;
        }
    }
    free(b);
    return apart;
}
