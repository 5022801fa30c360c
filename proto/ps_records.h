/**
 * @file ps_records.h
 * @brief The parameter service's records (include/collective_ps.h): the registration a rank
 *        writes into the job's pool for the daemon to read, and the checkpoint image of one
 *        node's shard of the optimizer state.
 *
 * Both are fixed little-endian layouts of 64-bit aligned fields, read in place by the other
 * side of one host (registration) or from a file (checkpoint), and checked field by field
 * before use: nothing in them is trusted.
 *
 * Registration: a coll_ps_reg_t, then num_layers coll_ps_reg_layer_t. Its fingerprint (FNV-1a
 * 64 of all those bytes) goes into the descriptor of the registration, so nodes that registered
 * differently fail with COLL_ERR_MISMATCH, and into every checkpoint image, so an image is
 * loaded only by the registration it was saved from.
 *
 * Checkpoint image of node r of N: a coll_ps_ckpt_t, then num_buckets coll_ps_ckpt_chunk_t (the
 * chunk of each bucket the node owns, bucket-relative), then nstate state arrays of
 * shard_elems float32 each (the optimizer's state arrays: SGD and LARS the momentum; AdamW and
 * LAMB the first, then the second moment), each the concatenation of the node's chunks in
 * bucket order.
 */
#ifndef COLL_PROTO_PS_RECORDS_H
#define COLL_PROTO_PS_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Version of both records. */
#define COLL_PS_RECORD_VERSION 1u
/** "PSRG" and "PSCK". */
#define COLL_PS_REG_MAGIC 0x47525350u
#define COLL_PS_CKPT_MAGIC 0x4b435350u

/** The optimizer's settings (collective_ps.h coll_ps_optim_t), fixed layout. */
typedef struct {
    double momentum, dampening, weight_decay, beta1, beta2, eps, eta;
    double trust_min, trust_max, phi_min, phi_max, clip_grad_norm, clip_eps;
    uint32_t kind, nesterov, lamb_bias, eps_inside_sqrt, grad_averaging, l2;
} coll_ps_reg_optim_t;

/** The schedule (collective_ps.h coll_ps_schedule_t), fixed layout. */
typedef struct {
    double base_lr, warmup_start_lr, gamma, final_lr;
    uint64_t base_batch, global_batch, warmup_steps, total_steps;
    uint64_t milestones[COLL_PS_MAX_MILESTONES];
    uint32_t decay, num_milestones;
} coll_ps_reg_sched_t;

/** The head of a registration. */
typedef struct {
    uint32_t magic;       /**< COLL_PS_REG_MAGIC */
    uint32_t version;     /**< COLL_PS_RECORD_VERSION */
    uint32_t num_layers;  /**< 1 .. COLL_PS_MAX_LAYERS */
    uint32_t num_buckets; /**< 1 .. COLL_PS_MAX_BUCKETS */
    uint64_t count;       /**< elements of all layers */
    coll_ps_reg_optim_t optim;
    coll_ps_reg_sched_t sched;
} coll_ps_reg_t;

/** One layer of a registration. */
typedef struct {
    uint64_t count;  /**< >= 1 */
    uint32_t flags;  /**< COLL_PS_NO_WEIGHT_DECAY | COLL_PS_NO_TRUST */
    uint32_t bucket; /**< 0 for the first layer, then the same or one more */
} coll_ps_reg_layer_t;

/** @return Bytes of a registration of @p num_layers layers. */
static inline size_t coll_ps_reg_bytes(size_t num_layers)
{
    return sizeof(coll_ps_reg_t) + num_layers * sizeof(coll_ps_reg_layer_t);
}

/**
 * @brief Check a registration of @p len bytes field by field: magic, version, sizes, layers
 *        (counts >= 1, buckets from 0 without gaps, known flags), the element count, the
 *        optimizer kind and the enums. The settings' ranges are the kernels' and the schedule's
 *        own checks (the daemon runs them).
 * @return COLL_OK; COLL_ERR_INVALID with the first problem in @p err. Thread-safe.
 */
coll_status_t coll_ps_reg_check(const void *reg, size_t len, char *err, size_t errlen);

/** @return FNV-1a 64 of @p len bytes, never 0 (0 becomes 1). Thread-safe. */
uint64_t coll_ps_fingerprint(const void *data, size_t len);

/** @return State arrays of @p kind: 0 for SGD without momentum, 1 for SGD and LARS, 2 for AdamW
 *          and LAMB. */
uint32_t coll_ps_state_arrays(uint32_t kind, double momentum);

/** The head of a checkpoint image (and of the reply of a save). */
typedef struct {
    uint32_t magic;        /**< COLL_PS_CKPT_MAGIC */
    uint32_t version;      /**< COLL_PS_RECORD_VERSION */
    uint64_t fingerprint;  /**< of the registration */
    uint64_t step;         /**< steps done */
    uint64_t count;        /**< elements of the registration */
    uint64_t shard_elems;  /**< elements of this node's chunks together */
    uint64_t state_offset; /**< in a save's reply: pool offset of the node's state arrays;
                                0 in an image */
    uint32_t nodes;        /**< nodes of the job that saved it */
    uint32_t node;         /**< the node whose shard this is */
    uint32_t nstate;       /**< state arrays */
    uint32_t num_buckets;
    uint32_t optimizer;    /**< coll_ps_optimizer_t */
    uint32_t reserved;     /**< 0 */
} coll_ps_ckpt_t;

/** A node's chunk of one bucket, in elements from the bucket's start. */
typedef struct {
    uint64_t off;
    uint64_t len;
} coll_ps_ckpt_chunk_t;

/** @return Bytes of the head and chunk table of @p num_buckets buckets (a save's reply). */
static inline size_t coll_ps_ckpt_head_bytes(size_t num_buckets)
{
    return sizeof(coll_ps_ckpt_t) + num_buckets * sizeof(coll_ps_ckpt_chunk_t);
}

/**
 * @brief Check an image of @p len bytes: magic, version, node < nodes, nstate <= 2, the chunk
 *        table (each chunk inside its bucket, the lengths adding up to shard_elems) and the
 *        size (head, table and state exactly @p len bytes). With @p head_only the state arrays
 *        are not expected (a save's reply).
 * @return COLL_OK; COLL_ERR_INVALID with the first problem in @p err. Thread-safe.
 */
coll_status_t coll_ps_ckpt_check(const void *image, size_t len, int head_only, char *err,
                                 size_t errlen);

/** @return The chunk table of a checked image. */
static inline const coll_ps_ckpt_chunk_t *coll_ps_ckpt_chunks(const void *image)
{
    return (const coll_ps_ckpt_chunk_t *)(const void *)((const uint8_t *)image +
                                                        sizeof(coll_ps_ckpt_t));
}

/** @return State array @p k of a checked image. */
static inline const float *coll_ps_ckpt_state(const void *image, uint32_t k)
{
    const coll_ps_ckpt_t *h = image;
    return (const float *)(const void *)((const uint8_t *)image +
                                         coll_ps_ckpt_head_bytes(h->num_buckets)) +
           (size_t)k * h->shard_elems;
}

#endif
