#include "job/doorbell.h"

#include <errno.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/log.h"
#include "engine/op.h"
#include "job/session.h"
#include "job/submission.h"
#include "proto/ctl.h"

/* Submissions taken per ring per round, so one rank cannot hold the loop. */
#define DRAIN_BATCH COLL_CTL_SUB_SLOTS

static coll_ctl_job_t *job_header(coll_job_t *job)
{
    return (coll_ctl_job_t *)(void *)coll_pool_base(job->pool);
}

static void submit_record(coll_job_t *job, coll_session_t *s, const coll_submission_t *r)
{
    Coll__Wire__Submit sub;
    char err[256];

    if (coll_wire_check_submission(r, err, sizeof(err)) != COLL_OK) {
        char why[300];
        snprintf(why, sizeof(why), "malformed submission in its control block: %s", err);
        coll_session_reject(s, why);
        return;
    }
    coll_submission_to_wire(r, &sub);
    coll_job_submit(job, s, &sub);
}

/* Ranks submit once the job is ready, and keep doing so after it failed (they are told why). */
static int takes_submissions(const coll_job_t *job)
{
    return job->pool != NULL && !job->closing &&
           (job->state == COLL_JOB_READY || job->state == COLL_JOB_FAILED);
}

/* Take what the job's ranks queued. */
static void drain(coll_job_t *job)
{
    for (uint32_t l = 0; l < job->local_size && takes_submissions(job); l++) {
        coll_session_t *s = job->locals[l];
        coll_submission_t rec;
        int n = 0, got;
        while (s != NULL && s->job == job && n++ < (int)DRAIN_BATCH &&
               (got = coll_ctl_take(s->ctl, &rec)) != 0) {
            if (got < 0) {
                coll_session_reject(s, "corrupt submission ring in its control block");
                break;
            }
            submit_record(job, s, &rec);
            s = job->locals[l]; /* a rejected session has left the job */
        }
    }
}

static void bell_cb(uv_poll_t *h, int status, int events)
{
    coll_job_t *job = h->data;
    uint64_t v;

    (void)!read(job->doorbell_fd, &v, sizeof(v)); /* reset; EAGAIN is harmless */
    drain(job);
}

coll_status_t coll_doorbell_open(coll_job_t *job)
{
    job->doorbell_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (job->doorbell_fd < 0) {
        coll_error(COLL_SUB_JOB, "job %s: eventfd for its doorbell: %m", job->id);
        return COLL_ERR_IO;
    }
    uv_poll_init(job->d->loop, &job->doorbell, job->doorbell_fd);
    job->doorbell.data = job;
    job->handles++;
    uv_poll_start(&job->doorbell, UV_READABLE, bell_cb);
    return COLL_OK;
}

void coll_doorbell_close(coll_job_t *job)
{
    if (job->doorbell_fd >= 0) {
        uv_close((uv_handle_t *)&job->doorbell, coll_job_handle_closed);
    }
}

/* Before the loop blocks: say so, then take what was queued before the ranks could see it. */
static void prepare_cb(uv_prepare_t *h)
{
    coll_daemon_t *d = h->data;
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (takes_submissions(job)) {
            atomic_store(&job_header(job)->daemon_asleep, 1);
            drain(job);
        }
    }
}

static void check_cb(uv_check_t *h)
{
    coll_daemon_t *d = h->data;
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &d->jobs, coll_job_t, link)
    {
        if (job->pool != NULL) {
            atomic_store(&job_header(job)->daemon_asleep, 0);
        }
    }
}

void coll_doorbell_start(coll_daemon_t *d)
{
    uv_prepare_init(d->loop, &d->prepare);
    uv_check_init(d->loop, &d->check);
    d->prepare.data = d->check.data = d;
    uv_prepare_start(&d->prepare, prepare_cb);
    uv_check_start(&d->check, check_cb);
}

void coll_doorbell_stop(coll_daemon_t *d)
{
    if (d->prepare.loop != NULL && !uv_is_closing((uv_handle_t *)&d->prepare)) {
        uv_close((uv_handle_t *)&d->prepare, NULL);
        uv_close((uv_handle_t *)&d->check, NULL);
    }
}
