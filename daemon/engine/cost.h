/**
 * @file cost.h
 * @brief The cost model of every algorithm (alpha-beta-gamma: Hockney 1994; Thakur,
 *        Rabenseifner and Gropp, IJHPCA 2005): the predicted time of a collective of a given
 *        size on a given number of nodes and ranks per node, per algorithm, and the fastest.
 *
 * The constants (coll_cost_params_t) are measured on the machine by bench/calibrate.sh;
 * coll_cost_params_default() gives the values measured on the development machine
 * (docs/cost-model.md says where each comes from). Every time is in seconds, every size in
 * bytes; S is the operation's bytes per rank (the allreduce buffer, the all-gather output, the
 * reduce-scatter input), N the nodes, L the ranks per node. The formulas, with
 * a = alpha, b = beta, g = gamma, P = the largest power of two <= N, and
 *
 *   local    = (L - 1) S g + (L - 1) S beta_mem   the daemon combines its L ranks' inputs and
 *                                                 copies the result to the L - 1 others
 *   node_in  = alpha_shm + (L - 1) (S / L) g      the ranks reduce their node's buffer in
 *                                                 shared memory, each a 1/L slice
 *   node_out = alpha_shm + S beta_mem             each rank copies the node's result out
 *   rd(a)    = log2(P) (a + S b + S g)  + [N != P] (2 a + 2 S b + S g)
 *
 * are, per algorithm (the daemon's operation adds alpha_op, its ranks' hand-offs, to each but
 * the direct path):
 *
 *   ring       allreduce 2 (N-1) (a + S/N b) + (N-1) S/N g; reduce-scatter (N-1) (a + S/N (b + g));
 *              all-gather (N-1) (a + S/N b); the pipeline's segments overlap, so one a per step
 *   rd         allreduce rd(alpha), run whole while S fits a segment
 *   knomial    allreduce in ceil(log_k N) rounds of k - 1 exchanges of S (radix k);
 *              broadcast and reduce a k-nomial tree: ceil(log_k N) rounds of k - 1 sends of S
 *   bruck      all-gather in ceil(log2 N) rounds: ceil(log2 N) a + (N-1)/N S b
 *   chain      broadcast and reduce pipelined along the nodes in segments of s = min(S, segment):
 *              (N - 2 + ceil(S / s)) (a + s b [+ s g for reduce])
 *   dissem.    barrier: ceil(log2 N) a
 *   node_rd    allreduce: node_in + rd(alpha) + node_out (one buffer per node between daemons)
 *   node_ring  allreduce: node_in + ring + node_out
 *   direct     allreduce: node_in + rd(alpha_direct) + node_out; the node leaders exchange the
 *              rounds over their own endpoints, no daemon hand-off
 *   fp16       allreduce compressed: 2 rounds (reduce-scatter, all-gather) of N - 1 messages of
 *              h + 2 S/(4N) bytes each, a + (N-1) msg b per round, plus codec_cast per element
 *   onebit     the same rounds with messages of h + ceil(S/(4N) / 8) bytes, codec_onebit
 *   topk       one round of N - 1 messages of h + (4 + w) k bytes, k = ceil(ratio S/4), w the
 *              index bytes (1..4); codec_topk per element plus N k g for the sums
 *   powersgd   the bucket as one matrix of R rows (powersgd_rows; 0: square) and C = S/4/R
 *              columns at rank r: two dense allreduces (P = R r, then Q = C r floats, 2 rounds
 *              each as fp16's with float32 payloads) and 6 S/4 r flops of codec_flop
 *
 * with h = 160 bytes of prefix per compressed message (descriptor, cx and wire headers).
 *
 * The CPU bound. Where @c cpus > 0, each time is at least the CPU work the algorithm puts on
 * the CPUs that run it: T = max(T_path, W / cpus), W the work of one node (times N when
 * @c cpus_shared: every node on the same CPUs, as the hosts of a cluster of namespaces on one
 * machine share it). A node's work, averaged over the nodes, is
 *
 *   W = m cpu_msg + B cpu_byte + R g + X
 *
 * with m the messages it sends (the ring's and the chain's in segments), B their bytes, R the
 * bytes it reduces, and X the rest: its ranks' hand-offs (L cpu_op: every rank waits and is
 * woken once, by the daemon or in shared memory by its leader), the daemon's local combine and
 * copies (local above), the ranks' shared-memory slices and copies (node_in's and node_out's
 * bytes), the codecs' work. T_path, the formulas above, is the critical path with a CPU for
 * every process; the bound is a roofline: no overlap of path and work is assumed. A cluster
 * whose nodes have CPUs to spare leaves it off (cpus 0, the built-in constants).
 * Compressed allreduces are lossy, so coll_cost_predict() never names them best: a caller that
 * opted into compression compares their times itself.
 *
 * Pure arithmetic, no state: any thread.
 */
#ifndef COLL_ENGINE_COST_H
#define COLL_ENGINE_COST_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "proto/desc.h"

/** The algorithms the model knows. */
typedef enum {
    COLL_COST_RING,
    COLL_COST_RD,
    COLL_COST_KNOMIAL,
    COLL_COST_BRUCK,
    COLL_COST_CHAIN,
    COLL_COST_DISSEMINATION,
    COLL_COST_NODE_RD,
    COLL_COST_NODE_RING,
    COLL_COST_DIRECT,
    COLL_COST_FP16,
    COLL_COST_ONEBIT,
    COLL_COST_TOPK,
    COLL_COST_POWERSGD,
    COLL_COST_NALGOS
} coll_cost_algo_t;

/** A mask of every algorithm, for coll_cost_predict()'s @c allowed. */
#define COLL_COST_ALL ((1u << COLL_COST_NALGOS) - 1u)

/** The constants of the model. Times in seconds, per-byte costs in seconds per byte. */
typedef struct coll_cost_params {
    double alpha;          /**< one message between daemons, with the receiver's wake-up */
    double beta;           /**< per byte on a node's link */
    double gamma;          /**< per byte of float32 reduction (one source into a destination) */
    double alpha_op;       /**< an operation's hand-offs between its ranks and the daemon */
    double alpha_shm;      /**< one step of a node's ranks in shared memory (all arrive) */
    double beta_mem;       /**< per byte of a memory copy */
    double alpha_direct;   /**< one message between node leaders' own endpoints */
    double codec_cast;     /**< per element: a node's fp16 codec work in one allreduce
                                (encode with error feedback, decode, sums, scans, copies) */
    double codec_onebit;   /**< per element: the same for 1-bit */
    double codec_topk;     /**< per element: the same for TopK (selection, residual) */
    double codec_flop;     /**< per floating-point operation of PowerSGD's products */
    double cpu_msg;        /**< CPU seconds of one message between daemons, both ends
                                together: the send, the receive, the receiver's wake-up */
    double cpu_byte;       /**< CPU seconds per byte such a message carries, both ends */
    double cpu_op;         /**< CPU seconds of one rank's hand-offs with its daemon for one
                                operation, both sides (submit, completion) */
    uint32_t cpus;         /**< CPUs that run a node's daemon and ranks; 0: no CPU bound */
    uint32_t cpus_shared;  /**< 1: every node runs on the same @c cpus; 0: each its own */
    double topk_ratio;     /**< TopK's density (0 < ratio <= 1) */
    uint32_t powersgd_rank;   /**< PowerSGD's rank r (>= 1) */
    uint64_t powersgd_rows;   /**< rows of the bucket as a matrix (0: square) */
    uint32_t knomial_radix;   /**< k of the k-nomial algorithms (>= 2) */
    uint64_t segment_bytes;   /**< the pipeline segment (the daemon's segment_size) */
    uint64_t rd_max_bytes;    /**< largest allreduce recursive doubling runs (one segment) */
} coll_cost_params_t;

/** What coll_cost_predict() found. */
typedef struct {
    /** Seconds of each algorithm; a negative value where it does not apply (another
     *  collective, not allowed, or a size it cannot run). */
    double time[COLL_COST_NALGOS];
    /** CPU seconds of one node's share of each algorithm (W of the CPU bound above, the mean
     *  over the nodes), whether or not @c cpus bounds the time; negative where time is. */
    double work[COLL_COST_NALGOS];
    coll_cost_algo_t best; /**< the fastest exact algorithm that applies */
} coll_cost_result_t;

/**
 * @brief The constants measured on the development machine (docs/cost-model.md): daemons
 *        on TCP over 10 Gbit/s links between network namespaces.
 * @param [out] p Filled completely.
 */
void coll_cost_params_default(coll_cost_params_t *p);

/**
 * @brief Predict the time of a @p kind operation of @p bytes per rank on @p nnodes nodes of
 *        @p ranks_per_node ranks each, for every algorithm in @p allowed (a mask of
 *        1 << coll_cost_algo_t), and choose the fastest exact one.
 * @param [out] out Every entry set (negative for those that do not apply); set only on success.
 * @return COLL_OK; COLL_ERR_INVALID for zero nodes or ranks, a negative or non-finite
 *         constant, a radix below 2, a PowerSGD rank of 0, a TopK ratio outside (0, 1], a
 *         zero segment, a @c cpus_shared other than 0 or 1, constants so large that a time
 *         is not finite, or a kind the model has no algorithm for (point-to-point, the
 *         parameter service); COLL_ERR_UNSUPPORTED when no allowed exact algorithm applies.
 */
coll_status_t coll_cost_predict(const coll_cost_params_t *p, coll_kind_t kind, uint64_t bytes,
                                uint32_t nnodes, uint32_t ranks_per_node, uint32_t allowed,
                                coll_cost_result_t *out);

/**
 * @return 1 when every constant of @p p is usable (coll_cost_predict()'s COLL_ERR_INVALID
 *         lists what is not), 0 otherwise.
 */
int coll_cost_params_valid(const coll_cost_params_t *p);

/**
 * @return NULL when every constant of @p p is usable, else a phrase naming the first that is
 *         not ("cpus_shared neither 0 nor 1"); static storage.
 */
const char *coll_cost_params_problem(const coll_cost_params_t *p);

/**
 * @brief Set one constant of @p p from a "KEY = VALUE" line (KEY a field of
 *        coll_cost_params_t; spaces around '=' allowed), as bench/calibrate.sh writes them.
 * @param [out] err A sentence saying what is wrong, on error.
 * @return COLL_OK; COLL_ERR_INVALID for a line without '=', an unknown key, or a value that
 *         is not a decimal number >= 0 (digits, '.', an exponent; not hex, inf or nan; an
 *         integer for the integer fields) or is above the largest double. A value below the
 *         smallest one is read as the denormal or 0 strtod() gives it.
 */
coll_status_t coll_cost_params_set(coll_cost_params_t *p, const char *line, char *err,
                                   size_t errlen);

/**
 * @brief Read the constants from the file at @p path over @p p (keys the file does not name
 *        keep their value): "KEY = VALUE" lines, each key at most once, '#' starts a comment,
 *        blank lines skipped. @p p is changed only on success.
 * @param [out] err What is wrong, with the file and line, on error.
 * @return COLL_OK; COLL_ERR_INVALID for a line coll_cost_params_set() refuses, a key given
 *         twice, a line over 255 characters (and a '\r'), a NUL byte, or constants that are
 *         not valid together (coll_cost_params_valid()); a negative errno when the file
 *         cannot be read.
 */
coll_status_t coll_cost_params_load(coll_cost_params_t *p, const char *path, char *err,
                                    size_t errlen);

/** @return The name of @p algo ("ring", "node_rd", ...); "?" when out of range. */
const char *coll_cost_algo_name(coll_cost_algo_t algo);

/** @return 1 when @p algo is a lossy (compressed) allreduce. */
int coll_cost_algo_lossy(coll_cost_algo_t algo);

#endif
