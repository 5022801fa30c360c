/**
 * @file rd_plan.h
 * @brief The schedule of recursive doubling over the nodes, which the daemons
 *        (daemon/engine/algos/rd.c) and the nodes' leaders on the direct path
 *        (client/direct/rounds.c) both follow, so that their results agree bit for bit:
 *        Thakur, Rabenseifner and Gropp, "Optimization of Collective Communication Operations in
 *        MPICH" (2005), section 4.2, with the fold of the nodes beyond the largest power of two:
 *        of the first 2 * rem nodes each even one sends its partial to the odd one after it and
 *        sits out the doubling, and gets the result back from it at the end (the unfold).
 *        Pure functions of a value; thread-safe.
 */
#ifndef COLL_PROTO_RD_PLAN_H
#define COLL_PROTO_RD_PLAN_H

#include <stdint.h>

/** Steps of the exchange, used as the tag's step: the fold, the unfold, then round k's
 *  COLL_RD_STEP_ROUND0 + k. */
enum { COLL_RD_STEP_FOLD = 0, COLL_RD_STEP_UNFOLD = 1, COLL_RD_STEP_ROUND0 = 2 };

/** One node's part in recursive doubling over @c n nodes. */
typedef struct {
    uint32_t n, r;   /**< nodes, this node (0 <= r < n) */
    uint32_t p, rem; /**< the largest power of two <= n, and n - p */
    int32_t vrank;   /**< its rank among the p that double, -1 when it sits out */
} coll_rd_plan_t;

/** @return Node @p r's part in recursive doubling over @p n nodes (n >= 1). */
static inline coll_rd_plan_t coll_rd_plan(uint32_t n, uint32_t r)
{
    coll_rd_plan_t pl = {.n = n, .r = r, .p = 1};

    while (pl.p * 2 <= n) {
        pl.p *= 2;
    }
    pl.rem = n - pl.p;
    pl.vrank = r < 2 * pl.rem ? (r % 2 ? (int32_t)(r / 2) : -1) : (int32_t)(r - pl.rem);
    return pl;
}

/** @return Whether the node folds (one of the first 2 * rem: it sends or receives a partial
 *          before the doubling). */
static inline int coll_rd_folds(const coll_rd_plan_t *pl)
{
    return pl->r < 2 * pl->rem;
}

/** @return The node whose rank among the doubling ones is @p v. */
static inline uint32_t coll_rd_node_of_vrank(const coll_rd_plan_t *pl, uint32_t v)
{
    return v < pl->rem ? 2 * v + 1 : v + pl->rem;
}

/** @return The partner of a doubling node (vrank >= 0) in round @p round (1 << round < p). */
static inline uint32_t coll_rd_partner(const coll_rd_plan_t *pl, uint32_t round)
{
    return coll_rd_node_of_vrank(pl, (uint32_t)pl->vrank ^ (1u << round));
}

#endif
