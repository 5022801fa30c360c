/**
 * @file arg.h
 * @brief Pointer arguments of the public API that must not be NULL: the check at a function's
 *        entry, and the calling thread's message of a call that failed without a communicator
 *        to keep it (what coll_comm_last_error(NULL) returns). The client library's check that
 *        puts the message on a communicator is COLL_ARG_CHECK (client/base/base.h).
 */
#ifndef COLL_COMMON_ARG_H
#define COLL_COMMON_ARG_H

#include <stddef.h>

#include <collective.h>

/** Bytes of the calling thread's message buffer (coll__thread_error()). */
#define COLL_THREAD_ERROR_BYTES 512

/** @return The calling thread's message buffer, COLL_THREAD_ERROR_BYTES long: why its last
 *          coll_comm_create() failed, or which argument or value of its last call was bad
 *          where that call had no communicator to hold the message. */
char *coll__thread_error(void);

/** @brief Write "@p func: @p arg must not be NULL" into the calling thread's buffer. */
void coll__thread_arg_null(const char *func, const char *arg);

/**
 * Return @p ret from the calling function when pointer @p arg is NULL, the message naming the
 * function and the argument in the calling thread's buffer (coll_comm_last_error(NULL)).
 */
#define COLL_ARG_NONNULL(arg, ret)                                                                 \
    do {                                                                                           \
        if ((arg) == NULL) {                                                                       \
            coll__thread_arg_null(__func__, #arg);                                                 \
            return ret;                                                                            \
        }                                                                                          \
    } while (0)

#endif
