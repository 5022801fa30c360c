#include "base/config.h"
#include "base/config_table.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "base/auth.h"
#include "base/log.h"
#include "base/stream.h"
#include "common/size.h"
#include "proto/frame.h"

#define KEY(n, t, d, doc) {#n, t, d, offsetof(coll_config_t, n), doc, NULL}
#define KEY_ALIAS(n, t, d, doc, alias) {#n, t, d, offsetof(coll_config_t, n), doc, alias}

static const cfg_key_t keys[] = {
    KEY(socket, CFG_STRING, "/run/collectived/collectived.sock",
        "Unix socket where trainers connect"),
    KEY(listen, CFG_STRING, "127.0.0.1:29510",
        "host:port of the control listener for peer daemons (port 0: any free port); opened "
        "only with a node secret (peer_secret_file) or allow_unauthenticated_peers = 1, and "
        "another address than the default is refused without either"),
    KEY(addr_file, CFG_STRING, "",
        "file to write the bound control address to once ready (for launchers and tests)"),
    KEY(pool_size, CFG_SIZE, "0",
        "shared pool of a job on this node when the job asks for none (COLL_POOL_SIZE); 0: up "
        "to pool_max, taken as the job's ranks allocate and given back as they free, within "
        "pool_budget"),
    KEY(pool_max, CFG_SIZE, "16G", "largest pool one job may ask for"),
    KEY(segment_size, CFG_SIZE, "256K", "ring pipeline segment in bytes"),
    KEY(pipeline_depth, CFG_UINT, "4", "segments in flight per operation (1..64)"),
    KEY(timeout_ms, CFG_UINT, "60000",
        "bound of every wait of a job in ms: rendezvous, each operation; a node whose heartbeats "
        "stop for half of it is declared lost (a job's ranks may ask for another with "
        "COLL_TIMEOUT_MS)"),
    KEY(rd_max_bytes, CFG_SIZE, "64K",
        "with cost_params = none (or a root daemon without the cost model): allreduces up to this "
        "size use recursive doubling, larger ones the ring (0: always ring)"),
    KEY(cost_params, CFG_STRING, "",
        "the cost model's constants (a file of KEY = VALUE lines, as bench/calibrate.sh writes "
        "them; \"\": the built-in ones, docs/cost-model.md): a job this daemon is the root of "
        "chooses its algorithms by the model's crossovers for its node count and ranks per "
        "node; none: by the fixed rd_max_bytes. A file that cannot be read or holds a bad "
        "constant stops the daemon at start"),
    KEY(shm_max_bytes, CFG_SIZE, "1M",
        "collectives of a single-node job up to this size run among its ranks in shared memory, "
        "without the daemon on the data path; larger ones in the daemon (0: always the daemon)"),
    KEY(shm_node_max_bytes, CFG_SIZE, "16K",
        "allreduces of a multi-node job up to this size are reduced among each node's ranks in "
        "shared memory, the daemons run only the inter-node phase on one buffer per node, and "
        "the ranks copy the result out (0: the daemon does all of it; the default is the "
        "crossover measured in docs/benchmarks.md)"),
    KEY(direct_max_bytes, CFG_SIZE, "64K",
        "allreduces of a multi-node job up to this size run their inter-node rounds between "
        "the nodes' leader ranks (local rank 0 of each) over UCX, without the daemons on the "
        "data path (the root daemon's value holds for the job; 0: never; at most 1M)"),
    KEY(kernel_threads, CFG_UINT, "2",
        "threads that split large single-node reductions (0: the loop thread does them)"),
    KEY(loop_stall_ms, CFG_UINT, "1000",
        "a callback that holds the event loop longer than this (ms) is logged with what it was "
        "doing and counted (collectived_loop_stalls_total); 10..60000"),
    KEY(ucx_error_mode, CFG_STRING, "auto",
        "UCX endpoint error handling: none (allows shared-memory transports), peer, or auto "
        "(peer to daemons on other hosts, none on this one)"),
    KEY(nccl, CFG_STRING, "auto",
        "offer NCCL between daemons to each job's root for collectives on device buffers: auto "
        "(when this daemon has a device layer and NCCL) or off (the staged path)"),
    KEY_ALIAS(log_level, CFG_LOGLEVEL, "info", "error, warn, info, debug or trace",
              "COLL_LOG_LEVEL"),
    KEY_ALIAS(log_subsys, CFG_STRING, "all",
              "subsystems logged at debug/trace: core,session,job,rdv,ucx,engine,pool,status or all",
              "COLL_LOG_SUBSYS"),
    KEY(status_socket, CFG_STRING, "status.sock",
        "Unix socket of the status server (GET /status, /metrics); a relative path is taken "
        "from the client socket's directory; none: off"),
    KEY(status_listen, CFG_STRING, "",
        "host:port where the status server also listens on TCP, e.g. for Prometheus (\"\": off)"),
    KEY(socket_group, CFG_STRING, "collective",
        "group (name or gid) that owns the client and status sockets (mode 0660); \"\" keeps "
        "the daemon's; the default is skipped when no such group exists"),
    KEY(busbw_min_bytes, CFG_SIZE, "1M",
        "operations of at least this many bytes update the last-large-operation busbw metric"),
    KEY(pool_budget, CFG_SIZE, "0",
        "bytes all jobs' pools on this node may use together; a job that would exceed it is "
        "refused (0: half of the machine's memory)"),
    KEY(device_pool_budget, CFG_SIZE, "0",
        "bytes the jobs' device pools may hold together on each GPU; an allocation that would "
        "grow them beyond it is refused (0: a quarter of each device's memory)"),
    KEY(device_peers_split_min, CFG_UINT, "262144",
        "a one-node allreduce, reduce-scatter or all-gather on the ranks' GPUs (device+peers) of "
        "at least this many elements in all (the allreduce's count, the others' count times "
        "the ranks) is split across the GPUs, each reducing and copying its "
        "share on its own stream; smaller ones run on the first rank's GPU (0: always split)"),
    KEY(staged_pinned_cache_bytes, CFG_SIZE, "64M",
        "page-locked host memory the staged path keeps idle on each GPU for the next operations' "
        "host copies, instead of locking and unlocking memory for each (0: none kept)"),
    KEY(staged_pinned_idle_ms, CFG_UINT, "10000",
        "a page-locked host buffer of the staged path idle this long (ms) is freed (1..3600000)"),
    KEY(peer_secret_file, CFG_STRING, COLL_AUTH_DEFAULT_SECRET,
        "the node secret (mode 0600, >= 16 bytes) every daemon of the cluster shares: daemons "
        "authenticate each other with it before anything else; collectived --make-secret "
        "creates it. Without one (the default file missing or unreadable, or \"\") the daemon "
        "runs single-node jobs only: no control listener, no connection to peers"),
    KEY(allow_unauthenticated_peers, CFG_UINT, "0",
        "1: without a node secret, listen for and connect to peers unauthenticated (any process "
        "that reaches the listen port, any local user on loopback, may then join jobs and read "
        "their data: only for hosts and networks of trusted users)"),
    KEY(peer_max_connections, CFG_UINT, "256",
        "control connections accepted at once; beyond it the listener waits (the kernel's "
        "backlog holds new ones) until one closes (1..65536)"),
    KEY(peer_max_per_address, CFG_UINT, "64",
        "control connections accepted at once from one remote address; one beyond it is closed "
        "at once, logged and counted (1..65536)"),
    KEY(peer_handshake_bytes, CFG_SIZE, "1K",
        "bytes a control connection may send before it authenticated (a handshake needs about "
        "150); a connection that sends more is closed, logged and counted (256..64K)"),
    KEY(peer_handshake_ms, CFG_UINT, "2000",
        "time a control connection has to authenticate (with no secret: to send its first "
        "message) before it is closed, logged and counted (100..60000)"),
    KEY(peer_idle_ms, CFG_UINT, "30000",
        "an accepted control connection that is not waiting in a rendezvous is closed after "
        "this long without a message (1000..3600000)"),
    KEY(status_max_connections, CFG_UINT, "64",
        "status connections served at once; beyond it the listener waits (the kernel's backlog "
        "holds new ones) until one closes (1..4096)"),
    KEY(fd_reserve, CFG_UINT, "64",
        "file descriptors kept for local jobs: the control listener closes a new connection "
        "(logged and counted) when fewer than this many are free, the status server when "
        "fewer than half; the client socket takes what is left (0..65536)"),
    KEY(log_file, CFG_STRING, "",
        "file the log goes to instead of stderr (\"\": stderr, the journal under systemd); "
        "SIGHUP reopens it"),
    KEY(require_job_token, CFG_UINT, "0",
        "1: a rank must present a job token (COLL_JOB_TOKEN) to join; 0: tokens are optional "
        "(a job that has one still refuses ranks without it)"),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))
_Static_assert(NKEYS <= COLL_CONFIG_MAX_KEYS, "raise COLL_CONFIG_MAX_KEYS");

static const char *const source_names[] = {"default", "file", "env", "flag"};

typedef coll__cfg_origin_t origin_t;

int coll__cfg_set_value(coll_config_t *cfg, const cfg_key_t *key, const char *text,
                        const char *from)
{
    void *field = (char *)cfg + key->offset;
    uint64_t v;
    char *end;

    switch (key->type) {
    case CFG_STRING:
    case CFG_LOGLEVEL:
        if (key->type == CFG_LOGLEVEL && coll_log_level_parse(text) < 0) {
            fprintf(stderr, "collectived: %s=%s (%s): unknown log level; use error, warn, info, "
                            "debug or trace\n", key->name, text, from);
            return -1;
        }
        free(*(char **)field);
        *(char **)field = strdup(text);
        return *(char **)field == NULL ? -1 : 0;
    case CFG_SIZE:
        if (coll_parse_size(text, &v) < 0) {
            fprintf(stderr, "collectived: %s=%s (%s): not a size; use bytes or K, M, G, T\n",
                    key->name, text, from);
            return -1;
        }
        *(uint64_t *)field = v;
        return 0;
    case CFG_UINT:
        errno = 0;
        v = strtoull(text, &end, 10);
        if (errno != 0 || end == text || *end != '\0' || text[0] == '-') {
            fprintf(stderr, "collectived: %s=%s (%s): not a non-negative integer\n", key->name,
                    text, from);
            return -1;
        }
        *(uint64_t *)field = v;
        return 0;
    }
    return -1;
}

const cfg_key_t *coll__cfg_key(size_t i)
{
    return i < NKEYS ? &keys[i] : NULL;
}

size_t coll__cfg_key_index(const cfg_key_t *key)
{
    return (size_t)(key - keys);
}

const cfg_key_t *coll__cfg_key_find(const char *name)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (strcmp(keys[i].name, name) == 0) {
            return &keys[i];
        }
    }
    return NULL;
}

static void env_name(const cfg_key_t *key, char *buf, size_t len)
{
    snprintf(buf, len, "COLLD_%s", key->name);
    for (char *p = buf; *p; p++) {
        *p = (char)toupper((unsigned char)*p);
    }
}

static void flag_name(const cfg_key_t *key, char *buf, size_t len)
{
    snprintf(buf, len, "%s", key->name);
    for (char *p = buf; *p; p++) {
        *p = *p == '_' ? '-' : *p;
    }
}

static void usage(FILE *out)
{
    char flag[64], env[64];
    fprintf(out,
            "usage: collectived [options]\n"
            "Collective-communication daemon: one per node. Trainers connect on a Unix socket;\n"
            "daemons of a job find each other through the job's root daemon and run\n"
            "Ring-AllReduce over UCX.\n\n"
            "Each option is also a key of the configuration file (key = value) and an\n"
            "environment variable COLLD_<NAME>; precedence: flag > environment > file > default.\n"
            "\noptions:\n");
    for (size_t i = 0; i < NKEYS; i++) {
        flag_name(&keys[i], flag, sizeof(flag));
        env_name(&keys[i], env, sizeof(env));
        fprintf(out, "  --%-16s %s\n  %-18s [default \"%s\", env %s%s%s]\n", flag, keys[i].doc,
                "", keys[i].def, env, keys[i].alias_env ? " or " : "",
                keys[i].alias_env ? keys[i].alias_env : "");
    }
    fprintf(out, "  --config PATH      configuration file (env COLLD_CONFIG; default %s;\n"
                 "                     none: no file)\n"
                 "  --print-config     print the effective configuration (a valid file) and exit\n"
                 "  --make-secret[=USER]  create peer_secret_file (a random node secret, mode\n"
                 "                     0600, given to USER) unless it exists, and exit\n"
                 "  --version          print the version and exit\n"
                 "  --help             this text\n\n"
                 "SIGHUP reopens log_file and applies the keys that may change while it runs:\n"
                 "  %s\n\n"
                 "example: collectived --socket /tmp/n0.sock --listen 127.0.0.1:0 "
                 "--addr-file /tmp/n0.addr\n", COLL_CONFIG_DEFAULT_FILE, COLL_CONFIG_RELOADABLE);
}

static void print_config(const coll_config_t *cfg, origin_t origin)
{
    printf("# configuration file: %s\n", cfg->config_file[0] ? cfg->config_file : "none");
    for (size_t i = 0; i < NKEYS; i++) {
        const void *field = (const char *)cfg + keys[i].offset;
        if (keys[i].type == CFG_SIZE || keys[i].type == CFG_UINT) {
            printf("%s = %llu  # %s\n", keys[i].name,
                   (unsigned long long)*(const uint64_t *)field, origin[i]);
        } else {
            printf("%s = %s  # %s\n", keys[i].name, *(char *const *)field, origin[i]);
        }
    }
}

static int load_defaults(coll_config_t *cfg, origin_t origin)
{
    for (size_t i = 0; i < NKEYS; i++) {
        cfg->source[i] = COLL_CFG_DEFAULT;
        snprintf(origin[i], sizeof(origin[i]), "%s", source_names[COLL_CFG_DEFAULT]);
        if (coll__cfg_set_value(cfg, &keys[i], keys[i].def, "default") < 0) {
            return -1;
        }
    }
    return 0;
}

/* COLLD_<NAME> first, then the key's alias (COLL_LOG_LEVEL, COLL_LOG_SUBSYS). */
static int load_env(coll_config_t *cfg, origin_t origin)
{
    char env[64];
    for (size_t i = 0; i < NKEYS; i++) {
        const char *name = env, *v;
        env_name(&keys[i], env, sizeof(env));
        v = getenv(env);
        if (v == NULL && keys[i].alias_env != NULL) {
            name = keys[i].alias_env;
            v = getenv(name);
        }
        if (v == NULL) {
            continue;
        }
        if (coll__cfg_set_value(cfg, &keys[i], v, name) < 0) {
            return -1;
        }
        cfg->source[i] = COLL_CFG_ENV;
        snprintf(origin[i], sizeof(origin[i]), "%s%s%s", source_names[COLL_CFG_ENV],
                 name == env ? "" : " ", name == env ? "" : name);
    }
    return 0;
}

/* --config PATH or --config=PATH, found before the other flags are parsed: the file is a lower
 * layer than every flag. The last one given counts. */
static const char *config_flag(int argc, char **argv)
{
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            path = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            path = argv[i] + 9;
        }
    }
    return path;
}

static int load_config_file(coll_config_t *cfg, origin_t origin, int argc, char **argv)
{
    const char *path = config_flag(argc, argv);
    int required = 1;

    if (path == NULL) {
        path = getenv("COLLD_CONFIG");
    }
    if (path == NULL) {
        path = COLL_CONFIG_DEFAULT_FILE;
        required = 0;
    }
    if (path[0] == '\0' || strcmp(path, "none") == 0) {
        return 0;
    }
    return coll__cfg_load_file(cfg, origin, path, required);
}

/* ---- checks after every layer ---- */

/* A relative status socket lives beside the client socket (several daemons on one host then
 * get one each without further configuration). */
static int resolve_status_socket(coll_config_t *cfg)
{
    const char *slash = strrchr(cfg->socket, '/');
    char *path;

    if (strcmp(cfg->status_socket, "none") == 0) {
        cfg->status_socket[0] = '\0';
        return 0;
    }
    if (cfg->status_socket[0] == '\0' || cfg->status_socket[0] == '/' || slash == NULL) {
        return 0;
    }
    if (asprintf(&path, "%.*s/%s", (int)(slash - cfg->socket), cfg->socket,
                 cfg->status_socket) < 0) {
        return -1;
    }
    free(cfg->status_socket);
    cfg->status_socket = path;
    return 0;
}

/* Whether @p text is a numeric host:port (IPv4, or IPv6 in brackets): no name resolution. */
static int numeric_hostport(const char *text)
{
    char host[64];
    int port;
    struct sockaddr_in6 sa;

    return coll_parse_hostport(text, host, sizeof(host), &port) == 0 &&
           (uv_ip4_addr(host, port, (struct sockaddr_in *)&sa) == 0 ||
            uv_ip6_addr(host, port, &sa) == 0);
}

/* A value that failed a check: "collectived: KEY=VALUE (ORIGIN): REASON" on stderr. */
static int refuse(const coll_config_t *cfg, const origin_t origin, const char *name,
                  const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int refuse(const coll_config_t *cfg, const origin_t origin, const char *name,
                  const char *fmt, ...)
{
    const cfg_key_t *key = coll__cfg_key_find(name);
    const void *field = (const char *)cfg + key->offset;
    va_list ap;

    if (key->type == CFG_SIZE || key->type == CFG_UINT) {
        fprintf(stderr, "collectived: %s=%llu (%s): ", name,
                (unsigned long long)*(const uint64_t *)field, origin[key - keys]);
    } else {
        fprintf(stderr, "collectived: %s=%s (%s): ", name, *(char *const *)field,
                origin[key - keys]);
    }
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return -1;
}

static int check_addresses(const coll_config_t *cfg, const origin_t origin)
{
    int bad = 0;

    if (cfg->socket[0] == '\0' || strlen(cfg->socket) >= 108) {
        bad |= refuse(cfg, origin, "socket", "must be 1..107 bytes");
    }
    if (strlen(cfg->status_socket) >= 108 || strcmp(cfg->status_socket, cfg->socket) == 0) {
        bad |= refuse(cfg, origin, "status_socket", "must be at most 107 bytes and differ "
                      "from socket");
    }
    if (!numeric_hostport(cfg->listen)) {
        bad |= refuse(cfg, origin, "listen", "not a numeric host:port (e.g. 0.0.0.0:29510 or "
                      "[::]:29510)");
    }
    /* A listener other than the default one needs a node secret to authenticate peers with,
     * or the consent to go without one; on the default address (which --print-config writes
     * out too) a daemon without a secret runs single-node jobs and opens no listener. */
    if (strcmp(cfg->listen, coll__cfg_key_find("listen")->def) != 0 && !cfg->make_secret &&
        !cfg->allow_unauthenticated_peers && access(cfg->peer_secret_file, R_OK) != 0) {
        bad |= refuse(cfg, origin, "listen", "no node secret to authenticate peers with "
                      "(peer_secret_file \"%s\": %s): create one with collectived --make-secret "
                      "(the same file on every node), or set allow_unauthenticated_peers = 1 for "
                      "hosts and networks of trusted users only", cfg->peer_secret_file,
                      cfg->peer_secret_file[0] ? strerror(errno) : "none");
    }
    if (cfg->status_listen[0] != '\0' && !numeric_hostport(cfg->status_listen)) {
        bad |= refuse(cfg, origin, "status_listen", "not a numeric host:port (e.g. "
                      "127.0.0.1:9464 or [::]:9464)");
    }
    return bad;
}

int coll_config_group(const char *name, unsigned *gid_p)
{
    struct group *g = getgrnam(name);
    char *end;
    unsigned long v;

    if (g != NULL) {
        *gid_p = (unsigned)g->gr_gid;
        return 0;
    }
    errno = 0;
    v = strtoul(name, &end, 10);
    if (name[0] < '0' || name[0] > '9' || *end != '\0' || errno != 0 || v >= 0xffffffffUL) {
        return -1;
    }
    *gid_p = (unsigned)v;
    return 0;
}

int coll_config_group_optional(const coll_config_t *cfg)
{
    return strcmp(cfg->socket_group, coll__cfg_key_find("socket_group")->def) == 0;
}

/* A group named on purpose must exist; the default one may be absent (a workstation, or a
 * host where systemd-sysusers has not run yet), wherever it was set. */
static int check_group(const coll_config_t *cfg, const origin_t origin)
{
    unsigned gid;

    if (cfg->socket_group[0] == '\0' || coll_config_group(cfg->socket_group, &gid) == 0 ||
        coll_config_group_optional(cfg)) {
        return 0;
    }
    return refuse(cfg, origin, "socket_group", "no such group (create it, e.g. with "
                  "systemd-sysusers, or set \"\" to keep the daemon's group)");
}

/* The bounds of what one connection may cost (net/accept.h, net/link.c, admin/status_server.c). */
static int check_limits(const coll_config_t *cfg, const origin_t origin)
{
    static const struct {
        const char *name;
        uint64_t lo, hi;
    } bounds[] = {
        {"peer_max_connections", 1, 65536},   {"peer_max_per_address", 1, 65536},
        {"peer_handshake_bytes", 256, 65536}, {"peer_handshake_ms", 100, 60000},
        {"peer_idle_ms", 1000, 3600000},      {"status_max_connections", 1, 4096},
        {"fd_reserve", 0, 65536},
    };

    int bad = 0;

    for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
        const cfg_key_t *key = coll__cfg_key_find(bounds[i].name);
        uint64_t v = *(const uint64_t *)((const char *)cfg + key->offset);
        if (v < bounds[i].lo || v > bounds[i].hi) {
            bad |= refuse(cfg, origin, bounds[i].name, "must be %llu..%llu",
                          (unsigned long long)bounds[i].lo, (unsigned long long)bounds[i].hi);
        }
    }
    return bad;
}

static int check_values(const coll_config_t *cfg, const origin_t origin)
{
    uint32_t mask;
    int bad = 0;

    if (cfg->log_subsys[0] != '\0' && coll_log_subsys_parse(cfg->log_subsys, &mask) < 0) {
        bad |= refuse(cfg, origin, "log_subsys", "unknown subsystem; use core, session, job, "
                      "rdv, ucx, engine, pool, status or all, separated by commas");
    }
    if (cfg->timeout_ms < 100 || cfg->timeout_ms > 86400000) {
        bad |= refuse(cfg, origin, "timeout_ms", "must be 100..86400000 (a day)");
    }
    if (cfg->pipeline_depth < 1 || cfg->pipeline_depth > 64) {
        bad |= refuse(cfg, origin, "pipeline_depth", "must be 1..64");
    }
    if (cfg->segment_size < 4096 || cfg->segment_size > (64u << 20)) {
        bad |= refuse(cfg, origin, "segment_size", "must be 4K..64M");
    }
    if (cfg->pool_size > cfg->pool_max) {
        bad |= refuse(cfg, origin, "pool_size", "must be 0..pool_max (%llu, %s)",
                      (unsigned long long)cfg->pool_max,
                      origin[coll__cfg_key_find("pool_max") - keys]);
    }
    if (cfg->require_job_token > 1) {
        bad |= refuse(cfg, origin, "require_job_token", "must be 0 or 1");
    }
    if (cfg->loop_stall_ms < 10 || cfg->loop_stall_ms > 60000) {
        bad |= refuse(cfg, origin, "loop_stall_ms", "must be 10..60000");
    }
    if (cfg->direct_max_bytes > COLL_CONFIG_DIRECT_MAX) {
        bad |= refuse(cfg, origin, "direct_max_bytes", "must be 0..1M (a node's leader keeps 64 "
                      "node buffers of this size in the job's pool)");
    }
    if (cfg->staged_pinned_idle_ms < 1 || cfg->staged_pinned_idle_ms > 3600000) {
        bad |= refuse(cfg, origin, "staged_pinned_idle_ms", "must be 1..3600000");
    }
    if (cfg->kernel_threads > 64) {
        bad |= refuse(cfg, origin, "kernel_threads", "must be 0..64");
    }
    bad |= check_limits(cfg, origin);
    if (strcmp(cfg->ucx_error_mode, "none") != 0 && strcmp(cfg->ucx_error_mode, "peer") != 0 &&
        strcmp(cfg->ucx_error_mode, "auto") != 0) {
        bad |= refuse(cfg, origin, "ucx_error_mode", "must be none, peer or auto");
    }
    if (strcmp(cfg->nccl, "auto") != 0 && strcmp(cfg->nccl, "off") != 0) {
        bad |= refuse(cfg, origin, "nccl", "must be auto or off");
    }
    bad |= check_addresses(cfg, origin);
    return bad | check_group(cfg, origin);
}

/* ---- flags ---- */

/* Returns 1 for --print-config, 0 to run, -1 after errors (every bad flag said), 2 after --help
 * or --version (--make-secret sets cfg->make_secret). */
static int load_flags(coll_config_t *cfg, origin_t origin, int argc, char **argv)
{
    struct option opts[NKEYS + 6];
    char names[NKEYS][64];
    int print = 0, bad = 0, c, idx;

    for (size_t i = 0; i < NKEYS; i++) {
        flag_name(&keys[i], names[i], sizeof(names[i]));
        opts[i] = (struct option){names[i], required_argument, NULL, (int)i};
    }
    opts[NKEYS] = (struct option){"print-config", no_argument, NULL, 'p'};
    opts[NKEYS + 1] = (struct option){"help", no_argument, NULL, 'h'};
    opts[NKEYS + 2] = (struct option){"config", required_argument, NULL, 'c'};
    opts[NKEYS + 3] = (struct option){"version", no_argument, NULL, 'V'};
    opts[NKEYS + 4] = (struct option){"make-secret", optional_argument, NULL, 'm'};
    opts[NKEYS + 5] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* 0, not 1: glibc then also forgets a half-parsed cluster of short options */
    while ((c = getopt_long(argc, argv, ":h", opts, &idx)) != -1) {
        if (c == 'h' || c == 'V') {
            c == 'h' ? usage(stdout) : (void)printf("collectived %s (wire protocol %u)\n",
                                                    COLL_DAEMON_VERSION, COLL_WIRE_VERSION);
            return 2;
        } else if (c == 'p') {
            print = 1;
        } else if (c == 'c') {
            continue; /* read before every other layer */
        } else if (c == 'm') {
            cfg->make_secret = 1;
            snprintf(cfg->make_secret_owner, sizeof(cfg->make_secret_owner), "%s",
                     optarg != NULL ? optarg : "");
        } else if (c >= 0 && c < (int)NKEYS) {
            char from[80];
            snprintf(from, sizeof(from), "flag --%s", names[c]);
            if (coll__cfg_set_value(cfg, &keys[c], optarg, from) < 0) {
                bad = 1;
                continue;
            }
            cfg->source[c] = COLL_CFG_FLAG;
            snprintf(origin[c], sizeof(origin[c]), "%s", source_names[COLL_CFG_FLAG]);
        } else {
            fprintf(stderr, "collectived: %s %s; see collectived --help\n",
                    c == ':' ? "missing value for" : "unknown option", argv[optind - 1]);
            bad = 1;
        }
    }
    for (int i = optind; i < argc; i++) {
        fprintf(stderr, "collectived: unexpected argument '%s'; see collectived --help\n",
                argv[i]);
        bad = 1;
    }
    return bad ? -1 : print;
}

coll_config_result_t coll_config_load(int argc, char **argv, coll_config_t *cfg)
{
    static origin_t origin;
    int flags;

    memset(cfg, 0, sizeof(*cfg));
    cfg->argc = argc;
    cfg->argv = argv;
    cfg->config_file = strdup("");
    if (cfg->config_file == NULL || load_defaults(cfg, origin) < 0 ||
        load_config_file(cfg, origin, argc, argv) < 0 || load_env(cfg, origin) < 0) {
        return COLL_CONFIG_ERROR;
    }
    flags = load_flags(cfg, origin, argc, argv);
    if (flags == 2) {
        return COLL_CONFIG_EXIT;
    }
    /* A bad flag fails the start, after the checks of every other value said their part. */
    if (resolve_status_socket(cfg) < 0 || check_values(cfg, origin) < 0 || flags < 0) {
        return COLL_CONFIG_ERROR;
    }
    if (flags == 1) {
        print_config(cfg, origin);
        return COLL_CONFIG_EXIT;
    }
    return cfg->make_secret ? COLL_CONFIG_MAKE_SECRET : COLL_CONFIG_RUN;
}

coll_config_source_t coll_config_source(const coll_config_t *cfg, const char *name)
{
    const cfg_key_t *key = coll__cfg_key_find(name);
    return key != NULL ? (coll_config_source_t)cfg->source[key - keys] : COLL_CFG_DEFAULT;
}

void coll_config_cleanup(coll_config_t *cfg)
{
    for (size_t i = 0; i < NKEYS; i++) {
        if (keys[i].type == CFG_STRING || keys[i].type == CFG_LOGLEVEL) {
            char **field = (char **)((char *)cfg + keys[i].offset);
            free(*field);
            *field = NULL;
        }
    }
    free(cfg->config_file);
    cfg->config_file = NULL;
}
