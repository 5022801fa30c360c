/**
 * @file objects.h
 * @brief The library's two objects, which every layer of client/ shares: the communicator (the
 *        job's world, owning the connection to the daemon, or a group split from it) and the
 *        request. Each layer keeps its own state behind a pointer of its own type (the
 *        timeline, the shared-memory area) or in the fields it alone writes. Not installed.
 */
#ifndef COLL_CLIENT_BASE_OBJECTS_H
#define COLL_CLIENT_BASE_OBJECTS_H

#include <pthread.h>
#include <stdint.h>

#include <collective.h>
#include "proto/ctl.h"
#include "proto/frame.h"
#include "proto/wire.h"

/** Kinds of requests the daemon answers. */
typedef enum {
    COLL_REQ_COLLECTIVE,
    COLL_REQ_ALLOC,
    COLL_REQ_GROUP,
    COLL_REQ_LAYOUT
} coll_req_kind_t;

/** A request's stream words (the wire's Submit.sync_*, engine/dev_sync.h in the daemon): slot
 *  @c slot of the communicator's words (api/devsync.c), at pool offset @c off. */
typedef struct {
    uint64_t off;
    uint64_t value;  /* what the ready word must reach and the done word gets */
    uint32_t flags;  /* COLL_SYNC_* (proto/submission.h); 0: none */
    uint32_t slot;
    int held;        /* the slot is the request's until it finishes */
} coll_req_sync_t;

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
    uint32_t pool;        /* COLL_REQ_ALLOC: its pool; COLL_REQ_COLLECTIVE: its buffers'
                             (coll_submission_t.pool: 0 the host pool, 1 + d device d's) */
    uint32_t next_group;  /* COLL_REQ_GROUP: the daemon's answer (GroupReply) */
    uint32_t group_local_rank, group_local_size, group_nodes;
    char algo[24];        /* COLL_REQ_COLLECTIVE: the algorithm that ran */
    coll_req_timing_t timing;
    uint64_t wire_bytes;  /* COLL_REQ_COLLECTIVE: bytes its node sent (coll_req_wire_bytes()) */
    uint64_t dense_bytes; /* ... and what the uncompressed ring would have sent */
    uint32_t nsteps;      /* COLL_REQ_COLLECTIVE: the algorithm's steps (coll_req_steps()) */
    uint64_t steps[COLL_CTL_MAX_STEPS]; /* packed, proto/ctl.h */
    /* What the timeline (trace/timeline.c) says about a collective: set at submission, and by
     * coll__req_label() for a bucketer's bucket. */
    uint32_t coll;        /* Coll__Wire__Collective */
    uint32_t dtype, redop;
    uint64_t key, count;
    uint32_t peer;        /* COLL_REQ_COLLECTIVE: a point-to-point transfer's other rank */
    int key_reused;       /* its key was submitted again while it was in flight: it ends with
                             COLL_ERR_INVALID whatever the daemon answers */
    uint64_t send_off, send_bytes; /* COLL_REQ_COLLECTIVE: the pool bytes it reads ... */
    uint64_t recv_off, recv_bytes; /* ... and writes (coll_kind_extent()); 0 bytes: none */
    uint64_t table_off;   /* COLL_REQ_COLLECTIVE: an alltoallv's count table, allocated in the
                             pool for it and given back when it finishes (0: none) */
    char track[32];       /* "" unless labelled */
    char name[48];
    uint64_t iteration;
    long bucket;          /* -1 unless labelled */
    struct coll_shm_op *shm_op; /* its post in the shared-memory area (shm/shm.h), or NULL */
    coll_req_sync_t sync; /* COLL_REQ_COLLECTIVE on device buffers: its stream words
                             (api/devsync.c); flags 0: none */
};

/** One allocation of this rank in the pool (client-side bookkeeping for coll_mem_free()). */
typedef struct {
    uint64_t offset;
    uint64_t bytes;
} coll_alloc_t;

/*
 * A communicator: the job's world (made by coll_comm_create(), owning the connection to the
 * daemon, the pool and the request lists) or a group split from it (coll_comm_split(),
 * groups/split.c), which uses its parent's connection: conn points at the world, whose lock,
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
    const struct coll__link_hooks *hooks; /* how the link reaches the requests (link/link.h) */
    pthread_cond_t cond;      /* a reader finished a round */
    int reading;              /* a thread is reading the socket without the lock */
    int fd;
    coll_frame_reader_t reader;
    int passed_fd[COLL_FRAME_MAX_FDS]; /* fds received with SCM_RIGHTS, in order, not yet taken
                                          (coll__take_fd(): the pool, its doorbell, chunks) */
    int npassed;
    int doorbell_fd;          /* the job's doorbell, -1 when none */
    coll_ctl_job_t *ctl_job;  /* the job header of the control area */
    coll_status_t broken;     /* COLL_OK while the daemon link works */
    coll_status_t ended;      /* conn: the code of the refused call with which this rank ended
                                 the job (COLL_OK: none); later submissions get it at once */
    char ended_msg[512];      /* conn: that call's message */
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
    uint64_t shm_bytes;       /* from the join reply: the shared-memory area's size (shm/) */
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
    struct coll_timeline *timeline; /* COLL_TIMELINE, NULL when off (trace/timeline.c) */
    struct coll_shm *shm;     /* the local ranks' shared-memory area (shm/shm.h), NULL: none */
    struct coll_direct *direct; /* the leader's direct path between nodes (direct/direct.h), NULL:
                                  none */
    struct coll_devmem *devmem; /* conn: device pools mapped, device allocations
                                   (devmap/devmap.h); NULL until the first device allocation */
    struct coll_sync *sync;   /* conn: the stream words of device requests (api/devsync.c);
                                 NULL until the first device allocation or when it failed */
    char daemon_layer[16];    /* conn: from the join reply: the daemon's device layer ("cuda",
                                 "fake"); "" when it did not say */
    char daemon_devices[256]; /* conn: from the join reply: what that layer found, or why the
                                 daemon has none */
    /* answers to the set-up messages */
    int hello_done;
    int join_done;
    coll_status_t join_status;
    char last_error[512];
};

#endif
