#include "job/health.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/log.h"
#include "engine/dev_sync.h"
#include "engine/op.h"
#include "engine/shm_route.h"
#include "engine/shm_watch.h"
#include "job/blame.h"
#include "net/control.h"
#include "net/transport.h"
#include "proto/ctl.h"

uint64_t coll_health_tick_ms(const coll_job_t *job)
{
    return coll_job_tick_ms(job->params.timeout_ms);
}

static uint64_t half_timeout_ns(const coll_job_t *job)
{
    uint64_t half = job->params.timeout_ms * 1000000ull / 2;
    uint64_t floor = 3 * coll_health_tick_ms(job) * 1000000ull;
    return half > floor ? half : floor;
}

/* The previous node stays alive while its heartbeats arrive. */
static void check_prev(coll_job_t *job, uint64_t now)
{
    uint32_t prev = (job->node_rank + job->nnodes - 1) % job->nnodes;
    coll_node_t *n = &job->nodes[prev];

    /* A heartbeat handled after @p now was taken is newer than it: fresh. */
    if (n->gone != COLL_OK || n->left || n->last_seen_ns >= now ||
        now - n->last_seen_ns <= half_timeout_ns(job)) {
        return;
    }
    coll_node_lost(n, "no heartbeat for %" PRIu64 " ms (its daemon is stopped, dead or "
                   "unreachable)", (now - n->last_seen_ns) / 1000000);
    coll_job_fail(job, COLL_ERR_PEER, 1, "node %u (%s, ranks from %u): %s", prev, n->host,
                  n->ranks[0], n->gone_why);
}

/* Append "node i (host, ranks from r)" once per node. */
static size_t add_node(const coll_job_t *job, uint32_t node, uint32_t *listed, uint32_t *nlisted,
                       char *buf, size_t n, size_t len)
{
    for (uint32_t k = 0; k < *nlisted; k++) {
        if (listed[k] == node) {
            return n;
        }
    }
    if (*nlisted < 8) {
        listed[(*nlisted)++] = node;
    }
    return n + (size_t)snprintf(buf + n, len - n, "%snode %u (%s, ranks from %u)", n ? ", " : "",
                                node, job->nodes[node].host, job->nodes[node].ranks[0]);
}

/* What @p op waits for, for messages: ranks that did not submit it, here or (as other nodes
 * answered, blame.h) elsewhere, ranks here whose stream has not written its ready word
 * (engine/dev_sync.h); failing that, the nodes whose data it has not received.
 * Returns the number of ranks named (an answer from another node counts as one). */
static uint32_t describe_wait(const coll_op_t *op, char *buf, size_t len)
{
    const coll_job_t *job = op->job;
    const char *remote = coll_blame_heard(op);
    uint32_t listed[8], nlisted = 0, named = 0;
    size_t n;
    coll_xfer_t *x, *tmp;

    if (!coll_kind_is_p2p(op->desc.coll)) {
        named = coll_blame_local(job, op->grp->id, op->desc.key, buf, len);
    } else {
        buf[0] = '\0';
    }
    named += coll_dev_sync_describe(op, buf, len); /* streams behind: the ranks' own work */
    n = strlen(buf);
    if (remote != NULL && n < len) {
        n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? ", " : "", remote);
        named++;
    }
    coll_list_for_each_safe(x, tmp, &((coll_op_t *)op)->posted, coll_xfer_t, posted)
    {
        if (named == 0 && !x->completed && !x->is_send && n < len) {
            n = add_node(job, x->peer, listed, &nlisted, buf, n, len);
        }
    }
    if (buf[0] == '\0') {
        snprintf(buf, len, "its sends to complete");
    }
    return named;
}

/* When an operation waits only for other nodes, the node it waits for (or one further up the
 * ring) usually times out too, at about the same moment, and knows more: which of its ranks did
 * not submit. Waiting two more ticks (at most COLL_BLAME_GRACE_MS) lets that node's abort, which
 * names the rank, arrive first. Grace plus one tick (when the check runs) stays below the
 * library's own bound (timeout + COLL_DAEMON_SLACK_MS, 1 s), so the daemon's error, which
 * says what was missing, is the one every rank gets. */
#define COLL_BLAME_GRACE_MS 500u

static uint64_t op_timeout_ns(const coll_job_t *job, uint32_t nnodes, uint32_t missing_local)
{
    uint64_t grace = 2 * coll_health_tick_ms(job);

    if (missing_local > 0 || nnodes == 1) {
        grace = 0;
    }
    return (job->params.timeout_ms + (grace < COLL_BLAME_GRACE_MS ? grace : COLL_BLAME_GRACE_MS)) *
           1000000ull;
}

/* The stall warning of @p op, once, when it can name what it waits for: the ranks here or the
 * other nodes' answer (asked two ticks before), or at the latest two ticks after half the
 * timeout, naming the nodes whose data has not come. */
static void warn_stall(coll_op_t *op, uint64_t age, uint32_t named, const char *wait)
{
    uint64_t late = half_timeout_ns(op->job) + 2 * coll_health_tick_ms(op->job) * 1000000ull;
    char nm[64];

    if (op->stall_warned || (named == 0 && age < late)) {
        return;
    }
    op->stall_warned = 1;
    coll_desc_name(&op->desc, nm, sizeof(nm));
    coll_warn(COLL_SUB_JOB, "job %s: %s stalled for %" PRIu64 " ms, waiting for %s",
              op->job->id, nm, age / 1000000, wait);
}

/* Stall warning at half the timeout, failure at the timeout; the other nodes are asked who did
 * not submit two ticks before the warning, so that it names the ranks. Returns 1 when the job
 * failed. */
static int check_ops(coll_job_t *job, uint64_t now)
{
    uint64_t ask = half_timeout_ns(job) - 2 * coll_health_tick_ms(job) * 1000000ull;
    coll_op_t *op, *tmp;
    char wait[400], nm[64];

    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        uint64_t age = now > op->t_submit_ns ? now - op->t_submit_ns : 0;
        if (op->done || age < ask) {
            continue;
        }
        if (!op->blame_asked) {
            op->blame_asked = 1;
            coll_blame_ask(op);
        }
        if (age < half_timeout_ns(job)) {
            continue;
        }
        uint32_t missing = describe_wait(op, wait, sizeof(wait));
        if (age >= op_timeout_ns(job, op->grp->nnodes, missing)) {
            coll_desc_name(&op->desc, nm, sizeof(nm));
            coll_job_fail(job, COLL_ERR_TIMEDOUT, 1, "%s timed out after %" PRIu64 " ms waiting "
                          "for %s", nm, age / 1000000, wait);
            return 1;
        }
        warn_stall(op, age, missing, wait);
    }
    return 0;
}

/* Whether the stall of shared-memory collective @p key was warned about; records it if not. */
static int shm_warned(coll_job_t *job, uint64_t key)
{
    uint32_t n = job->nshm_warned < 8 ? job->nshm_warned : 8;

    for (uint32_t i = 0; i < n; i++) {
        if (job->shm_warned[i] == key) {
            return 1;
        }
    }
    job->shm_warned[job->nshm_warned++ % 8] = key;
    return 0;
}

/* Collectives in shared memory after a local rank left the ready job (coll_job_leave() takes
 * those it had posted): they need it, unless they were complete and their completer was still
 * marking the posts, or ran before it left. Waiting at two ticks in a row, a whole tick apart,
 * they can never run. @p n: how many wait now. Returns 1 when the job failed. */
static int check_shm_left(coll_job_t *job, size_t n)
{
    if (job->left[0] == '\0') {
        return 0;
    }
    if (n == 0) {
        job->shm_left_ticks = 0;
        return 0;
    }
    if (++job->shm_left_ticks < 2) {
        return 0;
    }
    coll_job_fail(job, COLL_ERR_JOB, 1, "%s left job %s with %zu operations pending",
                  job->left, job->id, n);
    return 1;
}

/* "rank R" or "ranks R1,R2,...": the job's ranks of the local ranks whose bit in @p mask is
 * set (local ranks below 64), into @p buf. */
static void rank_list(const coll_job_t *job, uint64_t mask, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "rank%s ", (mask & (mask - 1)) != 0 ? "s" : "");

    for (uint32_t l = 0; l < job->local_size && l < 64 && n < len; l++) {
        if ((mask >> l) & 1) {
            mask &= ~(UINT64_C(1) << l);
            n += (size_t)snprintf(buf + n, len - n, "%u%s", job->ranks[l], mask ? "," : "");
        }
    }
}

/* The local ranks of two collectives of one key, one waiting in the area (@p w), the other
 * (@p kind) submitted to the daemon by @p daemon: each side by its ranks and its collective
 * ("ranks 0,2: allreduce #3, in shared memory; rank 1: broadcast #3, to the daemon"), and the
 * ranks that submitted neither yet. The job fails with it (COLL_ERR_MISMATCH). */
static void fail_kinds(coll_job_t *job, const coll_shm_wait_t *w, uint32_t kind, uint64_t daemon)
{
    uint64_t all = job->local_size >= 64 ? UINT64_MAX : (UINT64_C(1) << job->local_size) - 1;
    uint64_t neither = all & ~(w->posted | daemon);
    char mine[48], theirs[48], a[200], b[200], c[220] = "";

    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)w->coll, .key = w->key}, mine, sizeof(mine));
    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)kind, .key = w->key}, theirs, sizeof(theirs));
    rank_list(job, w->posted, a, sizeof(a));
    rank_list(job, daemon, b, sizeof(b));
    if (neither != 0) {
        snprintf(c, sizeof(c), "; ");
        rank_list(job, neither, c + 2, sizeof(c) - 2);
        snprintf(c + strlen(c), sizeof(c) - strlen(c), ": neither yet");
    }
    coll_job_fail(job, COLL_ERR_MISMATCH, 1, "the ranks of node %u submitted different "
                  "collectives with one key: %s: %s, in shared memory; %s: %s, to the daemon%s",
                  job->node_rank, a, mine, b, theirs, c);
}

/* A collective posted in the area while a local rank submitted another with its key to the
 * daemon, or the same one on device buffers: the ranks disagree on the collective or on where
 * its buffers are, and neither path would ever see the other's rank come. Fails the job with
 * COLL_ERR_MISMATCH naming both (returns 1). */
static int check_shm_conflict(coll_job_t *job, const coll_shm_wait_t *w)
{
    char mine[48], host[400] = "", dev[400] = "";
    uint32_t kind;
    uint64_t ranks = 0;

    if (!coll_shm_conflict(job, w, &kind, &ranks)) {
        return 0;
    }
    if (kind != w->coll) {
        fail_kinds(job, w, kind, ranks);
        return 1;
    }
    /* Each side by name: a rank of the other is no rank "not submitted" to this one. */
    coll_desc_name(&(coll_desc_t){.coll = (uint16_t)w->coll, .key = w->key}, mine, sizeof(mine));
    (void)coll_shm_name_ranks(job, w->posted, 1, "posted it in shared memory", host, sizeof(host));
    (void)coll_shm_name_ranks(job, ranks, 1, "submitted it to the daemon", dev, sizeof(dev));
    coll_job_fail(job, COLL_ERR_MISMATCH, 1, "the ranks of node %u disagree on where the buffers "
                  "of %s are: in host memory at %s; in a device pool at %s; every rank of a node "
                  "must hold them in the same kind of pool", job->node_rank, mine, host, dev);
    return 1;
}

/* Collectives waiting in the local ranks' shared-memory area (engine/shm_watch.h), scanned once
 * a tick: check_shm_left(), a collective of another kind or route elsewhere under the same key
 * (engine/shm_route.h), then the same stall warning and timeout as the daemon's own
 * operations. Returns 1 when the job failed. */
static int check_shm(coll_job_t *job, uint64_t now)
{
    coll_shm_wait_t w[COLL_SHM_WATCH_MAX];
    size_t n = coll_shm_waiting(job, w, COLL_SHM_WATCH_MAX);
    char wait[400], nm[48];

    if (check_shm_left(job, n)) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (check_shm_conflict(job, &w[i])) {
            return 1;
        }
    }
    if (coll_shm_route_check(job, w, n, now)) {
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t age = now > w[i].since_ns ? now - w[i].since_ns : 0;
        if (age < half_timeout_ns(job)) {
            break; /* oldest first: the others are younger */
        }
        uint32_t missing = coll_shm_describe(job, &w[i], wait, sizeof(wait));
        coll_desc_name(&(coll_desc_t){.coll = (uint16_t)w[i].coll, .key = w[i].key}, nm,
                       sizeof(nm));
        if (age >= op_timeout_ns(job, job->nnodes, missing)) {
            coll_job_fail(job, COLL_ERR_TIMEDOUT, 1, "%s timed out after %" PRIu64 " ms waiting "
                          "for %s", nm, age / 1000000, wait);
            return 1;
        }
        if (!shm_warned(job, w[i].key)) {
            coll_warn(COLL_SUB_JOB, "job %s: %s stalled for %" PRIu64 " ms in shared memory, "
                      "waiting for %s", job->id, nm, age / 1000000, wait);
        }
    }
    return 0;
}

/* A node that left or was lost fails the job only when this node still waits on it: a node
 * that left cleanly finished every operation it took part in and flushed what it sent, so a
 * receive from it still pending one tick later waits for data that will never come. */
static void check_stranded(coll_job_t *job)
{
    coll_op_t *op, *tmp;
    char nm[64];

    coll_list_for_each_safe(op, tmp, &job->engine.ops, coll_op_t, link)
    {
        coll_xfer_t *x, *xtmp;
        coll_list_for_each_safe(x, xtmp, &op->posted, coll_xfer_t, posted)
        {
            coll_node_t *n = &job->nodes[x->peer];
            if (op->done || x->completed || x->is_send || n->gone == COLL_OK) {
                continue;
            }
            if (x->suspect) {
                coll_desc_name(&op->desc, nm, sizeof(nm));
                coll_job_fail(job, n->gone, 1, "node %u (%s, ranks from %u): %s while %s still "
                              "waited for its data", x->peer, n->host, n->ranks[0], n->gone_why, nm);
                return;
            }
            x->suspect = 1;
        }
    }
}

static void log_gone(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        coll_node_t *n = &job->nodes[i];
        if (n->gone != COLL_OK && !n->gone_seen) {
            n->gone_seen = 1;
            coll_info(COLL_SUB_UCX, "job %s: node %u (%s): %s", job->id, i, n->host, n->gone_why);
        }
    }
}

static void tick_cb(uv_timer_t *t)
{
    coll_job_t *job = t->data;
    uint64_t now;

    coll_transport_drive(job); /* act on control messages first */
    now = uv_hrtime();
    if (job->state != COLL_JOB_READY) {
        return;
    }
    if (job->nnodes > 1) {
        coll_control_heartbeat(job, (job->node_rank + 1) % job->nnodes);
        check_prev(job, now);
        log_gone(job);
    }
    coll_shm_harvest(job);
    if (job->state == COLL_JOB_READY && !check_ops(job, now) && !check_shm(job, now)) {
        check_stranded(job);
    }
    if (job->state == COLL_JOB_READY) {
        coll_blame_answer(job);
    }
    coll_transport_drive(job);
}

void coll_health_start(coll_job_t *job)
{
    uint64_t now = uv_hrtime(), tick = coll_health_tick_ms(job);

    for (uint32_t i = 0; i < job->nnodes; i++) {
        job->nodes[i].last_seen_ns = now;
    }
    uv_timer_start(&job->health_timer, tick_cb, tick, tick);
}

void coll_health_stop(coll_job_t *job)
{
    uv_timer_stop(&job->health_timer);
}
