/*
 * What /status and /metrics both report: state names, uptime, pending operations.
 */
#include "admin/report.h"

#include "core/stats.h"
#include "engine/op.h"
#include "engine/shm_watch.h"

const char *coll_report_job_state(coll_job_state_t state)
{
    switch (state) {
    case COLL_JOB_GATHERING: return "gathering";
    case COLL_JOB_RENDEZVOUS: return "rendezvous";
    case COLL_JOB_READY: return "ready";
    case COLL_JOB_FAILED: return "failed";
    }
    return "unknown";
}

double coll_report_uptime(const coll_daemon_t *d)
{
    return (double)(coll_stats_now_ns() - d->stats.start_ns) / 1e9;
}

int coll_report_op_pending(const coll_op_t *op)
{
    return !op->done;
}

uint32_t coll_report_pending(const coll_job_t *job, uint64_t now_ns, uint64_t *oldest_ns_p)
{
    uint32_t n = 0;
    uint64_t oldest = 0;
    coll_op_t *op, *tmp;

    coll_list_for_each_safe(op, tmp, &((coll_job_t *)job)->engine.ops, coll_op_t, link)
    {
        if (coll_report_op_pending(op)) {
            n++;
            if (now_ns - op->t_submit_ns > oldest) {
                oldest = now_ns - op->t_submit_ns;
            }
        }
    }
    /* And those waiting in the local ranks' shared-memory area (oldest first). */
    coll_shm_wait_t w[COLL_SHM_WATCH_MAX];
    size_t nw = coll_shm_waiting(job, w, COLL_SHM_WATCH_MAX);
    if (nw > 0 && now_ns > w[0].since_ns && now_ns - w[0].since_ns > oldest) {
        oldest = now_ns - w[0].since_ns;
    }
    *oldest_ns_p = oldest;
    return n + (uint32_t)nw;
}
