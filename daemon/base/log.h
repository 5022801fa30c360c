/**
 * @file log.h
 * @brief Daemon logging: one line per event to stderr (journald), gated by level and subsystem
 *        before the arguments are evaluated.
 *
 * Levels follow syslog; each line starts with the sd-daemon priority prefix "<N>" when stderr is
 * the journal, so journald keeps the level. Log an error once, where it is decided.
 */
#ifndef COLL_LOG_H
#define COLL_LOG_H

#include <stdint.h>

/** Log levels, most severe first. */
typedef enum {
    COLL_LOG_ERROR = 0,
    COLL_LOG_WARN,
    COLL_LOG_INFO,
    COLL_LOG_DEBUG,
    COLL_LOG_TRACE,
} coll_log_level_t;

/** Subsystems, a bit each, to enable debug output selectively. */
typedef enum {
    COLL_SUB_CORE = 1u << 0,    /**< start-up, config, signals */
    COLL_SUB_SESSION = 1u << 1, /**< client sessions */
    COLL_SUB_JOB = 1u << 2,     /**< jobs and operations */
    COLL_SUB_RDV = 1u << 3,     /**< rendezvous and control links */
    COLL_SUB_UCX = 1u << 4,     /**< transport */
    COLL_SUB_ENGINE = 1u << 5,  /**< collective algorithms */
    COLL_SUB_POOL = 1u << 6,    /**< memory pools */
    COLL_SUB_STATUS = 1u << 7,  /**< status server, metrics, systemd notifications */
    COLL_SUB_ALL = 0xffffffffu,
} coll_log_subsys_t;

/** Current level and subsystem mask; set once at start-up by coll_log_configure(). */
extern coll_log_level_t coll__log_level;
extern uint32_t coll__log_subsys;

/**
 * @brief Set the level and subsystems from names, e.g. "debug" and "job,engine".
 * @return 0 on success, -1 when a name is unknown (nothing is changed).
 */
int coll_log_configure(const char *level, const char *subsys);

/**
 * @brief Send the log (and whatever else goes to stderr) to @p path from now on, appending;
 *        again to reopen it after a rotation. "" leaves stderr as it is.
 * @return 0; -1 with errno when the file cannot be opened (stderr is unchanged then).
 */
int coll_log_open_file(const char *path);

/**
 * @brief Parse a comma list of subsystem names ("job,engine", "all") into a mask.
 * @return 0, or -1 when a name is unknown (nothing is stored then).
 */
int coll_log_subsys_parse(const char *list, uint32_t *mask_p);

/** @brief Parse a level name ("error", "warn", "info", "debug", "trace"); -1 when unknown. */
int coll_log_level_parse(const char *name);

/** @brief Write one log line; use COLL_LOG instead. */
void coll__log(coll_log_level_t level, coll_log_subsys_t subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Log when @p level is enabled; warnings and errors ignore the subsystem mask. */
#define COLL_LOG(level, subsys, ...)                                                               \
    do {                                                                                           \
        if ((level) <= coll__log_level &&                                                          \
            ((level) <= COLL_LOG_WARN || (coll__log_subsys & (subsys)))) {                         \
            coll__log((level), (subsys), __VA_ARGS__);                                             \
        }                                                                                          \
    } while (0)

#define coll_error(sub, ...) COLL_LOG(COLL_LOG_ERROR, sub, __VA_ARGS__)
#define coll_warn(sub, ...) COLL_LOG(COLL_LOG_WARN, sub, __VA_ARGS__)
#define coll_info(sub, ...) COLL_LOG(COLL_LOG_INFO, sub, __VA_ARGS__)
#define coll_debug(sub, ...) COLL_LOG(COLL_LOG_DEBUG, sub, __VA_ARGS__)
#define coll_trace(sub, ...) COLL_LOG(COLL_LOG_TRACE, sub, __VA_ARGS__)

#endif
