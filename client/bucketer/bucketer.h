/**
 * @file bucketer.h
 * @brief The gradient bucketer's private state, shared by bucketer.c (create, plan,
 *        submission, queries) and wait.c (wait_all: waiting, measuring, rebuilding).
 */
#ifndef COLL_CLIENT_BUCKETER_H
#define COLL_CLIENT_BUCKETER_H

#include <stddef.h>
#include <stdint.h>

#include "client/bucketer/plan.h"
#include "client/api/api.h"

/* Keys: coll__space_key() of the key space, the iteration and the bucket. The two highest bucket
 * numbers are the rebuild's own collectives. */
#define KEY_BROADCAST 0xFFFFu
#define KEY_AGREE 0xFFFEu
#define MAX_BUCKETS 0xFFFEu
/* Bound of the rebuild's collectives when wait_all() was given no bound. */
#define REBUILD_TIMEOUT_MS 60000
#define MIB 1048576.0

enum { P_PENDING, P_READY, P_MARKED, P_DETECTED };

typedef struct {
    char name[48];
    size_t count;
    coll_dtype_t dtype;
    uint64_t rows, cols; /* its matrix for PowerSGD (coll_bucketer_param_shape()); 0: a vector */
    int state;          /* P_*, this iteration */
} bparam_t;

typedef struct {
    void *mem;                /* pool buffer, >= 64 bytes */
    size_t pending;           /* parameters not reported yet this iteration */
    int submitted;
    int late;                 /* submitted by wait_all() */
    coll_request_t *req;      /* in flight, or finished and not yet freed */
    coll_status_t status;     /* COLL_INPROGRESS until it completed */
    coll_req_timing_t timing;
    uint64_t wire_bytes, dense_bytes; /* of its last completed allreduce */
    uint64_t layout;          /* fingerprint of its parameters (layout_fingerprint()) */
} bbucket_t;

struct coll_bucketer {
    pthread_mutex_t lock;
    coll_comm_t *comm;
    size_t cap, first_cap;
    coll_redop_t redop;
    int has_algo;
    coll_algo_t algo;
    int rebuild_pending;
    unsigned key_space;
    coll_compression_t compression; /* of every bucket (its bucket field set per bucket) */
    char name[24];
    bparam_t *params;
    size_t nparams, cap_params;
    int sealed;
    coll__bplan_t plan;
    bbucket_t *buckets;
    uint64_t iteration;
    int in_wait;              /* wait_all() started this iteration (and may be re-entered) */
    size_t *seen;             /* first iteration: parameters in the order they were reported */
    size_t nseen;
    size_t marked;            /* this iteration: mark_unused() calls */
    size_t detected;          /* this iteration: found unreported by wait_all() */
    uint64_t first_ready_ns;
    uint64_t wait_begin_ns;
    coll_status_t error;      /* first error of this iteration */
    char errmsg[512];
    coll_bucketer_stats_t stats;
};

/** Record @p st with its message on the bucketer and the communicator; returns @p st. */
coll_status_t coll__bk_fail(coll_bucketer_t *b, coll_status_t st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/** Keep the first error of an iteration (the one wait_all() returns). */
void coll__bk_note_error(coll_bucketer_t *b, coll_status_t st, size_t bucket, const char *what);

/** Bytes of a planned bucket in the pool. */
size_t coll__bk_bucket_bytes(const coll__bp_bucket_t *bk);

/** Give the pool buffers of @p n buckets back. */
void coll__bk_free_bucket_mem(coll_bucketer_t *b, bbucket_t *bks, size_t n);

/** A pool buffer for every bucket of @p plan. */
coll_status_t coll__bk_alloc_buckets(coll_bucketer_t *b, const coll__bplan_t *plan,
                                     bbucket_t **bks_p);

/** The plan of the parameters in the order @p order (NULL: registration order). */
coll_status_t coll__bk_build_plan(coll_bucketer_t *b, const size_t *order, coll__bplan_t *plan);

/** Every parameter pending again, every bucket unsubmitted. */
void coll__bk_reset_iteration(coll_bucketer_t *b);

/** The first plan: built once, at the first gradient pointer or report. */
coll_status_t coll__bk_seal(coll_bucketer_t *b);

/** A parameter's gradient view inside its bucket. */
void *coll__bk_view_of(const coll_bucketer_t *b, const coll__bplan_t *plan, const bbucket_t *bks,
                       size_t p);

/** The keyed parameters of bucket @p bucket of iteration @p iteration. */
coll_op_params_t coll__bk_op_params(const coll_bucketer_t *b, uint64_t iteration, unsigned bucket);

/** Submit every bucket not submitted yet (wait_all()), zeroing unreported gradients. */
void coll__bk_submit_rest(coll_bucketer_t *b);

#endif
