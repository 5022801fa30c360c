/*
 * The collectives of the shared-memory area as the daemon sees them: a scan of every post for
 * the waiting ones, and the counters the ranks keep of the completed ones. Called from the
 * loop (health ticks, /status, /metrics); reads client memory, consistently and bounded.
 */
#include "engine/shm_watch.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "core/stats.h"
#include "engine/node_op.h"
#include "engine/op.h"
#include "engine/shm.h"

/* Merge local rank @p l's post @p d into @p out (n entries); returns the new count. */
static size_t merge(coll_shm_wait_t *out, size_t n, size_t max, uint32_t l,
                    const coll_shm_rec_t *d, int busy, uint32_t wait_node)
{
    size_t i = 0;

    while (i < n && out[i].key != d->sub.key) {
        i++;
    }
    if (i == n) {
        if (n == max) {
            return n;
        }
        out[n++] = (coll_shm_wait_t){.key = d->sub.key, .count = d->sub.count,
                                     .coll = d->sub.coll, .dtype = d->sub.dtype,
                                     .algo = d->sub.algo, .op = d->sub.redop,
                                     .since_ns = d->post_ns};
    }
    if (d->post_ns < out[i].since_ns) {
        out[i].since_ns = d->post_ns;
    }
    if (l == 0) {
        out[i].wait_node = wait_node;
    }
    if (l < 64) {
        out[i].posted |= 1ull << l;
        out[i].busy |= (uint64_t)(busy != 0) << l;
    }
    return n;
}

static int older(const void *a, const void *b)
{
    const coll_shm_wait_t *x = a, *y = b;
    return x->since_ns < y->since_ns ? -1 : x->since_ns > y->since_ns;
}

/* Whether the daemon runs the inter-node phase of node-reduced allreduce @p key now. */
static int with_daemon(const coll_job_t *job, uint64_t key)
{
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (!op->done && coll_op_is_node_reduced(op) && op->desc.key == key) {
            return 1;
        }
    }
    return 0;
}

size_t coll_shm_waiting(const coll_job_t *job, coll_shm_wait_t *out, size_t max)
{
    size_t n = 0;

    if (job->state != COLL_JOB_READY || job->pool == NULL) {
        return 0;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        const coll_shm_rank_t *r = coll_shm_rank(job, l);
        uint64_t busy = atomic_load_explicit(&r->busy_key, memory_order_relaxed);
        for (uint32_t i = 0; i < COLL_SHM_SLOTS; i++) {
            coll_shm_rec_t d;
            uint64_t state;
            if (coll_shm_read(&r->post[i], COLL_SHM_POSTED, &state, &d) &&
                d.sub.coll < COLL_SHM_KINDS && d.sub.dtype < COLL_DTYPE_COUNT &&
                !(job->nnodes > 1 && with_daemon(job, d.sub.key))) {
                n = merge(out, n, max, l, &d, busy == d.sub.key,
                          atomic_load_explicit(&r->post[i].direct_wait, memory_order_relaxed));
            }
        }
    }
    qsort(out, n, sizeof(*out), older);
    return n;
}

int coll_shm_waiting_key(const coll_job_t *job, uint64_t key, coll_shm_wait_t *w)
{
    coll_shm_wait_t all[COLL_SHM_WATCH_MAX];
    size_t n = coll_shm_waiting(job, all, COLL_SHM_WATCH_MAX);

    for (size_t i = 0; i < n; i++) {
        if (all[i].key == key) {
            *w = all[i];
            return 1;
        }
    }
    return 0;
}

/* Whether collective @p kind takes its key from the same count as those of the area: the
 * world's collectives do; point-to-point and the parameter service number theirs apart. */
static int same_keys(uint32_t kind)
{
    return kind <= COLL_KIND_BARRIER || kind == COLL_KIND_GATHER || kind == COLL_KIND_SCATTER ||
           kind == COLL_KIND_ALLTOALLV;
}

/* Whether a local rank submitted @p op with its buffers in a device pool (which the area never
 * takes: a rank with host buffers posts the same collective there). */
static int on_device(const coll_op_t *op)
{
    for (uint32_t l = 0; l < op->grp->nlocal; l++) {
        if (op->members[l].pool != 0) {
            return 1;
        }
    }
    return 0;
}

/* Bit l: local rank l submitted @p op (of the world: its local members are the local ranks),
 * with its buffers in a device pool when @p device. */
static uint64_t submitted_ranks(const coll_op_t *op, int device)
{
    uint64_t mask = 0;

    for (uint32_t l = 0; l < op->grp->nlocal && l < 64; l++) {
        if (op->members[l].session != NULL && (!device || op->members[l].pool != 0)) {
            mask |= UINT64_C(1) << l;
        }
    }
    return mask;
}

int coll_shm_conflict(const coll_job_t *job, const coll_shm_wait_t *w, uint32_t *kind_p,
                      uint64_t *ranks_p)
{
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (!op->done && op->grp == job->world && op->desc.key == w->key &&
            same_keys(op->desc.coll) &&
            (op->desc.coll != w->coll || on_device(op))) {
            *kind_p = op->desc.coll;
            *ranks_p = submitted_ranks(op, op->desc.coll == w->coll);
            return 1;
        }
    }
    return 0;
}

uint32_t coll_shm_name_ranks(const coll_job_t *job, uint64_t mask, int set, const char *what,
                             char *buf, size_t len)
{
    size_t n = strlen(buf);
    uint32_t named = 0;

    for (uint32_t l = 0; l < job->local_size && l < 64 && n < len; l++) {
        if ((int)((mask >> l) & 1) != set) {
            continue;
        }
        const coll_session_t *s = job->locals[l];
        n += (size_t)snprintf(buf + n, len - n, "%srank %u (pid %d, node %u, %s)", n ? ", " : "",
                              job->ranks[l], s != NULL ? (int)s->cred.pid : -1, job->node_rank,
                              what);
        named++;
    }
    return named;
}

/* Whether @p w of a multi-node job is an allreduce the local ranks reduce in shared memory
 * with its inter-node phase in the daemons (up to node_max_bytes, several local ranks) or
 * between the nodes' leaders (up to direct_max_bytes, the direct path: @p direct_p). */
static int node_reduced(const coll_job_t *job, const coll_shm_wait_t *w, int *direct_p)
{
    uint64_t bytes = w->count * coll_dtype_size((coll_dtype_t)w->dtype);
    const coll_shm_hdr_t *h = coll_shm_hdr(job);
    int reducible = job->nnodes > 1 && w->coll == COLL_KIND_ALLREDUCE &&
                    w->algo == COLL_ALGO_AUTO && coll_shm_node_reducible(w->dtype, w->op);

    *direct_p = reducible && h->direct_max_bytes > 0 && bytes <= h->direct_max_bytes;
    return *direct_p || (reducible && job->local_size > 1 && h->node_max_bytes > 0 &&
                         bytes <= h->node_max_bytes);
}

int coll_shm_is_direct(const coll_job_t *job, const coll_shm_wait_t *w)
{
    int direct;

    return node_reduced(job, w, &direct) && direct;
}

/* Whether process @p pid is stopped (by a signal, or traced): its state in /proc. */
static int stopped(pid_t pid)
{
    char path[64], line[512], *close;
    FILE *f;
    int st = 0;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return 0;
    }
    if (fgets(line, sizeof(line), f) != NULL && (close = strrchr(line, ')')) != NULL) {
        st = close[1] == ' ' && (close[2] == 'T' || close[2] == 't');
    }
    fclose(f);
    return st;
}

/* The rank of node @p node's leader (its first local rank) in the job's world. */
static uint32_t leader_of(const coll_job_t *job, uint32_t node)
{
    const coll_group_t *g = job->world;

    for (uint32_t r = 0; r < g->size; r++) {
        if (g->rank_node[r] == node && g->rank_local[r] == 0) {
            return r;
        }
    }
    return 0;
}

/* coll_shm_describe() of a direct allreduce whose local part is done: 1 for a stopped leader. */
static uint32_t describe_rounds(const coll_job_t *job, const coll_shm_wait_t *w, char *buf,
                                size_t len)
{
    const coll_session_t *s = job->locals[0];
    uint32_t node = w->wait_node - 1;

    if (s != NULL && stopped(s->cred.pid)) {
        (void)coll_shm_name_ranks(job, 1, 1, "the node's leader, stopped in the direct rounds",
                                  buf, len);
        return 1;
    }
    if (w->wait_node != 0 && node < job->nnodes && node != job->node_rank) {
        snprintf(buf, len, "rank %u (node %u's leader, which this node's leader waits for in "
                 "the direct rounds)", leader_of(job, node), node);
    } else {
        (void)coll_shm_name_ranks(job, 1, 1, "the node's leader, in the direct rounds with the "
                                  "other nodes' leaders", buf, len);
    }
    return 0;
}

uint32_t coll_shm_describe(const coll_job_t *job, const coll_shm_wait_t *w, char *buf,
                           size_t len)
{
    uint32_t missing;

    buf[0] = '\0';
    missing = coll_shm_name_ranks(job, w->posted, 0, "not submitted", buf, len);
    if (missing > 0 || coll_shm_name_ranks(job, w->busy, 1, "running its part", buf, len) > 0) {
        return missing;
    }
    if (coll_shm_is_direct(job, w)) {
        /* Everything local is done: the rounds between the leaders are what is missing. */
        return describe_rounds(job, w, buf, len);
    } else {
        snprintf(buf, len, "its local ranks to run it in shared memory");
    }
    return missing;
}

int coll_shm_runs_there(const coll_job_t *job, const coll_shm_wait_t *w)
{
    uint64_t bytes = coll_stats_op_bytes(w->coll, w->count,
                                         coll_dtype_size((coll_dtype_t)w->dtype), job->world_size);
    const coll_shm_hdr_t *h = coll_shm_hdr(job);
    int direct;

    if (job->nnodes > 1) {
        return node_reduced(job, w, &direct);
    }
    return w->algo == COLL_ALGO_AUTO && h->max_bytes > 0 && bytes <= h->max_bytes;
}

/* The counters of one kind of local rank @p r, taken (zeroed) into the daemon's. */
static uint64_t harvest_kind(coll_daemon_t *d, coll_shm_stats_t *r, unsigned k)
{
    uint64_t hist[COLL_SHM_BUCKETS + 1], ops = 0;

    for (unsigned t = 0; t < COLL_SHM_DTYPES && t < COLL_DTYPE_COUNT; t++) {
        uint64_t n = atomic_exchange_explicit(&r->ok[k][t], 0, memory_order_relaxed);
        uint64_t bytes = atomic_exchange_explicit(&r->bytes[k][t], 0, memory_order_relaxed);
        if (n > 0) {
            coll_stats_shm_done(&d->stats, k, t, n, bytes);
            ops += n;
        }
    }
    for (unsigned i = 0; i <= COLL_SHM_BUCKETS; i++) {
        hist[i] = atomic_exchange_explicit(&r->hist[k][i], 0, memory_order_relaxed);
    }
    coll_stats_shm_durations(&d->stats, k, hist,
                             atomic_exchange_explicit(&r->sum_ns[k], 0, memory_order_relaxed));
    return ops;
}

/* Messages local rank @p l (the leader) dropped on the direct path for a wrong job token:
 * counted and logged, once per harvest that found some. */
static void harvest_refused(coll_job_t *job, uint32_t l, coll_shm_stats_t *r)
{
    uint64_t n = atomic_exchange_explicit(&r->direct_refused, 0, memory_order_relaxed);

    if (n > 0) {
        coll_stats_direct_refused(&job->d->stats, n);
        coll_warn(COLL_SUB_JOB, "job %s: rank %u (the node's leader) dropped %" PRIu64 " direct "
                  "messages without the job's token (a sender outside the job)", job->id,
                  job->ranks[l], n);
    }
}

void coll_shm_harvest(coll_job_t *job)
{
    if (job->pool == NULL || job->state == COLL_JOB_GATHERING ||
        job->state == COLL_JOB_RENDEZVOUS) {
        return;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        coll_shm_stats_t *r = &coll_shm_rank(job, l)->stats;
        uint64_t posted = atomic_exchange_explicit(&r->posted, 0, memory_order_relaxed);
        coll_stats_shm_posted(&job->d->stats, posted);
        job->engine.shm_posted += posted;
        harvest_refused(job, l, r);
        for (unsigned k = 0; k < COLL_SHM_KINDS; k++) {
            job->engine.shm_done += harvest_kind(job->d, r, k);
        }
    }
}
