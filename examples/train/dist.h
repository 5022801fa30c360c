/**
 * @file dist.h
 * @brief The trainer's view of data parallelism: either a libcollective communicator, or
 *        standalone (one process, no daemon, plain memory, reductions are no-ops).
 *
 * Standalone mode is chosen when COLL_WORLD_SIZE is unset, or when it is 1 and COLL_SOCKET is
 * unset; it is the independent single-process reference for the multi-rank runs.
 */
#ifndef COLL_TRAIN_DIST_H
#define COLL_TRAIN_DIST_H

#include "mlp.h"

#include <collective.h>

#include <stddef.h>
#include <stdint.h>

/** Bound of every wait of the trainer on its collectives, unless --timeout says otherwise. */
#define DIST_DEFAULT_TIMEOUT_MS 300000

/** Data-parallel context of one trainer process. */
typedef struct dist {
    coll_comm_t *comm; /**< NULL in standalone mode */
    int rank;          /**< global rank, 0 .. world_size-1 */
    int world_size;    /**< number of ranks */
    int local_size;    /**< ranks on this node; world_size / local_size is the number of nodes */
    int timeout_ms;    /**< bound of every wait (dist_init() sets DIST_DEFAULT_TIMEOUT_MS) */
} dist_t;

/**
 * @brief Join the job described by the COLL_* environment (coll_comm_create(NULL, ...)), or
 *        set up standalone mode (see above).
 * @param [out] dist  Filled on success.
 * @return 0; -1 after printing the libcollective error to stderr.
 */
int dist_init(dist_t *dist);

/**
 * @brief Leave the job (coll_comm_destroy(), which also unmaps the pool); call it after
 *        dist_free() of every buffer. Safe to call twice.
 */
void dist_fini(dist_t *dist);

/** @return Nonzero when @p dist runs without a communicator. */
int dist_standalone(const dist_t *dist);

/**
 * @brief Allocate @p n zeroed floats that collectives may use: in the job's shared pool
 *        (coll_mem_alloc()), or from the heap in standalone mode.
 * @return The buffer, 64-byte aligned, owned by @p dist until dist_free(); NULL after printing
 *         the error to stderr.
 */
float *dist_alloc(dist_t *dist, size_t n);

/** @brief Free a buffer of dist_alloc(); safe with NULL. */
void dist_free(dist_t *dist, float *buf);

/**
 * @brief Allreduce @p n floats of @p buf in place and wait for the result
 *        (coll_allreduce_async() then coll_req_wait(), at most dist->timeout_ms). A no-op in
 *        standalone mode.
 * @param [in,out] buf  A buffer of dist_alloc().
 * @param [in]     op   COLL_SUM or COLL_AVG.
 * @return 0; -1 after printing coll_strerror() and coll_comm_last_error() to stderr.
 */
int dist_allreduce(dist_t *dist, float *buf, size_t n, coll_redop_t op);

/** @return CLOCK_MONOTONIC now in nanoseconds (the clock of coll_req_timing_t). */
uint64_t dist_now_ns(void);

/** @brief A span of this rank's own work on the timeline's "step" track (a no-op without
 *         COLL_TIMELINE or in standalone mode). */
void dist_span(dist_t *dist, const char *name, uint64_t begin_ns, uint64_t end_ns);

/** How the gradients travel (--comm). */
typedef enum {
    DIST_COMM_BUCKET, /**< buckets submitted during backward as they fill (overlap; default) */
    DIST_COMM_AFTER,  /**< one bucket of everything: one allreduce when backward ends */
    DIST_COMM_TENSOR, /**< one bucket per tensor, each submitted as soon as it is ready */
} dist_comm_t;

/** Options of dist_grads_init(). */
typedef struct dist_grads_opts {
    dist_comm_t comm;
    size_t cap_bytes;       /**< DIST_COMM_BUCKET: bucket cap; 0 = the library's (env, 25 MiB) */
    size_t first_cap_bytes; /**< DIST_COMM_BUCKET: first bucket's; 0 = the library's (1 MiB) */
    unsigned key_space;     /**< distinct per dist_grads_t of one job used together */
    const char *name;       /**< bucketer name in timelines, e.g. "grads" */
    int has_compression;    /**< --compression given: @c compression, else COLL_COMPRESSION */
    coll_compression_t compression;
} dist_grads_opts_t;

/** The gradients of one mlp_t and their exchange. */
typedef struct dist_grads {
    dist_t *dist;
    mlp_t *mlp;
    coll_bucketer_t *bkt; /**< NULL in standalone mode */
    float *heap;          /**< standalone mode: all gradients, contiguous */
    int failed;           /**< a grad_ready failed this iteration (reported once) */
} dist_grads_t;

/** Per-step measurements of the exchange (all 0 in standalone mode). */
typedef struct dist_step_stats {
    /** On the rank's clock: the union over buckets of [submit, the rank saw the completion]
     *  (coll_bucketer_stats_t.comm_ns) */
    double comm_s;
    /** The part of comm_s the trainer spent waiting after backward, in wait_all: never above
     *  comm_s (coll_bucketer_stats_t.exposed_ns) */
    double exposed_s;
    double overlap;     /**< 1 - exposed / comm, in [0, 1] */
    size_t buckets;
    uint64_t wire_bytes;  /**< bytes this node sent for the gradients (coll_req_wire_bytes()) */
    uint64_t dense_bytes; /**< what the uncompressed ring would have sent */
} dist_step_stats_t;

/**
 * @brief Register the network's tensors (per layer "fcL.weight" and "fcL.bias", forward
 *        order) with a bucketer laid out as @p opts says, and bind the network's gradients to
 *        their views in the pool (or to one heap buffer in standalone mode).
 * @return 0; -1 after printing the error.
 */
int dist_grads_init(dist_grads_t *g, dist_t *dist, mlp_t *mlp, const dist_grads_opts_t *opts);

/** @brief Point the network's gradients at this exchange's views again (after another
 *         dist_grads_t used the same network). */
int dist_grads_bind(dist_grads_t *g);

/** @brief mlp_grad_ready_fn: report layer @p layer's weight and bias gradients final
 *         (@p arg is the dist_grads_t). */
void dist_grad_ready(void *arg, const mlp_t *mlp, int layer);

/**
 * @brief End the step's exchange: coll_bucketer_wait_all() (bounded by dist->timeout_ms), then
 *        rebind the views (the first step's rebuild may move them).
 * @param [out] st  Measurements of this step.
 * @return 0; -1 after printing the error.
 */
int dist_grads_wait(dist_grads_t *g, dist_step_stats_t *st);

/** @brief Free the bucketer (or the heap buffer). Safe on a zeroed dist_grads_t. */
void dist_grads_fini(dist_grads_t *g);

#endif /* COLL_TRAIN_DIST_H */
