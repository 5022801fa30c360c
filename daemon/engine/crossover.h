/**
 * @file crossover.h
 * @brief The automatic algorithm choice by the cost model (engine/cost.h): for a job of N
 *        nodes and L ranks per node, the size ranges in which each algorithm of the table
 *        (engine/algo.h) is the one the model predicts fastest, per collective.
 *
 * The root daemon computes them once, when the job's rendezvous is complete, from its own
 * constants (the cost_params file, or the built-in ones), and sends them with the job
 * parameters (coll_job_params_t's choices); every node then resolves an automatic choice by
 * comparing the operation's bytes with those integers. So every node chooses alike even when
 * their constants, builds or versions of the model differ (no floating point is compared on
 * the way of an operation), and an operation pays one short scan instead of the model.
 *
 * Candidates are the host-memory entries of a collective that the model knows and whose
 * predicate runs the size; the model never names a lossy algorithm, and an entry it does not
 * know keeps its score, which the choice falls back to where the ranges name nothing.
 * Loop thread only, but for the pure functions (coll_crossover_make(), coll_crossover_algo(),
 * coll_crossover_cost_algo()), which any thread may call.
 */
#ifndef COLL_ENGINE_CROSSOVER_H
#define COLL_ENGINE_CROSSOVER_H

#include "core/daemon.h"
#include "core/job.h"
#include "engine/cost.h"

/**
 * @return The cost model's algorithm for the table's @p algo of collective @p kind;
 *         COLL_COST_NALGOS when the model has none for it.
 */
coll_cost_algo_t coll_crossover_cost_algo(coll_kind_t kind, coll_algo_t algo);

/**
 * @brief The size ranges of every collective the model knows, for @p nnodes nodes of
 *        @p ranks_per_node ranks, with the constants @p cp (their segment and recursive
 *        doubling's limit replaced by those of @p p, the job's): each range the largest size
 *        up to which its algorithm is the fastest candidate that runs (the first in table
 *        order on a tie), sizes rising within a collective, the last up to UINT64_MAX.
 * @param [in,out] p The job parameters: choices and nchoices set, only on success.
 * @return COLL_OK; COLL_ERR_INVALID for zero nodes or ranks or constants coll_cost_predict()
 *         refuses; COLL_ERR_NOMEM; COLL_ERR_UNSUPPORTED for more than COLL_JOB_CHOICES ranges.
 */
coll_status_t coll_crossover_make(const coll_cost_params_t *cp, uint32_t nnodes,
                                  uint32_t ranks_per_node, coll_job_params_t *p);

/**
 * @return The algorithm @p p's ranges give a @p kind operation of @p bytes per rank;
 *         COLL_ALGO_AUTO when they name none (no range of that kind, or a range where no
 *         candidate runs).
 */
uint32_t coll_crossover_algo(const coll_job_params_t *p, coll_kind_t kind, uint64_t bytes);

/**
 * @brief Read the constants of the daemon's cost_params into d->cost: the file's over the
 *        built-in ones; "" the built-in ones; "none" none (d->cost stays NULL).
 * @return COLL_OK; COLL_ERR_NOMEM; COLL_ERR_INVALID for a bad file (logged with its line), a
 *         negative errno for one that cannot be read (logged).
 */
coll_status_t coll_crossover_start(coll_daemon_t *d);

/** @brief Free d->cost; safe when there is none. */
void coll_crossover_stop(coll_daemon_t *d);

/**
 * @brief The job layer's params hook (core/hooks.h): the ranges of d->cost for the job's
 *        shape into @p p; none (the fixed crossovers) without constants, or when
 *        coll_crossover_make() fails (logged).
 */
void coll_crossover_fill(const coll_daemon_t *d, uint32_t nnodes, uint32_t ranks_per_node,
                         coll_job_params_t *p);

#endif
