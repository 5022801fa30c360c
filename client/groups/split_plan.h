/**
 * @file split_plan.h
 * @brief What a communicator split makes, computed alike by every rank of the parent from what
 *        the all-gather of the split brought: the groups, their order and their ids. Pure.
 *
 * Ids: the split's lowest id is the largest "next unused id" any rank reported (each asked its
 * daemon, which knows every id registered on its node). Groups are taken in increasing color
 * order, each with the lowest offset from there that no earlier group of the split sharing one
 * of its nodes took: groups on different nodes may share an id (their transfers never meet), so
 * a split uses at most as many ids as the most groups that share one node.
 */
#ifndef COLL_CLIENT_SPLIT_PLAN_H
#define COLL_CLIENT_SPLIT_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** One parent rank's part of a split, as the all-gather carries it (4 x int32). */
typedef struct {
    int32_t color;        /**< >= 0, or COLL_UNDEFINED */
    int32_t key;          /**< orders the group (ties: the parent rank) */
    uint32_t node;        /**< its node in the job */
    uint32_t next_group;  /**< the lowest group id unused on its node, as it knows it */
} coll__split_entry_t;

/** What the split makes, and the calling rank's part. */
typedef struct {
    uint32_t first_group; /**< the split's lowest id */
    uint32_t last_group;  /**< the highest id it uses (first_group - 1 when it makes none) */
    uint32_t ngroups;     /**< groups it makes */
    uint32_t group;       /**< the rank's group id; 0 for COLL_UNDEFINED */
    uint32_t size;        /**< its group's ranks (0 for COLL_UNDEFINED) */
    uint32_t rank;        /**< its place in it */
} coll__split_t;

/**
 * @brief Plan the split of a parent of @p n ranks over a job of @p nodes nodes, for parent rank
 *        @p me.
 * @param [in]  e        The @p n entries, by parent rank.
 * @param [out] members  Room for @p n: the parent ranks of @p me's group in group order.
 * @param [out] out      The plan; set on COLL_OK.
 * @return COLL_OK; COLL_ERR_PROTOCOL for a node or color out of range (a message in @p err);
 *         COLL_ERR_NOMEM when the ids would go above COLL_MAX_GROUP_ID, or no memory.
 */
coll_status_t coll__split_plan(const coll__split_entry_t *e, uint32_t n, uint32_t nodes,
                               uint32_t me, uint32_t *members, coll__split_t *out, char *err,
                               size_t errlen);

#endif
