/*
 * The compressors' arithmetic that does not touch a buffer (compress.h): the same on every node
 * and for every memory kind.
 */
#include <math.h>

#include "kernels/compress.h"

size_t coll_onebit_sign_bytes(size_t count)
{
    return count / 8 + (count % 8 != 0);
}

size_t coll_topk_k(size_t count, double ratio)
{
    if (count == 0) {
        return 0;
    }
    if (!(ratio > 0)) {
        return 1;
    }
    if (ratio >= 1) {
        return count;
    }
    double x = ratio * (double)count;
    x = ceil(x - x * 0x1p-40);
    return x < 1 ? 1 : x >= (double)count ? count : (size_t)x;
}

unsigned coll_lowrank_rank(size_t rows, size_t cols, unsigned rank)
{
    size_t r = rank;
    r = rows < r ? rows : r;
    r = cols < r ? cols : r;
    return (unsigned)r;
}

int coll_lowrank_should_compress(size_t rows, size_t cols, unsigned rank, double min_rate)
{
    return ((double)rows + (double)cols) * (double)rank * min_rate < (double)rows * (double)cols;
}
