/*
 * The synthetic model of the parameter service's tests (ps_rank.c, ps_ref.c): layers, buckets,
 * initial weights and each rank's gradients, as pure functions of (element, rank, step) and the
 * weights, so that the service and the reference see the same problem.
 *
 * Layers: three weight matrices and three biases in three buckets (a bucket is consecutive
 * layers); on two nodes each bucket's chunks cut its weight layer in two, so every weight layer
 * is split across the two shards. Biases are excluded (no weight decay, no trust ratio) for LARS
 * and LAMB, as the MLPerf reference and tensorflow/addons exclude them. Layer 4 starts at zero,
 * so LARS and LAMB meet a zero weight norm (trust 1) at step 1.
 *
 * The loss of rank r is sum_i a_i (w_i - c_i)^2 / 2 plus noise, so its gradient is
 * g_i = a_i (w_i - c_i) + 0.05 u(r, t, i) with u uniform in [-1, 1): it depends on the weights,
 * so a wrong update shows in every later step.
 */
#ifndef TEST_PS_MODEL_H
#define TEST_PS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#define PS_MODEL_LAYERS 6
#define PS_MODEL_BUCKETS 3

static const size_t ps_model_counts[PS_MODEL_LAYERS] = {2000, 40, 30000, 64, 5000, 10};
static const size_t ps_model_buckets[PS_MODEL_LAYERS] = {0, 0, 1, 1, 2, 2};

/* splitmix64 of a key */
static inline uint64_t ps_mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1) from a key, exactly representable in float. */
static inline float ps_unit(uint64_t key)
{
    return (float)((double)(ps_mix(key) >> 40) * 0x1p-23 - 1.0);
}

/* The layer of element @p i, and whether it is a bias. */
static inline int ps_model_layer(size_t i)
{
    int l = 0;
    while (l < PS_MODEL_LAYERS - 1 && i >= ps_model_counts[l]) {
        i -= ps_model_counts[l++];
    }
    return l;
}

static inline size_t ps_model_count(void)
{
    size_t n = 0;
    for (int l = 0; l < PS_MODEL_LAYERS; l++) {
        n += ps_model_counts[l];
    }
    return n;
}

/* Initial weight of element @p i (0 in layer 4). */
static inline float ps_model_init(size_t i)
{
    return ps_model_layer(i) == 4 ? 0.0f : 0.5f * ps_unit(i * 3 + 1);
}

static inline double ps_model_a(size_t i)
{
    return 1.0 + 0.5 * ps_unit(i * 3 + 2);
}

static inline double ps_model_c(size_t i)
{
    return ps_unit(i * 3 + 3);
}

static inline double ps_model_noise(int rank, uint64_t step, size_t i)
{
    return 0.05 * ps_unit(((uint64_t)rank << 56) ^ (step << 32) ^ i ^ 0x5555);
}

/* Rank @p rank's gradient of element @p i at step @p step (1, 2, ...) in float, as a trainer
 * computes it from its float weights. */
static inline float ps_model_grad(float w, int rank, uint64_t step, size_t i)
{
    return (float)(ps_model_a(i) * ((double)w - ps_model_c(i)) + ps_model_noise(rank, step, i));
}

#endif
