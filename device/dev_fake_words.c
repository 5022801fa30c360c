/*
 * The fake device layer's words shared with the host (dev_fake.h): registered host memory is its
 * own device address; a stream's wait for a word is an entry of the stream's queue that holds
 * the work after it (dev_fake.c lands it); a stream's word write is an atomic release store, at
 * once, or from a thread of its own, in the stream's order, where the stream is behind: with
 * COLL_DEVICE_FAKE_COPY_DELAY_MS that long later, after the stream's earlier delayed writes, and
 * once the words the stream waits for are there (dropped, as on a device it would never land,
 * when one stays below for COLL_DEVICE_FAKE_WAIT_MS); refused (COLL_ERR_UNSUPPORTED) behind a
 * wait for another stream's event not reached (dev_fake_events.c), which that thread cannot
 * follow (the daemon's streams that wait for events write no words).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/dev_fake.h"

/* A delayed stream_write_word(): the @p ticket-th of its stream, due at @p due_ns, and once the
 * @p ngates words its stream waited for before it are there (or COLL_DEVICE_FAKE_WAIT_MS ms
 * after, when it is dropped, as on a device it would never land). */
struct late_write {
    struct coll_dev_stream *s;
    uint64_t *word, value, due_ns, ticket;
    size_t ngates;
    struct fake_copy gates[];
};

/* The device address of host memory is its host address. */
coll_status_t coll__fake_host_register(void *p, size_t bytes, uint64_t *dev_p)
{
    coll_status_t st = coll__dev_check_register(p, bytes, dev_p, "host register");

    if (st == COLL_OK) {
        *dev_p = (uint64_t)(uintptr_t)p;
    }
    return st;
}

void coll__fake_host_unregister(void *p)
{
    (void)p;
}

/* Holds the stream's later work until the word is there (at once where it is); blocks no one. */
coll_status_t coll__fake_stream_wait_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    coll_status_t st = coll__dev_check_word(word, "stream wait");
    struct fake_copy c = {.word = (const uint64_t *)(uintptr_t)word, .value = value};

    if (st != COLL_OK || coll__fake_passed(&c)) {
        return st; /* a word there already holds nothing */
    }
    s = coll__fake_or_default(s);
    coll__fake_land(s, coll__fake_now_ns());
    if (coll__fake_defer(s, c) != 0) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream wait: out of memory");
    }
    s->gates++;
    s->queued++; /* done stays below it */
    return COLL_OK;
}

static void *late_write_main(void *arg)
{
    struct late_write *w = arg;
    struct timespec due = {(time_t)(w->due_ns / 1000000000ull),
                           (long)(w->due_ns % 1000000000ull)};
    uint64_t limit = coll__fake_now_ns() + coll__fake_knob_or("COLL_DEVICE_FAKE_WAIT_MS", 60000) * 1000000ull;
    int drop = 0;

    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR) {
        continue; /* the due time is absolute: sleep on */
    }
    /* In the stream's order: after the delayed writes queued before this one. */
    while (atomic_load_explicit(&w->s->landed, memory_order_acquire) != w->ticket) {
        coll__fake_nap();
    }
    for (size_t i = 0; i < w->ngates; i++) {
        while (!coll__fake_passed(&w->gates[i]) && coll__fake_now_ns() < limit) {
            coll__fake_nap();
        }
        drop |= !coll__fake_passed(&w->gates[i]);
    }
    if (!drop) {
        __atomic_store_n(w->word, w->value, __ATOMIC_RELEASE);
    }
    atomic_fetch_add_explicit(&w->s->landed, 1, memory_order_release);
    free(w);
    return NULL;
}

/* Write @p value into @p word @p delay_ms from now, and after the words @p s waits for, from a
 * thread of its own. */
static coll_status_t write_late(coll_dev_stream_t s, uint64_t word, uint64_t value,
                                uint64_t delay_ms)
{
    struct late_write *w = malloc(sizeof(*w) + s->gates * sizeof(w->gates[0]));
    pthread_attr_t attr;
    pthread_t t;
    int e;

    if (w == NULL) {
        return coll__dev_fail(COLL_ERR_NOMEM, "stream write: out of memory");
    }
    *w = (struct late_write){s, (uint64_t *)(uintptr_t)word, value,
                             coll__fake_now_ns() + delay_ms * 1000000ull, s->late, 0};
    for (size_t i = s->head; i < s->ndue; i++) {
        if (s->due[i].word != NULL) {
            w->gates[w->ngates++] = s->due[i];
        }
    }
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    e = pthread_create(&t, &attr, late_write_main, w);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        free(w);
        return coll__dev_fail(COLL_ERR_NOMEM, "stream write: no thread for a delayed write: %s",
                              strerror(e));
    }
    s->late++;
    return COLL_OK;
}

/* At once, or late with COLL_DEVICE_FAKE_COPY_DELAY_MS (and after the stream's late writes). */
coll_status_t coll__fake_stream_write_word(coll_dev_stream_t s, uint64_t word, uint64_t value)
{
    uint64_t delay_ms = coll__fake_knob("COLL_DEVICE_FAKE_COPY_DELAY_MS");
    coll_status_t st = coll__dev_check_word(word, "stream write");

    if (st != COLL_OK) {
        return st;
    }
    s = coll__fake_or_default(s);
    coll__fake_land(s, UINT64_MAX); /* the copies before the word */
    for (size_t i = s->head; i < s->ndue; i++) {
        if (s->due[i].after != NULL) { /* a delayed write's thread looks only at words */
            return coll__dev_fail(COLL_ERR_UNSUPPORTED, "stream write: the stream waits for "
                                  "another stream's event, and the fake writes no word behind "
                                  "such a wait");
        }
    }
    if (delay_ms > 0 || s->gates > 0 ||
        atomic_load_explicit(&s->landed, memory_order_acquire) != s->late) {
        return write_late(s, word, value, delay_ms);
    }
    __atomic_store_n((uint64_t *)(uintptr_t)word, value, __ATOMIC_RELEASE);
    return COLL_OK;
}
