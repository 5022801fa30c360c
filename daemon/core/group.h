/**
 * @file group.h
 * @brief A communicator of a job as one daemon sees it: the job's world (group 0) or a group of
 *        some of its ranks made by coll_comm_split(). Groups share the job's pool, UCX worker
 *        and endpoints; an operation of a group involves only its ranks and the nodes they are
 *        on, which it runs on as if they were the whole job (the algorithms see the group's
 *        nodes, ranks and local members, never the job's).
 *
 * Numbering. A group rank g is the rank's place in the group (0 .. size-1). The group's nodes
 * are the job nodes with a member, in the job's (ring) order; its local members are this
 * node's members in local rank order, and a group rank's "local index" is its place among its
 * node's members in that order. For the world every mapping is the identity.
 *
 * Life: the world is built when the job becomes ready and freed with it; a group is built when
 * its first local rank registers it (job/groups.c), and freed once no local rank is registered
 * and no operation refers to it (coll_group_unref()). Loop thread only.
 */
#ifndef COLL_CORE_GROUP_H
#define COLL_CORE_GROUP_H

#include <stdint.h>

#include <collective.h>

#include "base/list.h"

struct coll_job;

/** Not a member: coll_group_t.local_of of a local rank outside the group. */
#define COLL_GROUP_NONE UINT32_MAX

typedef struct coll_group {
    coll_list_t link;            /**< in job->groups (not the world) */
    uint32_t id;                 /**< 0: the world; 1 .. COLL_TAG_MAX_GROUP a split group */
    uint32_t size;               /**< ranks */
    uint32_t *ranks;             /**< [size] job rank of each group rank */
    uint32_t *rank_node;         /**< [size] group node of each group rank */
    uint32_t *rank_local;        /**< [size] local index of each group rank on its node */
    uint32_t nnodes;             /**< nodes with a member */
    uint32_t *nodes;             /**< [nnodes] job node index of each group node */
    uint32_t node_rank;          /**< this node among them */
    const uint32_t **node_ranks; /**< [nnodes] group ranks of each node's members, local order */
    uint32_t *node_nranks;       /**< [nnodes] members of each node */
    uint32_t nlocal;             /**< members on this node (>= 1) */
    uint32_t *locals;            /**< [nlocal] job local rank of each local member */
    uint32_t *local_of;          /**< [job local size] local member index, or COLL_GROUP_NONE */
    uint64_t registered;         /**< bit i: local member i registered it (not for the world) */
    uint32_t ops;                /**< operations that refer to it */
} coll_group_t;

/** @return The group rank of local member @p i of @p g. */
static inline uint32_t coll_group_rank_of_local(const coll_group_t *g, uint32_t i)
{
    return g->node_ranks[g->node_rank][i];
}

/**
 * @brief Build the group of job ranks @p ranks (group rank order) with id @p id from the job's
 *        rank and node tables (valid from READY on).
 * @param [out] g_p  The group, owned by the caller (coll_group_free()); set on success only.
 * @return COLL_OK; COLL_ERR_INVALID when a rank is out of range or listed twice, or none of
 *         them is on this node (message in @p err); COLL_ERR_NOMEM.
 */
coll_status_t coll_group_build(const struct coll_job *job, uint32_t id, const uint32_t *ranks,
                               uint32_t size, coll_group_t **g_p, char *err, size_t errlen);

/** @brief Build job->world, the group of every rank. @return COLL_OK or COLL_ERR_NOMEM. */
coll_status_t coll_group_world(struct coll_job *job);

/** @brief Free a group. Safe with NULL. */
void coll_group_free(coll_group_t *g);

/** @return The group @p id of @p job (0: the world) known on this node, or NULL. */
coll_group_t *coll_group_find(const struct coll_job *job, uint32_t id);

/** @return 1 when @p a and @p b have the same ranks in the same order. */
int coll_group_same_ranks(const coll_group_t *g, const uint32_t *ranks, uint32_t size);

/**
 * @brief An operation stopped referring to @p g: free it (and unlink it from its job) when no
 *        local rank is registered and no operation is left. The world is never freed here.
 */
void coll_group_unref(coll_group_t *g);

/** @brief Free every group of @p job, the world included (the job is being freed). */
void coll_group_free_all(struct coll_job *job);

#endif
