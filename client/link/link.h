/**
 * @file link.h
 * @brief The link to the daemon: the Unix socket (frames of protobuf) and the control block's
 *        rings. Whichever caller waits reads the socket and takes what completed; what it
 *        finds it hands up through the table the requests registered (coll__link_hooks_t), for
 *        the link calls nothing above it by name. Every function is called with the
 *        connection's lock held unless it says otherwise. Not installed.
 */
#ifndef COLL_CLIENT_LINK_LINK_H
#define COLL_CLIENT_LINK_LINK_H

#include <stdint.h>

#include "client/base/base.h"
#include "proto/shm_area.h"
#include "proto/submission.h"

/** Longest pause between two attempts to connect to a daemon that is not there yet. */
#define COLL_CONNECT_RETRY_MS 200
/** Waiting this long for a daemon is said on stderr (a wrong path should not look like a hang). */
#define COLL_CONNECT_NOTE_MS 1000
/** Longest poll of a watched fd (coll__link_sleep()) before the waiter looks at the rest. */
#define COLL_LINK_FD_SLICE_MS 10
/** The same once what the fd stands for has been awaited COLL_LINK_FD_IDLE_MS (a stalled
 *  peer): a long wait wakes a tenth as often (below 1 % of a core), and a job failure is still
 *  seen within this. */
#define COLL_LINK_FD_IDLE_SLICE_MS 100
#define COLL_LINK_FD_IDLE_MS 1000
/** Most words a waiter watches (coll__link_watch_t): one per post of a rank's ring. */
#define COLL_LINK_WATCH_MAX COLL_SHM_SLOTS

/** What a waiter watches without the lock besides the control block's event word: words that
 *  another process changes when something this connection waits for completes, without
 *  always waking it (the states of the posts that run in the shared-memory area). */
typedef struct {
    const _Atomic uint64_t *word[COLL_LINK_WATCH_MAX];
    uint64_t seen[COLL_LINK_WATCH_MAX];
    unsigned n;
    uint64_t spin_ns; /* how long to poll before sleeping (0: sleep at once) */
    int yield;        /* more local ranks than CPUs: give the CPU to them while polling */
    int fd;           /* an armed fd whose readiness is an event too (the leader's UCX worker
                         while direct rounds run, client/direct/), -1: none, below -1: an
                         event is pending already (do not sleep) */
    uint64_t fd_since_ns; /* since when what the fd stands for has been awaited */
} coll__link_watch_t;

/** What the link hands up to the requests (req/request.c), which register it in every
 *  connection (coll_comm_t.link): the link never calls a layer above it by name. Every entry
 *  is called with the lock held. */
typedef struct coll__link_hooks {
    /** Handle one decoded DaemonMsg. */
    void (*dispatch)(coll_comm_t *c, const coll_daemon_msg_t *m);
    /** Take what completed without a socket message (the control block's completion ring,
     *  the shared-memory area); how many requests that ended. */
    int (*progress)(coll_comm_t *c);
    /** Fill @p w with the words a waiter of @p c watches (none: n 0). */
    void (*watch)(coll_comm_t *c, coll__link_watch_t *w);
    /** Fail every pending request with @p status (the link broke). */
    void (*fail_all)(coll_comm_t *c, coll_status_t status);
    /** End one pending request with @p status (for the shared-memory area, shm/shm.h). */
    void (*finish)(coll_request_t *r, coll_status_t status);
} coll__link_hooks_t;

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

/** @return The first fd the daemon passed that nobody took yet (the caller's to close), or -1
 *          when none is left. Called with the lock held, by the thread dispatching frames. */
int coll__take_fd(coll_comm_t *c);

/**
 * @brief Wait until @p flag becomes non-zero (set by dispatched messages), reading the socket.
 *        Called with the lock held; releases it while blocked in poll(2).
 * @param timeout_ms -1 forever.
 * @return COLL_OK; COLL_ERR_TIMEDOUT; the link's error when it broke.
 */
coll_status_t coll__wait_flag(coll_comm_t *c, const int *flag, int timeout_ms);

/** @brief Send one submission through the control block when it has room, else the socket
 *         (as the wire's Submit); one with stream words (@p sync, NULL: none) always through
 *         the socket, the only one to carry them. @return COLL_OK or the link's error. */
coll_status_t coll__submit_send(coll_comm_t *c, const coll_submission_t *s,
                                const coll_req_sync_t *sync);

/**
 * @brief Wait, without the lock, for an event on control block @p ctl (its word moving from
 *        @p seen) or for a watched word to move: with words to watch, poll for a bounded time
 *        (coll__link_watch_t.spin_ns: a completion by a rank on another core comes within
 *        microseconds), then sleep on the event word for at most @p timeout_ms (0: only look).
 *        With an fd to watch, poll it instead of sleeping on the event word, in slices of at
 *        most COLL_LINK_FD_SLICE_MS (1 ms while words are watched too: their movers wake the
 *        event word, which a poll does not see), and return after the first.
 */
void coll__link_sleep(coll_ctl_t *ctl, const coll__link_watch_t *w, uint32_t seen,
                      int timeout_ms);

#endif
