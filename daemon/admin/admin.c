/*
 * The daemon as a systemd service: it says READY=1 once every listener is up, keeps a STATUS=
 * line current, pings the watchdog from the loop (a loop that hangs stops pinging, and systemd
 * restarts the daemon), and says STOPPING=1 when it shuts down.
 */
#include "admin/admin.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin/report.h"
#include "admin/status_server.h"
#include "base/log.h"
#include "base/notify.h"
#include "core/job.h"

/* STATUS= is refreshed at least this often (milliseconds), and on every watchdog ping. */
#define STATUS_PERIOD_MS 5000

coll_status_t coll_admin_own_socket(coll_daemon_t *d, const char *path)
{
    const char *name = d->cfg.socket_group;
    struct stat st;
    unsigned gid;

    if (name[0] == '\0') {
        return chmod(path, 0660) == 0 ? COLL_OK : COLL_ERR_IO;
    }
    if (coll_config_group(name, &gid) < 0) {
        /* Only the default can be missing: the configuration refused an unknown group. */
        coll_info(COLL_SUB_CORE, "%s: mode 0660, the daemon's own group (socket_group %s is "
                  "not defined on this host until systemd-sysusers creates it)", path, name);
        return chmod(path, 0660) == 0 ? COLL_OK : COLL_ERR_IO;
    }
    /* The service runs with the group as its own (Group=): the socket has it already. */
    if ((stat(path, &st) < 0 || st.st_gid != (gid_t)gid) &&
        chown(path, (uid_t)-1, (gid_t)gid) < 0) {
        /* A daemon run by a user outside the default group (tests, a workstation) goes on. */
        int dflt = errno == EPERM && coll_config_group_optional(&d->cfg);
        COLL_LOG(dflt ? COLL_LOG_INFO : COLL_LOG_ERROR, COLL_SUB_CORE,
                 "giving %s to group %s: %m", path, name);
        if (!dflt) {
            return COLL_ERR_IO;
        }
    }
    if (chmod(path, 0660) < 0) {
        coll_error(COLL_SUB_CORE, "chmod 0660 %s: %m", path);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

/* "2 jobs (1 ready), 4 ranks, 3 operations pending" */
static void status_line(const coll_daemon_t *d, char *buf, size_t len)
{
    unsigned jobs = 0, ready = 0, ranks = 0, pending = 0;
    uint64_t now = coll_stats_now_ns(), oldest;
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &((coll_daemon_t *)d)->jobs, coll_job_t, link)
    {
        jobs++;
        ready += job->state == COLL_JOB_READY;
        ranks += job->njoined;
        pending += coll_report_pending(job, now, &oldest);
    }
    snprintf(buf, len, "%u jobs (%u ready), %u ranks, %u operations pending", jobs, ready, ranks,
             pending);
}

/* Send @p extra (assignments, each ending in a newline, or "") and STATUS=<the status line>.
 * The assignments are separated by newlines as sd_notify(3) wants; a log line names them
 * separated by spaces, so that it stays one line. */
static void send_status(coll_admin_t *svc, const char *extra)
{
    char line[160], msg[256];

    status_line(svc->d, line, sizeof(line));
    if (extra[0] == '\0' && strcmp(line, svc->status_line) == 0) {
        return;
    }
    snprintf(svc->status_line, sizeof(svc->status_line), "%s", line);
    snprintf(msg, sizeof(msg), "%sSTATUS=%s", extra, line);
    if (coll_notify(msg) < 0) {
        for (char *nl = strchr(msg, '\n'); nl != NULL; nl = strchr(nl, '\n')) {
            *nl = ' ';
        }
        coll_warn(COLL_SUB_STATUS, "sd_notify(%s) failed", msg);
    }
}

static void tick_cb(uv_timer_t *t)
{
    coll_admin_t *svc = t->data;
    send_status(svc, svc->watchdog_usec ? "WATCHDOG=1\n" : "");
}

/* The watchdog is pinged at half its period, as sd_watchdog_enabled(3) advises. */
static void start_tick(coll_admin_t *svc)
{
    uint64_t period = STATUS_PERIOD_MS;

    svc->watchdog_usec = coll_notify_watchdog_usec();
    if (svc->watchdog_usec > 0 && svc->watchdog_usec / 2000 < period) {
        period = svc->watchdog_usec / 2000 > 0 ? svc->watchdog_usec / 2000 : 1;
    }
    uv_timer_init(svc->d->loop, &svc->tick);
    svc->tick.data = svc;
    svc->tick_open = 1;
    uv_timer_start(&svc->tick, tick_cb, period, period);
    /* The loop may hold the daemon in a job's close for a while after a stop: do not let the
     * timer alone keep it running. */
    uv_unref((uv_handle_t *)&svc->tick);
    coll_debug(COLL_SUB_STATUS, "systemd notifications every %llu ms (watchdog %llu us)",
               (unsigned long long)period, (unsigned long long)svc->watchdog_usec);
}

coll_status_t coll_admin_start(coll_daemon_t *d)
{
    coll_admin_t *svc = calloc(1, sizeof(*svc));
    coll_status_t st;

    if (svc == NULL) {
        return COLL_ERR_NOMEM;
    }
    svc->d = d;
    d->admin = svc;
    if ((st = coll_admin_own_socket(d, d->cfg.socket)) != COLL_OK ||
        (st = coll_status_server_open(d, &svc->server)) != COLL_OK) {
        return st;
    }
    if (coll_notify_enabled()) {
        start_tick(svc);
        send_status(svc, "READY=1\n");
    }
    return COLL_OK;
}

const char *coll_admin_tcp_addr(const coll_admin_t *svc)
{
    return coll_status_server_tcp_addr(svc->server);
}

void coll_admin_stop(coll_daemon_t *d)
{
    coll_admin_t *svc = d->admin;

    if (svc == NULL) {
        return;
    }
    if (coll_notify_enabled()) {
        coll_notify("STOPPING=1\nSTATUS=shutting down: failing pending operations, closing jobs");
    }
    coll_status_server_close(svc->server);
    svc->server = NULL;
    if (svc->tick_open) {
        uv_close((uv_handle_t *)&svc->tick, NULL);
        svc->tick_open = 0;
    }
}

void coll_admin_cleanup(coll_daemon_t *d)
{
    free(d->admin);
    d->admin = NULL;
}
