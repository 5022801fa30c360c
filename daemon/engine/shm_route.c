/*
 * An allreduce run on the direct path on this node and through the daemons on the previous
 * one (engine/shm_route.h). Whichever way the routes split, some node of the daemons' path is
 * followed in the ring by one of the direct path, whose daemon this check runs on: every
 * disagreement of routes is seen by at least one daemon, which fails the job for all.
 *
 * Nothing is taken from the worker while the job runs: a descriptor that came early, for a
 * collective this node's ranks have not posted yet, is still there for the daemon's own
 * operation when they post it through the daemons (as they must when the job is right), and
 * nothing is posted that would have to be cancelled. The grace covers a key used again (the
 * user's keys only; the library's never repeat within 2^27 collectives): the previous node may
 * have finished the direct allreduce of that key and run the next one through the daemons
 * while this node's leader still waits for the last messages of the first, which the other
 * leaders have sent or are about to send. Only a leader unscheduled for the whole grace could
 * make a correct job fail here.
 */
#include "engine/shm_route.h"

#include <inttypes.h>
#include <stdio.h>

#include "base/log.h"
#include "engine/shm.h"
#include "net/transport.h"
#include "proto/tag.h"

/* The previous node of the ring: the one whose descriptor this node's daemon checks. */
static uint32_t prev_node(const coll_job_t *job)
{
    return (job->node_rank + job->nnodes - 1) % job->nnodes;
}

/* The tag of the world's descriptor of collective @p key (engine/xfer.c). */
static uint64_t desc_tag(const coll_job_t *job, uint64_t key)
{
    return coll_tag_make(job->world->id, key, COLL_TAG_DESC, 0, 0);
}

/* Whether @p w is a direct allreduce that every local rank posted and whose rounds have not
 * ended (no node word of its home post's generation): its home post's record and generation. */
static int in_rounds(const coll_job_t *job, const coll_shm_wait_t *w, coll_shm_rec_t *rec,
                     uint64_t *gen_p)
{
    const coll_shm_rank_t *home = coll_shm_rank(job, 0);
    uint64_t all = job->local_size >= 64 ? UINT64_MAX : (1ull << job->local_size) - 1;
    uint64_t state, word;
    uint32_t slot;

    if (!coll_shm_is_direct(job, w) || w->posted != all ||
        !coll_shm_find(home, w->key, COLL_SHM_POSTED, &slot, &state, rec)) {
        return 0;
    }
    word = atomic_load_explicit(&home->post[slot].node, memory_order_acquire);
    *gen_p = coll_shm_gen(state);
    return !((word & COLL_SHM_NODE_DONE) && (uint32_t)(word >> 32) == (uint32_t)*gen_p);
}

/* Whether @p w waits in its rounds with the previous node's descriptor of its key waiting. */
static int suspect(coll_job_t *job, const coll_shm_wait_t *w, coll_shm_rec_t *rec,
                   uint64_t *gen_p)
{
    return in_rounds(job, w, rec, gen_p) && coll_transport_unexpected(job, desc_tag(job, w->key));
}

/* Fail the job: the previous node's descriptor (taken from the worker) against this node's,
 * as the ranks' records give it, on the direct path. */
static void fail(coll_job_t *job, const coll_shm_rec_t *rec)
{
    coll_shm_route_t *t = &job->engine.route;
    uint32_t prev = prev_node(job);
    coll_desc_t mine;
    char a[200], b[200], nm[48];

    coll_desc_make(&rec->sub, &(coll_desc_ctx_t){.world_size = job->world_size,
                                                 .node = job->node_rank,
                                                 .first_rank = job->ranks[0],
                                                 .algo = COLL_ALGO_DIRECT,
                                                 .epoch = job->epoch},
                   &mine);
    coll_desc_format(&mine, b, sizeof(b));
    if (coll_transport_take(job, desc_tag(job, rec->sub.key), &t->peer, sizeof(t->peer)) ==
            sizeof(t->peer) &&
        t->peer.magic == COLL_DESC_MAGIC) {
        coll_desc_format(&t->peer, a, sizeof(a));
    } else {
        snprintf(a, sizeof(a), "a descriptor this node could not read");
    }
    coll_desc_name(&mine, nm, sizeof(nm));
    coll_job_fail(job, COLL_ERR_MISMATCH, 1,
                  "%s: node %u (ranks from %u) ran it through the daemons but node %u (ranks "
                  "from %u) on the direct path between the nodes' leaders, which takes small "
                  "uncompressed collectives of host buffers: the nodes differ in the buffers' "
                  "memory (device, host), the compression or algorithm, or the operation "
                  "(%s; %s)",
                  nm, prev, job->nodes[prev].ranks[0], job->node_rank, job->ranks[0], a, b);
}

int coll_shm_route_check(coll_job_t *job, const coll_shm_wait_t *w, size_t n, uint64_t now)
{
    coll_shm_route_t *t = &job->engine.route;
    const coll_shm_wait_t *first = NULL;
    uint64_t gen, first_gen = 0;
    coll_shm_rec_t rec;

    if (job->nnodes < 2 || job->world == NULL) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!suspect(job, &w[i], &rec, &gen)) {
            continue;
        }
        if (t->since_ns != 0 && w[i].key == t->key && gen == t->gen) {
            if (now - t->since_ns < COLL_SHM_ROUTE_GRACE_MS * 1000000ull) {
                return 0; /* still the one watched */
            }
            fail(job, &rec);
            return 1;
        }
        if (first == NULL) {
            first = &w[i];
            first_gen = gen;
        }
    }
    /* The one watched ended (or there was none): watch the first suspect, if any. */
    t->key = first != NULL ? first->key : 0;
    t->gen = first_gen;
    t->since_ns = first != NULL ? now : 0;
    if (first != NULL) {
        coll_debug(COLL_SUB_JOB, "job %s: key %#" PRIx64 " waits in its direct rounds with node "
                   "%u's descriptor of that key waiting here: a mismatch of routes if still so "
                   "in %u ms", job->id, first->key, prev_node(job), COLL_SHM_ROUTE_GRACE_MS);
    }
    return 0;
}
