/**
 * @file config.h
 * @brief The daemon's configuration: one table of keys (name, type, default, doc).
 *
 * Every key can be set, in increasing precedence, by its default, the environment variable
 * COLLD_<NAME> (upper case) and the flag --<name> (underscores become dashes).
 * `collectived --print-config` prints the effective values and where each came from.
 */
#ifndef COLL_CONFIG_H
#define COLL_CONFIG_H

#include <stdint.h>
#include <stdio.h>

/** Effective configuration. Strings are owned by the struct (coll_config_cleanup()). */
typedef struct {
    char *socket;            /**< client Unix socket path */
    char *listen;            /**< control listener host:port (port 0 = ephemeral) */
    char *addr_file;         /**< where to write the bound control address ("" = nowhere) */
    uint64_t pool_size;      /**< bytes of a job's pool when the client asks for none */
    uint64_t pool_max;       /**< largest pool a job may ask for, bytes */
    uint64_t segment_size;   /**< ring pipeline segment, bytes */
    uint64_t pipeline_depth; /**< segments in flight per operation */
    uint64_t rd_max_bytes;   /**< allreduces up to this size use recursive doubling */
    uint64_t kernel_threads; /**< threads for large local reductions (0: none) */
    char *ucx_error_mode;    /**< "none" or "peer": UCX endpoint error handling */
    char *log_level;         /**< error, warn, info, debug, trace */
    char *log_subsys;        /**< comma list of subsystems for debug/trace, or "all" */
} coll_config_t;

/** Where a value came from. */
typedef enum { COLL_CFG_DEFAULT, COLL_CFG_ENV, COLL_CFG_FLAG } coll_config_source_t;

/** Outcome of coll_config_load(). */
typedef enum {
    COLL_CONFIG_RUN,   /**< start the daemon */
    COLL_CONFIG_EXIT,  /**< --help or --print-config was served; exit 0 */
    COLL_CONFIG_ERROR, /**< invalid input; a message naming key, value and reason was printed */
} coll_config_result_t;

/**
 * @brief Build the configuration from defaults, environment and command line.
 * @param [out] cfg Filled on COLL_CONFIG_RUN and COLL_CONFIG_EXIT.
 */
coll_config_result_t coll_config_load(int argc, char **argv, coll_config_t *cfg);

/** @brief Free the strings of @p cfg. */
void coll_config_cleanup(coll_config_t *cfg);

#endif
