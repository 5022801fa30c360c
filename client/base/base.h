/**
 * @file base.h
 * @brief The bottom of client/: the clock, COLL_DEBUG, a communicator's error text, the
 *        decoding of a request's step records. Not installed.
 */
#ifndef COLL_CLIENT_BASE_BASE_H
#define COLL_CLIENT_BASE_BASE_H

#include <stdint.h>

#include "client/base/objects.h"
#include "common/arg.h"
#include "common/assert.h"

/** Slack over the job's timeout before the library gives up on a daemon that does not answer:
 *  the daemon itself fails an operation within the timeout (+ two health ticks, at most 2 s);
 *  1 s keeps the library's own verdict, counted from the submit, within timeout + 2 s of a
 *  daemon stopping just before it. */
#define COLL_DAEMON_SLACK_MS 1000
/** Levels of COLL_DEBUG (debug.c), most important first. */
enum {
    COLL__DEBUG_NONE = 0, /**< nothing */
    COLL__DEBUG_WARN,     /**< the default: what no return value tells (waiting for a daemon or
                               the other ranks, a timeline switched off) */
    COLL__DEBUG_INFO,     /**< also every error as it is returned, and each communicator made */
};

/** @return Nonzero when COLL_DEBUG (read once, thread-safe) enables level @p lvl. */
int coll__debug_enabled(int lvl);

/** @brief Write "libcollective <pid>: <text>" on stderr when COLL_DEBUG enables @p lvl. */
void coll__debug(int lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** @return CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t coll__now_ns(void);

/** @brief Record a detailed error message on @p c's connection (printf-style): the message of
 *         coll_comm_last_error() for every communicator of the connection. */
void coll__set_error(coll_comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** @brief Record that @p func was given NULL for pointer @p arg: the message on @p c (taking its
 *         connection's lock, which the caller must not hold), or, @p c NULL, the calling
 *         thread's (coll_comm_last_error(NULL)). Printed with COLL_DEBUG=INFO. */
void coll__arg_null(coll_comm_t *c, const char *func, const char *arg);

/** @brief Record the calling thread's message (printf-style), what coll_comm_last_error(NULL)
 *         returns: why a call without a communicator failed, e.g. a grid's bad size
 *         ("<function>: <the bad value>"). Printed with COLL_DEBUG=INFO. */
void coll__thread_set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * The check of a public function's pointer argument that must not be NULL, at its entry:
 * return @p ret (COLL_ARG_CHECK: COLL_ERR_INVALID) when @p arg is NULL, with a message naming
 * the function and the argument on communicator @p comm (NULL: the calling thread's, for a
 * call that has no communicator, or whose communicator is the argument checked).
 */
#define COLL_ARG_CHECK_OR(comm, arg, ret)                                                          \
    do {                                                                                           \
        if ((arg) == NULL) {                                                                       \
            coll__arg_null((comm), __func__, #arg);                                                \
            return ret;                                                                            \
        }                                                                                          \
    } while (0)
#define COLL_ARG_CHECK(comm, arg) COLL_ARG_CHECK_OR(comm, arg, COLL_ERR_INVALID)

/** @brief coll_req_steps() with the communicator's lock held: fills @p steps (room for
 *         COLL_MAX_STEPS) from a done request. @return The number of records. */
uint32_t coll__req_decode_steps(const coll_request_t *r, coll_req_step_t *steps);

#endif
