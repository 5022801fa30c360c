#include "net/peerwatch.h"

#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/log.h"

/* One watched peer; freed by its handle's close callback, so it outlives nothing it uses. */
typedef struct coll_peerwatch {
    uv_poll_t poll;
    coll_job_t *job;
    uint32_t node;
    int fd;
} coll_peerwatch_t;

static void watch_closed(uv_handle_t *h)
{
    coll_peerwatch_t *w = h->data;
    coll_job_t *job = w->job;

    close(w->fd);
    free(w);
    coll_job_handle_closed((uv_handle_t *)&job->join_timer);
}

static void unwatch(coll_node_t *n)
{
    if (n->watch != NULL) {
        uv_close((uv_handle_t *)&n->watch->poll, watch_closed);
        n->watch = NULL;
    }
}

static void exited_cb(uv_poll_t *h, int status, int events)
{
    coll_peerwatch_t *w = h->data;
    coll_job_t *job = w->job;
    coll_node_t *n = &job->nodes[w->node];

    unwatch(n);
    if (n->left || n->gone != COLL_OK || job->state != COLL_JOB_READY) {
        return;
    }
    coll_node_lost(n, "its daemon (pid %u) exited", n->pid);
    coll_job_fail(job, COLL_ERR_PEER, 1, "node %u (%s, ranks from %u): %s", n->index, n->host,
                  n->ranks[0], n->gone_why);
}

static void watch(coll_job_t *job, coll_node_t *n)
{
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)n->pid, 0);
    coll_peerwatch_t *w = fd >= 0 ? calloc(1, sizeof(*w)) : NULL;

    if (w == NULL) {
        coll_debug(COLL_SUB_JOB, "job %s: node %u's daemon (pid %u) is not watched: %s",
                   job->id, n->index, n->pid, fd < 0 ? "no pidfd" : "no memory");
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    *w = (coll_peerwatch_t){.job = job, .node = n->index, .fd = fd};
    uv_poll_init(job->d->loop, &w->poll, fd);
    w->poll.data = w;
    job->handles++;
    n->watch = w;
    uv_poll_start(&w->poll, UV_READABLE, exited_cb);
}

void coll_peerwatch_start(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        coll_node_t *n = &job->nodes[i];
        if (i != job->node_rank && n->same_kernel && n->pid != 0) {
            watch(job, n);
        }
    }
}

void coll_peerwatch_stop(coll_job_t *job)
{
    for (uint32_t i = 0; i < job->nnodes; i++) {
        unwatch(&job->nodes[i]);
    }
}
