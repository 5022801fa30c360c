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

#include <collective.h>

#include <stddef.h>

/** Data-parallel context of one trainer process. */
typedef struct dist {
    coll_comm_t *comm; /**< NULL in standalone mode */
    int rank;          /**< global rank, 0 .. world_size-1 */
    int world_size;    /**< number of ranks */
    int local_size;    /**< ranks on this node; world_size / local_size is the number of nodes */
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
 *        (coll_allreduce_async() then coll_req_wait()). A no-op in standalone mode.
 * @param [in,out] buf  A buffer of dist_alloc().
 * @param [in]     op   COLL_SUM or COLL_AVG.
 * @return 0; -1 after printing coll_strerror() and coll_comm_last_error() to stderr.
 */
int dist_allreduce(dist_t *dist, float *buf, size_t n, coll_redop_t op);

#endif /* COLL_TRAIN_DIST_H */
