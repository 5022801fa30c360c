/*
 * A communicator's view of its job's shared-memory area (proto/shm_area.h): opening it, the
 * records of this rank's collectives in it (kept for reuse), and what a waiter watches.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "client/shm/shm.h"

/* How long a waiter polls before it sleeps, unless COLL_SPIN_US says otherwise: a peer on
 * another core answers within a few microseconds. With more local ranks than CPUs the waiter
 * yields its CPU between polls, so that the rank it waits for can run (docs/benchmarks.md,
 * "Latency"). */
#define COLL_SHM_SPIN_NS_DEFAULT 20000u
/* The longest COLL_SPIN_US accepted. */
#define COLL_SHM_SPIN_US_MAX 10000u

/* COLL_SPIN_US (microseconds, 0 .. COLL_SHM_SPIN_US_MAX) into *ns_p; -1 with the reason in
 * the communicator's error when it is not such a number. */
static int spin_ns_from_env(coll_comm_t *c, uint64_t *ns_p)
{
    const char *v = getenv("COLL_SPIN_US");
    char *end;
    unsigned long us;

    if (v == NULL || v[0] == '\0') {
        *ns_p = COLL_SHM_SPIN_NS_DEFAULT;
        return 0;
    }
    errno = 0;
    us = strtoul(v, &end, 10);
    if (v[0] == '-' || *end != '\0' || errno != 0 || us > COLL_SHM_SPIN_US_MAX) {
        coll__set_error(c, "COLL_SPIN_US=%s is not a number of microseconds from 0 to %u", v,
                        COLL_SHM_SPIN_US_MAX);
        return -1;
    }
    *ns_p = us * 1000u;
    return 0;
}

/* CPUs this process may run on. */
static uint32_t cpus(void)
{
    cpu_set_t set;

    return sched_getaffinity(0, sizeof(set), &set) == 0 ? (uint32_t)CPU_COUNT(&set) : 1;
}

coll_status_t coll__shm_open(coll_comm_t *c, uint64_t shm_bytes, uint64_t max_bytes)
{
    coll_shm_t *s;
    uint64_t spin_ns;

    if (c->ctl == NULL || shm_bytes != COLL_SHM_TOTAL(c->local_size) ||
        COLL_POOL_PREFIX(c->local_size) > c->pool_bytes) {
        return COLL_OK; /* a daemon without the area: every collective goes to it */
    }
    if (spin_ns_from_env(c, &spin_ns) < 0) {
        return COLL_ERR_INVALID;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    s->base = c->pool;
    s->exec = coll_exec_get(COLL_MEM_HOST);
    s->hdr = coll_shm_hdr_of(c->pool, (uint32_t)c->local_size);
    s->self = (uint32_t)c->local_rank;
    s->nlocal = (uint32_t)c->local_size;
    s->nnodes = c->node_count;
    s->max_bytes = max_bytes;
    s->spin_ns = spin_ns;
    s->oversubscribed = s->nlocal > cpus();
    /* On several nodes the daemon takes part in every allreduce reduced here (route NODE): a
     * polling rank takes the CPU from it or from the rank it waits for (docs/benchmarks.md,
     * "Allreduces reduced in shared memory between nodes"). */
    s->crowded = s->nnodes > 1 && s->nlocal + 1 > cpus();
    s->ops.next = s->ops.prev = &s->ops;
    c->shm = s;
    if (s->self == 0 && s->hdr->direct_max_bytes > 0 && !coll__direct_ready(c)) {
        /* The other leaders would wait for this one in every direct allreduce. */
        coll__abort(c, COLL_ERR_NOMEM, "local rank 0 lacks the direct path's worker or the "
                    "other leaders' addresses (no memory)");
        coll__set_error(c, "rank %d: no direct path to the other nodes' leaders", c->rank);
        return COLL_ERR_NOMEM;
    }
    if (s->self == 0 && s->hdr->direct_max_bytes > 0) {
        return coll__direct_connect(c, s->hdr, c->job_timeout_ms);
    }
    return COLL_OK;
}

void coll__shm_close(coll_comm_t *c)
{
    coll_shm_t *s = c->shm;

    if (s == NULL) {
        return;
    }
    while (s->spare != NULL) {
        coll_shm_op_t *op = s->spare;
        s->spare = op->next;
        free(op);
    }
    free(s);
    c->shm = NULL;
}

coll_shm_op_t *coll__shm_op_new(coll_shm_t *s)
{
    coll_shm_op_t *op = s->spare;
    size_t l = s->nlocal;

    if (op != NULL) {
        s->spare = op->next;
    } else if ((op = malloc(sizeof(*op) + l * (sizeof(uint32_t) + 3 * sizeof(uint64_t)))) ==
               NULL) {
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    op->peer_state = (uint64_t *)(op + 1);
    op->in_off = op->peer_state + l;
    op->out_off = op->in_off + l;
    op->peer_slot = (uint32_t *)(op->out_off + l);
    return op;
}

void coll__shm_op_add(coll_shm_t *s, coll_shm_op_t *op)
{
    COLL_ASSERT(op->next == NULL && op->prev == NULL);
    op->next = &s->ops;
    op->prev = s->ops.prev;
    s->ops.prev->next = op;
    s->ops.prev = op;
}

void coll__shm_op_free(coll_shm_t *s, coll_shm_op_t *op)
{
    COLL_ASSERT(op != &s->ops && op->prev->next == op && op->next->prev == op);
    op->prev->next = op->next;
    op->next->prev = op->prev;
    op->next = s->spare;
    op->prev = NULL;
    s->spare = op;
}

void coll__shm_watch(coll_comm_t *c, coll__link_watch_t *w)
{
    coll_shm_t *s = c->shm;

    int rounds = 0;

    w->n = 0;
    w->fd = -1;
    w->fd_since_ns = 0;
    w->spin_ns = s != NULL && !s->crowded ? s->spin_ns : 0;
    w->yield = s != NULL && s->oversubscribed;
    for (coll_shm_op_t *op = s != NULL ? s->ops.next : NULL; op != NULL && op != &s->ops &&
                                                           w->n < COLL_LINK_WATCH_MAX;
         op = op->next) {
        if (coll__shm_direct_waiting(s, op)) {
            /* the other leaders' messages wake the worker's event fd */
            if (!rounds || op->rounds.start_ns > w->fd_since_ns) {
                w->fd_since_ns = op->rounds.start_ns; /* the youngest: the shortest wait */
            }
            rounds = 1;
        } else if (op->route != COLL_SHM_ROUTE_DAEMON && !coll__shm_node_with_daemon(s, op)) {
            w->word[w->n] = &coll__shm_post_of(s, s->self, op->slot)->state;
            w->seen[w->n++] = op->state;
        }
    }
    if (rounds) {
        w->fd = coll__direct_arm(c->conn);
    }
}
