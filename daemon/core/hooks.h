/**
 * @file hooks.h
 * @brief What the layers below the job layer report upward: the job layer installs these at
 *        start-up (job/lifecycle.h), and the transport, the rendezvous and coll_job_fail() call
 *        them, so that nothing below the job layer calls into it by name (as UCT calls what UCP
 *        registered). Every hook runs on the loop thread.
 */
#ifndef COLL_CORE_HOOKS_H
#define COLL_CORE_HOOKS_H

#include "proto/wire.h"

struct coll_job;
struct coll_job_params;
struct coll_daemon;

typedef struct coll_job_hooks {
    /** The job just failed (coll_job_fail() recorded, logged and counted it): end what is
     *  pending, in this order: the rendezvous, the other nodes (when @p tell_peers and the job
     *  was ready), the operations, the local ranks' joins. @p was: the state before. */
    void (*failed)(struct coll_job *job, int was, int tell_peers);
    /** The root answered the job's rendezvous (success or error). */
    void (*rendezvous_done)(struct coll_job *job, const Coll__Wire__NodeJoinReply *reply);
    /** The job's transport finished closing and nothing holds its memory (job->holds): free
     *  what is left. */
    void (*closed)(struct coll_job *job);
    /** Nothing of the transport holds the job any more (no drive in progress): free it if no
     *  rank holds it either. */
    void (*idle)(struct coll_job *job);
    /** A job is complete on @p nnodes nodes of at most @p ranks_per_node ranks each: add to
     *  @p params (the configuration's, coll_job_params_from_config()) what this daemon decides
     *  for every node alike beyond them (the automatic choice's size ranges). Called by the
     *  root's rendezvous before it answers (a job on one node has no rendezvous: the job layer
     *  adds them itself). */
    void (*params)(const struct coll_daemon *d, uint32_t nnodes, uint32_t ranks_per_node,
                   struct coll_job_params *params);
} coll_job_hooks_t;

#endif
