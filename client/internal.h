/**
 * @file internal.h
 * @brief libcollective internals shared by its source files (not installed).
 */
#ifndef COLL_CLIENT_INTERNAL_H
#define COLL_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <collective.h>
#include "proto/ctl.h"
#include "proto/frame.h"
#include "proto/wire.h"

/** The library's bound of the join wait when the job asks for no timeout (the daemon's default). */
#define COLL_DEFAULT_JOIN_MS 60000
/** Slack over the job's timeout before the library gives up on a daemon that does not answer:
 *  the daemon itself fails an operation within the timeout (+ two health ticks, at most 2 s);
 *  1 s keeps the library's own verdict, counted from the submit, within timeout + 2 s of a
 *  daemon stopping just before it. */
#define COLL_DAEMON_SLACK_MS 1000
/** Longest pause between two attempts to connect to a daemon that is not there yet. */
#define COLL_CONNECT_RETRY_MS 200
/** Waiting this long for a daemon is said on stderr (a wrong path should not look like a hang). */
#define COLL_CONNECT_NOTE_MS 1000

/** Kinds of requests the daemon answers. */
typedef enum { COLL_REQ_COLLECTIVE, COLL_REQ_ALLOC } coll_req_kind_t;

struct coll_request {
    coll_comm_t *comm;
    struct coll_request *prev, *next; /* in comm->pending, then comm->done */
    uint32_t id;
    coll_req_kind_t kind;
    int done;
    int detached;         /* freed by the user while pending: free on completion */
    coll_status_t status;
    uint64_t offset;      /* COLL_REQ_ALLOC: the allocation */
    char algo[24];        /* COLL_REQ_COLLECTIVE: the algorithm that ran */
    coll_req_timing_t timing;
    uint32_t nsteps;      /* COLL_REQ_COLLECTIVE: the algorithm's steps (coll_req_steps()) */
    uint64_t steps[COLL_CTL_MAX_STEPS]; /* packed, proto/ctl.h */
    /* What the timeline (timeline.c) says about a collective: set at submission, and by
     * coll__req_label() for a bucketer's bucket. */
    uint32_t coll;        /* Coll__Wire__Collective */
    uint32_t dtype, op;
    uint64_t key, count;
    char track[32];       /* "" unless labelled */
    char name[48];
    uint64_t iteration;
    long bucket;          /* -1 unless labelled */
    struct coll_shm_op *shm_op; /* its post in the shared-memory area (shm.h), or NULL */
};

/** @brief coll_req_steps() with the communicator's lock held: fills @p steps (room for
 *         COLL_MAX_STEPS) from a done request. @return The number of records. */
uint32_t coll__req_decode_steps(const coll_request_t *r, coll_req_step_t *steps);

/** @return CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t coll__now_ns(void);

/** What the links, to the daemon (io.c) and to the other local ranks (shm.c), hand up to the
 *  requests (request.c), which register it: the links never call the request layer by name.
 *  Every entry is called with the lock held. */
typedef struct {
    /** Handle one decoded DaemonMsg. */
    void (*dispatch)(coll_comm_t *c, const coll_daemon_msg_t *m);
    /** Take the completions the daemon wrote into the control block's ring; how many. */
    int (*drain)(coll_comm_t *c);
    /** Fail every pending request with @p status (the link broke). */
    void (*fail_all)(coll_comm_t *c, coll_status_t status);
    /** End one pending request with @p status (the shared-memory path, shm.h). */
    void (*finish)(coll_request_t *r, coll_status_t status);
} coll__link_ops_t;

/** The request layer's entries for the link (request.c). */
extern const coll__link_ops_t coll__request_link_ops;

/** One allocation of this rank in the pool (client-side bookkeeping for coll_mem_free()). */
typedef struct {
    uint64_t offset;
    uint64_t bytes;
} coll_alloc_t;

struct coll_comm {
    pthread_mutex_t lock;
    const coll__link_ops_t *link; /* coll__request_link_ops */
    pthread_cond_t cond;      /* a reader finished a round */
    int reading;              /* a thread is reading the socket without the lock */
    int fd;
    coll_frame_reader_t reader;
    int passed_fd[2];         /* fds received with SCM_RIGHTS (pool, doorbell) */
    int npassed;
    int doorbell_fd;          /* the job's doorbell, -1 when none */
    coll_ctl_job_t *ctl_job;  /* the job header of the control area */
    coll_status_t broken;     /* COLL_OK while the daemon link works */
    char job[COLL_JOB_ID_MAX + 1];
    int rank, world_size, local_rank, local_size;
    uint32_t node_rank, node_count;
    uint64_t job_timeout_ms;  /* from the join reply: the daemon ends every wait by then */
    uint64_t epoch;
    uint8_t *pool;
    size_t pool_bytes;
    coll_ctl_t *ctl;          /* this rank's control block in the pool, NULL when none */
    uint32_t frames_seen;     /* ctl->frames when the socket was last read */
    uint32_t ctl_bytes;       /* from the join reply */
    uint64_t shm_bytes;       /* from the join reply: the shared-memory area's size (shm.h) */
    uint64_t shm_max_bytes;   /* from the join reply: the crossover to the daemon's path */
    coll_alloc_t *allocs;
    size_t nallocs, cap_allocs;
    uint32_t next_id;
    uint64_t next_seq;        /* key of the next collective without one */
    pthread_t owner;          /* the thread that created it: the only one whose operations may
                                 go without a key (their order is its call order) */
    uint32_t *send_seq;       /* per peer: key of the next send without one (lazily allocated) */
    uint32_t *recv_seq;       /* per peer: key of the next receive without one */
    coll_algo_t algo;         /* COLL_ALGO */
    struct coll_request pending; /* list head: waiting for the daemon */
    struct coll_request done;    /* list head: finished, not yet freed by the user */
    struct coll_timeline *timeline; /* COLL_TIMELINE, NULL when off (timeline.c) */
    struct coll_shm *shm;     /* the local ranks' shared-memory area (shm.h), NULL when none */
    /* answers to the set-up messages */
    int hello_done;
    int join_done;
    coll_status_t join_status;
    char last_error[512];
};

/** @brief Resolve parameters: explicit fields first, then COLL_* (and torchrun) variables. */
coll_status_t coll__params_resolve(const coll_comm_params_t *in, coll_comm_params_t *out,
                                   char *err, size_t errlen);

/**
 * @brief Connect a Unix stream socket to @p path, trying again while there is no daemon there
 *        yet (no socket, or nobody accepting) for up to @p wait_ms; after COLL_CONNECT_NOTE_MS
 *        a line on stderr says that rank @p rank waits.
 * @return The fd; COLL_ERR_CONNREFUSED (no daemon within the time, or another connect error),
 *         COLL_ERR_DENIED (no permission on the socket), COLL_ERR_INVALID (path too long),
 *         with a message in @p err.
 */
int coll__connect(const char *path, int wait_ms, int rank, char *err, size_t errlen);

/**
 * @brief Fail the job on every rank with @p status and @p reason (an Abort to the daemon).
 *        Lock held. Does nothing when the link to the daemon is broken (the job fails anyway).
 */
void coll__abort(coll_comm_t *c, coll_status_t status, const char *reason);

/** @brief Send one ClientMsg (version filled in). Called with the lock held. */
coll_status_t coll__send(coll_comm_t *c, coll_client_msg_t *msg);

/**
 * @brief Wait until @p flag becomes non-zero (set by dispatched messages), reading the socket.
 *        Called with the lock held; releases it while blocked in poll(2).
 * @param timeout_ms -1 forever.
 * @return COLL_OK; COLL_ERR_TIMEDOUT; the link's error when it broke.
 */
coll_status_t coll__wait_flag(coll_comm_t *c, const int *flag, int timeout_ms);

/** @brief Record a detailed error message on @p c (printf-style). */
void coll__set_error(coll_comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** @brief New request of @p kind, linked into comm->pending. Lock held. */
coll_request_t *coll__req_new(coll_comm_t *c, coll_req_kind_t kind);

/** @brief Unlink and free. Lock held. */
void coll__req_release(coll_request_t *r);

/** @brief End a pending request with @p status (it moves to comm->done, or is freed when the
 *         user already freed it). Lock held. */
void coll__req_finish(coll_request_t *r, coll_status_t status);

/** @brief Send one submission through the control block when it has room, else the socket.
 *         Lock held. @return COLL_OK or the link's error. */
coll_status_t coll__submit_send(coll_comm_t *c, Coll__Wire__Submit *m);

/** @brief Fail every pending request with @p status (the link broke). Lock held. */
void coll__req_fail_all(coll_comm_t *c, coll_status_t status);

/** @brief Free every request of @p c, pending or finished (communicator destroy). Lock held. */
void coll__req_free_all(coll_comm_t *c);

/** @brief Parse an algorithm name ("auto", "ring", "rd", ...); -1 when unknown. */
int coll__algo_parse(const char *name);

/**
 * @brief Take the completions the daemon wrote into the control block's ring. Lock held.
 * @return The number taken.
 */
int coll__ctl_drain(coll_comm_t *c);

/** @brief Handle one decoded DaemonMsg. Lock held. */
void coll__dispatch(coll_comm_t *c, const coll_daemon_msg_t *m);

#endif
