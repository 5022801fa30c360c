/*
 * Reference models of the compressed allreduces (docs/compression.md), written from the
 * documented algorithms, independently of the engine's code: the tests over the fake net
 * (tests/unit/engine/test_codec.c) and with real daemons (tests/system/compression/compress_check.c)
 * both check the daemon against them.
 *
 * A model holds every node's worker residual (and server residual, and PowerSGD's Q) and steps
 * through operations: given every rank's input, it returns the result each rank must receive.
 *
 *   TopK: x = residual + the node's ranks' inputs (float32, in that order); the k =
 *     max(1, ceil(ratio x count x (1 - 2^-40))) largest |x|, ties to the lower index; result =
 *     sum over nodes in rank order of float32(weight x value); residual = x with them zeroed.
 *   fp16, bf16, 1-bit: chunks of ceil(count / N) rounded up to 16 elements; each chunk of x
 *     encoded (16-bit: a scale 2^p putting the largest magnitude in [2^14, 2^15), rounding by
 *     compress_ref.h's frexp/nearbyint; 1-bit: signs, sign(0) = +1, and ||x||_2 / sqrt(n) in
 *     double), worker residual x - decode; owner c: y = its server residual + the decoded
 *     contributions times the weight in rank order (float32); y encoded, server residual
 *     y - decode(y); result: every chunk's decode(y).
 *   PowerSGD (in double): the layout's matrices at rank min(n, m, r) where (n + m) r 2 < n m,
 *     the rest summed exactly; Q (drawn by coll_lowrank_init_q() from the engine's documented
 *     seed) orthonormalized by Gram-Schmidt, P = sum of M Q, orthonormalized, Q = weight x sum
 *     of M^T P, result P Q^T, residual M - a P Q^T with a = L / (weight x world).
 */
#ifndef TEST_COMPRESS_MODEL_H
#define TEST_COMPRESS_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Rank @p rank's input element @p i at step @p step. */
typedef float (*cm_input_fn)(uint32_t rank, uint32_t step, uint64_t i, void *arg);

typedef struct cm cm_t;

/**
 * @brief A model of @p nodes nodes of @p local ranks each (rank = node x local + l) running
 *        @p spec (coll_compression_parse() text) on buckets of @p count elements, @p avg for
 *        COLL_AVG (else COLL_SUM), job @p job, bucket @p bucket; PowerSGD: @p nt tensors of
 *        @p shape (rows, cols pairs). @return The model (free with cm_free()); NULL on a bad
 *        spec or no memory.
 */
cm_t *cm_new(uint32_t nodes, uint32_t local, uint64_t count, int avg, const char *spec,
             const char *job, uint32_t bucket, const uint64_t *shape, size_t nt);

/** @brief One operation at step @p step: @p out (count) = what every rank receives. */
void cm_step(cm_t *m, uint32_t step, cm_input_fn in, void *arg, double *out);

/**
 * @brief One parameter-service step's reduction at step @p step (docs/parameter-service.md):
 *        fp16, bf16, 1-bit: the compressed reduce-scatter alone, @p out[i] = the sum over
 *        nodes in rank order of the decoded contributions times the weight, in float32 from
 *        0, for the chunk that holds i (no server residual, no second encoding; the worker
 *        residuals as cm_step()); TopK: cm_step()'s result. PowerSGD is not modelled (the
 *        service refuses it): @p out untouched.
 */
void cm_step_reduced(cm_t *m, uint32_t step, cm_input_fn in, void *arg, double *out);

/** @return Node @p node's worker residual (count floats). */
const float *cm_residual(const cm_t *m, uint32_t node);

/** @return Node @p node's server residual and its length in @p len (0 unless two-sided). */
const float *cm_server_residual(const cm_t *m, uint32_t node, uint64_t *len);

/** @return The tolerance of a comparison with the engine, relative to the largest result:
 *          0 for TopK (exact in float32), 1e-6 for the two-sided codecs, 1e-4 for PowerSGD. */
double cm_rel_tolerance(const cm_t *m);

void cm_free(cm_t *m);

#endif
