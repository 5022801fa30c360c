/**
 * @file rng.h
 * @brief A small portable pseudo-random generator (SplitMix64, Steele et al. 2014), so that every
 *        rank on every machine draws the same initial weights and the same shuffles from a seed.
 */
#ifndef COLL_TRAIN_RNG_H
#define COLL_TRAIN_RNG_H

#include <stdint.h>

/** Generator state; any value, including 0, is a valid seed. */
typedef struct rng {
    uint64_t state;
} rng_t;

/** @brief Next 64 random bits. */
static inline uint64_t rng_next(rng_t *rng)
{
    uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/** @brief Uniform float in [0, 1), with 24 random bits. */
static inline float rng_uniform(rng_t *rng)
{
    return (float)(rng_next(rng) >> 40) * (1.0f / 16777216.0f);
}

/** @brief Uniform integer in [0, bound), bound > 0 (Lemire's multiply-shift; the bias is
 *         below 2^-32 for the bounds used here). */
static inline uint32_t rng_below(rng_t *rng, uint32_t bound)
{
    return (uint32_t)(((rng_next(rng) >> 32) * (uint64_t)bound) >> 32);
}

/** @brief @p order = a permutation of 0 .. n-1: Fisher-Yates from (seed, epoch) alone, so every
 *         rank walks the training set in the same order in every epoch. */
static inline void rng_epoch_order(uint32_t *order, uint32_t n, uint64_t seed, int epoch)
{
    rng_t rng = {seed ^ (0xd1b54a32d192ed03ull * (uint64_t)epoch)};

    for (uint32_t i = 0; i < n; i++) {
        order[i] = i;
    }
    for (uint32_t i = n - 1; i > 0; i--) {
        uint32_t j = rng_below(&rng, i + 1);
        uint32_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
}

#endif /* COLL_TRAIN_RNG_H */
