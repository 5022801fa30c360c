/*
 * copy_probe: node 0's copies watched, for the engine's tests of the staged path
 * (test_dev_staged.c, test_dev_staged_local.c): its device layer stood in for by one whose
 * copy_async notes the stream of each copy in (device to host) and back (host to device), each
 * stream once, and what the first copy back found, then copies as the layer it stands for.
 * One watch at a time, on the test's thread.
 */
#ifndef TESTS_UNIT_ENGINE_COPY_PROBE_H
#define TESTS_UNIT_ENGINE_COPY_PROBE_H

#include "device/dev.h"
#include "fake_dev.h"

#define COPY_PROBE_STREAMS 8 /* streams noted of each way (more fail the test) */

/** What the watch saw since copy_probe_begin(). */
typedef struct {
    coll_dev_stream_t in[COPY_PROBE_STREAMS];   /* the copies in's streams, each once */
    coll_dev_stream_t back[COPY_PROBE_STREAMS]; /* the copies back's streams, each once */
    int n_in, n_back;
    int backs;     /* copies back queued (a test may clear it to judge a later first one) */
    int back_idle; /* 1: the first copy back's stream had nothing queued before it */
    int in_busy;   /* 1: then a stream of the copies in was still copying */
} copy_probe_t;

/** What the current (or last) watch saw; the test may clear backs and in_busy. */
extern copy_probe_t copy_probe;

/**
 * @brief Watch node 0 of @p w's copies from now on, copy_probe cleared, until copy_probe_end()
 *        (an event of node 0's device 0 made for it). Asserts on failure.
 */
void copy_probe_begin(fake_world_t *w);

/**
 * @brief Node 0's device layer as it was before copy_probe_begin(), the event freed; nothing
 *        when no watch is on (a test's teardown, also after it failed).
 */
void copy_probe_end(void);

#endif
