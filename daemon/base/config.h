/**
 * @file config.h
 * @brief The daemon's configuration: one table of keys (name, type, default, doc).
 *
 * Every key can be set, in increasing precedence, by its default, the configuration file (INI,
 * `key = value`, parsed with libinih; /etc/collectived/collectived.conf unless --config or
 * COLLD_CONFIG names another, "none" for no file), the environment variable COLLD_<NAME> (upper
 * case; log_level and log_subsys also read COLL_LOG_LEVEL and COLL_LOG_SUBSYS) and the flag
 * --<name> (underscores become dashes). Unknown keys in the file are warned about; an invalid
 * value fails with its key, value, origin (file:line, variable or flag) and the reason.
 * `collectived --print-config` prints the effective values and where each came from.
 */
#ifndef COLL_CONFIG_H
#define COLL_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/** Room for the keys of the table in config.c (checked at compile time there). */
#define COLL_CONFIG_MAX_KEYS 48

/** The largest direct_max_bytes: a node's leader keeps 64 node buffers of it in the pool. */
#define COLL_CONFIG_DIRECT_MAX ((uint64_t)1 << 20)

/** Effective configuration. Strings are owned by the struct (coll_config_cleanup()). */
typedef struct {
    char *socket;            /**< client Unix socket path */
    char *listen;            /**< control listener host:port (port 0 = ephemeral) */
    char *addr_file;         /**< where to write the bound control address ("" = nowhere) */
    uint64_t pool_size;      /**< bytes of a job's pool when the client asks for none */
    uint64_t pool_max;       /**< largest pool a job may ask for, bytes */
    uint64_t segment_size;   /**< ring pipeline segment, bytes */
    uint64_t pipeline_depth; /**< segments in flight per operation */
    uint64_t timeout_ms;     /**< bound of every wait of a job (health.h) */
    uint64_t rd_max_bytes;   /**< allreduces up to this size use recursive doubling, when
                                  the root has no cost model */
    char *cost_params;       /**< the cost model's constants: a file, "" built in, "none" */
    uint64_t shm_max_bytes;  /**< single-node collectives up to this size run in shared memory */
    uint64_t shm_node_max_bytes; /**< multi-node allreduces up to this size are reduced and
                                      distributed in shared memory */
    uint64_t direct_max_bytes; /**< multi-node allreduces up to this size run between the
                                    nodes' leader ranks (the direct path); 0: never */
    uint64_t kernel_threads; /**< threads for large local reductions (0: none) */
    uint64_t loop_stall_ms;  /**< a loop callback longer than this is a stall (loopwatch.h) */
    uint64_t pool_budget;    /**< bytes of all jobs' pools together (0: half the memory) */
    uint64_t device_pool_budget; /**< bytes of the jobs' device pools on each device (0: a
                                      quarter of its memory) */
    uint64_t device_peers_split_min; /**< device+peers splits an allreduce, reduce-scatter or
                                          all-gather of at least this many elements in all
                                          across the members' devices
                                          (engine/algos/dev_peers.c) */
    uint64_t staged_pinned_cache_bytes; /**< idle page-locked bytes kept per device
                                             (core/dev_pinned.h) */
    uint64_t staged_pinned_idle_ms; /**< an idle page-locked buffer is freed after this */
    char *peer_secret_file;  /**< the node secret daemons authenticate each other with (auth.h) */
    uint64_t require_job_token; /**< 1: joining needs a job token */
    char *ucx_error_mode;    /**< "none" or "peer": UCX endpoint error handling */
    char *nccl;              /**< "auto" or "off": whether this daemon offers NCCL to its jobs
                                  (net/rdv_nccl.h) */
    char *log_level;         /**< error, warn, info, debug, trace */
    char *log_subsys;        /**< comma list of subsystems for debug/trace, or "all" */
    char *status_socket;     /**< Unix socket of the status server ("" when off) */
    char *status_listen;     /**< host:port of the TCP status server ("" when off) */
    char *socket_group;      /**< group given the client and status sockets ("" keeps ours) */
    uint64_t busbw_min_bytes; /**< operations this large or larger set the busbw gauges */
    uint64_t allow_unauthenticated_peers; /**< 1: without a secret, peers unauthenticated */
    uint64_t peer_max_connections; /**< accepted control links open at once */
    uint64_t peer_max_per_address; /**< of them, from one remote address */
    uint64_t peer_handshake_bytes; /**< bytes a control link may send before authenticating */
    uint64_t peer_handshake_ms; /**< time a control link has to authenticate */
    uint64_t peer_idle_ms;   /**< an accepted link that is no rendezvous' member: idle bound */
    uint64_t status_max_connections; /**< status connections open at once */
    uint64_t fd_reserve;     /**< descriptors the control and status listeners leave free */
    char *log_file;          /**< the log's file ("" = stderr); SIGHUP reopens it */
    char *config_file;       /**< the file that was read, "" when none */
    int make_secret;         /**< --make-secret: create peer_secret_file and exit */
    char make_secret_owner[64]; /**< --make-secret=USER: the user to give it to ("" keeps) */
    int argc;                /**< the command line it was built from (main()'s, for reloads) */
    char **argv;
    unsigned char source[COLL_CONFIG_MAX_KEYS]; /**< coll_config_source_t of each key */
} coll_config_t;

/** Where a value came from. */
typedef enum { COLL_CFG_DEFAULT, COLL_CFG_FILE, COLL_CFG_ENV, COLL_CFG_FLAG } coll_config_source_t;

/** The configuration file read when neither --config nor COLLD_CONFIG names one. */
#define COLL_CONFIG_DEFAULT_FILE "/etc/collectived/collectived.conf"

/** Outcome of coll_config_load(). */
typedef enum {
    COLL_CONFIG_RUN,   /**< start the daemon */
    COLL_CONFIG_EXIT,  /**< --help or --print-config was served; exit 0 */
    COLL_CONFIG_MAKE_SECRET, /**< --make-secret: create peer_secret_file (auth.h), then exit */
    COLL_CONFIG_ERROR, /**< invalid input; a message naming key, value and reason was printed */
} coll_config_result_t;

/**
 * @brief Build the configuration from defaults, the configuration file, environment and
 *        command line.
 * @param [out] cfg Filled on COLL_CONFIG_RUN and COLL_CONFIG_EXIT; free with
 *                  coll_config_cleanup() whatever the result.
 * @return COLL_CONFIG_RUN, COLL_CONFIG_EXIT or COLL_CONFIG_ERROR (a message was printed).
 */
coll_config_result_t coll_config_load(int argc, char **argv, coll_config_t *cfg);

/**
 * @brief Resolve a socket_group value: a group name, or a numeric gid (containers often have
 *        the group only as a number).
 * @param [out] gid_p The group id.
 * @return 0, or -1 when no such group exists.
 */
int coll_config_group(const char *name, unsigned *gid_p);

/**
 * @brief Whether the socket group is the default one ("collective"), which may be missing (a
 *        workstation, a host where systemd-sysusers has not run yet) or not ours to give: the
 *        daemon then keeps its own group for the sockets (logged at info).
 */
int coll_config_group_optional(const coll_config_t *cfg);

/**
 * @brief Where the value of key @p name came from.
 * @return Its source; COLL_CFG_DEFAULT for a name that is not a key.
 */
coll_config_source_t coll_config_source(const coll_config_t *cfg, const char *name);

/** The keys that SIGHUP applies to a running daemon (jobs created afterwards see them); a
 *  change of any other key is logged and waits for a restart. */
#define COLL_CONFIG_RELOADABLE                                                                   \
    "log_level, log_subsys, log_file, timeout_ms, pool_size, pool_max, pool_budget, "           \
    "device_pool_budget, staged_pinned_cache_bytes, staged_pinned_idle_ms, "                    \
    "segment_size, pipeline_depth, rd_max_bytes, require_job_token, busbw_min_bytes"

/**
 * @brief Build the configuration again as at start-up (the same command line, the environment,
 *        the file as it is now) and apply to @p cfg the keys of COLL_CONFIG_RELOADABLE that
 *        changed. A changed key that needs a restart is logged (warn) and keeps its value.
 *        Loop thread only: nothing may hold a string of @p cfg across the call.
 * @param [out] applied Names of the keys applied, ", "-separated ("" when none).
 * @return 0; -1 when the configuration is now invalid (the reason was printed on stderr and
 *         @p cfg is unchanged).
 */
int coll_config_reload(coll_config_t *cfg, char *applied, size_t len);

/** @brief Free the strings of @p cfg. */
void coll_config_cleanup(coll_config_t *cfg);

#endif
