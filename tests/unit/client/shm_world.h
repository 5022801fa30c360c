/*
 * The harness of the shared-memory path's unit tests (test_shm.c, test_shm_node.c): one
 * process maps a buffer laid out as a job's pool, each thread is one local rank with a
 * communicator of its own (its daemon link a socketpair whose other end the test reads), and
 * the tests play the daemon where the path needs one. Not thread-safe except where it says:
 * the ranks' threads share nothing but the pool.
 */
#ifndef COLL_TEST_SHM_WORLD_H
#define COLL_TEST_SHM_WORLD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/shm/shm.h"

/* Checks inside the ranks' threads (cmocka's assertions belong to the main thread): print
 * what failed, then abort the test. */
#define T_FAIL(...) (fprintf(stderr, __VA_ARGS__), abort())
#define T_CHECK(c) ((c) ? (void)0 : T_FAIL("%s:%d: check failed: %s\n", __FILE__, __LINE__, #c))
#define T_EQ(a, b)                                                                             \
    do {                                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                                    \
        if (a_ != b_) {                                                                        \
            T_FAIL("%s:%d: %s is %lld, expected %lld\n", __FILE__, __LINE__, #a, a_, b_);     \
        }                                                                                      \
    } while (0)
#define T_STREQ(a, b) T_CHECK(strcmp((a), (b)) == 0)

#define MAXL 4
#define BUF (512u * 1024u) /* each rank's send and receive buffers: 4 x 20000 floats */
#define WAIT_MS 10000
#define NODE_BYTES (128u * 1024u) /* node_max_bytes of the node-reduced cases */

typedef struct world {
    uint32_t nlocal, nnodes;
    uint8_t *pool;
    size_t pool_bytes;
    coll_comm_t *c[MAXL];
    int daemon_fd[MAXL]; /* the daemon's end of each rank's link */
} world_t;

/* nlocal ranks (1..MAXL) of a job of nnodes nodes, each with its communicator open on the
 * area; aborts on failure. Free with world_free(). */
world_t *world_new(uint32_t nlocal, uint32_t nnodes);
void world_free(world_t *w);
/* Local rank l's send and receive buffers in the pool (BUF bytes each, float32). */
float *sendbuf(world_t *w, uint32_t l);
float *recvbuf(world_t *w, uint32_t l);
/* Runs fn(w, l, arg) on one thread per local rank and joins them. */
void on_every_rank(world_t *w, void (*fn)(world_t *, uint32_t, void *), void *arg);
/* A world of nlocal ranks on nnodes nodes in which daemon(w) runs on a thread of its own while
 * fn(w, l, arg) runs on every rank; both joined, the world freed. */
void with_daemon(uint32_t nlocal, uint32_t nnodes, void *(*daemon)(void *),
                 void (*fn)(world_t *, uint32_t, void *), void *arg);

/* The status of submission @p expr (which sets r) after its wait; the algorithm into @p algo. */
#define DONE(expr, algo) (st = (expr), finish_req(st, r, (algo)))
coll_status_t finish_req(coll_status_t st, coll_request_t *r, char *algo);

/* Element i of rank's input; fill() writes n of them into local rank l's send buffer and
 * -1e30 into its receive buffer; sum_at() is element i's sum over the local ranks. */
float input(uint32_t rank, size_t i);
void fill(world_t *w, uint32_t l, size_t n);
float sum_at(const world_t *w, size_t i);

#endif
