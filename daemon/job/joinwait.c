/*
 * What a job's join waits for, told to its local ranks 1 s after the job was created here
 * (JoinWait): the local ranks that have not joined, the root daemon that cannot be reached and
 * why, or what the root has gathered. The same facts as the timeout's message, at once.
 */
#include <stdio.h>
#include <string.h>

#include "job/lifecycle.h"
#include "net/clientlink.h"
#include "net/rdv.h"

/* "local ranks 1, 3 (of 4)": those of @p job that have not joined this node. */
static void missing_locals(const coll_job_t *job, char *buf, size_t len)
{
    size_t n = 0;

    buf[0] = '\0';
    for (uint32_t l = 0; l < job->local_size && n < len; l++) {
        if (job->locals[l] == NULL) {
            n += (size_t)snprintf(buf + n, len - n, "%s%u", n ? ", " : "", l);
        }
    }
}

static void describe(const coll_job_t *job, char *buf, size_t len)
{
    char more[600];

    if (job->state == COLL_JOB_GATHERING) {
        missing_locals(job, more, sizeof(more));
        snprintf(buf, len, "waiting for the other ranks of this node: %u of %u joined the daemon "
                 "here, not yet local ranks %s (COLL_LOCAL_RANK); waiting up to %u ms",
                 job->njoined, job->local_size, more, job->timeout_ms);
    } else if (job->rdv.error[0] != '\0') {
        snprintf(buf, len, "waiting for the root daemon at %s (COLL_ROOT): %s; trying again for "
                 "up to %u ms%s", job->root, job->rdv.error,
                 job->connect_timeout_ms ? job->connect_timeout_ms : job->timeout_ms,
                 job->connect_timeout_ms ? " (COLL_CONNECT_TIMEOUT_MS)" : "");
    } else if (coll_rdv_describe(job->d, job, more, sizeof(more))) {
        snprintf(buf, len, "waiting for the other nodes at the root daemon (this one, %s): %s; "
                 "waiting up to %u ms", job->root, more, job->timeout_ms);
    } else {
        snprintf(buf, len, "registered at the root daemon %s, which waits for the ranks of the "
                 "other nodes (%u ranks in all); waiting up to %u ms", job->root,
                 job->world_size, job->timeout_ms);
    }
}

void coll_job_join_note(coll_job_t *job)
{
    coll_daemon_msg_t msg = COLL__WIRE__DAEMON_MSG__INIT;
    Coll__Wire__JoinWait w = COLL__WIRE__JOIN_WAIT__INIT;
    char text[1024];

    describe(job, text, sizeof(text));
    w.waiting_for = text;
    msg.body_case = COLL__WIRE__DAEMON_MSG__BODY_JOIN_WAIT;
    msg.join_wait = &w;
    for (uint32_t l = 0; l < job->local_size; l++) {
        if (job->locals[l] != NULL) {
            coll_session_send(job->locals[l], &msg);
        }
    }
}
