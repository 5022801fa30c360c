/**
 * @file plan.h
 * @brief The bucket plan of a bucketer (bucketer.c): which parameter goes into which bucket, at
 *        which offset. A pure function of the parameters, an order and the caps, so that unit
 *        tests check it against hand-computed plans without a daemon. Not installed.
 */
#ifndef COLL_CLIENT_BUCKET_PLAN_H
#define COLL_CLIENT_BUCKET_PLAN_H

#include <stddef.h>

#include <collective.h>

/** What the plan needs of a parameter. */
typedef struct {
    size_t count;
    coll_dtype_t dtype;
} coll__bp_param_t;

/** One bucket of a plan. */
typedef struct {
    coll_dtype_t dtype;
    size_t count;   /**< elements */
    size_t first;   /**< its parameters: members[first .. first + nparams) */
    size_t nparams;
} coll__bp_bucket_t;

/** A plan. Its arrays are its own (coll__bplan_free()). */
typedef struct {
    size_t nparams;
    size_t nbuckets;
    coll__bp_bucket_t *buckets;
    size_t *members;   /**< parameters bucket after bucket, each bucket's in plan order */
    size_t *bucket_of; /**< per parameter: its bucket */
    size_t *offset_of; /**< per parameter: element offset of its view in the bucket */
} coll__bplan_t;

/**
 * @brief Lay out @p n parameters: walk them in @p order (a permutation of 0..n-1), append each
 *        to the open bucket of its datatype, and close that bucket once its bytes reach the cap:
 *        @p first_cap for the first bucket of each datatype, @p cap for the others (DDP's
 *        compute_bucket_assignment_by_size). Buckets are numbered by the walk position of their
 *        first parameter.
 * @param [out] plan  Filled on COLL_OK; free with coll__bplan_free().
 * @return COLL_OK; COLL_ERR_INVALID when @p order is not a permutation, a dtype is unknown or
 *         a cap is 0; COLL_ERR_NOMEM.
 */
coll_status_t coll__bplan_build(const coll__bp_param_t *params, size_t n, const size_t *order,
                                size_t first_cap, size_t cap, coll__bplan_t *plan);

/** @brief Free a plan's arrays (safe on a zeroed plan). */
void coll__bplan_free(coll__bplan_t *plan);

/** @return Nonzero when both plans put every parameter at the same bucket and offset. */
int coll__bplan_equal(const coll__bplan_t *a, const coll__bplan_t *b);

/** @brief Fill @p order with n-1, ..., 0 (reverse registration: the initial walk). */
void coll__bplan_reverse_order(size_t *order, size_t n);

#endif
