/**
 * @file collective_trace.h
 * @brief What a completed request did: the bytes its node sent, the times of its phases and
 *        the steps of its inter-node algorithm (for timelines, overlap and compression
 *        measurements). Included by collective.h.
 */
#ifndef COLLECTIVE_TRACE_H
#define COLLECTIVE_TRACE_H

#include <collective.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Bytes this rank's node sent to other nodes for a completed request, and what the
 *        uncompressed ring would have sent for it (2 (N-1) / N x count x element bytes per node
 *        for an allreduce of N nodes): their quotient is the compression ratio. Data messages
 *        only (not the 128-byte descriptors); 0 and 0 for jobs on one node and for operations
 *        other than allreduce and the parameter service's steps (coll_ps_step_bucket_async(),
 *        whose uncompressed ring is that of an allreduce of the bucket).
 * @param [out] sent  Bytes sent by the node.
 * @param [out] dense The uncompressed ring's bytes.
 * @return COLL_OK; COLL_INPROGRESS while pending (nothing written); COLL_ERR_INVALID for a
 *         NULL @p req, @p sent or @p dense. Thread-safe.
 */
COLL_API coll_status_t coll_req_wire_bytes(const coll_request_t *req, uint64_t *sent,
                                           uint64_t *dense);

/**
 * When a request went through its phases: CLOCK_MONOTONIC nanoseconds (clock_gettime), which
 * the processes of one host share. A phase the operation did not have is 0.
 */
typedef struct {
    uint64_t submit_ns;   /**< the library sent the submission */
    uint64_t ready_ns;    /**< the daemon had every local rank's submission (wait for peers
                               on this node before) */
    uint64_t peers_ns;    /**< the daemon heard from the other nodes (their descriptor checked) */
    uint64_t reduced_ns;  /**< the reduction finished (reduce-scatter; distribution after) */
    uint64_t done_ns;     /**< the daemon finished */
    uint64_t complete_ns; /**< the library saw the completion */
} coll_req_timing_t;

/**
 * @brief The phase times of a completed request (for timelines and overlap measurements).
 * @param [out] timing Filled on COLL_OK.
 * @return COLL_OK; COLL_INPROGRESS while it is pending (nothing written); COLL_ERR_INVALID for
 *         a NULL @p req or @p timing.
 */
COLL_API coll_status_t coll_req_timing(const coll_request_t *req, coll_req_timing_t *timing);

/** Phases of an inter-node algorithm whose steps coll_req_steps() reports. */
typedef enum {
    COLL_STEP_REDUCE_SCATTER = 1, /**< ring reduce-scatter, N-1 steps for N nodes */
    COLL_STEP_ALLGATHER = 2,      /**< ring all-gather, N-1 steps */
    COLL_STEP_RD_FOLD = 3,        /**< recursive doubling: the nodes above a power of two p fold
                                       into their partners (one step, only on those nodes) */
    COLL_STEP_RD_ROUND = 4,       /**< recursive doubling: exchange rounds, log2(p) steps */
    COLL_STEP_RD_UNFOLD = 5,      /**< recursive doubling: the result goes back (one step) */
} coll_step_phase_t;

/** Most step records coll_req_steps() gives for one request. */
#define COLL_MAX_STEPS 32

/**
 * One step, or several consecutive steps of one phase, of the inter-node algorithm as this
 * node saw it: a step ends when its data arrived from the previous node. A record begins where
 * the previous one ended (the first at peers_ns, the first all-gather record at reduced_ns of
 * ::coll_req_timing_t); done_ns comes after the last step once this node's own last sends
 * completed too.
 */
typedef struct {
    uint64_t end_ns;    /**< CLOCK_MONOTONIC ns (1 us resolution) when this step and every
                             earlier one were done on this node */
    uint32_t phase;     /**< ::coll_step_phase_t */
    uint32_t first;     /**< first step of the phase covered, 0-based */
    uint32_t last;      /**< last step covered; > first only when a ring of more than 17 nodes
                             had its N-1 steps per phase merged into 16 records */
} coll_req_step_t;

/**
 * @brief The steps of the inter-node algorithm of a completed request (ring and recursive
 *        doubling; none for single-node jobs, broadcast, reduce, barrier and point-to-point),
 *        in order: where a slow peer or link shows in a timeline.
 * @param [out] steps  Room for ::COLL_MAX_STEPS records; the first @p *nsteps are filled.
 * @param [out] nsteps Number of records, 0 .. ::COLL_MAX_STEPS.
 * @return COLL_OK; COLL_INPROGRESS while it is pending (nothing written); COLL_ERR_INVALID for
 *         a NULL @p req, @p steps or @p nsteps. Thread-safe.
 */
COLL_API coll_status_t coll_req_steps(const coll_request_t *req, coll_req_step_t *steps,
                                      uint32_t *nsteps);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_TRACE_H */
