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
#include "proto/desc.h"
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
/** The port of the root daemon when only its host is known (Slurm's first node, torchrun's
 *  MASTER_ADDR) and COLL_ROOT_PORT is not set: the daemon's default listen port. */
#define COLL_DEFAULT_ROOT_PORT "29510"

/** Levels of COLL_DEBUG (debug.c), most important first. */
enum {
    COLL__DEBUG_NONE = 0, /**< nothing */
    COLL__DEBUG_WARN,     /**< the default: what no return value tells (waiting for a daemon or
                               the other ranks, a timeline switched off) */
    COLL__DEBUG_INFO,     /**< also every error as it is returned, and each communicator made */
};

/** @return Nonzero when COLL_DEBUG (read once, thread-safe) enables level @p lvl. */
int coll__debug_enabled(int lvl);

/** @brief Write "libcollective <pid>: <text>" on stderr when COLL_DEBUG enables @p lvl. */
void coll__debug(int lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** Kinds of requests the daemon answers. */
typedef enum {
    COLL_REQ_COLLECTIVE,
    COLL_REQ_ALLOC,
    COLL_REQ_GROUP,
    COLL_REQ_LAYOUT
} coll_req_kind_t;

struct coll_request {
    coll_comm_t *comm;    /* the connection's communicator (comm->conn): its lock and lists */
    coll_comm_t *owner;   /* the communicator it was submitted on (freed with it) */
    struct coll_request *prev, *next; /* in comm->pending, then comm->done */
    uint32_t id;
    coll_req_kind_t kind;
    int done;
    int detached;         /* freed by the user while pending: free on completion */
    coll_status_t status;
    uint64_t offset;      /* COLL_REQ_ALLOC: the allocation */
    uint32_t next_group;  /* COLL_REQ_GROUP: the daemon's answer (GroupReply) */
    uint32_t group_local_rank, group_local_size, group_nodes;
    char algo[24];        /* COLL_REQ_COLLECTIVE: the algorithm that ran */
    coll_req_timing_t timing;
    uint64_t wire_bytes;  /* COLL_REQ_COLLECTIVE: bytes its node sent (coll_req_wire_bytes()) */
    uint64_t dense_bytes; /* ... and what the uncompressed ring would have sent */
    uint32_t nsteps;      /* COLL_REQ_COLLECTIVE: the algorithm's steps (coll_req_steps()) */
    uint64_t steps[COLL_CTL_MAX_STEPS]; /* packed, proto/ctl.h */
    /* What the timeline (timeline.c) says about a collective: set at submission, and by
     * coll__req_label() for a bucketer's bucket. */
    uint32_t coll;        /* Coll__Wire__Collective */
    uint32_t dtype, op;
    uint64_t key, count;
    uint32_t peer;        /* COLL_REQ_COLLECTIVE: a point-to-point transfer's other rank */
    int key_reused;       /* its key was submitted again while it was in flight: it ends with
                             COLL_ERR_INVALID whatever the daemon answers */
    uint64_t send_off, send_bytes; /* COLL_REQ_COLLECTIVE: the pool bytes it reads ... */
    uint64_t recv_off, recv_bytes; /* ... and writes (coll_kind_extent()); 0 bytes: none */
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

/*
 * A communicator: the job's world (made by coll_comm_create(), owning the connection to the
 * daemon, the pool and the request lists) or a group split from it (coll_comm_split(),
 * client/split.c), which uses its parent's connection: conn points at the world, whose lock,
 * socket, pool, requests and last error every communicator of the connection shares. The
 * fields marked "conn" are meaningful in the world only; rank, sizes and operation numbering
 * are each communicator's own.
 */
struct coll_comm {
    struct coll_comm *conn;   /* the world communicator of the connection (itself there) */
    int refs;                 /* conn: communicators alive on the connection (itself included
                                 until coll_comm_destroy()); it closes at 0 */
    uint32_t group;           /* 0: the world; else the group's id (proto/tag.h) */
    uint32_t *job_ranks;      /* group: the job rank of each of its ranks (NULL: the world) */
    uint32_t next_group;      /* conn: the lowest group id this rank knows to be unused */
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
    uint64_t link_check_ns;   /* conn: when the socket is next looked at for a daemon that is
                                 gone (coll__link_check()) */
    char job[COLL_JOB_ID_MAX + 1];
    int rank, world_size, local_rank, local_size; /* in this communicator */
    uint32_t node_rank;       /* conn: this node among the job's */
    uint32_t node_count;      /* nodes this communicator spans */
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
    coll_compression_t compression; /* COLL_COMPRESSION, coll_comm_set_compression() */
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

/** What a launcher's environment says about this process (launcher.c). */
typedef struct {
    const char *name;      /**< "Open MPI", "Slurm"; NULL when no launcher was recognised */
    int rank, world_size, local_rank, local_size;
    char job[COLL_JOB_ID_MAX + 1]; /**< a job id from the launcher's job, "" when it has none */
    char root[300];        /**< "host:port" of node 0's daemon, "" when the launcher names none */
} coll__launcher_t;

/**
 * @brief Read the launcher's variables: Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE,
 *        _LOCAL_RANK, _LOCAL_SIZE; job id "ompi-" + PMIX_NAMESPACE; no root) or a task of a
 *        Slurm job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the count of
 *        SLURM_STEP_TASKS_PER_NODE for SLURM_NODEID; job id "slurm-<job>.<step>"; root: the
 *        first host of SLURM_STEP_NODELIST, port COLL_ROOT_PORT or 29510, when the step spans
 *        several nodes). A Slurm batch script, which has no step, is not a launcher here.
 * @param [out] l Filled; zeroed when there is no launcher.
 * @return 1 found, 0 no launcher, -1 its variables are malformed (message in @p err).
 */
int coll__launcher_env(coll__launcher_t *l, char *err, size_t errlen);

/**
 * @brief The root under torchrun: "MASTER_ADDR:port", port COLL_ROOT_PORT or 29510 (an IPv6
 *        address bracketed), for a job over several nodes whose root is named nowhere else.
 * @return 0, or -1 when MASTER_ADDR is not set.
 */
int coll__root_from_master(char *out, size_t len);

/** @brief The task count of node @p node in a Slurm list such as "4(x2),3"; -1 if none. */
int coll__slurm_tasks_on_node(const char *list, int node);

/** @brief The first host of a Slurm host list ("gpu[07-09],x" -> "gpu07"). @return 0 or -1. */
int coll__slurm_first_host(const char *list, char *out, size_t len);

/**
 * @brief Resolve parameters, field by field: explicit fields first, then COLL_* variables,
 *        torchrun's, and the launcher's (coll__launcher_env()).
 * @param [out] launcher Storage for strings that come from a launcher (out points into it).
 * @return COLL_OK, or COLL_ERR_INVALID with a message in @p err.
 */
coll_status_t coll__params_resolve(const coll_comm_params_t *in, coll__launcher_t *launcher,
                                   coll_comm_params_t *out, char *err, size_t errlen);

/**
 * @brief Connect a Unix stream socket to @p path, trying again while there is no daemon there
 *        yet (no socket, or nobody accepting) for up to @p wait_ms (the connect timeout, or the
 *        job's when shorter); after COLL_CONNECT_NOTE_MS a line on stderr says that rank
 *        @p rank waits.
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

/**
 * @brief Once a health tick of the job (coll_job_tick_ms()), by CLOCK_MONOTONIC @p now_ns:
 *        whether the daemon closed the socket (it exited or was killed). Collectives on the
 *        shared-memory path complete without it, so without this a rank would run on after
 *        its daemon died. A closed link ends every pending request with COLL_ERR_CLOSED (after
 *        the other local ranks' chunks on its buffers stopped) and every later call. Cheap
 *        between ticks (one comparison). Lock held; nothing is done while another thread reads.
 */
void coll__link_check(coll_comm_t *c, uint64_t now_ns);

/** @brief Send one ClientMsg (version filled in). Called with the lock held. */
coll_status_t coll__send(coll_comm_t *c, coll_client_msg_t *msg);

/**
 * @brief Wait until @p flag becomes non-zero (set by dispatched messages), reading the socket.
 *        Called with the lock held; releases it while blocked in poll(2).
 * @param timeout_ms -1 forever.
 * @return COLL_OK; COLL_ERR_TIMEDOUT; the link's error when it broke.
 */
coll_status_t coll__wait_flag(coll_comm_t *c, const int *flag, int timeout_ms);

/** @brief Tell the daemon that this rank leaves group @p group (GroupFree), unless the link is
 *         broken. Connection lock held. */
void coll__group_leave(coll_comm_t *k, uint32_t group);

/** @brief Record a detailed error message on @p c's connection (printf-style): the message of
 *         coll_comm_last_error() for every communicator of the connection. */
void coll__set_error(coll_comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** @brief New request of @p kind of communicator @p owner, linked into its connection's
 *         pending list. Connection lock held. */
coll_request_t *coll__req_new(coll_comm_t *owner, coll_req_kind_t kind);

/**
 * @return The pending collective or point-to-point request of communicator @p owner that
 *         submission @p m would be confused with (one whose key the tags cannot tell from
 *         m's: the same collective key, or the same point-to-point direction, peer and key),
 *         or NULL. Connection lock held.
 */
coll_request_t *coll__req_same_key(const coll_comm_t *owner, const coll_submission_t *m);

/**
 * @return A pending collective request of connection @p c that reads or writes a byte of the
 *         pool range [@p off, @p off + @p bytes), or NULL. Connection lock held.
 */
coll_request_t *coll__req_using(const coll_comm_t *c, uint64_t off, uint64_t bytes);

/** @brief Unlink and free. Lock held. */
void coll__req_release(coll_request_t *r);

/** @brief End a pending request with @p status (it moves to comm->done, or is freed when the
 *         user already freed it). Lock held. */
void coll__req_finish(coll_request_t *r, coll_status_t status);

/** @brief Send one submission through the control block when it has room, else the socket.
 *         Lock held. @return COLL_OK or the link's error. */
coll_status_t coll__submit_send(coll_comm_t *c, const coll_submission_t *s);

/**
 * @brief Send @p msg, which carries the id of request @p r of @p c, on c's connection and wait
 *        up to @p timeout_ms for the daemon's answer to it. Connection lock held.
 * @return COLL_OK: r is answered (the answer's own status in r->status) and still the caller's,
 *         to read and coll__req_release(); otherwise the link's error or COLL_ERR_TIMEDOUT, and
 *         r is gone (released, or freed when a late answer comes).
 */
coll_status_t coll__req_exchange(coll_comm_t *c, coll_request_t *r, coll_client_msg_t *msg,
                                 int timeout_ms);

/** @brief Fail every pending request with @p status (the link broke). Lock held. */
void coll__req_fail_all(coll_comm_t *c, coll_status_t status);

/** @brief Free every request of communicator @p owner, pending or finished (its destroy).
 *         Connection lock held. */
void coll__req_free_owned(coll_comm_t *owner);

/**
 * @brief Send @p msg (a GroupQuery or GroupCreate whose req_id the caller sets from @p *r_p's
 *        id after this creates it) and wait for the daemon's GroupReply. Connection lock held.
 * @param [out] r_p  The answered request, to read and then coll__req_release(); set on
 *                   COLL_OK only.
 * @return COLL_OK (the reply's own status is in the request); the link's error or
 *         COLL_ERR_TIMEDOUT.
 */
coll_status_t coll__group_request(coll_comm_t *c, coll_client_msg_t *msg, uint32_t *req_id,
                                  coll_request_t **r_p);

/**
 * @brief Ask the daemon for an allocation of @p bytes in the pool for this rank, without
 *        listing it among the user's (the library's own buffers). Lock held; @p c the
 *        connection.
 * @param [out] offset_p Its pool offset.
 * @return COLL_OK; the daemon's refusal (COLL_ERR_POOL_FULL, with its message as the last
 *         error); the link's error or COLL_ERR_TIMEDOUT.
 */
coll_status_t coll__mem_alloc(coll_comm_t *c, size_t bytes, uint64_t *offset_p);

/** @brief Parse an algorithm name ("auto", "ring", "rd", ...); -1 when unknown. */
int coll__algo_parse(const char *name);

/**
 * @brief Take the completions the daemon wrote into the control block's ring. Lock held.
 * @return The number taken.
 */
int coll__ctl_drain(coll_comm_t *c);

/**
 * @brief The key of a keyed collective the library makes itself (the bucketer's buckets, the
 *        parameter service's steps; python/collective/ddp.py follows the same layout): key
 *        space @p space (0..7) in bits 24-26, @p iteration mod 256 in bits 16-23, @p low (a
 *        bucket or a control code) in bits 0-15. All inside the 27 key bits a collective's tag
 *        carries (proto/tag.h), so at most one iteration of a key space may be in flight.
 */
static inline uint64_t coll__space_key(unsigned space, uint64_t iteration, unsigned low)
{
    return ((uint64_t)(space & 7u) << 24) | ((iteration & 0xFFu) << 16) | (low & 0xFFFFu);
}

/**
 * @brief Submit a checked operation @p m (key, kind, fields; req_id is filled in) and return
 *        its request, on @p c (the world or a group: m->group is set) over c->conn.
 *        c->conn->lock held.
 * @return COLL_INPROGRESS and the request; COLL_ERR_INVALID (nothing submitted) when a request
 *         of @p c with a key the tags cannot tell from m's is still pending (coll__req_same_key():
 *         that request then ends with COLL_ERR_INVALID too, whatever its outcome); COLL_ERR_NOMEM;
 *         the link's error and the shared-memory path's (coll__shm_post()).
 */
coll_status_t coll__submit_msg(coll_comm_t *c, coll_submission_t *m, coll_request_t **req_p);

/**
 * @brief Offset of [p, p + len) in the job's pool. Lock held.
 * @return The offset, or -1 when the range is not inside the pool.
 */
int64_t coll__pool_offset(const coll_comm_t *c, const void *p, size_t len);

/** @brief Handle one decoded DaemonMsg. Lock held. */
void coll__dispatch(coll_comm_t *c, const coll_daemon_msg_t *m);

#endif
