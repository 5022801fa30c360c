/*
 * Communicator life: connect to the daemon, say hello, join the job (the daemon answers once
 * every rank of the job on every node has joined, passing the pool's memfd), map the pool.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/api/api.h"
#include "client/base/env.h"
#include "common/dtype.h"
#include "client/direct/direct.h"
#include "client/shm/shm.h"
#include "client/trace/timeline.h"
#include "client/devmap/devmap.h"

static coll_status_t hello(coll_comm_t *c, int timeout_ms)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Hello h = COLL__WIRE__HELLO__INIT;
    char name[64];
    coll_status_t st;

    snprintf(name, sizeof(name), "libcollective %d.%d pid %d", COLL_VERSION_MAJOR,
             COLL_VERSION_MINOR, (int)getpid());
    h.client = name;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    msg.hello = &h;
    st = coll__send(c, &msg);
    return st == COLL_OK ? coll__wait_flag(c, &c->hello_done, timeout_ms) : st;
}

/* The job's timeout bounds the whole of coll_comm_create(): connecting (a daemon that is not
 * there yet), the hello and the rendezvous. The daemon bounds the rendezvous by the same
 * timeout and answers; the library waits for that answer until some slack after the deadline,
 * in case the daemon is hung. */
static int job_timeout_ms(const coll_comm_params_t *p)
{
    return p->timeout_ms > 0 ? p->timeout_ms : COLL_DEFAULT_JOIN_MS;
}

/* How long connecting to the daemon may wait: the connect timeout, unless the job's is shorter
 * (0: the job's). */
static int connect_wait_ms(const coll_comm_params_t *p)
{
    int job = job_timeout_ms(p);
    return p->connect_timeout_ms > 0 && p->connect_timeout_ms < job ? p->connect_timeout_ms : job;
}

/* Milliseconds from now until @p deadline_ns (at least 1). */
static int ms_until(uint64_t deadline_ns)
{
    uint64_t now = coll__now_ns();
    return now + 1000000 < deadline_ns ? (int)((deadline_ns - now) / 1000000) : 1;
}

static coll_status_t join(coll_comm_t *c, const coll_comm_params_t *p, uint64_t deadline_ns)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__JoinJob j = COLL__WIRE__JOIN_JOB__INIT;
    const void *leader;
    size_t leader_len;
    coll_status_t st;

    /* The leader of a job over several nodes brings its own UCX worker (direct/direct.h). */
    if ((st = coll__direct_open(c, &leader, &leader_len)) != COLL_OK) {
        return st;
    }
    j.leader_address = (ProtobufCBinaryData){leader_len, (uint8_t *)(uintptr_t)leader};
    j.job = (char *)p->job;
    j.rank = (uint32_t)p->rank;
    j.world_size = (uint32_t)p->world_size;
    j.local_rank = (uint32_t)p->local_rank;
    j.local_size = (uint32_t)p->local_size;
    j.root = (char *)p->root;
    j.pool_bytes = p->pool_bytes;
    j.timeout_ms = (uint32_t)p->timeout_ms;
    j.connect_timeout_ms = (uint32_t)p->connect_timeout_ms;
    j.token = (char *)p->job_token;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_JOIN;
    msg.join = &j;
    st = coll__send(c, &msg);
    /* The daemon enforces the timeout and answers; a little slack covers the round trip. */
    if (st == COLL_OK) {
        st = coll__wait_flag(c, &c->join_done, ms_until(deadline_ns) + COLL_DAEMON_SLACK_MS);
    }
    return st == COLL_OK ? c->join_status : st;
}

/* The pool's start holds the control blocks (proto/ctl.h) when the daemon says so. */
static void find_ctl(coll_comm_t *c)
{
    if (c->ctl_bytes != COLL_CTL_BYTES || COLL_CTL_TOTAL(c->local_size) > c->pool_bytes) {
        return; /* a daemon without them: completions come on the socket */
    }
    c->ctl_job = (coll_ctl_job_t *)(void *)c->pool;
    c->ctl = coll_ctl_of(c->pool, (uint32_t)c->local_rank);
    c->frames_seen = atomic_load(&c->ctl->frames);
}

static coll_status_t map_pool(coll_comm_t *c)
{
    int fd = coll__take_fd(c);

    c->doorbell_fd = coll__take_fd(c); /* the join's second fd; -1: a daemon without one */
    if (fd < 0) {
        coll__set_error(c, "collectived did not pass the pool's file descriptor");
        return COLL_ERR_PROTOCOL;
    }
    c->pool = mmap(NULL, c->pool_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (c->pool == MAP_FAILED) {
        c->pool = NULL;
        coll__set_error(c, "mapping the job's pool (%zu bytes) failed", c->pool_bytes);
        return COLL_ERR_NOMEM;
    }
    find_ctl(c);
    return coll__shm_open(c, c->shm_bytes, c->shm_max_bytes);
}

/* Local rank 0 of a multi-node job takes its node buffers from the pool when it joins, before
 * any allocation of the job's own can fill it (shm/shm.h, route NODE): both sets, else the
 * direct path's alone. A pool without room for them is no error here: the daemons' path's
 * allreduces then go to the daemon whole (said once at COLL_DEBUG=WARN, the default; a direct
 * one fails the job, saying why, as it must: shm/submit.c), and the last error the user may
 * read is left as it was. Connection lock held. */
static void node_buffers(coll_comm_t *c)
{
    uint64_t bytes = coll__shm_node_wanted(c->shm), off = 0;
    char saved[sizeof(c->last_error)];
    coll_status_t st;

    if (bytes == 0) {
        return;
    }
    memcpy(saved, c->last_error, sizeof(saved));
    st = coll__mem_alloc(c, (size_t)bytes, &off);
    if (st == COLL_ERR_POOL_FULL && coll__shm_node_direct_only(c->shm)) {
        bytes = coll__shm_node_wanted(c->shm);
        st = coll__mem_alloc(c, (size_t)bytes, &off);
        coll__debug(COLL__DEBUG_WARN, "rank %d of job %s: no room in the pool for the node "
                    "buffers of allreduces above direct_max_bytes: those go to the daemon "
                    "whole, not reduced in shared memory first", c->rank, c->job);
    }
    if (st != COLL_OK) {
        coll__debug(COLL__DEBUG_WARN, "rank %d of job %s: %s the %llu bytes of node buffers "
                    "(%s): its node's allreduces go to the daemon whole, not reduced in shared "
                    "memory first%s", c->rank, c->job,
                    st == COLL_ERR_POOL_FULL ? "no room in the pool for" : "could not allocate",
                    (unsigned long long)bytes, c->last_error,
                    coll_comm_direct_max_bytes(c) > 0
                        ? ", but those of the direct path (up to direct_max_bytes) cannot: the "
                          "first of them fails the job"
                        : "");
        off = 0;
    }
    memcpy(c->last_error, saved, sizeof(saved));
    coll__shm_node_provide(c->shm, off, bytes);
}

static coll_comm_t *comm_new(const coll_comm_params_t *p)
{
    coll_comm_t *c = calloc(1, sizeof(*c));
    if (c == NULL || coll_frame_reader_init(&c->reader, COLL_FRAME_MAX_CLIENT) != COLL_OK) {
        free(c);
        return NULL;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    c->conn = c;
    c->refs = 1;
    c->next_group = 1;
    c->fd = -1;
    c->doorbell_fd = -1;
    c->pending.next = c->pending.prev = &c->pending;
    c->done.next = c->done.prev = &c->done;
    snprintf(c->job, sizeof(c->job), "%s", p->job);
    c->rank = p->rank;
    c->world_size = p->world_size;
    c->local_rank = p->local_rank;
    c->local_size = p->local_size;
    c->next_id = 1;
    c->owner = pthread_self();
    c->hooks = &coll__request_link_hooks;
    return c;
}

/* A failed create: keep why for coll_comm_last_error(NULL), on stderr only with COLL_DEBUG=INFO
 * (the caller has the status and this text), unless the communicator's error that it repeats
 * was printed already (@p printed). */
static coll_status_t create_failed(coll_status_t st, int printed, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static coll_status_t create_failed(coll_status_t st, int printed, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(coll__thread_error(), COLL_THREAD_ERROR_BYTES, fmt, ap);
    va_end(ap);
    if (!printed) {
        coll__debug(COLL__DEBUG_INFO, "%s", coll__thread_error());
    }
    return st;
}

coll_status_t coll_comm_create(const coll_comm_params_t *params, coll_comm_t **comm_p)
{
    coll_comm_params_t p;
    coll__launcher_t launcher;
    uint64_t deadline_ns;
    char err[512];
    coll_comm_t *c;
    const char *algo = getenv("COLL_ALGO"), *cz = getenv("COLL_COMPRESSION");
    coll_compression_t comp = {.method = COLL_COMPRESS_NONE};
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm_p);
    st = coll__params_resolve(params, &launcher, &p, err, sizeof(err));
    if (st == COLL_OK && algo != NULL && coll__algo_parse(algo) < 0) {
        snprintf(err, sizeof(err), "COLL_ALGO=%s: use auto, ring, rd, chain, dissemination, "
                 "direct, nccl or device", algo);
        st = COLL_ERR_INVALID;
    }
    if (st == COLL_OK && cz != NULL && cz[0] != '\0' && coll_compression_parse(cz, &comp) != COLL_OK) {
        snprintf(err, sizeof(err), "COLL_COMPRESSION=%s: use none, fp16, bf16, topk:RATIO, "
                 "onebit, powersgd:RANK or auto, optionally with ,noef and ,warmup=N", cz);
        st = COLL_ERR_INVALID;
    }
    if (st != COLL_OK) {
        return create_failed(st, 0, "%s", err);
    }
    if ((c = comm_new(&p)) == NULL) {
        return create_failed(COLL_ERR_NOMEM, 0, "rank %d: out of memory", p.rank);
    }
    c->algo = algo != NULL ? (coll_algo_t)coll__algo_parse(algo) : COLL_ALGO_AUTO;
    c->compression = comp;
    deadline_ns = coll__now_ns() + (uint64_t)job_timeout_ms(&p) * 1000000;
    c->fd = coll__connect(p.socket_path, connect_wait_ms(&p), p.rank, err, sizeof(err));
    if (c->fd < 0) {
        st = (coll_status_t)c->fd;
        c->fd = -1;
        coll_comm_destroy(c);
        return create_failed(st, 0, "rank %d: %s", p.rank, err);
    }
    pthread_mutex_lock(&c->lock);
    st = hello(c, ms_until(deadline_ns) + COLL_DAEMON_SLACK_MS);
    if (st == COLL_OK) {
        st = join(c, &p, deadline_ns);
    }
    if (st == COLL_OK) {
        st = map_pool(c);
    }
    if (st == COLL_OK && c->shm != NULL) {
        node_buffers(c);
        coll__shm_node_announce(c->shm);
        st = coll__shm_node_wait(c, ms_until(deadline_ns) + COLL_DAEMON_SLACK_MS);
    }
    pthread_mutex_unlock(&c->lock);
    if (st != COLL_OK) {
        snprintf(err, sizeof(err), "%s", c->last_error);
        coll_comm_destroy(c);
        return create_failed(st, err[0] != '\0', "rank %d of job %s%s%s", p.rank, p.job,
                             err[0] ? ": " : "", err);
    }
    c->timeline = coll__timeline_open(c->rank, c->world_size);
    *comm_p = c;
    return COLL_OK;
}

/* Unmap the pool but [@p keep, + @p keep_bytes) (page-aligned; NULL: all of it): stream words
 * a device may still touch (coll__sync_close()). */
static void unmap_pool(coll_comm_t *c, uint8_t *keep, size_t keep_bytes)
{
    uint8_t *end = c->pool + c->pool_bytes;

    if (keep == NULL) {
        munmap(c->pool, c->pool_bytes);
        return;
    }
    if (keep > c->pool) {
        munmap(c->pool, (size_t)(keep - c->pool));
    }
    if (keep + keep_bytes < end) {
        munmap(keep + keep_bytes, (size_t)(end - keep - keep_bytes));
    }
}

/* The connection's last communicator went: leave the job. */
static void close_connection(coll_comm_t *c)
{
    uint8_t *keep;
    size_t keep_bytes;

    pthread_mutex_lock(&c->lock);
    coll__shm_close(c);
    coll__direct_close(c);
    coll__timeline_close(c->timeline);
    c->timeline = NULL;
    pthread_mutex_unlock(&c->lock);
    /* Closing the socket is the goodbye: the daemon releases this rank's allocations. */
    if (c->fd >= 0) {
        close(c->fd);
    }
    while (c->npassed > 0) {
        close(coll__take_fd(c));
    }
    coll__sync_close(c, &keep, &keep_bytes);
    coll__devmap_close(c);
    if (c->doorbell_fd >= 0) {
        close(c->doorbell_fd);
    }
    if (c->pool != NULL) {
        unmap_pool(c, keep, keep_bytes);
    }
    coll_frame_reader_cleanup(&c->reader);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c->allocs);
    free(c->send_seq);
    free(c->recv_seq);
    free(c);
}

void coll__group_leave(coll_comm_t *k, uint32_t group)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__GroupFree f = COLL__WIRE__GROUP_FREE__INIT;

    if (k->broken == COLL_OK) {
        f.group = group;
        msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_GROUP_FREE;
        msg.group_free = &f;
        (void)coll__send(k, &msg);
    }
}

/* A group leaves its daemon's group table (if the link still works) and is freed. Connection
 * lock held. */
static void free_group(coll_comm_t *g)
{
    coll__group_leave(g->conn, g->group);
    free(g->job_ranks);
    free(g->send_seq);
    free(g->recv_seq);
    free(g);
}

void coll_comm_destroy(coll_comm_t *c)
{
    coll_comm_t *k;
    int last;

    if (c == NULL) {
        return;
    }
    k = c->conn;
    pthread_mutex_lock(&k->lock);
    coll__req_free_owned(c);
    if (c != k) {
        free_group(c);
    }
    last = --k->refs == 0;
    pthread_mutex_unlock(&k->lock);
    if (last) {
        close_connection(k);
    }
}

int coll_comm_rank(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    return comm->rank;
}

int coll_comm_world_size(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    return comm->world_size;
}

int coll_comm_local_rank(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    return comm->local_rank;
}

int coll_comm_local_size(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    return comm->local_size;
}

uint64_t coll_comm_shm_max_bytes(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, 0);
    /* Set before the communicator is handed out and never changed: no lock needed. */
    return comm->shm != NULL && comm->shm->nnodes == 1 ? comm->shm->max_bytes : 0;
}

uint64_t coll_comm_shm_node_max_bytes(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, 0);
    /* The header is written before the join reply (the job is ready): it does not change. */
    return comm->shm != NULL && comm->shm->nnodes > 1 && comm->shm->nlocal > 1
               ? comm->shm->hdr->node_max_bytes
               : 0;
}

uint64_t coll_comm_direct_max_bytes(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, 0);
    /* Written before the join reply, like node_max_bytes. */
    return comm->shm != NULL && comm->shm->nnodes > 1 ? comm->shm->hdr->direct_max_bytes : 0;
}

coll_status_t coll_comm_abort(coll_comm_t *comm, const char *reason)
{
    coll_comm_t *c;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, reason);
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    coll__abort(c, COLL_ERR_JOB, reason);
    st = c->broken;
    pthread_mutex_unlock(&c->lock);
    return st;
}

const char *coll_comm_last_error(const coll_comm_t *comm)
{
    /* Other threads write the communicator's message under its lock: the caller gets a copy of
     * its own, stable until its next call. */
    static _Thread_local char copy[sizeof(comm->last_error)];
    const coll_comm_t *c = comm != NULL ? comm->conn : NULL;
    coll_comm_t *m = (coll_comm_t *)c;

    if (c == NULL) {
        return coll__thread_error();
    }
    pthread_mutex_lock(&m->lock);
    snprintf(copy, sizeof(copy), "%s", c->last_error);
    pthread_mutex_unlock(&m->lock);
    return copy;
}
