#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "size.h"

typedef enum { CFG_STRING, CFG_SIZE, CFG_UINT, CFG_LOGLEVEL } cfg_type_t;

typedef struct {
    const char *name;
    cfg_type_t type;
    const char *def;
    size_t offset;
    const char *doc;
} cfg_key_t;

#define KEY(n, t, d, doc) {#n, t, d, offsetof(coll_config_t, n), doc}

static const cfg_key_t keys[] = {
    KEY(socket, CFG_STRING, "/run/collectived/collectived.sock",
        "Unix socket where trainers connect"),
    KEY(listen, CFG_STRING, "0.0.0.0:29510",
        "host:port of the control listener for peer daemons (port 0: any free port)"),
    KEY(addr_file, CFG_STRING, "",
        "file to write the bound control address to once ready (for launchers and tests)"),
    KEY(pool_size, CFG_SIZE, "256M", "shared pool of a job on this node when the job asks for none"),
    KEY(pool_max, CFG_SIZE, "16G", "largest pool one job may ask for"),
    KEY(segment_size, CFG_SIZE, "256K", "ring pipeline segment in bytes"),
    KEY(pipeline_depth, CFG_UINT, "4", "segments in flight per operation (1..64)"),
    KEY(rd_max_bytes, CFG_SIZE, "64K",
        "allreduces up to this size use recursive doubling, larger ones the ring (0: always ring)"),
    KEY(kernel_threads, CFG_UINT, "2",
        "threads that split large single-node reductions (0: the loop thread does them)"),
    KEY(ucx_error_mode, CFG_STRING, "none",
        "UCX endpoint error handling: none (allows shared-memory transports) or peer"),
    KEY(log_level, CFG_LOGLEVEL, "info", "error, warn, info, debug or trace"),
    KEY(log_subsys, CFG_STRING, "all",
        "subsystems logged at debug/trace: core,session,job,rdv,ucx,engine,pool or all"),
};
#define NKEYS (sizeof(keys) / sizeof(keys[0]))

static const char *const source_names[] = {"default", "env", "flag"};

/* Store @p text into the field of @p key; on error print key, value and reason. */
static int set_value(coll_config_t *cfg, const cfg_key_t *key, const char *text, const char *from)
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
            "Ring-AllReduce over UCX.\n\noptions (each also settable as COLLD_<NAME>):\n");
    for (size_t i = 0; i < NKEYS; i++) {
        flag_name(&keys[i], flag, sizeof(flag));
        env_name(&keys[i], env, sizeof(env));
        fprintf(out, "  --%-16s %s\n  %-18s [default \"%s\", env %s]\n", flag, keys[i].doc, "",
                keys[i].def, env);
    }
    fprintf(out, "  --print-config     print the effective configuration and exit\n"
                 "  --help             this text\n\n"
                 "example: collectived --socket /tmp/n0.sock --listen 127.0.0.1:0 "
                 "--addr-file /tmp/n0.addr\n");
}

static void print_config(const coll_config_t *cfg, const coll_config_source_t *src)
{
    for (size_t i = 0; i < NKEYS; i++) {
        const void *field = (const char *)cfg + keys[i].offset;
        if (keys[i].type == CFG_SIZE || keys[i].type == CFG_UINT) {
            printf("%s = %llu  # %s\n", keys[i].name,
                   (unsigned long long)*(const uint64_t *)field, source_names[src[i]]);
        } else {
            printf("%s = %s  # %s\n", keys[i].name, *(char *const *)field, source_names[src[i]]);
        }
    }
}

static int load_defaults_and_env(coll_config_t *cfg, coll_config_source_t *src)
{
    char env[64];
    for (size_t i = 0; i < NKEYS; i++) {
        const char *v;
        env_name(&keys[i], env, sizeof(env));
        v = getenv(env);
        src[i] = v != NULL ? COLL_CFG_ENV : COLL_CFG_DEFAULT;
        if (set_value(cfg, &keys[i], v != NULL ? v : keys[i].def, v != NULL ? env : "default") <
            0) {
            return -1;
        }
    }
    return 0;
}

static int check_values(const coll_config_t *cfg)
{
    if (cfg->pipeline_depth < 1 || cfg->pipeline_depth > 64) {
        fprintf(stderr, "collectived: pipeline_depth=%llu: must be 1..64\n",
                (unsigned long long)cfg->pipeline_depth);
        return -1;
    }
    if (cfg->segment_size < 4096 || cfg->segment_size > (64u << 20)) {
        fprintf(stderr, "collectived: segment_size=%llu: must be 4K..64M\n",
                (unsigned long long)cfg->segment_size);
        return -1;
    }
    if (cfg->pool_size == 0 || cfg->pool_size > cfg->pool_max) {
        fprintf(stderr, "collectived: pool_size=%llu: must be 1..pool_max (%llu)\n",
                (unsigned long long)cfg->pool_size, (unsigned long long)cfg->pool_max);
        return -1;
    }
    if (cfg->kernel_threads > 64) {
        fprintf(stderr, "collectived: kernel_threads=%llu: must be 0..64\n",
                (unsigned long long)cfg->kernel_threads);
        return -1;
    }
    if (strcmp(cfg->ucx_error_mode, "none") != 0 && strcmp(cfg->ucx_error_mode, "peer") != 0) {
        fprintf(stderr, "collectived: ucx_error_mode=%s: must be none or peer\n",
                cfg->ucx_error_mode);
        return -1;
    }
    if (cfg->socket[0] == '\0' || strlen(cfg->socket) >= 108) {
        fprintf(stderr, "collectived: socket=%s: must be 1..107 bytes\n", cfg->socket);
        return -1;
    }
    return 0;
}

coll_config_result_t coll_config_load(int argc, char **argv, coll_config_t *cfg)
{
    struct option opts[NKEYS + 3];
    char names[NKEYS][64];
    coll_config_source_t src[NKEYS];
    int print = 0, c, idx;

    memset(cfg, 0, sizeof(*cfg));
    if (load_defaults_and_env(cfg, src) < 0) {
        return COLL_CONFIG_ERROR;
    }
    for (size_t i = 0; i < NKEYS; i++) {
        flag_name(&keys[i], names[i], sizeof(names[i]));
        opts[i] = (struct option){names[i], required_argument, NULL, (int)i};
    }
    opts[NKEYS] = (struct option){"print-config", no_argument, NULL, 'p'};
    opts[NKEYS + 1] = (struct option){"help", no_argument, NULL, 'h'};
    opts[NKEYS + 2] = (struct option){NULL, 0, NULL, 0};
    optind = 0; /* 0, not 1: glibc then also forgets a half-parsed cluster of short options */
    while ((c = getopt_long(argc, argv, ":h", opts, &idx)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return COLL_CONFIG_EXIT;
        } else if (c == 'p') {
            print = 1;
        } else if (c >= 0 && c < (int)NKEYS) {
            char from[80];
            snprintf(from, sizeof(from), "flag --%s", names[c]);
            if (set_value(cfg, &keys[c], optarg, from) < 0) {
                return COLL_CONFIG_ERROR;
            }
            src[c] = COLL_CFG_FLAG;
        } else {
            fprintf(stderr, "collectived: %s %s; see collectived --help\n",
                    c == ':' ? "missing value for" : "unknown option", argv[optind - 1]);
            return COLL_CONFIG_ERROR;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "collectived: unexpected argument '%s'; see collectived --help\n",
                argv[optind]);
        return COLL_CONFIG_ERROR;
    }
    if (check_values(cfg) < 0) {
        return COLL_CONFIG_ERROR;
    }
    if (print) {
        print_config(cfg, src);
        return COLL_CONFIG_EXIT;
    }
    return COLL_CONFIG_RUN;
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
}
