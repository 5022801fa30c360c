/*
 * The fake device layer's waits across streams (dev_fake.h; dev.h's stream_wait(), CUDA's
 * cuStreamWaitEvent): a wait for an event whose work is done already holds nothing; one whose
 * stream is held (by a wait for a word, a stand-in NCCL collective, or another such wait) is an
 * entry of the waiting stream's queue that holds its later work, as on a device, until the
 * event's stream has done the work recorded before the event (the event's record at the wait:
 * a later record of the event changes nothing). dev_fake.c's coll__fake_land() asks
 * coll__fake_after_passed(), which lands the event's stream first; waits that cross back to a
 * stream being landed read its work landed so far (they cannot deadlock: a wait only names
 * work queued before it), and nesting is bounded (FAKE_NEST_MAX: deeper, the stream is read
 * as it is, and looked at again at the next query or sync). A stream destroyed while another
 * waits for its event settles that wait: passed where it had done the work, else never to pass
 * (its held work was dropped): the waiting stream's syncs time out after
 * COLL_DEVICE_FAKE_WAIT_MS, as for a word that never comes. Two streams tied by a wait are
 * used from one thread (the daemon's loop), as dev.h's callers use streams.
 */
#include <pthread.h>

#include "device/dev_fake.h"

/* How deep waits across streams land each other's streams from one query or sync. */
#define FAKE_NEST_MAX 16

/* The live streams (their waits for each other's events settled when one goes). */
static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct coll_dev_stream *live;

/* What a settled wait names instead of a destroyed stream: all done, or nothing ever (never
 * landed: landing is set). */
static struct coll_dev_stream settled = {.done = UINT64_MAX, .landing = 1};
static struct coll_dev_stream never = {.done = 0, .landing = 1};

void coll__fake_stream_add(struct coll_dev_stream *s)
{
    pthread_mutex_lock(&live_lock);
    s->next = live;
    live = s;
    pthread_mutex_unlock(&live_lock);
}

void coll__fake_stream_remove(struct coll_dev_stream *s)
{
    pthread_mutex_lock(&live_lock);
    for (struct coll_dev_stream **p = &live; *p != NULL; p = &(*p)->next) {
        if (*p == s) {
            *p = s->next;
            break;
        }
    }
    for (struct coll_dev_stream *o = live; o != NULL; o = o->next) {
        for (size_t i = o->head; i < o->ndue; i++) {
            struct fake_copy *c = &o->due[i];
            if (c->after == s) {
                c->after = s->done >= c->value ? &settled : &never;
            }
        }
    }
    pthread_mutex_unlock(&live_lock);
}

int coll__fake_after_passed(const struct fake_copy *c)
{
    static _Thread_local unsigned depth;
    struct coll_dev_stream *a = (struct coll_dev_stream *)c->after;

    if (depth < FAKE_NEST_MAX) {
        depth++;
        coll__fake_land(a, coll__fake_now_ns());
        depth--;
    }
    return a->done >= c->value;
}

coll_status_t coll__fake_stream_wait(coll_dev_stream_t s, coll_dev_event_t e)
{
    struct coll_dev_stream *es = (struct coll_dev_stream *)e->stream;

    s = coll__fake_or_default(s);
    if (es == NULL) {
        return COLL_OK; /* never recorded: nothing to wait for */
    }
    coll__fake_land(es, UINT64_MAX); /* work queued elsewhere and not held is done */
    if (es->done >= e->target) {
        return COLL_OK;
    }
    coll__fake_land(s, coll__fake_now_ns());
    if (coll__fake_defer(s, (struct fake_copy){.after = es, .value = e->target}) != 0) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream wait: out of memory");
    }
    s->gates++;
    s->queued++; /* done stays below it */
    return COLL_OK;
}
