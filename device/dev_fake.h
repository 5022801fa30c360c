/**
 * @file dev_fake.h
 * @brief Internal to the fake device layer (device/dev_fake.c, dev_fake_words.c,
 *        dev_fake_events.c; dev.h's coll_dev_fake is its interface): its streams, their queue
 *        of work held back, events, and the helpers the files share; the entries of its table
 *        for words shared with the host (host_register(), stream_wait_word(),
 *        stream_write_word()) and for waits across streams (stream_wait()). A stream is used by
 *        one thread at a time, as the callers of dev.h use streams (two tied by a wait, by one
 *        thread); the delayed word writes' threads touch only its landed count.
 */
#ifndef COLL_DEVICE_DEV_FAKE_H
#define COLL_DEVICE_DEV_FAKE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "device/dev.h"

struct coll_dev_stream {
    int dev;
    uint64_t queued;       /* work queued so far */
    uint64_t done;         /* work done: all of it, but what a wait for a word holds */
    size_t gates;          /* its waits for a word not passed yet, and the stand-in NCCL's
                              collectives not ended (in due[]) */
    uint64_t late;         /* delayed word writes queued (COLL_DEVICE_FAKE_COPY_DELAY_MS) */
    _Atomic uint64_t landed; /* of those, done: each in its turn, by a thread of its own */
    uint64_t busy_ns;      /* when its copies would end at COLL_DEVICE_FAKE_COPY_MBPS */
    struct fake_copy *due; /* its copies not landed yet (COLL_DEVICE_FAKE_COPY_MBPS, or held by
                              a wait) and its waits for a word, in order */
    size_t head, ndue, cap; /* due[head .. ndue) are waiting */
    int landing;           /* coll__fake_land() runs on it (a wait across streams, nested) */
    struct coll_dev_stream *next; /* the live streams' list (dev_fake_events.c) */
};

struct coll_dev_event {
    int dev;
    const struct coll_dev_stream *stream; /* where it was last recorded, NULL: never */
    uint64_t target;                      /* the stream's queued work at that moment */
    uint64_t ready_ns;                    /* CLOCK_MONOTONIC time it may complete at */
};

/* A copy that lands when it would have ended (COLL_DEVICE_FAKE_COPY_MBPS) and the waits before
 * it passed, or (@p word not NULL) a wait that holds what follows until *@p word >= @p value,
 * or (@p after not NULL) a wait for another stream's event (stream_wait()) that holds what
 * follows until @p after has done @p value pieces of work (the event's target), or (@p run not NULL) a launch of the fake's executor, run(@p arg, 1) when it lands (0 when it
 * is dropped: its device faulted, or its stream destroyed behind a wait that never passed), or
 * the stand-in NCCL's collective (@p busy too, coll__dev_fake_hold()), which holds the stream's
 * later work until @p busy says it ended: the @p ticket-th piece of work of its stream. A
 * delayed word write waits for the words before it, not for such a collective (the NCCL path's
 * streams write no words). */
struct fake_copy {
    uint64_t dst, src, end_ns;
    size_t bytes;
    const uint64_t *word;
    const struct coll_dev_stream *after;
    uint64_t value, ticket;
    void (*run)(void *arg, int go);
    int (*busy)(void *arg); /* the stand-in NCCL's: its collective still runs (it holds what
                               follows, counted in gates, until this returns 0) */
    int started;            /* run() was called */
    void *arg;
};

/** @return Whether COLL_DEVICE_FAKE_LAZY is set: a stream's work runs only once something
 *          looks at it (dev.h). */
int coll__fake_lazy(void);
/** @return The test knob @p name of the environment as a number, 0 when absent. */
uint64_t coll__fake_knob(const char *name);
/** @return The test knob @p name as a number, @p dflt when absent. */
uint64_t coll__fake_knob_or(const char *name, uint64_t dflt);
/** @brief Sleep 100 us: how often the fake looks again at what another thread will change. */
void coll__fake_nap(void);
/** @return CLOCK_MONOTONIC now, ns. */
uint64_t coll__fake_now_ns(void);
/** @return Whether the word of wait @p c is there (>= its value). */
int coll__fake_passed(const struct fake_copy *c);
/** @brief Land @p s's copies that would have ended by @p now_ns (UINT64_MAX: all of them), in
 *         order, up to its first wait whose word is not there; its work before that is done. */
void coll__fake_land(struct coll_dev_stream *s, uint64_t now_ns);
/** @brief Queue on @p s the copy or wait @p c (its ticket the stream's next).
 *  @return 0, or -1 without memory. */
int coll__fake_defer(struct coll_dev_stream *s, struct fake_copy c);
/** @return @p s, or for NULL the stream CUDA's default stream stands for (device 0). */
coll_dev_stream_t coll__fake_or_default(coll_dev_stream_t s);

/** @brief Add @p s, made, to the live streams (a wait across streams looks it up when it goes). */
void coll__fake_stream_add(struct coll_dev_stream *s);
/** @brief Take @p s, going, off the live streams: the waits of the others for its events are
 *         settled (passed where it had done the work before them, else never to pass, as its
 *         work was dropped). */
void coll__fake_stream_remove(struct coll_dev_stream *s);
/** @return Whether the wait @p c for another stream's event passed, that stream's work landed
 *          first (not when it lands already: waits that cross back, nested at most a bound). */
int coll__fake_after_passed(const struct fake_copy *c);
/** dev.h's stream_wait(): the event's work done, or @p s's later work held until it is. */
coll_status_t coll__fake_stream_wait(coll_dev_stream_t s, coll_dev_event_t e);

/** @brief The fake's injected kernel fault (dev_fake_fault.c) on device @p dev, for the entry
 *         @p who: COLL_ERR_IO with CUDA_ERROR_ILLEGAL_ADDRESS's text in coll_dev_error() once
 *         reported; a fault not reported yet is reported (and sticky from then) where
 *         @p report is 1 (an event query, a sync), else passed over. @return COLL_OK; that. */
coll_status_t coll__fake_fault(int dev, const char *who, int report);
/** @return Whether device @p dev faulted (reported or not): it runs no more work. */
int coll__fake_faulted(int dev);
/** @brief Count a copy queued on device @p dev: the COLL_DEVICE_FAKE_COPY_FAIL-th of the
 *         process faults the device (it runs no more work, this copy included). */
void coll__dev_fake_copy_count(int dev);

/** dev.h's host_register(): the device address of host memory is its host address. */
coll_status_t coll__fake_host_register(void *p, size_t bytes, uint64_t *dev_p);
/** dev.h's host_unregister(): nothing to undo. */
void coll__fake_host_unregister(void *p);
/** dev.h's stream_wait_word(): holds the stream's later work until the word is there. */
coll_status_t coll__fake_stream_wait_word(coll_dev_stream_t s, uint64_t word, uint64_t value);
/** dev.h's stream_write_word(): at once, or from a thread of its own where the stream is behind
 *  (COLL_DEVICE_FAKE_COPY_DELAY_MS, an earlier delayed write, a wait for a word). */
coll_status_t coll__fake_stream_write_word(coll_dev_stream_t s, uint64_t word, uint64_t value);

#endif
