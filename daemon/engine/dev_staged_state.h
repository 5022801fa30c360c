/**
 * @file dev_staged_state.h
 * @brief The staged path's state of an operation, shared by its files (internal to
 *        engine/dev_staged.c and engine/dev_staged_pipe.c; engine/dev_staged.h is the
 *        interface): the spans of device memory and their host copies, the copies in flight,
 *        and, for a pipelined operation, its batches. Loop thread only.
 */
#ifndef COLL_ENGINE_DEV_STAGED_STATE_H
#define COLL_ENGINE_DEV_STAGED_STATE_H

#include <uv.h>

#include "core/dev_pools.h"
#include "engine/dev_staged_copy.h"
#include "engine/op.h"

/* One device span and its host copy. */
typedef struct {
    int device;                 /* the daemon's index of the span's device */
    coll_dev_stream_t (*streams)[2]; /* its device pool's pairs, in and back
                                        (coll_dev_pool_streams(), span_pair()), or own */
    coll_dev_stream_t own[2][2]; /* where its copies in wait on the device for a ready word:
                                    a pair in of its own (taken from the pool's idle ones,
                                    coll_dev_pool_wait_get(), and given back or destroyed with
                                    the span), so that the wait holds no other operation's
                                    copies; the pool's pair back */
    uint64_t dev;               /* device address of the span's first byte */
    uint8_t *host;              /* its host copy */
    size_t pinned;              /* > 0: host is a buffer of this size of the daemon's cache
                                   (coll_pinned_take()); 0: ordinary memory */
    uint64_t in_off, in_len;    /* what is copied in before the algorithm (in_len 0: nothing) */
    uint32_t nout;              /* ranges of the span copied back after it (0: nothing) */
    coll_dev_staged_range_t *out; /* them (offsets in the span): &one, or an all-to-all's
                                     receive blocks (allocated) */
    coll_dev_staged_range_t one;
    coll_dev_event_t ev[2];     /* recorded on each stream of the pair after the copies */
} span_t;

/* The pair of @p p's streams its copies in (@p in) or back go on. */
static inline coll_dev_stream_t *span_pair(const span_t *p, int in)
{
    return p->streams[in ? COLL_DEV_POOL_IN : COLL_DEV_POOL_BACK];
}

typedef struct {
    coll_impl_t impl;  /* the host algorithm's, named "staged+<its name>" */
    char name[24];
    coll_op_t *op;
    void (*ready)(coll_op_t *op); /* once the copies in completed: coll_op_attached(), or a
                                     point-to-point operation's start */
    uv_timer_t *timer; /* the poll of the events while copies are in flight, NULL before the
                          first; freed by its close callback */
    int in;            /* the copies in flight: 1 in, 0 back */
    int inflight;      /* 1 from the first copy queued until its events completed */
    int streams;       /* 1 while the ranks' streams have not written their ready words
                          (engine/dev_sync.h): the timer polls those, nothing is copied yet */
    int waited;        /* 1 when the copies in may wait on the device for the ready words
                          (coll_dev_sync_device_wait()), on the spans' own streams */
    /* Pipelined (a large ring allreduce, or a large allreduce, reduce or broadcast on one node,
     * coll__staged_pipe_setup()): the copies go batch by batch of the algorithm's columns, in
     * while it runs the first, back as it finishes them. */
    int pipe;
    int pipe_in;                  /* 1 while the timer polls the batches' copies in */
    coll_plan_t plan;             /* the algorithm's (coll_impl_t.plan) */
    coll_dev_staged_batches_t bt;
    uint64_t batches_in;          /* batches, from the first on, whose copies in completed */
    uint64_t *final_cols;         /* [bt.nbatches] columns of each batch it finished */
    unsigned turn[2];             /* the stream of the next piece, back [0] and in [1]
                                     (coll_dev_staged_queue()) */
    coll_dev_event_t *bev;        /* [bt.nbatches][nspans][2] recorded after each batch's
                                     copies in, on each stream of each span's in pair */
    uint32_t nspans;
    span_t span[];     /* at most two per local member */
} staged_t;

/** @brief Fail @p op's job with @p st: "the staged path <what>: <why>". @return @p st. */
coll_status_t coll__staged_fail(coll_op_t *op, coll_status_t st, const char *what,
                                const char *why);

/** @brief A copy of span @p p failed on its device, as event query @p q said (the layer's text
 *         in coll_dev_error()): a device's error is sticky, so the device goes out of service
 *         for this daemon (coll_device_fault()). @return @p q. */
coll_status_t coll__staged_fault(const coll_op_t *op, const span_t *p, coll_status_t q);

/** @brief Queue the copy of bytes [@p off, @p off + @p len) of span @p p to its host copy
 *         (@p in) or back, counted per device, its chunks alternating between the span's pair
 *         of streams of that direction (span_pair()) from *@p turn on
 *         (coll_dev_staged_queue()). @return COLL_OK or the device layer's error. */
coll_status_t coll__staged_queue(coll_devices_t *ds, span_t *p, int in, uint64_t off,
                                 uint64_t len, unsigned *turn);

/** @brief The loop polls @p sg's copies (its timer, every millisecond) from now on.
 *  @return COLL_INPROGRESS, or COLL_ERR_NOMEM. */
coll_status_t coll__staged_poll_start(coll_op_t *op, staged_t *sg);

/**
 * @brief Pipeline @p op when @p inner (the host algorithm it runs) works by columns (the ring,
 *        the local algorithm: coll_impl_t.plan), the operation is an allreduce, a reduce or a
 *        broadcast (what those algorithms run of them) and its plan has more than one batch
 *        (coll_dev_staged_batches()): the batches' events, op->gate, the name
 *        "staged+pipelined+<inner's>". @return COLL_OK (pipelined or not), or the error with
 *        which the job failed.
 */
coll_status_t coll__staged_pipe_setup(coll_op_t *op, staged_t *sg, const coll_impl_t *inner);

/** @brief Queue every batch's copies in, the events of each after it; the loop polls them and
 *         the algorithm starts the columns of each batch that came in (op->gate). The
 *         operation starts at once. @return COLL_OK, or the error with which the job failed. */
coll_status_t coll__staged_pipe_in(coll_op_t *op, staged_t *sg);

/** @brief The loop's poll while the batches' copies in are in flight (sg->pipe_in). */
void coll__staged_pipe_tick(coll_op_t *op, staged_t *sg);

/** @brief Free the batches' events (of @p ops, the daemon's device layer) and counts (the
 *         streams are idle). */
void coll__staged_pipe_free(const coll_dev_ops_t *ops, staged_t *sg);

#endif
