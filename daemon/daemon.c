/*
 * The composition root: the one file that sees every layer. It starts them bottom up
 * (the loop watch, authentication, UCX, the kernel threads, the listeners, the status
 * service), installs the job layer's hooks and the parameter service's (ps/ps.h), and
 * stops them top down.
 */
#include "daemon.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "admin/admin.h"
#include "base/log.h"
#include "base/loopwatch.h"
#include "base/notify.h"
#include "engine/crossover.h"
#include "engine/workers.h"
#include "job/doorbell.h"
#include "job/formation.h"
#include "job/lifecycle.h"
#include "job/session.h"
#include "net/accept.h"
#include "net/rdv.h"
#include "net/transport.h"
#include "ps/ps.h"

static void client_cb(coll_acceptor_t *a, int fd, const struct sockaddr_storage *peer)
{
    coll_session_open(coll_acceptor_data(a), fd, a);
}

/* A socket file left by a daemon that died is removed; one a live daemon answers on is not. */
static coll_status_t clear_stale_socket(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live;

    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    live = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    if (fd >= 0) {
        close(fd);
    }
    if (live) {
        coll_error(COLL_SUB_CORE, "another collectived is listening on %s", path);
        return COLL_ERR_INVALID;
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        coll_error(COLL_SUB_CORE, "removing stale socket %s: %m", path);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

/* The socket's directory (e.g. /run/collectived) is created when it is missing; systemd's
 * tmpfiles does it for the service. */
static coll_status_t make_socket_dir(const char *path)
{
    char dir[108];
    char *slash;

    snprintf(dir, sizeof(dir), "%s", path);
    slash = strrchr(dir, '/');
    if (slash == NULL || slash == dir) {
        return COLL_OK;
    }
    *slash = '\0';
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        coll_error(COLL_SUB_CORE, "cannot create the socket directory %s: %m", dir);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

/* The client socket has no connection limit and keeps no descriptors in reserve: local jobs
 * get what the status server and the peers must leave (net/accept.h). */
static coll_status_t listen_clients(coll_daemon_t *d)
{
    const char *path = d->cfg.socket;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    coll_acceptor_params_t p = {.listener = COLL_LISTENER_CLIENT, .what = "client socket",
                                .cb = client_cb, .data = d};
    char err[128];
    int fd;

    if (make_socket_dir(path) != COLL_OK || clear_stale_socket(path) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (coll_acceptor_bind((struct sockaddr *)&sa, sizeof(sa), &fd, err, sizeof(err)) !=
        COLL_OK) {
        coll_error(COLL_SUB_CORE, "client socket %s: %s", path, err);
        return COLL_ERR_IO;
    }
    d->listening = 1;
    if (coll_acceptor_open(d, fd, &p, &d->clients) != COLL_OK) {
        return COLL_ERR_IO;
    }
    /* Owner and group only: the group of trainers that may use this daemon. */
    chmod(path, 0660);
    coll_info(COLL_SUB_CORE, "clients connect on %s", path);
    return COLL_OK;
}

/* Written to a temporary name and renamed, so a reader never sees half an address. */
static coll_status_t write_addr_file(coll_daemon_t *d)
{
    char tmp[4200];
    FILE *f;

    if (d->cfg.addr_file[0] == '\0' || d->control_addr[0] == '\0') {
        return COLL_OK; /* no control listener: nothing to tell */
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->cfg.addr_file);
    f = fopen(tmp, "w");
    if (f == NULL || fprintf(f, "%s\n", d->control_addr) < 0 || fclose(f) != 0 ||
        rename(tmp, d->cfg.addr_file) < 0) {
        coll_error(COLL_SUB_CORE, "writing address file %s: %m", d->cfg.addr_file);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

static uint64_t half_of_memory(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size / 2 : UINT64_MAX;
}

static int hex_value(int c)
{
    return isdigit(c) ? c - '0' : isxdigit(c) ? tolower(c) - 'a' + 10 : -1;
}

/* Boot id and pid namespace: daemons that share both share a kernel and process ids, so each
 * can watch the other's process (peerwatch.h). All zero when /proc does not tell. */
static void read_kernel_id(coll_daemon_t *d)
{
    char text[64] = "";
    struct stat st;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    uint64_t ns = stat("/proc/self/ns/pid", &st) == 0 ? (uint64_t)st.st_ino : 0;
    unsigned k = 0;

    memset(d->kernel_id, 0, sizeof(d->kernel_id));
    if (f != NULL) {
        (void)!fgets(text, sizeof(text), f);
        fclose(f);
    }
    /* The boot id is a UUID: 32 hex digits and dashes. */
    for (const char *p = text; *p != '\0' && k < 32; p++) {
        int v = hex_value((unsigned char)*p);
        if (v >= 0) {
            d->kernel_id[k / 2] |= (uint8_t)(k % 2 ? v : v << 4);
            k++;
        }
    }
    memcpy(d->kernel_id + 16, &ns, sizeof(ns));
}

/* The control listener, when the node secret (or the consent to go without one) allows it;
 * the log says which, as /status does (peers.mode). */
static coll_status_t listen_peers(coll_daemon_t *d)
{
    switch (d->auth.mode) {
    case COLL_PEERS_AUTHENTICATED:
        coll_info(COLL_SUB_RDV, "peers authenticate with the node secret in %s",
                  d->cfg.peer_secret_file);
        break;
    case COLL_PEERS_UNAUTHENTICATED:
        coll_warn(COLL_SUB_RDV, "peers are not authenticated (%s; allow_unauthenticated_peers "
                  "= 1): any process that reaches %s may join jobs and read their data",
                  d->auth.why, d->cfg.listen);
        break;
    case COLL_PEERS_OFF:
        coll_info(COLL_SUB_RDV, "no control listener: %s; this daemon runs single-node jobs "
                  "only (collectived --make-secret creates a secret: the same file on every "
                  "node)", d->auth.why);
        return COLL_OK;
    }
    return coll_rdv_listen(d);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    coll_info(COLL_SUB_CORE, "signal %d: shutting down", signum);
    coll_daemon_stop(h->data);
}

/* SIGHUP: apply what may change while the daemon runs (COLL_CONFIG_RELOADABLE; jobs that
 * exist keep what they started with) and reopen the log file (after a rotation). */
static void reload_cb(uv_signal_t *h, int signum)
{
    coll_daemon_t *d = h->data;
    char applied[512], log_file[4096];

    snprintf(log_file, sizeof(log_file), "%s", d->cfg.log_file);
    coll_notify("RELOADING=1");
    if (coll_log_open_file(d->cfg.log_file) < 0) {
        coll_error(COLL_SUB_CORE, "reopening log_file %s: %m; the log stays where it was",
                   d->cfg.log_file);
    }
    if (coll_config_reload(&d->cfg, applied, sizeof(applied)) < 0) {
        coll_error(COLL_SUB_CORE, "reload: the configuration is invalid now (the line above "
                   "says why); nothing changed");
    } else {
        coll_info(COLL_SUB_CORE, "reloaded on signal %d: %s", signum,
                  applied[0] != '\0' ? applied : "no key changed");
    }
    if (strcmp(d->cfg.log_file, log_file) != 0 && coll_log_open_file(d->cfg.log_file) < 0) {
        coll_error(COLL_SUB_CORE, "opening log_file %s: %m; the log stays where it was",
                   d->cfg.log_file);
    }
    (void)coll_log_configure(d->cfg.log_level, d->cfg.log_subsys); /* checked by the reload */
    d->stats.busbw_min_bytes = d->cfg.busbw_min_bytes;
    d->pool_budget.limit = d->cfg.pool_budget ? d->cfg.pool_budget : half_of_memory();
    coll_devices_budget(&d->devices, d->cfg.device_pool_budget);
    coll_pinned_configure(&d->devices.pinned, d->loop, d->cfg.staged_pinned_cache_bytes,
                          d->cfg.staged_pinned_idle_ms);
    coll_notify("READY=1");
}

coll_status_t coll_daemon_start(coll_daemon_t *d, uv_loop_t *loop)
{
    coll_status_t st;

    d->loop = loop;
    coll_list_init(&d->sessions);
    coll_list_init(&d->jobs);
    coll_list_init(&d->peer_links);
    coll_list_init(&d->rdvs);
    coll_list_init(&d->barred_jobs);
    coll_stats_init(&d->stats, d->cfg.busbw_min_bytes);
    coll_job_layer_init(d);
    d->stage_hooks = &coll_ps_hooks;
    if (gethostname(d->hostname, sizeof(d->hostname) - 1) < 0) {
        snprintf(d->hostname, sizeof(d->hostname), "localhost");
    }
    read_kernel_id(d);
    uv_signal_init(loop, &d->sig_int);
    uv_signal_init(loop, &d->sig_term);
    uv_signal_init(loop, &d->sig_hup);
    d->sig_int.data = d->sig_term.data = d->sig_hup.data = d;
    uv_signal_start(&d->sig_int, signal_cb, SIGINT);
    uv_signal_start(&d->sig_term, signal_cb, SIGTERM);
    uv_signal_start(&d->sig_hup, reload_cb, SIGHUP);
    coll_doorbell_start(d);
    d->pool_budget.limit = d->cfg.pool_budget ? d->cfg.pool_budget : half_of_memory();
    coll_devices_open(&d->devices, d->cfg.device_pool_budget);
    coll_pinned_configure(&d->devices.pinned, loop, d->cfg.staged_pinned_cache_bytes,
                          d->cfg.staged_pinned_idle_ms);
    if ((st = coll_loopwatch_start(loop, d->cfg.loop_stall_ms)) != COLL_OK ||
        (st = coll_auth_load(&d->auth, d->cfg.peer_secret_file,
                             coll_config_source(&d->cfg, "peer_secret_file") != COLL_CFG_DEFAULT,
                             d->cfg.allow_unauthenticated_peers != 0)) != COLL_OK ||
        (st = coll_crossover_start(d)) != COLL_OK || (st = coll_transport_init(d)) != COLL_OK ||
        (st = coll_workers_start(d, (unsigned)d->cfg.kernel_threads)) != COLL_OK ||
        (st = listen_clients(d)) != COLL_OK ||
        (st = listen_peers(d)) != COLL_OK || (st = coll_admin_start(d)) != COLL_OK ||
        (st = write_addr_file(d)) != COLL_OK) {
        coll_daemon_stop(d);
        return st;
    }
    coll_info(COLL_SUB_CORE, "collectived %d.%d ready on %s", COLL_VERSION_MAJOR,
              COLL_VERSION_MINOR, d->hostname);
    return COLL_OK;
}

static void close_handle(uv_handle_t *h)
{
    if (h->loop != NULL && !uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

void coll_daemon_stop(coll_daemon_t *d)
{
    coll_session_t *s, *tmp;

    if (d->stopping) {
        return;
    }
    d->stopping = 1;
    coll_job_close_all(d);
    coll_list_for_each_safe(s, tmp, &d->sessions, coll_session_t, link)
    {
        coll_session_close(s, "daemon shutting down");
    }
    coll_rdv_close_all(d);
    coll_formation_clear(d);
    coll_workers_stop(d);
    coll_pinned_close(&d->devices.pinned); /* operations freed later free their own */
    coll_crossover_stop(d);
    coll_doorbell_stop(d);
    coll_acceptor_close(d->clients); /* freed once its last session is */
    d->clients = NULL;
    close_handle((uv_handle_t *)&d->sig_int);
    close_handle((uv_handle_t *)&d->sig_term);
    close_handle((uv_handle_t *)&d->sig_hup);
    if (d->listening) {
        unlink(d->cfg.socket);
    }
    if (d->cfg.addr_file[0] != '\0') {
        unlink(d->cfg.addr_file);
    }
    coll_admin_stop(d);
    coll_loopwatch_stop();
}

void coll_daemon_cleanup(coll_daemon_t *d)
{
    coll_transport_cleanup(d);
    coll_admin_cleanup(d);
}
