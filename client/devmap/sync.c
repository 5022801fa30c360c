/*
 * Stream words of requests on device buffers (collective.h COLL_OP_PARAM_STREAM,
 * coll_req_stream_wait(); docs/gpu.md, "Streams"). At the first device allocation the library
 * takes SLOTS pairs of 64-bit words in the host pool (an allocation of its own, not in this
 * rank's list) and registers them with the device layer, so that a stream can write and wait
 * on them (host_register()). Each request on device buffers takes a free pair for its life:
 * with a stream, the stream writes the ready word once the work queued before the submission
 * is done, and the daemon reads the inputs only then; the daemon stores the done word when the
 * operation completes, and coll_req_stream_wait() makes a stream wait for it. Values only grow
 * (one counter per pair), so a pair given to the next request leaves every earlier wait on it
 * satisfied and none early. The library stores the done word too when the request finishes
 * here, whatever its end (a refused submission, a lost daemon), so no stream waits forever.
 * The library allocates the words (api/devmem.c). Lock held unless said otherwise.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/base/base.h"
#include "client/devmap/devmap.h"
#include "proto/submission.h"

/* Pairs of words: requests on device buffers in flight at once, with their stream words. */
#define SLOTS 1024u
/* Bytes of one pair: the ready word, then the done word. */
#define PAIR 16u
/* Pages are this large at most: the words start on one (the driver registers whole pages). */
#define PAGE 65536u

struct coll_sync {
    uint8_t *words;      /* SLOTS pairs in the pool, on a page boundary; NULL when they could
                            not be had (why says why) */
    char why[200];
    uint64_t off;        /* their pool offset */
    uint64_t dev;        /* their device address (host_register()) */
    const coll_dev_ops_t *ops;
    uint64_t value[SLOTS];  /* per pair, the last value given out */
    uint64_t due[SLOTS];    /* per pair, the value a stream was asked to write in its ready
                               word (0: none) */
    uint64_t seen[SLOTS];   /* per pair, the last value its stream is known to have written
                               (its request succeeded: the daemon's work went behind it) */
    int waited;             /* a stream wait was queued on a done word */
    uint32_t free[SLOTS];   /* free pairs, a stack */
    uint32_t nfree;
};

_Static_assert(COLL_SYNC_WORDS_BYTES == SLOTS * PAIR + PAGE, "room for the words on a page");

/* The words in the pool, registered; NULL words and the reason in why where not. */
static void words_open(coll_comm_t *c, struct coll_sync *y, coll_status_t st, uint64_t off)
{
    if (st != COLL_OK) {
        snprintf(y->why, sizeof(y->why), "no room for them in the pool: %s",
                 coll_strerror(st));
        return;
    }
    y->off = (off + PAGE - 1) / PAGE * PAGE;
    if (y->ops->host_register(c->pool + y->off, SLOTS * PAIR, &y->dev) != COLL_OK) {
        snprintf(y->why, sizeof(y->why), "the device layer refused them: %s", coll_dev_error());
        return;
    }
    y->words = c->pool + y->off;
    for (uint32_t i = 0; i < SLOTS; i++) {
        y->free[i] = SLOTS - 1 - i;
    }
    y->nfree = SLOTS;
}

coll_status_t coll__sync_open(coll_comm_t *c, const coll_dev_ops_t *ops, coll_status_t st,
                              uint64_t off)
{
    if (c->sync != NULL) {
        return COLL_OK;
    }
    if ((c->sync = calloc(1, sizeof(*c->sync))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    c->sync->ops = ops;
    words_open(c, c->sync, st, off);
    return COLL_OK;
}

static _Atomic uint64_t *word(const struct coll_sync *y, uint32_t slot, int done)
{
    return (_Atomic uint64_t *)(void *)(y->words + slot * PAIR + (done ? 8u : 0u));
}

/* Store every done word at its last value. @return The pairs whose ready word a stream may
 * yet write: those not known written by a request's success. The word itself cannot tell: the
 * daemon stores a failed job's ready words to release its own device waits, while the rank's
 * stream may still be behind them. */
static uint32_t release_all(struct coll_sync *y)
{
    uint32_t due = 0;

    for (uint32_t i = 0; i < SLOTS; i++) {
        atomic_store_explicit(word(y, i, 1), y->value[i], memory_order_release);
        due += y->seen[i] < y->due[i];
    }
    return due;
}

void coll__sync_close(coll_comm_t *c, uint8_t **keep_p, size_t *keep_bytes_p)
{
    struct coll_sync *y = c->sync;
    uint32_t due;

    *keep_p = NULL;
    *keep_bytes_p = 0;
    if (y != NULL && y->words != NULL) {
        due = release_all(y);
        if (due > 0 || y->waited) {
            coll__debug(COLL__DEBUG_INFO, "rank %d: streams may still write %u ready words or "
                        "wait on done words: the words (%u bytes) stay mapped", c->rank, due,
                        SLOTS * PAIR);
            *keep_p = y->words;
            *keep_bytes_p = SLOTS * PAIR;
        } else {
            y->ops->host_unregister(y->words);
        }
    }
    free(y);
    c->sync = NULL;
}

/* Without a stream, a request that finds no free pair goes without (it cannot be waited on by
 * a stream); with one, it is refused. */
static coll_status_t no_pair(coll_comm_t *c, void *const *stream)
{
    if (stream == NULL) {
        return COLL_OK;
    }
    if (c->sync == NULL || c->sync->words == NULL) {
        coll__set_error(c, "rank %d: a stream was given, but this process has no stream words "
                        "(%s)", c->rank, c->sync == NULL ? "its buffers are host memory"
                                                         : c->sync->why);
        return c->sync == NULL ? COLL_ERR_INVALID : COLL_ERR_UNSUPPORTED;
    }
    coll__set_error(c, "rank %d: a stream was given, but %u operations with stream words are "
                    "in flight, the most there are", c->rank, SLOTS);
    return COLL_ERR_BUSY;
}

coll_status_t coll__sync_take(coll_comm_t *c, coll_request_t *r, void *const *stream)
{
    struct coll_sync *y = c->sync;
    uint32_t slot;
    coll_status_t st;

    if (y == NULL || y->nfree == 0) {
        return no_pair(c, stream);
    }
    slot = y->free[--y->nfree];
    r->sync = (coll_req_sync_t){.off = y->off + slot * PAIR, .value = ++y->value[slot],
                                .flags = COLL_SYNC_DONE | (stream != NULL ? COLL_SYNC_READY : 0),
                                .slot = slot, .held = 1};
    if (stream != NULL && (st = y->ops->stream_write_word(*stream, y->dev + slot * PAIR,
                                                          r->sync.value)) != COLL_OK) {
        coll__set_error(c, "rank %d: queueing the ready word on the stream: %s", c->rank,
                        coll_dev_error());
        coll__sync_end(r, st);
        r->sync.flags = 0;
        return st;
    }
    if (stream != NULL) {
        y->due[slot] = r->sync.value;
    }
    return COLL_OK;
}

void coll__sync_release(coll_request_t *r)
{
    _Atomic uint64_t *w;
    uint64_t cur;

    if (!r->sync.held) {
        return;
    }
    w = word(r->comm->sync, r->sync.slot, 1);
    cur = atomic_load_explicit(w, memory_order_relaxed);
    while (cur < r->sync.value &&
           !atomic_compare_exchange_weak_explicit(w, &cur, r->sync.value, memory_order_release,
                                                  memory_order_relaxed)) {
    }
}

void coll__sync_end(coll_request_t *r, coll_status_t status)
{
    struct coll_sync *y = r->comm->sync;

    if (!r->sync.held) {
        return;
    }
    if (status == COLL_OK && (r->sync.flags & COLL_SYNC_READY)) {
        y->seen[r->sync.slot] = r->sync.value;
    }
    coll__sync_release(r);
    /* A pair whose ready word the stream has not written yet (a request refused or failed
     * before its stream got there) is not given out again: that late write would lower the
     * next request's word. */
    if (!(r->sync.flags & COLL_SYNC_READY) ||
        atomic_load_explicit(word(y, r->sync.slot, 0), memory_order_acquire) >= r->sync.value) {
        y->free[y->nfree++] = r->sync.slot;
    }
    r->sync.held = 0;
}

coll_status_t coll_req_stream_wait(coll_request_t *req, void *stream)
{
    coll_comm_t *c;
    const coll_dev_ops_t *ops = NULL;
    uint64_t dev = 0, value = 0;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, req);
    c = req->comm;
    pthread_mutex_lock(&c->lock);
    if (req->sync.flags != 0) {
        c->sync->waited = 1;
        ops = c->sync->ops;
        dev = c->sync->dev + req->sync.slot * PAIR + 8u;
        value = req->sync.value;
    } else {
        coll__set_error(c, "rank %d: coll_req_stream_wait: the request has no stream words (%s)",
                        c->rank, req->pool == 0 ? "its buffers are host memory"
                                 : c->sync != NULL && c->sync->words == NULL
                                     ? c->sync->why
                                     : "none were free when it was submitted");
    }
    pthread_mutex_unlock(&c->lock);
    if (ops == NULL) {
        return COLL_ERR_INVALID;
    }
    /* Outside the lock: the fake device's wait blocks until the daemon stores the word. */
    if ((st = ops->stream_wait_word(stream, dev, value)) != COLL_OK) {
        pthread_mutex_lock(&c->lock);
        coll__set_error(c, "rank %d: coll_req_stream_wait: %s", c->rank, coll_dev_error());
        pthread_mutex_unlock(&c->lock);
    }
    return st;
}
