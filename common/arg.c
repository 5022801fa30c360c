/*
 * The calling thread's message of a call that failed without a communicator to keep it, and
 * the text of a NULL argument (arg.h).
 */
#include "common/arg.h"

#include <stdio.h>

static _Thread_local char thread_error[COLL_THREAD_ERROR_BYTES];

char *coll__thread_error(void)
{
    return thread_error;
}

void coll__thread_arg_null(const char *func, const char *arg)
{
    snprintf(thread_error, sizeof(thread_error), "%s: %s must not be NULL", func, arg);
}
