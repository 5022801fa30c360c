/*
 * Inner loops of TopK (topk.c), compiled once per instruction set by compress_<isa>.c; see
 * compress_isa.h for the contract of each. The histograms of the radix select stay scalar in
 * topk.c (a scatter of increments does not vectorize); what vectorizes is the residual update
 * and the search for the next element at or above a threshold, which is most of the data.
 */
#ifndef COLL_KERNELS_TOPK_LOOPS_H
#define COLL_KERNELS_TOPK_LOOPS_H

#include "compress_isa.h"
#include "half.h"

/* Elements per block of topk_find: one maximum per block, then a scalar look inside it. */
#define TOPK_FIND_BLOCK 64

static void ef_add(const float *g, float *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        e[i] = g[i] + e[i];
    }
}

static size_t topk_find(const float *v, size_t n, uint32_t t)
{
    size_t i = 0;

    /* The largest key of each block, an unsigned maximum that vectorizes; most blocks have
     * none at or above t (t is near the k-th largest), so the scalar look below is rare. */
    for (; i + TOPK_FIND_BLOCK <= n; i += TOPK_FIND_BLOCK) {
        uint32_t m = 0;
        for (size_t l = 0; l < TOPK_FIND_BLOCK; l++) {
            uint32_t k = coll__mag_key(coll__f32_bits(v[i + l]));
            m = k > m ? k : m;
        }
        if (m >= t) {
            break;
        }
    }
    for (; i < n; i++) {
        if (coll__mag_key(coll__f32_bits(v[i])) >= t) {
            return i;
        }
    }
    return n;
}

#endif
