#include "job/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/codec/codec.h"
#include "engine/inflight.h"
#include "engine/op.h"
#include "job/devalloc.h"
#include "job/groups.h"
#include "job/lifecycle.h"
#include "job/submission.h"
#include "kernels/mem_kind.h"
#include "net/accept.h"
#include "net/clientlink.h"

static void session_close_cb(uv_handle_t *h)
{
    coll_session_t *s = h->data;
    struct sockaddr_storage local = {.ss_family = AF_UNIX};

    coll_acceptor_release(s->acceptor, &local);
    coll_frame_reader_cleanup(&s->reader);
    free(s);
}

void coll_session_close(coll_session_t *s, const char *why)
{
    if (s->closing) {
        return;
    }
    s->closing = 1;
    COLL_LOG(s->protocol_error ? COLL_LOG_ERROR : COLL_LOG_INFO, COLL_SUB_SESSION,
             "session %llu (pid %d%s%s) closed: %s", (unsigned long long)s->id, (int)s->cred.pid,
             s->job ? ", job " : "", s->job ? s->job->id : "", why);
    if (s->job != NULL) {
        coll_job_leave(s->job, s);
    }
    coll_list_remove(&s->link);
    coll_session_drop_fd_frames(s);
    uv_close((uv_handle_t *)&s->pipe, session_close_cb);
}

void coll_session_reject(coll_session_t *s, const char *why)
{
    s->protocol_error = 1;
    coll_session_close(s, why);
}

/* Why an allocation of @p bytes did not fit: the job's own pool, or the daemon's budget that
 * a pool growing on demand is charged to. */
static void pool_full_message(const coll_daemon_t *d, const coll_job_t *job, uint64_t bytes,
                              char *err, size_t errlen)
{
    const coll_pool_budget_t *b = &d->pool_budget;

    if (coll_pool_on_demand(job->pool) &&
        (b->used > b->limit || bytes > b->limit - b->used)) {
        snprintf(err, errlen,
                 "pool of job %s on this node cannot grow: %llu bytes asked, the jobs' pools "
                 "hold %llu of this daemon's %llu (pool_budget)",
                 job->id, (unsigned long long)bytes, (unsigned long long)b->used,
                 (unsigned long long)b->limit);
    } else {
        snprintf(err, errlen,
                 "pool of job %s on this node has no room: %llu bytes asked, %zu of %zu free "
                 "(raise %s)",
                 job->id, (unsigned long long)bytes, coll_pool_free_bytes(job->pool),
                 coll_pool_size(job->pool),
                 coll_pool_on_demand(job->pool) ? "pool_max" : "COLL_POOL_SIZE");
    }
}

/* Why the job of @p s takes no allocation now (COLL_OK: it does). */
static coll_status_t alloc_refused(const coll_session_t *s, char *err, size_t errlen)
{
    const coll_job_t *job = s->job;

    if (job == NULL) {
        snprintf(err, errlen, "allocation before joining a job");
        return COLL_ERR_PROTOCOL;
    }
    if (job->state == COLL_JOB_FAILED) { /* why, as its submissions are told */
        snprintf(err, errlen, "job %s failed earlier: %.500s", job->id, job->errmsg);
        return coll_job_status_for(job, s->rank, job->error);
    }
    if (job->state != COLL_JOB_READY) {
        snprintf(err, errlen, "job %s is not running yet", job->id);
        return COLL_ERR_JOB;
    }
    return COLL_OK;
}

static void on_alloc(coll_session_t *s, const Coll__Wire__MemAlloc *a)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__MemAllocReply r = COLL__WIRE__MEM_ALLOC_REPLY__INIT;
    coll_devalloc_out_t dev = {.nfds = 0};
    char err[768] = "";
    size_t off = 0;

    r.req_id = a->req_id;
    r.kind = a->kind;
    r.device = a->device;
    r.status = alloc_refused(s, err, sizeof(err));
    if (r.status == COLL_OK && a->kind != COLL_MEM_HOST) {
        r.status = coll_devalloc(s, a, &r, &dev, err, sizeof(err));
    } else if (r.status == COLL_OK) {
        r.status = coll_pool_alloc(s->job->pool, a->bytes, s, &off);
        if (r.status == COLL_ERR_POOL_FULL) {
            pool_full_message(s->d, s->job, a->bytes, err, sizeof(err));
        }
        r.offset = off;
    }
    r.error = err;
    r.bytes = a->bytes;
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_ALLOC;
    msg.alloc = &r;
    coll_session_send_fds(s, &msg, dev.fds, dev.nfds);
}

/* A free has no answer: a refused one is logged. An allocation that an operation in flight
 * still uses stays until the job ends (the library refuses such a free with COLL_ERR_BUSY
 * before it sends it, so only a client without it gets here). */
static void on_free(coll_session_t *s, uint64_t off, uint32_t pool)
{
    char what[48];

    if (s->job == NULL || s->job->pool == NULL) {
        coll_warn(COLL_SUB_SESSION, "session %llu: free of offset %llu before joining a job",
                  (unsigned long long)s->id, (unsigned long long)off);
    } else if (coll_inflight_uses(s->job, s, pool, off, what, sizeof(what))) {
        coll_warn(COLL_SUB_SESSION, "session %llu (rank %u of job %s): free of offset %llu of "
                  "pool %u refused: its %s still uses it (kept until the job ends)",
                  (unsigned long long)s->id, s->rank, s->job->id, (unsigned long long)off, pool,
                  what);
    } else if (pool != 0) {
        coll_devalloc_free(s, pool, off);
    } else if (coll_pool_free(s->job->pool, off, s) != COLL_OK) {
        coll_warn(COLL_SUB_SESSION, "session %llu: free of offset %llu it does not own",
                  (unsigned long long)s->id, (unsigned long long)off);
    }
}

static void on_hello(coll_session_t *s, const Coll__Wire__Hello *h)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__HelloReply r = COLL__WIRE__HELLO_REPLY__INIT;
    char name[128];

    s->hello = 1;
    coll_debug(COLL_SUB_SESSION, "session %llu: hello from %s", (unsigned long long)s->id,
               h->client);
    snprintf(name, sizeof(name), "collectived %d.%d on %s", COLL_VERSION_MAJOR,
             COLL_VERSION_MINOR, s->d->hostname);
    r.daemon = name;
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_HELLO;
    msg.hello = &r;
    coll_session_send(s, &msg);
}

static void dispatch(coll_session_t *s, const coll_client_msg_t *m)
{
    if (!s->hello && m->body_case != COLL__WIRE__CLIENT_MSG__BODY_HELLO) {
        coll_session_reject(s, "protocol error: first message is not Hello");
        return;
    }
    switch (m->body_case) {
    case COLL__WIRE__CLIENT_MSG__BODY_HELLO:
        on_hello(s, m->hello);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_JOIN:
        if (s->job != NULL) {
            coll_session_reject(s, "protocol error: second JoinJob on one connection");
        } else {
            coll_job_join(s->d, s, m->join);
        }
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_ALLOC:
        on_alloc(s, m->alloc);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_FREE:
        on_free(s, m->free->offset, m->free->pool);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_SUBMIT:
        if (s->job == NULL) {
            coll_session_complete(s, m->submit->req_id, COLL_ERR_PROTOCOL,
                                  "submit before joining a job", "");
        } else {
            coll_job_submit(s->job, s, m->submit);
        }
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_LAYOUT:
        if (s->job == NULL) {
            coll_session_reject(s, "protocol error: layout before joining a job");
        } else {
            coll_codec_layout_register(s->job, s, m->layout);
        }
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_ABORT:
        if (s->job != NULL) {
            coll_job_abort(s->job, s, (coll_status_t)m->abort->status, m->abort->reason);
        }
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_GROUP_QUERY:
        coll_groups_query(s, m->group_query);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_GROUP_CREATE:
        coll_groups_create(s, m->group_create);
        break;
    case COLL__WIRE__CLIENT_MSG__BODY_GROUP_FREE:
        coll_groups_free(s, m->group_free->group);
        break;
    default:
        break; /* the decoder admits no other body */
    }
}

static void on_frame(coll_session_t *s, const uint8_t *p, size_t n)
{
    char err[256], why[300];
    coll_client_msg_t *m;

    if (coll_wire_unpack_client(p, n, &m, err, sizeof(err)) != COLL_OK) {
        snprintf(why, sizeof(why), "malformed message: %s", err);
        coll_session_reject(s, why);
        return;
    }
    dispatch(s, m);
    coll__wire__client_msg__free_unpacked(m, NULL);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    coll_session_t *s = h->data;
    uint8_t *p;
    size_t len;

    if (coll_frame_reader_space(&s->reader, 4096, &p, &len) != COLL_OK) {
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)p, (unsigned)len);
}

static void read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    coll_session_t *s = stream->data;
    const uint8_t *p;
    size_t n;
    coll_status_t st = COLL_INPROGRESS;

    if (nread < 0) {
        coll_session_close(s, nread == UV_EOF ? "client disconnected" : uv_strerror((int)nread));
        return;
    }
    coll_frame_reader_commit(&s->reader, (size_t)nread);
    while (!s->closing && (st = coll_frame_reader_next(&s->reader, &p, &n)) == COLL_OK) {
        on_frame(s, p, n);
    }
    if (!s->closing && st == COLL_ERR_PROTOCOL) {
        char why[96];
        snprintf(why, sizeof(why), "malformed frame: larger than %u bytes", COLL_FRAME_MAX_CLIENT);
        coll_session_reject(s, why);
    }
}

void coll_session_open(coll_daemon_t *d, int fd, struct coll_acceptor *a)
{
    static uint64_t next_id = 1;
    struct sockaddr_storage local = {.ss_family = AF_UNIX};
    coll_session_t *s = calloc(1, sizeof(*s));
    socklen_t len = sizeof(s->cred);

    if (s == NULL || coll_frame_reader_init(&s->reader, COLL_FRAME_MAX_CLIENT) != COLL_OK) {
        coll_error(COLL_SUB_SESSION, "accepting a client: out of memory");
        free(s);
        close(fd);
        coll_acceptor_release(a, &local);
        return;
    }
    s->d = d;
    coll_list_init(&s->fd_frames);
    s->id = next_id++;
    s->acceptor = a;
    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &s->cred, &len);
    uv_pipe_init(d->loop, &s->pipe, 0);
    s->pipe.data = s;
    coll_list_push(&d->sessions, &s->link);
    if (uv_pipe_open(&s->pipe, fd) != 0) {
        close(fd);
        coll_session_close(s, "accept failed");
        return;
    }
    coll_debug(COLL_SUB_SESSION, "session %llu: pid %d uid %d connected", (unsigned long long)s->id,
               (int)s->cred.pid, (int)s->cred.uid);
    uv_read_start((uv_stream_t *)&s->pipe, alloc_cb, read_cb);
}
