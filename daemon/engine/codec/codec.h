/**
 * @file codec.h
 * @brief Gradient compression in the engine (docs/compression.md): what the rest of the daemon
 *        calls. The files of this folder, one concept each:
 *
 *   shapes.c    the tensor shapes a registered layout stands for (coll_layout_register())
 *   residual.c  one residual slot per (job, bucket) in the job's pool: error feedback, PowerSGD's
 *               Q, the wire buffers; its reset rule
 *   policy.c    what an operation runs (warm-up, fallbacks, auto) and the root's choice for the
 *               bucket's next operation
 *   estimate.c  the link and compressor measurements auto decides from
 *   rounds.c    the compressed allreduce: rounds of messages between all nodes
 *   twosided.c  fp16, bf16 and 1-bit: compressed reduce-scatter, server error, all-gather
 *   topk.c      TopK: all-gather of (index, value) sets
 *   powersgd.c  PowerSGD: P and Q allreduced, the rest of the bucket dense
 *   staged.c    the parameter service's steps: the codec's reduction, the optimizer on this
 *               node's chunk (engine/stage.h), a float32 all-gather of the parameters
 *   account.c   bytes on the wire per job and method
 *
 * codec.c and account.c are the two features an operation carries (engine/feature.c registers
 * them): compression when it asks for it, the wire's accounting on several nodes.
 *
 * Compression applies between nodes only: every local rank's input is summed first, densely and
 * exactly (engine/combine.c), and the node's sum is compressed, so a node keeps one residual per
 * bucket, not one per GPU (as Deep Gradient Compression recommends for hierarchies).
 *
 * Loop thread only, like the rest of the engine.
 */
#ifndef COLL_ENGINE_CODEC_H
#define COLL_ENGINE_CODEC_H

#include "core/job.h"
#include "core/session.h"
#include "engine/feature.h"
#include "engine/op.h"
#include "proto/wire.h"

/**
 * @brief Register the shapes of a layout for @p job (a client's Layout message) and answer the
 *        session.
 *
 * Errors answered (the job goes on): COLL_ERR_INVALID for a layout registered before with
 * other shapes; COLL_ERR_JOB when the job is not ready or failed; COLL_ERR_NOMEM.
 */
void coll_codec_layout_register(coll_job_t *job, coll_session_t *s, const Coll__Wire__Layout *l);

/** Compression as a feature of the operations that ask for it (engine/feature.h): what an
 *  operation runs (op->desc.run, and the compressed allreduce as op->impl), its bucket's
 *  residual slot, the auto policy message (the completion waits for it), and what the
 *  completion commits. A failure (a busy bucket, no pool memory for the residual) fails the
 *  job; a count that is not its layout's fails the operation on every rank. */
extern const coll_op_feature_t coll_codec_feature;

/** The bytes on the wire as a feature of every allreduce and parameter-service step of a job on
 *  several nodes (account.c): counted per method run, written into the completion
 *  (wire_bytes, dense_bytes), sampled for auto's link estimate. */
extern const coll_op_feature_t coll_wire_feature;

/**
 * @return The digest of the shapes registered for @p layout in @p job (the descriptor's
 *         shapes), 0 when none are.
 */
uint64_t coll_codec_shapes(const coll_job_t *job, uint64_t layout);

/** @brief Free a job's compression state (layouts, slots; their pool memory goes with the
 *         pool). Safe when there is none. */
void coll_codec_job_free(coll_job_t *job);

/* ---- what /status and /metrics show (info.c) ---------------------------------------------- */

/** Reasons an operation that asked for compression ran uncompressed (metric labels). */
#define COLL_CODEC_FALLBACK_REASONS 5

/** A job's compression on this node. */
typedef struct {
    uint64_t ops[COLL_COMPRESS_COUNT];   /**< allreduces between nodes, by method run */
    uint64_t wire_bytes[COLL_COMPRESS_COUNT];  /**< bytes this node sent for them */
    uint64_t dense_bytes[COLL_COMPRESS_COUNT]; /**< what the uncompressed ring would have sent */
    uint64_t resets;                     /**< buckets that started over (count, layout, ...) */
    uint64_t method_resets;              /**< residuals dropped by a change of method */
    uint64_t fallbacks[COLL_CODEC_FALLBACK_REASONS]; /**< by coll_codec_fallback_name() */
    uint64_t nonfinite;                  /**< operations failed by a NaN or infinity */
    double link_bytes_per_s;             /**< auto's link estimate (0: none yet) */
    size_t residual_bytes;               /**< pool bytes of every bucket's slot */
    size_t buckets;                      /**< slots */
    size_t layouts;                      /**< registered layouts */
} coll_codec_job_info_t;

/** One bucket's compression on this node. */
typedef struct {
    uint32_t bucket;
    uint64_t count;
    uint64_t ops;         /**< successful operations since its last reset */
    uint64_t resets;
    char asked[48];       /**< the spec asked for, e.g. "auto" */
    char last[48];        /**< what its last operation ran ("none": uncompressed) */
    char next[48];        /**< auto: what its next operation runs, the root's choice */
    const char *why;      /**< auto on node 0: the estimates behind the choice ("" else) */
    size_t pool_bytes;    /**< its slot in the pool */
} coll_codec_bucket_info_t;

/** @return 1 and @p out filled when @p job has compression state, 0 otherwise. */
int coll_codec_job_info(const coll_job_t *job, coll_codec_job_info_t *out);

/** @return 1 and @p out filled for the @p i-th bucket of @p job (0 ..), 0 past the last. */
int coll_codec_bucket_info(const coll_job_t *job, size_t i, coll_codec_bucket_info_t *out);

/** @return The metric label of fallback reason @p i, e.g. "dtype". */
const char *coll_codec_fallback_name(unsigned i);

#endif
