/*
 * Requests: submitted collectives and allocations waiting for the daemon's answer, matched by
 * id. Completions are dispatched by whichever thread reads the socket.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "client/req/request.h"
#include "client/devmap/devmap.h"
#include "client/direct/direct.h"
#include "client/shm/shm.h"
#include "client/trace/timeline.h"
#include "proto/tag.h"

static void unlink_req(coll_request_t *r)
{
    COLL_ASSERT(r->prev->next == r && r->next->prev == r);
    r->prev->next = r->next;
    r->next->prev = r->prev;
    r->next = r->prev = r;
}

static void link_req(coll_request_t *head, coll_request_t *r)
{
    r->next = head;
    r->prev = head->prev;
    head->prev->next = r;
    head->prev = r;
}

coll_request_t *coll__req_new(coll_comm_t *owner, coll_req_kind_t kind)
{
    coll_comm_t *c = owner->conn;
    coll_request_t *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    r->comm = c;
    r->owner = owner;
    r->kind = kind;
    r->id = c->next_id++;
    r->status = COLL_INPROGRESS;
    link_req(&c->pending, r);
    return r;
}

void coll__req_release(coll_request_t *r)
{
    coll__sync_end(r, r->done ? r->status : COLL_INPROGRESS);
    if (r->done) {
        coll__timeline_request(r->comm->timeline, r);
    }
    unlink_req(r);
    free(r);
}

coll_request_t *coll__req_same_key(const coll_comm_t *owner, const coll_submission_t *m)
{
    const coll_comm_t *c = owner->conn;
    uint64_t p2p_mask = (1ull << COLL_TAG_P2P_KEY_BITS) - 1;

    for (coll_request_t *r = c->pending.next; r != &c->pending; r = r->next) {
        if (r->kind != COLL_REQ_COLLECTIVE || r->owner != owner ||
            coll_kind_is_p2p(r->coll) != coll_kind_is_p2p(m->coll)) {
            continue;
        }
        if (coll_kind_is_p2p(r->coll) ? r->coll == m->coll && r->peer == m->peer &&
                                  ((r->key ^ m->key) & p2p_mask) == 0
                            : coll_tag_key(r->key) == coll_tag_key(m->key)) {
            return r;
        }
    }
    return NULL;
}

static int overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
    return alen > 0 && blen > 0 && a < b + blen && b < a + alen;
}

coll_request_t *coll__req_using(const coll_comm_t *c, uint32_t pool, uint64_t off,
                                uint64_t bytes)
{
    for (coll_request_t *r = c->pending.next; r != &c->pending; r = r->next) {
        if (r->kind == COLL_REQ_COLLECTIVE && r->pool == pool &&
            (overlaps(r->send_off, r->send_bytes, off, bytes) ||
             overlaps(r->recv_off, r->recv_bytes, off, bytes))) {
            return r;
        }
    }
    return NULL;
}

/* An alltoallv's count table goes back to the daemon with its operation, which copied it at
 * submission. With the link gone there is nothing to do: the daemon frees a rank's allocations
 * when it leaves. */
static void give_back_table(coll_request_t *r)
{
    if (r->table_off != 0) {
        coll__pool_give_back(r->comm, r->table_off);
        r->table_off = 0;
    }
}

void coll__pool_give_back(coll_comm_t *c, uint64_t offset)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__MemFree f = COLL__WIRE__MEM_FREE__INIT;

    if (c->broken != COLL_OK) {
        return;
    }
    f.offset = offset;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_FREE;
    msg.free = &f;
    (void)coll__send(c, &msg); /* a broken link is the next call's error */
}

/* A finished request waits on comm->done until the user frees it (or the communicator goes). */
static void finish(coll_request_t *r, coll_status_t status)
{
    COLL_ASSERT(!r->done && status != COLL_INPROGRESS);
    give_back_table(r);
    if (r->key_reused && status == COLL_OK) {
        status = COLL_ERR_INVALID; /* the user reused its key: the job fails, this one too */
    }
    coll__shm_forget(r);
    coll__sync_end(r, status);
    r->timing.complete_ns = coll__now_ns();
    unlink_req(r);
    r->status = status;
    r->done = 1;
    if (r->detached) {
        coll__timeline_request(r->comm->timeline, r);
        free(r);
    } else {
        link_req(&r->comm->done, r);
    }
}

void coll__req_finish(coll_request_t *r, coll_status_t status)
{
    finish(r, status);
}

void coll__req_fail_all(coll_comm_t *c, coll_status_t status)
{
    coll__shm_stop(c); /* no other local rank writes their outputs after they failed */
    while (c->pending.next != &c->pending) {
        finish(c->pending.next, status);
    }
}

void coll__req_free_owned(coll_comm_t *owner)
{
    coll_comm_t *c = owner->conn;
    coll_request_t *r, *next;

    for (r = c->pending.next; r != &c->pending; r = next) {
        next = r->next;
        if (r->owner == owner) {
            finish(r, COLL_ERR_CLOSED);
        }
    }
    for (r = c->done.next; r != &c->done; r = next) {
        next = r->next;
        if (r->owner == owner) {
            coll__req_release(r);
        }
    }
}

static coll_request_t *find(coll_comm_t *c, uint32_t id)
{
    for (coll_request_t *r = c->pending.next; r != &c->pending; r = r->next) {
        if (r->id == id) {
            return r;
        }
    }
    return NULL;
}

/* The daemon's phase times and @p n (<= COLL_CTL_MAX_STEPS) step records of a completion. */
static void set_times(coll_request_t *r, const coll_ctl_times_t *t, const uint64_t *steps,
                      size_t n)
{
    r->timing.ready_ns = t->ready_ns;
    r->timing.peers_ns = t->peers_ns;
    r->timing.reduced_ns = t->reduced_ns;
    r->timing.done_ns = t->done_ns;
    r->wire_bytes = t->wire_bytes;
    r->dense_bytes = t->dense_bytes;
    r->nsteps = (uint32_t)n;
    if (n > 0) { /* a Complete without steps has none at all (NULL) */
        memcpy(r->steps, steps, n * sizeof(steps[0]));
    }
}

static void on_complete(coll_comm_t *c, const Coll__Wire__Complete *m)
{
    coll_request_t *r = find(c, m->req_id);
    if (r == NULL || r->kind != COLL_REQ_COLLECTIVE) {
        return; /* a request freed with its communicator's failure */
    }
    if (m->status != COLL_OK) {
        coll__set_error(c, "%s", m->error);
    }
    snprintf(r->algo, sizeof(r->algo), "%s", m->algo);
    set_times(r, &(coll_ctl_times_t){.ready_ns = m->ready_ns, .peers_ns = m->peers_ns,
                                     .reduced_ns = m->reduced_ns, .done_ns = m->done_ns,
                                     .wire_bytes = m->wire_bytes,
                                     .dense_bytes = m->dense_bytes},
              m->steps, m->n_steps); /* steps checked by coll_wire_unpack_daemon() */
    finish(r, m->status > 0 ? COLL_ERR_PROTOCOL : (coll_status_t)m->status);
}

/* The completions the daemon wrote into the control block's ring: how many were taken. */
static int ctl_drain(coll_comm_t *c)
{
    coll_ctl_t *ctl = c->ctl;
    uint32_t tail = atomic_load_explicit(&ctl->comp_tail, memory_order_relaxed);
    uint32_t head = atomic_load_explicit(&ctl->comp_head, memory_order_acquire);
    int n = 0;

    for (; tail != head; tail++, n++) {
        const coll_ctl_comp_t *rec = &ctl->comp[tail % COLL_CTL_SLOTS];
        coll_request_t *r = find(c, rec->req_id);
        if (r != NULL && r->kind == COLL_REQ_COLLECTIVE) {
            uint32_t n = rec->t.nsteps;
            snprintf(r->algo, sizeof(r->algo), "%.*s", (int)sizeof(rec->algo) - 1, rec->algo);
            if (!coll_ctl_steps_valid(rec->t.steps, n)) {
                coll__set_error(c, "collectived completed request %u with %u malformed step "
                                "records", rec->req_id, n);
                finish(r, COLL_ERR_PROTOCOL);
                continue;
            }
            set_times(r, &rec->t, rec->t.steps, n);
            finish(r, COLL_OK);
        }
    }
    atomic_store_explicit(&ctl->comp_tail, tail, memory_order_release);
    return n;
}

static void on_alloc(coll_comm_t *c, const Coll__Wire__MemAllocReply *m)
{
    coll_request_t *r = find(c, m->req_id);
    /* A device pool's chunks come with the reply: mapped, or their fds closed, in any case. */
    coll_status_t st = m->kind != 0 ? coll__devmap_reply(c, m) : COLL_OK;

    if (r == NULL || r->kind != COLL_REQ_ALLOC) {
        return;
    }
    if (m->status != COLL_OK) {
        coll__set_error(c, "%s", m->error);
    } else if (st == COLL_OK && m->kind == 0 &&
               (m->offset > c->pool_bytes || m->bytes > c->pool_bytes - m->offset)) {
        coll__set_error(c, "collectived returned an allocation outside the pool");
        st = COLL_ERR_PROTOCOL;
    }
    if (st != COLL_OK) {
        finish(r, st);
        return;
    }
    r->offset = m->offset;
    r->pool = m->pool;
    finish(r, m->status > 0 ? COLL_ERR_PROTOCOL : (coll_status_t)m->status);
}

static void on_group(coll_comm_t *c, const Coll__Wire__GroupReply *m)
{
    coll_request_t *r = find(c, m->req_id);
    if (r == NULL || r->kind != COLL_REQ_GROUP) {
        return;
    }
    if (m->status != COLL_OK) {
        coll__set_error(c, "%s", m->error);
    }
    r->next_group = m->next_group;
    r->group_local_rank = m->local_rank;
    r->group_local_size = m->local_size;
    r->group_nodes = m->node_count;
    finish(r, m->status > 0 ? COLL_ERR_PROTOCOL : (coll_status_t)m->status);
}

static void on_layout(coll_comm_t *c, const Coll__Wire__LayoutReply *m)
{
    coll_request_t *r = find(c, m->req_id);
    if (r == NULL || r->kind != COLL_REQ_LAYOUT) {
        return;
    }
    if (m->status != COLL_OK) {
        coll__set_error(c, "%s", m->error);
    }
    finish(r, m->status > 0 ? COLL_ERR_PROTOCOL : (coll_status_t)m->status);
}

/* The leaders' addresses of the direct path, to this rank's worker (it is local rank 0); a
 * failure fails the join. */
static void leaders(coll_comm_t *c, const Coll__Wire__JoinReply *m)
{
    const void **a = calloc(m->n_leader_addresses, sizeof(*a));
    size_t *len = calloc(m->n_leader_addresses, sizeof(*len));
    coll_status_t st = COLL_ERR_NOMEM;

    for (size_t i = 0; a != NULL && len != NULL && i < m->n_leader_addresses; i++) {
        a[i] = m->leader_addresses[i].data;
        len[i] = m->leader_addresses[i].len;
    }
    if (a != NULL && len != NULL) {
        st = coll__direct_peers(c, a, len, m->n_leader_addresses);
    }
    free(a);
    free(len);
    c->join_status = st;
}

static void on_join(coll_comm_t *c, const Coll__Wire__JoinReply *m)
{
    c->join_done = 1;
    c->join_status = m->status > 0 ? COLL_ERR_PROTOCOL : (coll_status_t)m->status;
    if (m->status != COLL_OK) {
        coll__set_error(c, "%s", m->error);
        return;
    }
    c->pool_bytes = m->pool_bytes;
    c->ctl_bytes = m->ctl_bytes;
    c->shm_bytes = m->shm_bytes;
    c->shm_max_bytes = m->shm_max_bytes;
    c->job_timeout_ms = m->timeout_ms;
    c->epoch = m->epoch;
    c->node_rank = m->node_rank;
    c->node_count = m->node_count;
    snprintf(c->daemon_layer, sizeof(c->daemon_layer), "%s", m->device_layer);
    snprintf(c->daemon_devices, sizeof(c->daemon_devices), "%s", m->device_status);
    if (m->n_leader_addresses > 0) {
        leaders(c, m);
    }
}

/* One decoded DaemonMsg. */
static void dispatch(coll_comm_t *c, const coll_daemon_msg_t *m)
{
    switch (m->body_case) {
    case COLL__WIRE__DAEMON_MSG__BODY_HELLO:
        c->hello_done = 1;
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_JOIN:
        on_join(c, m->join);
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_ALLOC:
        on_alloc(c, m->alloc);
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_COMPLETE:
        on_complete(c, m->complete);
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_JOIN_WAIT:
        coll__debug(COLL__DEBUG_WARN, "rank %d of job %s: %s", c->rank, c->job,
                    m->join_wait->waiting_for);
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_GROUP:
        on_group(c, m->group);
        break;
    case COLL__WIRE__DAEMON_MSG__BODY_LAYOUT:
        on_layout(c, m->layout);
        break;
    default:
        break;
    }
}

/* The daemon completes or fails every operation within the job's timeout; a request still
 * pending well after that means the daemon itself is stuck (e.g. stopped). Milliseconds left
 * until then, or -1 when the job has no timeout. */
static int64_t daemon_deadline_ms(const coll_request_t *r)
{
    const coll_comm_t *c = r->comm;
    int64_t end_ns, left;

    if (c->job_timeout_ms == 0 || r->timing.submit_ns == 0) {
        return -1;
    }
    end_ns = (int64_t)(r->timing.submit_ns + (c->job_timeout_ms + COLL_DAEMON_SLACK_MS) * 1000000);
    left = (end_ns - (int64_t)coll__now_ns()) / 1000000;
    return left > 0 ? left : 0;
}

/* The library's verdict on a daemon that answered nothing about @p r within the job's timeout
 * (+ slack): COLL_ERR_TIMEDOUT with the reason; a stream waiting for @p r goes on (its results
 * undefined). Lock held. */
static coll_status_t daemon_silent(coll_comm_t *c, coll_request_t *r)
{
    coll__sync_release(r);
    coll__set_error(c, "collectived answered neither success nor failure within the job's "
                    "timeout of %llu ms (is the daemon stopped?)",
                    (unsigned long long)c->job_timeout_ms);
    return COLL_ERR_TIMEDOUT;
}

coll_status_t coll_req_test(coll_request_t *req)
{
    coll_comm_t *c;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, req);
    c = req->comm;
    pthread_mutex_lock(&c->lock);
    if (!req->done && c->broken == COLL_OK) {
        coll__wait_flag(c, &req->done, 0);
    }
    st = req->done ? req->status : (c->broken != COLL_OK ? c->broken : COLL_INPROGRESS);
    if (st == COLL_INPROGRESS && daemon_deadline_ms(req) == 0) {
        st = daemon_silent(c, req);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

coll_status_t coll_req_wait(coll_request_t *req, int timeout_ms)
{
    coll_comm_t *c;
    int64_t bound;
    int by_daemon;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, req);
    c = req->comm;
    bound = daemon_deadline_ms(req);
    by_daemon = bound >= 0 && (timeout_ms < 0 || bound < timeout_ms);
    pthread_mutex_lock(&c->lock);
    st = coll__wait_flag(c, &req->done, by_daemon ? (int)bound : timeout_ms);
    if (req->done) {
        st = req->status;
    } else if (st == COLL_ERR_TIMEDOUT && by_daemon) {
        st = daemon_silent(c, req);
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

/* Free @p r now when it is done, else when its answer comes. Lock held. */
static void drop(coll_request_t *r)
{
    if (r->done) {
        coll__req_release(r);
    } else {
        r->detached = 1;
    }
}

coll_status_t coll__req_exchange(coll_comm_t *c, coll_request_t *r, coll_client_msg_t *msg,
                                 int timeout_ms)
{
    coll_status_t st = coll__send(c->conn, msg);

    if (st == COLL_OK) {
        st = coll__wait_flag(c->conn, &r->done, timeout_ms);
    }
    if (st != COLL_OK) {
        drop(r);
    }
    return st;
}

void coll_req_free(coll_request_t *r)
{
    coll_comm_t *c;
    if (r == NULL) {
        return;
    }
    c = r->comm;
    pthread_mutex_lock(&c->lock);
    drop(r);
    pthread_mutex_unlock(&c->lock);
}

const char *coll_req_algo(const coll_request_t *req)
{
    COLL_ARG_CHECK_OR(NULL, req, "unknown");
    return req->algo;
}

/* What the daemon reported for a done request: its phase times and/or its steps. */
static coll_status_t read_done(const coll_request_t *r, coll_req_timing_t *timing,
                               coll_req_step_t *steps, uint32_t *nsteps)
{
    coll_comm_t *c = r->comm;
    coll_status_t st = COLL_INPROGRESS;

    pthread_mutex_lock(&c->lock);
    if (r->done) {
        if (timing != NULL) {
            *timing = r->timing;
        }
        if (steps != NULL) {
            *nsteps = coll__req_decode_steps(r, steps);
        }
        st = COLL_OK;
    }
    pthread_mutex_unlock(&c->lock);
    return st;
}

coll_status_t coll_req_timing(const coll_request_t *req, coll_req_timing_t *timing)
{
    COLL_ARG_CHECK(NULL, req);
    COLL_ARG_CHECK(req->comm, timing);
    return read_done(req, timing, NULL, NULL);
}

coll_status_t coll_req_steps(const coll_request_t *req, coll_req_step_t *steps, uint32_t *nsteps)
{
    COLL_ARG_CHECK(NULL, req);
    COLL_ARG_CHECK(req->comm, steps);
    COLL_ARG_CHECK(req->comm, nsteps);
    return read_done(req, NULL, steps, nsteps);
}

coll_status_t coll_req_wire_bytes(const coll_request_t *req, uint64_t *sent, uint64_t *dense)
{
    coll_status_t st = COLL_INPROGRESS;

    COLL_ARG_CHECK(NULL, req);
    COLL_ARG_CHECK(req->comm, sent);
    COLL_ARG_CHECK(req->comm, dense);
    pthread_mutex_lock(&req->comm->lock);
    if (req->done) {
        *sent = req->wire_bytes;
        *dense = req->dense_bytes;
        st = COLL_OK;
    }
    pthread_mutex_unlock(&req->comm->lock);
    return st;
}

/* What completed without a socket message: the daemon's ring first, then the local ranks'. */
static int progress(coll_comm_t *c)
{
    return ctl_drain(c) + coll__shm_progress(c);
}

const coll__link_hooks_t coll__request_link_hooks = {
    .dispatch = dispatch,
    .progress = progress,
    .watch = coll__shm_watch,
    .fail_all = coll__req_fail_all,
    .finish = coll__req_finish,
};
