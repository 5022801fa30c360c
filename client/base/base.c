/*
 * The bottom of the client library: the clock, a communicator's error text, and the decoding
 * of a request's step records. Calls nothing else of the library but COLL_DEBUG (debug.c).
 */
#include "client/base/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

uint64_t coll__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void coll__set_error(coll_comm_t *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->conn->last_error, sizeof(c->conn->last_error), fmt, ap);
    va_end(ap);
    coll__debug(COLL__DEBUG_INFO, "rank %d: %s", c->rank, c->last_error);
}

void coll__arg_null(coll_comm_t *c, const char *func, const char *arg)
{
    if (c == NULL) {
        coll__thread_arg_null(func, arg);
        coll__debug(COLL__DEBUG_INFO, "%s", coll__thread_error());
        return;
    }
    pthread_mutex_lock(&c->conn->lock);
    coll__set_error(c, "%s: rank %d: %s must not be NULL", func, c->rank, arg);
    pthread_mutex_unlock(&c->conn->lock);
}

void coll__thread_set_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(coll__thread_error(), COLL_THREAD_ERROR_BYTES, fmt, ap);
    va_end(ap);
    coll__debug(COLL__DEBUG_INFO, "%s", coll__thread_error());
}

uint32_t coll__req_decode_steps(const coll_request_t *r, coll_req_step_t *steps)
{
    uint32_t phase = 0, next = 0;

    for (uint32_t i = 0; i < r->nsteps; i++) {
        uint64_t rec = r->steps[i];
        steps[i].phase = coll_ctl_step_phase(rec);
        steps[i].first = steps[i].phase == phase ? next : 0;
        steps[i].last = coll_ctl_step_last(rec);
        steps[i].end_ns = r->timing.ready_ns + (uint64_t)coll_ctl_step_end_us(rec) * 1000;
        phase = steps[i].phase;
        next = steps[i].last + 1;
    }
    return r->nsteps;
}
