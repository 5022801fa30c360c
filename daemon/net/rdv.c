#include "net/rdv.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "base/auth.h"
#include "base/log.h"
#include "net/accept.h"
#include "net/link.h"
#include "net/rdv_nccl.h"
#include "net/ucx_address.h"
#include "proto/shm_area.h"

/* A rendezvous this daemon serves as root: the nodes of one job that registered so far, or,
 * once it failed, why (kept until @c expires so that late nodes hear it at once). */
typedef struct coll_rdv {
    coll_list_t link; /* in d->rdvs */
    coll_daemon_t *d;
    char job[COLL_JOB_ID_MAX + 1];
    uint32_t world_size;
    uint32_t nranks;
    coll_list_t members; /* rdv_member_t */
    coll_status_t failed; /* COLL_OK while gathering */
    char *failed_msg;
    uint8_t token_digest[COLL_AUTH_BYTES];
    uint64_t expires;    /* loop time (ms) */
} coll_rdv_t;

/* A node registered at a rendezvous: its link and its request. */
typedef struct {
    coll_list_t link;    /* in rdv->members */
    coll_rdv_t *rdv;
    coll_peer_link_t *l;
    Coll__Wire__NodeJoin *join;
} rdv_member_t;


#define RDV_RETRY_MS 100

/* ---- root side -------------------------------------------------------------------------------- */

static void member_free(rdv_member_t *m)
{
    coll_list_remove(&m->link);
    m->rdv->nranks -= (uint32_t)m->join->n_ranks;
    coll__wire__node_join__free_unpacked(m->join, NULL);
    m->l->owner = NULL;
    free(m);
}

/* The members' links stay open for their last answer: each node closes its own. */
static void rdv_free(coll_rdv_t *rdv)
{
    while (!coll_list_empty(&rdv->members)) {
        member_free(coll_container_of(rdv->members.next, rdv_member_t, link));
    }
    coll_list_remove(&rdv->link);
    free(rdv->failed_msg);
    free(rdv);
}

static void send_reply_error(coll_peer_link_t *l, coll_status_t status, const char *msg)
{
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;

    reply.status = status;
    reply.error = (char *)msg;
    out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
    out.node_join_reply = &reply;
    coll_link_send(l, &out);
}

/* Fail the rendezvous on every node registered so far, and remember why for the ones still
 * to come (for the job's timeout). */
static void rdv_fail(coll_rdv_t *rdv, coll_status_t status, const char *msg, uint64_t keep_ms)
{
    rdv_member_t *m, *tmp;

    coll_warn(COLL_SUB_RDV, "rendezvous of job %s failed: %s", rdv->job, msg);
    coll_list_for_each_safe(m, tmp, &rdv->members, rdv_member_t, link)
    {
        send_reply_error(m->l, status, msg);
        member_free(m);
    }
    rdv->failed = status;
    rdv->failed_msg = strdup(msg);
    rdv->expires = uv_now(rdv->d->loop) + keep_ms;
}

static uint32_t min_rank(const rdv_member_t *m)
{
    uint32_t r = UINT32_MAX;
    for (size_t i = 0; i < m->join->n_ranks; i++) {
        r = m->join->ranks[i] < r ? m->join->ranks[i] : r;
    }
    return r;
}

static int by_min_rank(const void *a, const void *b)
{
    uint32_t x = min_rank(*(rdv_member_t *const *)a);
    uint32_t y = min_rank(*(rdv_member_t *const *)b);
    return x < y ? -1 : x > y;
}

/* The epoch of a new incarnation of a job: the root's wall clock, which a restarted root does
 * not repeat either. */
static uint64_t realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The table every node gets, in ring order; @p sorted, @p infos and @p ptrs have @p n slots. */
static void fill_table(coll_rdv_t *rdv, size_t n, rdv_member_t **sorted,
                       Coll__Wire__NodeInfo *infos, Coll__Wire__NodeInfo **ptrs,
                       uint64_t *timeout_ms)
{
    rdv_member_t *m, *tmp;
    size_t k = 0;

    coll_list_for_each_safe(m, tmp, &rdv->members, rdv_member_t, link)
    {
        sorted[k++] = m;
        /* The most patient node's ranks set the job's timeout. */
        *timeout_ms = m->join->timeout_ms > *timeout_ms ? m->join->timeout_ms : *timeout_ms;
    }
    qsort(sorted, n, sizeof(*sorted), by_min_rank);
    for (k = 0; k < n; k++) {
        coll__wire__node_info__init(&infos[k]);
        infos[k].n_ranks = sorted[k]->join->n_ranks;
        infos[k].ranks = sorted[k]->join->ranks;
        infos[k].worker_address = sorted[k]->join->worker_address;
        infos[k].host = sorted[k]->join->host;
        infos[k].pid = sorted[k]->join->pid;
        infos[k].kernel_id = sorted[k]->join->kernel_id;
        infos[k].leader_address = sorted[k]->join->leader_address;
        ptrs[k] = &infos[k];
    }
}

/* The job parameter nccl from every node's offer (net/rdv_nccl.h); why not is logged. */
static int nccl_decide(const coll_rdv_t *rdv, size_t n, rdv_member_t **sorted)
{
    const Coll__Wire__NodeJoin **joins = calloc(n, sizeof(*joins));
    char why[COLL_DEV_TEXT_MAX + 200];
    int yes = 0;

    for (size_t k = 0; joins != NULL && k < n; k++) {
        joins[k] = sorted[k]->join;
    }
    if (joins != NULL && (yes = coll_rdv_nccl_decide(joins, n, why, sizeof(why))) == 0) {
        coll_info(COLL_SUB_RDV, "job %s: device buffers take the staged path between nodes, "
                  "not NCCL: %s", rdv->job, why);
    }
    free(joins);
    return yes;
}

/* The direct path's bound for the job: the root's, when every node's leader sent an address
 * that passes the check (net/ucx_address.h) and all of them fit the join reply that hands them
 * to each leader; otherwise 0, with the reason logged and no address sent. */
/* The direct path's bound within the smallest of the @p n >= 1 pools: its node buffers take at
 * most an eighth (coll_shm_direct_cap()). */
static uint64_t direct_pool_cap(const coll_rdv_t *rdv, size_t n, rdv_member_t **sorted,
                                uint64_t max_bytes)
{
    const Coll__Wire__NodeJoin *s = sorted[0]->join;

    for (size_t k = 1; k < n; k++) {
        s = sorted[k]->join->pool_bytes < s->pool_bytes ? sorted[k]->join : s;
    }
    if (coll_shm_direct_cap(s->pool_bytes) < max_bytes) {
        max_bytes = coll_shm_direct_cap(s->pool_bytes);
        coll_info(COLL_SUB_RDV, "job %s: direct_max_bytes %llu for the pool of %llu bytes on %s",
                  rdv->job, (unsigned long long)max_bytes,
                  (unsigned long long)s->pool_bytes, s->host);
    }
    return max_bytes;
}

static uint64_t direct_decide(const coll_rdv_t *rdv, size_t n, rdv_member_t **sorted,
                              Coll__Wire__NodeInfo **ptrs, uint64_t max_bytes)
{
    char why[160] = "";
    size_t total = 0;

    for (size_t k = 0; k < n && max_bytes > 0 && why[0] == '\0'; k++) {
        const ProtobufCBinaryData *a = &ptrs[k]->leader_address;
        total += a->len;
        if (a->len == 0) {
            snprintf(why, sizeof(why), "node %s sent no leader address", ptrs[k]->host);
        } else if (coll_ucx_address_check(a->data, a->len, why, sizeof(why)) == COLL_OK &&
                   total > COLL_DIRECT_ADDRS_MAX) {
            snprintf(why, sizeof(why), "the leaders' addresses exceed %u bytes",
                     COLL_DIRECT_ADDRS_MAX);
        }
    }
    if (max_bytes > 0 && why[0] != '\0') {
        coll_info(COLL_SUB_RDV, "job %s: no direct path between the leaders: %s", rdv->job, why);
        max_bytes = 0;
    }
    max_bytes = max_bytes > 0 ? direct_pool_cap(rdv, n, sorted, max_bytes) : 0;
    for (size_t k = 0; k < n && max_bytes == 0; k++) {
        ptrs[k]->leader_address = (ProtobufCBinaryData){0, NULL};
    }
    return max_bytes;
}

static void send_table(coll_rdv_t *rdv, size_t n, rdv_member_t **sorted,
                       Coll__Wire__NodeInfo **ptrs, uint64_t timeout_ms)
{
    Coll__Wire__JobParams params;
    Coll__Wire__AlgoChoice choices[COLL_JOB_CHOICES], *choice_ptrs[COLL_JOB_CHOICES];
    uint64_t epoch = realtime_ns();
    uint32_t ranks_per_node = 0;
    coll_job_params_t p;

    for (size_t k = 0; k < n; k++) {
        if (sorted[k]->join->n_ranks > ranks_per_node) {
            ranks_per_node = (uint32_t)sorted[k]->join->n_ranks;
        }
    }
    coll_job_params_from_config(&rdv->d->cfg, &p);
    p.timeout_ms = timeout_ms ? timeout_ms : p.timeout_ms;
    p.nccl = nccl_decide(rdv, n, sorted);
    p.direct_max_bytes = direct_decide(rdv, n, sorted, ptrs, p.direct_max_bytes);
    while (p.direct_max_bytes > 0 && p.direct_token == 0) {
        randombytes_buf(&p.direct_token, sizeof(p.direct_token));
    }
    rdv->d->job_hooks->params(rdv->d, (uint32_t)n, ranks_per_node, &p);
    coll_job_params_to_wire(&p, &params, choices, choice_ptrs);
    for (size_t k = 0; k < n; k++) {
        Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
        Coll__Wire__NodeJoinReply reply = COLL__WIRE__NODE_JOIN_REPLY__INIT;
        reply.params = &params;
        reply.epoch = epoch;
        reply.node_rank = (uint32_t)k;
        reply.n_nodes = n;
        reply.nodes = ptrs;
        out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY;
        out.node_join_reply = &reply;
        coll_link_send(sorted[k]->l, &out);
    }
}

/* Every rank is present: answer each node with the table in ring order. */
static void rdv_complete(coll_rdv_t *rdv)
{
    size_t n = 0;
    uint64_t timeout_ms = 0;
    coll_list_t *e;
    rdv_member_t **sorted;
    Coll__Wire__NodeInfo *infos, **ptrs;

    for (e = rdv->members.next; e != &rdv->members; e = e->next) {
        n++;
    }
    sorted = calloc(n, sizeof(*sorted));
    infos = calloc(n, sizeof(*infos));
    ptrs = calloc(n, sizeof(*ptrs));
    if (sorted == NULL || infos == NULL || ptrs == NULL) {
        rdv_fail(rdv, COLL_ERR_RENDEZVOUS, "root daemon out of memory", 0);
    } else {
        fill_table(rdv, n, sorted, infos, ptrs, &timeout_ms);
        send_table(rdv, n, sorted, ptrs, timeout_ms);
        coll_info(COLL_SUB_RDV, "job %s: rendezvous complete, %zu nodes, world size %u",
                  rdv->job, n, rdv->world_size);
        rdv_free(rdv);
    }
    free(sorted);
    free(infos);
    free(ptrs);
}

/* Whether @p rdv is the rendezvous of the job named @p job and @p digest (base/auth.h: jobs of
 * one id and another token, or another user's, never meet). */
static int rdv_named(const coll_rdv_t *rdv, const char *job, const uint8_t *digest, size_t len)
{
    return strcmp(rdv->job, job) == 0 && len == sizeof(rdv->token_digest) &&
           sodium_memcmp(digest, rdv->token_digest, sizeof(rdv->token_digest)) == 0;
}

/* The rendezvous of @p j's job: the one gathering, a failed one that still holds, or a new
 * one. Failed ones past their time are dropped on the way. */
static coll_rdv_t *rdv_get(coll_daemon_t *d, const Coll__Wire__NodeJoin *j)
{
    coll_rdv_t *rdv, *tmp, *found = NULL;
    uint64_t now = uv_now(d->loop);

    coll_list_for_each_safe(rdv, tmp, &d->rdvs, coll_rdv_t, link)
    {
        if (rdv->failed != COLL_OK && now >= rdv->expires) {
            rdv_free(rdv);
        } else if (rdv_named(rdv, j->job, j->token_digest.data, j->token_digest.len)) {
            found = rdv;
        }
    }
    if (found != NULL || (found = calloc(1, sizeof(*found))) == NULL) {
        return found;
    }
    snprintf(found->job, sizeof(found->job), "%s", j->job);
    found->d = d;
    found->world_size = j->world_size;
    if (j->token_digest.len == sizeof(found->token_digest)) {
        memcpy(found->token_digest, j->token_digest.data, sizeof(found->token_digest));
    }
    coll_list_init(&found->members);
    coll_list_push(&d->rdvs, &found->link);
    return found;
}

int coll_rdv_describe(coll_daemon_t *d, const coll_job_t *job, char *buf, size_t len)
{
    coll_rdv_t *rdv, *rtmp;
    rdv_member_t *m, *mtmp;
    size_t n;

    coll_list_for_each_safe(rdv, rtmp, &d->rdvs, coll_rdv_t, link)
    {
        if (rdv->failed != COLL_OK ||
            !rdv_named(rdv, job->id, job->token_digest, sizeof(job->token_digest))) {
            continue;
        }
        n = (size_t)snprintf(buf, len, "%u of %u ranks have registered here", rdv->nranks,
                             rdv->world_size);
        coll_list_for_each_safe(m, mtmp, &rdv->members, rdv_member_t, link)
        {
            if (n < len) {
                n += (size_t)snprintf(buf + n, len - n, "%s %s (%zu ranks)",
                                      m->link.prev == &rdv->members ? ":" : ",", m->join->host,
                                      m->join->n_ranks);
            }
        }
        return 1;
    }
    return 0;
}

/* Returns a message when @p j conflicts with the nodes already registered, else NULL. */
static const char *rdv_conflict(coll_rdv_t *rdv, const Coll__Wire__NodeJoin *j,
                                const char *from, char *buf, size_t len)
{
    rdv_member_t *m, *tmp;
    if (j->world_size != rdv->world_size) {
        snprintf(buf, len, "node %s (%s) says world size %u, earlier nodes say %u", j->host,
                 from, j->world_size, rdv->world_size);
        return buf;
    }
    coll_list_for_each_safe(m, tmp, &rdv->members, rdv_member_t, link)
    {
        for (size_t a = 0; a < j->n_ranks; a++) {
            for (size_t b = 0; b < m->join->n_ranks; b++) {
                if (j->ranks[a] == m->join->ranks[b]) {
                    snprintf(buf, len, "rank %u is claimed by node %s (%s) and by node %s (%s)",
                             j->ranks[a], m->join->host, m->l->peer, j->host, from);
                    return buf;
                }
            }
        }
    }
    return NULL;
}

static uint64_t keep_failure_ms(const coll_daemon_t *d, const Coll__Wire__NodeJoin *j)
{
    return j->timeout_ms ? j->timeout_ms : d->cfg.timeout_ms;
}

static void root_on_refusal(coll_peer_link_t *l, coll_rdv_t *rdv, Coll__Wire__NodeJoin *j)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), "node %s (%s) refused job %s: %s", j->host, l->peer, j->job,
             j->refusal_error);
    if (rdv->failed == COLL_OK) {
        rdv_fail(rdv, (coll_status_t)j->refusal, msg, keep_failure_ms(l->d, j));
    }
    send_reply_error(l, rdv->failed, rdv->failed_msg ? rdv->failed_msg : msg);
    coll__wire__node_join__free_unpacked(j, NULL);
}

/* A node whose worker address UCX could not read safely (net/ucx_address.h): its join alone is
 * refused, with the reason; the rendezvous goes on for the others. Returns 1 when refused. */
static int bad_worker_address(coll_peer_link_t *l, Coll__Wire__NodeJoin *j)
{
    char why[160], msg[512];

    if (j->refusal != 0 ||
        coll_ucx_address_check(j->worker_address.data, j->worker_address.len, why,
                               sizeof(why)) == COLL_OK) {
        return 0;
    }
    snprintf(msg, sizeof(msg), "node %s (%s) of job %s sent a UCX worker address that cannot be "
             "used (%zu bytes: %s); its join is refused", j->host, l->peer, j->job,
             j->worker_address.len, why);
    coll_refusal_note(l->d, COLL_LISTENER_CONTROL, COLL_REFUSED_WORKER_ADDRESS, "%s", msg);
    send_reply_error(l, COLL_ERR_RENDEZVOUS, msg);
    coll__wire__node_join__free_unpacked(j, NULL);
    return 1;
}

static void root_on_node_join(coll_peer_link_t *l, Coll__Wire__NodeJoin *j)
{
    char msg[1024];
    const char *conflict;
    coll_rdv_t *rdv;
    rdv_member_t *m;

    if (bad_worker_address(l, j)) {
        return;
    }
    rdv = rdv_get(l->d, j);
    if (rdv != NULL && j->refusal != 0) {
        root_on_refusal(l, rdv, j);
        return;
    }
    if (rdv != NULL && rdv->failed != COLL_OK) {
        send_reply_error(l, rdv->failed, rdv->failed_msg ? rdv->failed_msg : "it failed");
        coll__wire__node_join__free_unpacked(j, NULL);
        return;
    }
    if (rdv == NULL || (m = calloc(1, sizeof(*m))) == NULL) {
        coll__wire__node_join__free_unpacked(j, NULL);
        coll_link_close(l);
        return;
    }
    conflict = rdv_conflict(rdv, j, l->peer, msg, sizeof(msg));
    *m = (rdv_member_t){.rdv = rdv, .l = l, .join = j};
    l->owner = m;
    coll_list_push(&rdv->members, &m->link);
    rdv->nranks += (uint32_t)j->n_ranks;
    if (conflict != NULL) {
        rdv_fail(rdv, COLL_ERR_RENDEZVOUS, conflict, keep_failure_ms(l->d, j));
        return;
    }
    coll_debug(COLL_SUB_RDV, "job %s: node %s registered %zu ranks (%u of %u)", rdv->job, j->host,
               j->n_ranks, rdv->nranks, rdv->world_size);
    if (rdv->nranks == rdv->world_size) {
        rdv_complete(rdv);
    }
}

static void root_on_down(coll_peer_link_t *l, coll_status_t st, const char *why);

static void root_on_msg(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    Coll__Wire__NodeJoin *j = m->node_join;

    if (m->body_case != COLL__WIRE__PEER_MSG__BODY_NODE_JOIN || l->owner != NULL) {
        coll_warn(COLL_SUB_RDV, "control link %s: unexpected message; closing", l->peer);
        /* A member's link takes its node out of the rendezvous before it goes. */
        root_on_down(l, COLL_ERR_PROTOCOL, "it sent an unexpected message");
        coll_link_close(l);
        return;
    }
    m->node_join = NULL; /* kept by the member */
    m->body_case = COLL__WIRE__PEER_MSG__BODY__NOT_SET;
    root_on_node_join(l, j);
}

/* A node that goes away during its rendezvous takes its ranks back. */
static void root_on_down(coll_peer_link_t *l, coll_status_t st, const char *why)
{
    rdv_member_t *m = l->owner;

    if (m != NULL) {
        coll_rdv_t *rdv = m->rdv;
        coll_debug(COLL_SUB_RDV, "job %s: node %s left the rendezvous: %s", rdv->job,
                   m->join->host, why);
        member_free(m);
        if (coll_list_empty(&rdv->members) && rdv->failed == COLL_OK) {
            rdv_free(rdv);
        }
    }
}

static const coll_link_hooks_t root_hooks = {NULL, root_on_msg, root_on_down};

coll_status_t coll_rdv_listen(coll_daemon_t *d)
{
    return coll_link_listen(d, &root_hooks);
}

/* ---- node side: a job's rendezvous ------------------------------------------------------------- */

static void node_on_up(coll_peer_link_t *l)
{
    coll_job_t *job = l->owner;
    Coll__Wire__PeerMsg out = COLL__WIRE__PEER_MSG__INIT;
    Coll__Wire__NodeJoin j = COLL__WIRE__NODE_JOIN__INIT;
    ProtobufCBinaryData uuids[COLL_DEV_MAX];

    job->rdv.error[0] = '\0';
    j.job = job->id;
    j.world_size = job->world_size;
    j.n_ranks = job->local_size;
    j.ranks = job->ranks;
    j.worker_address.data = job->net.worker_address;
    j.worker_address.len = job->net.worker_address_len;
    j.host = l->d->hostname;
    j.timeout_ms = job->requested_timeout_ms;
    j.pid = (uint32_t)getpid();
    j.kernel_id = (ProtobufCBinaryData){sizeof(l->d->kernel_id), l->d->kernel_id};
    j.token_digest = (ProtobufCBinaryData){sizeof(job->token_digest), job->token_digest};
    j.leader_address = (ProtobufCBinaryData){job->leader_address_len, job->leader_address};
    j.pool_bytes = coll_pool_size(job->pool);
    coll_rdv_nccl_offer(l->d, &j, uuids);
    out.body_case = COLL__WIRE__PEER_MSG__BODY_NODE_JOIN;
    out.node_join = &j;
    coll_link_send(l, &out);
}

static void node_on_msg(coll_peer_link_t *l, coll_peer_msg_t *m)
{
    coll_job_t *job = l->owner;

    job->rdv.link = NULL;
    coll_link_close(l);
    if (m->body_case == COLL__WIRE__PEER_MSG__BODY_NODE_JOIN_REPLY) {
        job->d->job_hooks->rendezvous_done(job, m->node_join_reply);
    } else {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "root %s sent an unexpected message",
                      l->peer);
    }
}

static void retry_cb(uv_timer_t *t)
{
    coll_rdv_join(t->data);
}

/* Whether the root has refused this node for longer than the job's connect timeout. */
static int refused_too_long(const coll_job_t *job)
{
    return job->connect_timeout_ms != 0 &&
           uv_now(job->d->loop) - job->rdv.since_ms >= job->connect_timeout_ms;
}

/* A root that refuses connections may not be up yet (launch order): retry until the job's
 * connect timeout, or its join timer, ends the wait. Anything else fails the job now. */
static void node_on_down(coll_peer_link_t *l, coll_status_t st, const char *why)
{
    coll_job_t *job = l->owner;

    job->rdv.link = NULL;
    if (job->state != COLL_JOB_RENDEZVOUS) {
        return;
    }
    if (st == COLL_ERR_CONNREFUSED && refused_too_long(job)) {
        coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "no root daemon at %s (COLL_ROOT) within %u "
                      "ms (COLL_CONNECT_TIMEOUT_MS): %s; is collectived running there, "
                      "listening on that address?", job->root, job->connect_timeout_ms, why);
        return;
    }
    if (st == COLL_ERR_CONNREFUSED) {
        snprintf(job->rdv.error, sizeof(job->rdv.error), "%s", why);
        coll_debug(COLL_SUB_RDV, "job %s: %s; retrying", job->id, why);
        uv_timer_start(&job->rdv.retry_timer, retry_cb, RDV_RETRY_MS, 0);
        return;
    }
    coll_job_fail(job, COLL_ERR_RENDEZVOUS, 0, "root %s: %s", job->root, why);
}

static const coll_link_hooks_t node_hooks = {node_on_up, node_on_msg, node_on_down};

void coll_rdv_join(coll_job_t *job)
{
    char err[320];
    coll_status_t st;

    if (job->state != COLL_JOB_RENDEZVOUS) {
        return;
    }
    if (job->d->auth.mode == COLL_PEERS_OFF) {
        coll_job_fail(job, COLL_ERR_DENIED, 0, "job %s spans several nodes, but this daemon "
                      "talks to no peer: %s", job->id, job->d->auth.why);
        return;
    }
    if (job->rdv.since_ms == 0) {
        job->rdv.since_ms = uv_now(job->d->loop);
    }
    st = coll_link_connect(job->d, job->root, &node_hooks, job, &job->rdv.link, err, sizeof(err));
    if (st != COLL_OK) {
        job->rdv.link = NULL;
        coll_job_fail(job, st, 0, "root address %s (COLL_ROOT): %s", job->root, err);
        return;
    }
    if (job->d->auth.enabled) {
        snprintf(job->rdv.error, sizeof(job->rdv.error),
                 "waiting for root %.200s to authenticate (is peer_secret_file set there?)",
                 job->root);
    }
}

void coll_rdv_job_init(coll_job_t *job)
{
    uv_timer_init(job->d->loop, &job->rdv.retry_timer);
    job->rdv.retry_timer.data = job;
    job->handles++;
}

void coll_rdv_job_close(coll_job_t *job)
{
    uv_close((uv_handle_t *)&job->rdv.retry_timer, coll_job_handle_closed);
}

void coll_rdv_cancel(coll_job_t *job)
{
    uv_timer_stop(&job->rdv.retry_timer);
    if (job->rdv.link != NULL) {
        coll_link_close(job->rdv.link);
        job->rdv.link = NULL;
    }
}

void coll_rdv_close_all(coll_daemon_t *d)
{
    coll_rdv_t *rdv, *tmp;
    coll_list_for_each_safe(rdv, tmp, &d->rdvs, coll_rdv_t, link) { rdv_free(rdv); }
    coll_link_close_all(d);
}
