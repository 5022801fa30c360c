/**
 * @file ctl.h
 * @brief The control blocks a job's local ranks share with their daemon at the start of the
 *        job's pool: the fast path for submissions and completions.
 *
 * Layout: a job header (COLL_CTL_JOB_BYTES) then one block per local rank (COLL_CTL_BYTES).
 *
 * Submissions: a rank writes its submission record (proto/submission.h) into its ring; it
 * rings the job's doorbell (an eventfd the daemon polls) only when the header says the daemon
 * is asleep. The daemon announces sleep before its loop blocks and drains every ring right
 * after, so a record is never missed (both sides store their own flag, then read the other's,
 * sequentially consistent). A full ring falls back to the socket.
 *
 * Completions: a success is a fixed record (phase times, algorithm steps) in a ring the daemon
 * writes and the client reads; no socket message, no protobuf. Every notification to the
 * client, ring record or socket frame (errors, allocation replies), increments @c events; a
 * client with nothing to do sleeps on that word with futex(2) after announcing it in
 * @c waiting, and the daemon only makes the wake-up system call when someone sleeps
 * (Dekker-style: each side stores its flag, then reads the other's, both sequentially
 * consistent, so at least one of them sees the other).
 *
 * Layout is part of the wire protocol (COLL_WIRE_VERSION); both sides are on one host.
 */
#ifndef COLL_CTL_H
#define COLL_CTL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/submission.h"

/** Bytes of the job header at pool offset 0. */
#define COLL_CTL_JOB_BYTES 4096u
/** Bytes of one rank's control block; rank l's is at COLL_CTL_JOB_BYTES + l * COLL_CTL_BYTES. */
#define COLL_CTL_BYTES 32768u
/** Completion records in a ring. */
#define COLL_CTL_SLOTS 64u
/** Submission records in a ring. */
#define COLL_CTL_SUB_SLOTS 64u

/** The job header. */
typedef struct {
    _Alignas(64) _Atomic uint32_t daemon_asleep; /**< the daemon's loop may block: ring the bell */
} coll_ctl_job_t;

/** Most step records of one operation (collective.h COLL_MAX_STEPS). */
#define COLL_CTL_MAX_STEPS 32u
/** Most records of one ring phase: more steps than this are merged (collective.h). */
#define COLL_CTL_RING_PHASE_STEPS (COLL_CTL_MAX_STEPS / 2)

/** When the daemon reached each phase of an operation: CLOCK_MONOTONIC nanoseconds, which
 *  processes of one host share; 0 for a phase the operation did not have. */
typedef struct {
    uint64_t ready_ns;   /**< every local rank had submitted */
    uint64_t peers_ns;   /**< the previous node's descriptor was checked (the peers are in) */
    uint64_t reduced_ns; /**< the reduction finished (the ring's reduce-scatter) */
    uint64_t done_ns;    /**< the operation completed */
    uint32_t nsteps;     /**< records in @c steps */
    uint32_t reserved;
    uint64_t steps[COLL_CTL_MAX_STEPS]; /**< the algorithm's steps, coll_ctl_step_pack() */
    uint64_t wire_bytes;  /**< bytes this node sent to other nodes (Complete.wire_bytes) */
    uint64_t dense_bytes; /**< the uncompressed ring's bytes (Complete.dense_bytes) */
} coll_ctl_times_t;

/**
 * @brief One step record, as the control block and the wire's Complete.steps carry it:
 *        bits 0-31 microseconds from ready_ns to the end of the step, bits 32-55 the last step
 *        of its phase that the record covers, bits 56-63 the phase (coll_step_phase_t).
 */
static inline uint64_t coll_ctl_step_pack(uint32_t phase, uint32_t last, uint64_t end_us)
{
    return (uint64_t)(uint8_t)phase << 56 | (uint64_t)(last & 0xffffffu) << 32 |
           (end_us > UINT32_MAX ? UINT32_MAX : end_us);
}

/** @brief The phase of a packed step record. */
static inline uint32_t coll_ctl_step_phase(uint64_t rec)
{
    return (uint32_t)(rec >> 56);
}

/** @brief The last step a packed step record covers. */
static inline uint32_t coll_ctl_step_last(uint64_t rec)
{
    return (uint32_t)(rec >> 32) & 0xffffffu;
}

/** @brief Microseconds from ready_ns to the end of a packed step record. */
static inline uint32_t coll_ctl_step_end_us(uint64_t rec)
{
    return (uint32_t)rec;
}

/**
 * @brief Whether step @p step (0-based) of a phase of @p nsteps steps ends a record when the
 *        phase may have at most @p budget records: with nsteps <= budget every step does,
 *        beyond that consecutive steps are merged into @p budget records of nearly equal size.
 */
static inline int coll_ctl_step_ends_record(uint32_t step, uint32_t nsteps, uint32_t budget)
{
    return step + 1 >= nsteps ||
           (uint64_t)step * budget / nsteps != (uint64_t)(step + 1) * budget / nsteps;
}

/**
 * @brief Check step records from the daemon: at most COLL_CTL_MAX_STEPS, known phases in the
 *        order the algorithms run them, steps rising within a phase, end times not falling.
 * @return 1 when valid, 0 otherwise.
 */
int coll_ctl_steps_valid(const uint64_t *steps, size_t n);

/** One successful completion. */
typedef struct {
    uint32_t req_id;
    int32_t status;  /**< always COLL_OK: failures travel on the socket with their message */
    char algo[24];   /**< algorithm that ran, NUL-terminated */
    coll_ctl_times_t t;
} coll_ctl_comp_t;

/** A rank's control block. Only the daemon writes comp[] and comp_head; only the client
 *  writes comp_tail and waiting. */
typedef struct {
    _Alignas(64) _Atomic uint32_t events;    /**< notifications so far; the futex word */
    _Atomic uint32_t waiting;                /**< the client sleeps on @c events */
    _Atomic uint32_t frames;                 /**< socket frames sent (the client reads the
                                                  socket only when this moved) */
    _Alignas(64) _Atomic uint32_t comp_head; /**< records written */
    _Alignas(64) _Atomic uint32_t comp_tail; /**< records consumed */
    _Alignas(64) _Atomic uint32_t sub_head;  /**< submissions written (client) */
    _Alignas(64) _Atomic uint32_t sub_tail;  /**< submissions taken (daemon) */
    _Alignas(64) coll_ctl_comp_t comp[COLL_CTL_SLOTS];
    coll_submission_t sub[COLL_CTL_SUB_SLOTS];
} coll_ctl_t;

_Static_assert(sizeof(coll_ctl_t) <= COLL_CTL_BYTES, "control block fits its slot");
_Static_assert(sizeof(coll_submission_t) == 96, "a submission record is 96 bytes (README.md)");
_Static_assert(sizeof(coll_ctl_job_t) <= COLL_CTL_JOB_BYTES, "job header fits its slot");

/** Shortest and longest health tick of a job (coll_job_tick_ms()). The longest keeps the
 *  daemon's verdicts, taken once a tick, within the library's own bound of timeout + 1 s. */
#define COLL_JOB_TICK_MIN_MS 50u
#define COLL_JOB_TICK_MAX_MS 250u

/**
 * @return The health tick, in milliseconds, of a job whose timeout is @p timeout_ms: an eighth
 *         of it, COLL_JOB_TICK_MIN_MS to COLL_JOB_TICK_MAX_MS. The daemon checks the job once a
 *         tick (heartbeats, stalls, timeouts); a local rank that runs collectives in the
 *         shared-memory area without it looks once a tick whether the daemon is still there.
 */
static inline uint64_t coll_job_tick_ms(uint64_t timeout_ms)
{
    uint64_t t = timeout_ms / 8;
    return t < COLL_JOB_TICK_MIN_MS ? COLL_JOB_TICK_MIN_MS
                                    : t > COLL_JOB_TICK_MAX_MS ? COLL_JOB_TICK_MAX_MS : t;
}

/** Bytes of the control area of a job with @p nlocal local ranks. */
#define COLL_CTL_TOTAL(nlocal) (COLL_CTL_JOB_BYTES + (size_t)(nlocal) * COLL_CTL_BYTES)

/** @return Local rank @p l's control block in a pool mapped at @p base. */
static inline coll_ctl_t *coll_ctl_of(void *base, uint32_t l)
{
    return (coll_ctl_t *)(void *)((char *)base + COLL_CTL_JOB_BYTES + (size_t)l * COLL_CTL_BYTES);
}

/**
 * @brief Client side: queue one submission. Thread-safe for one writer per block.
 * @return 1 when queued (and @p *ring_p is 1 when the daemon must be woken through the
 *         doorbell), 0 when the ring is full (use the socket).
 */
int coll_ctl_submit(coll_ctl_job_t *job, coll_ctl_t *ctl, const coll_submission_t *rec,
                    int *ring_p);

/**
 * @brief Daemon side: take the next submission into @p rec (copied before it is checked, so
 *        the client cannot change it meanwhile).
 * @return 1 when one was taken, 0 when the ring is empty, -1 when the ring's counters are
 *         impossible (a misbehaving client).
 */
int coll_ctl_take(coll_ctl_t *ctl, coll_submission_t *rec);

/**
 * @brief Daemon side: submissions queued and not taken yet (a rank that dies right after
 *        submitting leaves them behind), at most COLL_CTL_SUB_SLOTS whatever the client wrote.
 */
uint32_t coll_ctl_queued(coll_ctl_t *ctl);

/**
 * @brief Daemon side: count one notification and wake the client if it sleeps.
 *        Thread-safe; one futex system call only when the client is asleep.
 */
void coll_ctl_notify(coll_ctl_t *ctl);

/**
 * @brief Client side: sleep until @c events differs from @p seen or @p timeout_ms passes
 *        (-1: no limit). Returns at once when a notification came in meanwhile.
 */
void coll_ctl_wait(coll_ctl_t *ctl, uint32_t seen, int timeout_ms);

/**
 * @brief Notify the client only if it announced that it sleeps: for a notifier whose news the
 *        client also finds without the event word (a word it watches while it polls, checked
 *        again after announcing the sleep in coll_ctl_wait_unless()). Thread-safe.
 */
void coll_ctl_notify_sleeper(coll_ctl_t *ctl);

/**
 * @brief coll_ctl_wait() that, after announcing the sleep, asks @p moved(@p arg) whether what
 *        it waits for came meanwhile, and does not sleep then. A notifier using
 *        coll_ctl_notify_sleeper() after making @p moved true either sees the announcement or
 *        is seen (each side stores, then reads the other's word, sequentially consistent).
 */
void coll_ctl_wait_unless(coll_ctl_t *ctl, uint32_t seen, int timeout_ms,
                          int (*moved)(const void *arg), const void *arg);

#endif
