/**
 * @file blame.h
 * @brief Who has not submitted a stalled operation, asked across nodes.
 *
 * An operation waits for local ranks (this node knows which) or for other nodes' data. In the
 * second case the ranks at fault are on another node, and that node may not even know the
 * operation (none of its ranks submitted it, so it has nothing that could stall there). So a
 * node whose operation stalls (half the job's timeout) asks every other node which of its
 * ranks have not submitted that (group, key); the question names the operation by
 * group << 52 | its key's low 52 bits; each answers at its next health tick with those ranks
 * ("rank 5 (pid 123, node 2, not submitted)"), and the answers name the culprits in the
 * timeout's error and in /status on every node that waits.
 */
#ifndef COLL_BLAME_H
#define COLL_BLAME_H

#include "engine/op.h"

/** @brief Ask every other node about @p op (called once, when it stalls). */
void coll_blame_ask(coll_op_t *op);

/** @brief Answer every query received since the last call (health tick). */
void coll_blame_answer(coll_job_t *job);

/**
 * @brief This node's ranks of group @p group that have not submitted its collective @p key, as
 *        text in @p buf: "rank R (pid P, node N, not submitted)" or "rank R (node N, left the
 *        job)", comma-separated; "" when all did or the group has no rank here.
 * @return The number of such ranks.
 */
uint32_t coll_blame_local(const coll_job_t *job, uint32_t group, uint64_t key, char *buf,
                          size_t len);

/** @return What the other nodes answered about @p op (their ranks that have not submitted it),
 *          or NULL when none did. */
const char *coll_blame_heard(const coll_op_t *op);

#endif
