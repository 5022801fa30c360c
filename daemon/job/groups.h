/**
 * @file groups.h
 * @brief The groups a job's local ranks split from it (coll_comm_split()): the client's
 *        GroupQuery, GroupCreate and GroupFree, and what a leaving rank leaves behind.
 *
 * Group ids. Every split asks the daemons of its ranks for the lowest id their node has not seen
 * used (job->group_next), takes the largest answer as its base, and numbers its groups from
 * there so that two of its groups that share a node never share an id (the client computes
 * this, client/groups/split_plan.c); registering a group raises the node's next id past every id of
 * its split. So splits that follow one another never reuse an id on a node they share. Two
 * splits run at the same time by ranks of one node may pick the same id: the second group to
 * register it here is refused (COLL_ERR_INVALID, saying so), and the client fails that split on
 * all its ranks; nothing of either group is mixed up. Ids are never reused within a job.
 *
 * A rank that leaves the job stays registered in its groups: the groups remember it, so that
 * the next collective of one of them fails naming it (job/blame.c) rather than waiting for a
 * node that knows nothing of the group.
 */
#ifndef COLL_JOB_GROUPS_H
#define COLL_JOB_GROUPS_H

#include "core/job.h"

/** @brief Answer a GroupQuery of @p s: the node's lowest unused group id of its job. */
void coll_groups_query(coll_session_t *s, const Coll__Wire__GroupQuery *q);

/**
 * @brief Register local rank @p s in the group of a GroupCreate (building the group on this
 *        node when it is the first), and answer with its place in it. Refused (status and
 *        reason in the reply) when the job is not ready, the rank list is not inside the
 *        rank's allocations, lists a rank twice or omits @p s, or another group holds the id.
 */
void coll_groups_create(coll_session_t *s, const Coll__Wire__GroupCreate *c);

/** @brief Local rank @p s leaves group @p id (the group goes when no local member and no
 *         operation is left); an id it is not registered in is ignored with a warning. */
void coll_groups_free(coll_session_t *s, uint32_t id);

#endif
