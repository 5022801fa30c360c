/**
 * @file internal.h
 * @brief What the files of engine/codec/ share (codec.h lists them): a job's compression state,
 *        registered layouts, residual slots, an operation's compression, and the interface of a
 *        compressed allreduce's codec over its rounds. Not used outside the folder.
 */
#ifndef COLL_ENGINE_CODEC_INTERNAL_H
#define COLL_ENGINE_CODEC_INTERNAL_H

#include <stdint.h>

#include <collective.h>

#include "base/list.h"
#include "core/job.h"
#include "engine/codec/codec.h"
#include "engine/exec.h"
#include "engine/feature.h"
#include "engine/op.h"
#include "engine/plan.h"
#include "net/transport.h"

/* ---- layouts' shapes (shapes.c) ------------------------------------------------------------- */

/** The shapes a layout fingerprint stands for. */
typedef struct {
    coll_list_t link;  /**< in coll_codec_job_t.layouts */
    uint64_t layout;   /**< the client's fingerprint */
    uint64_t digest;   /**< of the shapes, compared between nodes (coll_desc_t.shapes) */
    uint64_t total;    /**< elements: the sum of rows x cols */
    size_t ntensors;
    uint64_t *shape;   /**< 2 per tensor: rows, cols (owned) */
} coll_tensor_layout_t;

/** @return @p job's layout @p layout, or NULL when none was registered. */
const coll_tensor_layout_t *coll__layout_find(const coll_job_t *job, uint64_t layout);

/* ---- measurements for auto (estimate.c) ----------------------------------------------------- */

/** Samples of the link's speed kept: the estimate is the fastest of them. */
#define COLL_EST_SAMPLES 8

/** What a node measured of its link and of the compressors. */
typedef struct {
    double bw[COLL_EST_SAMPLES]; /**< bytes per second of recent large transfers */
    uint32_t nbw;                /**< samples taken in all (the next slot: % COLL_EST_SAMPLES) */
    double cost[COLL_COMPRESS_COUNT]; /**< seconds per element of a method's codec work on this
                                           node; 0 until measured */
} coll_estimate_t;

/* ---- accounting (account.c) ----------------------------------------------------------------- */

/** Bytes and operations of one method run. */
typedef struct {
    uint64_t ops;
    uint64_t wire_bytes;  /**< sent by this node */
    uint64_t dense_bytes; /**< what the uncompressed ring would have sent */
} coll_account_t;

/** Why an operation that asked for compression ran uncompressed. */
typedef enum {
    COLL_FALLBACK_OP,       /**< not an allreduce with SUM or AVG */
    COLL_FALLBACK_DTYPE,    /**< not float32, float16 or bfloat16 */
    COLL_FALLBACK_SHAPES,   /**< PowerSGD without registered shapes */
    COLL_FALLBACK_NOMATRIX, /**< PowerSGD with no matrix compression would shrink */
    COLL_FALLBACK_COUNT_MAX, /**< TopK beyond COLL_TOPK_MAX_COUNT elements */
    COLL_FALLBACK_REASONS
} coll_fallback_t;

/** @return The metric label of @p reason, e.g. "dtype". */
const char *coll__fallback_name(coll_fallback_t reason);

/* ---- residual slots (residual.c) ------------------------------------------------------------ */

/** Memory a codec needs in a slot, in elements or bytes; 0 for what it does not use. */
typedef struct {
    size_t res_elems;   /**< float32 per residual buffer (two with error feedback, else one) */
    size_t srv_elems;   /**< float32 per server residual buffer (two) */
    size_t q_elems;     /**< float32: PowerSGD's Q of every compressed matrix */
    size_t work_elems;  /**< float32 scratch */
    size_t send_bytes;  /**< messages this node sends in one operation */
    size_t recv_bytes;  /**< messages it receives */
    size_t scratch_bytes; /**< the kernels' working memory (TopK's candidates) */
} coll_slot_sizes_t;

/**
 * One bucket's compression state on this node, in the job's pool. The residual is double
 * buffered: an operation adds res[cur] to the node's sum of the local ranks' inputs into
 * res[cur ^ 1] and compresses from there, turning it into the new residual; only a successful
 * operation flips cur, so one that fails (a NaN anywhere, a lost node) leaves the residual as
 * it was, on every node.
 */
typedef struct coll_slot {
    coll_list_t link;      /**< in coll_codec_job_t.slots */
    uint32_t bucket;
    /* What the bucket is: a change of any of these resets the slot. */
    uint64_t count;
    uint32_t dtype;
    uint64_t layout;
    uint64_t shapes;
    uint32_t kind;         /**< the operations' kind (allreduce, parameter-service step) */
    uint64_t asked;        /**< compression asked for (cspec) */
    uint32_t warmup;       /**< and its warm-up */
    /* What its memory is laid out for: a change of method zeroes the residual. */
    uint64_t mem_run;      /**< cspec the memory holds (0: none allocated) */
    uint32_t mem_nodes;
    uint64_t ops;          /**< successful operations since the last reset (warm-up) */
    uint64_t resets;       /**< of the bucket (count, dtype, layout, spec) */
    uint64_t method_resets; /**< residuals zeroed by a change of method (auto) */
    uint64_t last_run;     /**< cspec the last operation ran (0: uncompressed) */
    uint64_t auto_next;    /**< auto: cspec the next operation runs, the root's choice */
    char auto_why[160];    /**< auto: the root's estimates behind it */
    int busy;              /**< an operation uses it */
    int ef;                /**< error feedback: two residual buffers */
    int fresh;             /**< the residual is zero and PowerSGD's Q not drawn yet */
    size_t pool_off, pool_bytes; /**< its allocation in the job's pool */
    float *res[2];         /**< res[cur]: the residual; res[cur ^ 1]: this operation's input */
    unsigned cur;
    float *srv[2];         /**< two-sided codecs: server residual of this node's chunk, as res */
    float *q;              /**< PowerSGD: Q of every compressed matrix (warm start) */
    float *work;
    uint8_t *send, *recv;
    void *scratch;
    coll_slot_sizes_t sz;
} coll_slot_t;

/**
 * @brief The slot of @p op's bucket, reset when the bucket changed, marked busy.
 * @return The slot; NULL when the job failed (the bucket is busy, no memory; logged).
 */
coll_slot_t *coll__slot_take(coll_op_t *op);

/**
 * @brief Give @p slot the memory @p sz asks for, for running @p run on @p nnodes nodes
 *        (allocated in the pool when the method or node count changed, the residual then
 *        zero). @return COLL_OK; COLL_ERR_POOL_FULL or COLL_ERR_NOMEM (the job failed).
 */
coll_status_t coll__slot_memory(coll_op_t *op, coll_slot_t *slot, uint64_t run,
                                const coll_slot_sizes_t *sz);

/** @brief Free @p slot's memory (an uncompressed operation ran: the residual is dropped,
 *         counted as a change of method). */
void coll__slot_drop(coll_job_t *job, coll_slot_t *slot);

/* ---- a job's compression state ---------------------------------------------------------------- */

/** job->engine.codec. */
typedef struct coll_codec_job {
    coll_list_t layouts;       /**< coll_tensor_layout_t */
    coll_list_t slots;         /**< coll_slot_t */
    coll_estimate_t est;
    coll_account_t acct[COLL_COMPRESS_COUNT]; /**< by method run (NONE: uncompressed) */
    uint64_t resets;           /**< slots reset (count, dtype, layout or spec changed) */
    uint64_t method_resets;    /**< residuals zeroed by a change of method */
    uint64_t fallbacks[COLL_FALLBACK_REASONS];
    uint64_t nonfinite;        /**< operations failed by a non-finite gradient */
    uint32_t logged;           /**< fallback reasons logged (bit per reason) */
} coll_codec_job_t;

/** @return @p job's compression state, created on first use; NULL when out of memory. */
coll_codec_job_t *coll__codec_job(coll_job_t *job);

/* ---- an operation's compression --------------------------------------------------------------- */

/** The auto policy message: the root's descriptor and its choice for the bucket's next
 *  operation. */
typedef struct {
    coll_desc_t desc;
    uint64_t next_run;     /**< cspec, 0 for uncompressed */
    uint64_t zero;
} coll_policy_msg_t;

/** An operation's compression: the codec feature's state (coll__codec_op()). */
typedef struct coll_codec_op {
    coll_compression_t asked;  /**< what the operation asked for (with warm-up and bucket) */
    coll_compression_t run;    /**< what it runs (method NONE: uncompressed) */
    coll_slot_t *slot;         /**< its bucket's slot, NULL when it took none */
    const coll_tensor_layout_t *layout; /**< its registered shapes, or NULL */
    int commit;                /**< the codec finished: the slot's new residual is valid */
    double codec_s;            /**< seconds of codec work on this node */
    int policy;                /**< an auto operation on several nodes: the policy message */
    int policy_wait;           /**< waiting for the root's message */
    uint64_t next_run;         /**< the root's choice for the bucket's next operation */
    coll_policy_msg_t msg;
    coll_xfer_t *policy_x;     /**< per node */
} coll_codec_op_t;

/** @return @p op's compression state, NULL when it carries none (codec.c). */
static inline coll_codec_op_t *coll__codec_op(const coll_op_t *op)
{
    return coll_op_feature_state(op, &coll_codec_feature);
}

/* ---- policy (policy.c) -------------------------------------------------------------------- */

/**
 * @brief Whether @p op may compress at all: it asked for compression, on several nodes, and the
 *        descriptor rules nothing out (an allreduce with SUM or AVG of float32, float16 or
 *        bfloat16); a fallback is counted and logged once per job and reason.
 */
int coll__policy_applies(coll_op_t *op, const coll_codec_op_t *c);

/**
 * @brief What @p op runs, as a spec (method NONE: its own algorithm): warm-up, the fallbacks
 *        (counted and logged once per job and reason), auto's choice.
 */
void coll__policy_resolve(coll_op_t *op, coll_codec_op_t *c);

/**
 * @brief The root's choice for the next operation of @p op's bucket (auto): the candidate
 *        whose estimated time (estimate.c) is lowest, keeping the current one unless another
 *        is more than COLL_AUTO_HYSTERESIS faster. Writes the estimates into @p why.
 * @return The cspec, 0 for uncompressed.
 */
uint64_t coll__policy_choose(coll_op_t *op, const coll_codec_op_t *c, char *why, size_t len);

/* ---- estimates (estimate.c) ------------------------------------------------------------------- */

/** Seconds per round of messages added to every estimate (a constant, not measured). */
#define COLL_AUTO_ROUND_S 50e-6
/** A method replaces auto's current choice only when it is estimated this much faster. */
#define COLL_AUTO_HYSTERESIS 0.10
/** Transfers below this many bytes are not link samples (latency, not bandwidth). */
#define COLL_EST_MIN_BYTES (256u * 1024u)

/** @return The link estimate in bytes per second: the fastest recent sample; 0 when none. */
double coll__est_bandwidth(const coll_estimate_t *e);

/** @brief Record a completed allreduce: @p bytes sent in @p seconds, of which @p codec_s
 *         were codec work of method @p method on @p count elements. */
void coll__est_record(coll_estimate_t *e, coll_compress_method_t method, uint64_t count,
                      uint64_t bytes, double seconds, double codec_s);

/** @return Seconds per element of @p method's codec work: measured, or calibrated now on a
 *          synthetic buffer (once per job and method). */
double coll__est_cost(coll_estimate_t *e, const coll_compression_t *run);

/* ---- the compressed allreduce: rounds of messages (rounds.c) ---------------------------------- */

/** Bytes in front of every message: the sender's descriptor and a cx header (then the
 *  compress_wire.h message). */
#define COLL_CX_PREFIX 144u

/** The cx header after the descriptor. */
typedef struct {
    int32_t status;  /**< COLL_OK, or the sender's failure: the message has no payload */
    uint32_t round;
    uint32_t from;   /**< sender's node */
    uint32_t zero;
} coll_cx_hdr_t;

struct coll_cx;

/** A compressed allreduce's method over its rounds (rounds.c). Every round, every node sends
 *  one message to each other node and receives one from each (a message may be empty). */
typedef struct coll_cx_codec {
    coll_compress_method_t method;
    unsigned rounds;
    /** Memory for @p op's bucket; an error fails the operation's job (messages say why). */
    coll_status_t (*sizes)(struct coll_cx *cx, coll_slot_sizes_t *sz);
    /** Point cx->sendp, sendlen, recvp and recvlen at round cx->round's messages in the
     *  slot (a pure function of the sizes: it also runs for an operation that carries no
     *  data any more). */
    void (*place)(struct coll_cx *cx);
    /** The input (cx->in: local sum + residual) is ready: compress it into round 0's
     *  messages. COLL_ERR_INVALID when it cannot be encoded (the operation fails). */
    coll_status_t (*begin)(struct coll_cx *cx);
    /** Every transfer of cx->round completed: use what arrived and write the next round's
     *  messages (after the last round: the result into cx->outf). COLL_ERR_PROTOCOL for a
     *  malformed message (the job fails), COLL_ERR_INVALID for a sum that cannot be encoded
     *  (the operation fails). */
    coll_status_t (*round_done)(struct coll_cx *cx);
    /** @return Bytes this node sends for @p count elements on @p nnodes nodes (estimates). */
    double (*wire_bytes)(uint64_t count, uint32_t nnodes, const coll_compression_t *run,
                         const coll_tensor_layout_t *layout);
    /** A parameter-service step (staged.c): the rounds of the reduction alone, after which
     *  this node's chunk of cx->plan holds the reduced gradient in cx->outf; 0 when the method
     *  cannot run a step. */
    unsigned staged_rounds;
    /** The last of those rounds completed: this node's chunk of the reduction into cx->outf,
     *  without a server side (NULL: round_done, which writes the whole result). Errors as
     *  round_done. */
    coll_status_t (*staged_done)(struct coll_cx *cx);
} coll_cx_codec_t;

/** The rounds' state of one operation (op->algo_state). */
typedef struct coll_cx {
    coll_op_t *op;
    const coll_exec_t *ex;  /**< the executor of the operation's buffers (engine/exec.h) */
    coll_codec_op_t *c;
    coll_slot_t *slot;
    const coll_cx_codec_t *codec;
    uint32_t n, r;          /**< nodes, this node */
    uint64_t count;
    float weight;           /**< of each node's contribution: 1, or 1/world for COLL_AVG */
    unsigned round;
    unsigned rounds;        /**< of this operation: the codec's, or for a staged one its
                                 staged_rounds and the all-gather of the stage's output */
    int staged;             /**< a parameter-service step (coll_op_stage(), staged.c) */
    size_t ag_send_off, ag_recv_off; /**< staged: the all-gather's areas in the slot's send and
                                          recv buffers */
    uint32_t waiting;       /**< transfers of the round not completed */
    float *in;              /**< count float32: the local ranks' sum + the residual; becomes
                                 the new residual */
    float *outf;            /**< count float32: the result (the output itself for float32) */
    coll_plan_t plan;       /**< chunks of the two-sided codecs and PowerSGD's rounds */
    /* Set by the codec for the current round, per node (this node's entries unused). */
    uint8_t **sendp;
    size_t *sendlen;
    uint8_t **recvp;
    size_t *recvlen;        /**< exact bytes expected */
    coll_xfer_t *xs;        /**< 2n: receive from p at [p], send to p at [n + p] */
    coll_status_t poison;   /**< a node's failure: the remaining rounds carry no data */
    char poison_msg[256];
    uint8_t poison_buf[COLL_CX_PREFIX];
    void *state;            /**< the codec's own */
} coll_cx_t;

/** @return The index of the first non-finite element (NaN or infinity) of the @p n float32
 *          values at @p x, or @p n when there is none. */
uint64_t coll__cx_first_nonfinite(const float *x, uint64_t n);

/** @return Payload of message buffer @p buf (after the prefix). */
static inline uint8_t *coll__cx_payload(uint8_t *buf)
{
    return buf + COLL_CX_PREFIX;
}

/** @return @p n rounded up to 64 (message buffers start on cache lines). */
static inline size_t coll__cx_align(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

/** @return The implementation of @p method's parameter-service step (rounds.c, staged.c),
 *          or NULL when the method cannot run one (POWERSGD, AUTO, NONE). */
const coll_impl_t *coll__cx_staged_impl(coll_compress_method_t method);

/** @return The codec of @p method (FP16, BF16, TOPK, ONEBIT, POWERSGD), or NULL. */
const coll_cx_codec_t *coll__cx_codec(coll_compress_method_t method);

/** @return The implementation of @p method's compressed allreduce (rounds.c), or NULL. */
const coll_impl_t *coll__cx_impl(coll_compress_method_t method);

/** @return The 64 bits of @p c (proto/cspec.h), 0 for NONE. */
uint64_t coll__cspec_of(const coll_compression_t *c);

/** The codecs. */
extern const coll_cx_codec_t coll__cx_fp16, coll__cx_bf16, coll__cx_onebit, coll__cx_topk,
    coll__cx_powersgd;

/* ---- the parameter service's steps (staged.c) ------------------------------------------------ */

/** @brief The slot memory of a staged operation: the codec's, without a server residual, and
 *         the all-gather of this node's updated chunk (its offsets into cx->ag_*_off).
 *         @return The codec's sizes() status. */
coll_status_t coll__staged_sizes(coll_cx_t *cx, coll_slot_sizes_t *sz);

/** @brief Point round cx->round's messages: the codec's during the reduction, the float32
 *         all-gather's in the last round. */
void coll__staged_place(coll_cx_t *cx);

/**
 * @brief Every transfer of round cx->round of a staged operation completed: a reduction round
 *        goes to the codec; after the last of them this node's chunk of the reduced gradient
 *        (in op->in[0]) goes piece by piece to the stage's reduced(); after the all-gather
 *        every node's chunk of the parameters lands in local rank 0's output.
 * @return COLL_OK (the stage may have failed the job: op->done); the codec's errors;
 *         COLL_ERR_PROTOCOL for a malformed all-gather message.
 */
coll_status_t coll__staged_round_done(coll_cx_t *cx);

/** @brief The stage let the chunk go: distribute() on every piece, then the all-gather's
 *         message of the updated chunk (unless the stage failed the job). */
void coll__staged_distribute(coll_cx_t *cx);

/* ---- shared by the codecs (dense.c) ----------------------------------------------------------- */

/*
 * A float32 array of @p len elements allreduced without loss in two rounds: a reduce-scatter of
 * its coll_plan_init() chunks (node p sums chunk p) and an all-gather of the sums. The message
 * areas @p send and @p recv hold coll__dense_msg_bytes(len, n) bytes each.
 */

/** @brief Point the round's messages at @p send (chunk p to node p) and @p recv (this node's
 *         chunk from every node). */
void coll__dense_rs_place(coll_cx_t *cx, uint64_t len, uint8_t *send, uint8_t *recv);

/** @brief Write the reduce-scatter's messages of the array @p src into @p send. */
void coll__dense_rs_write(coll_cx_t *cx, const float *src, uint64_t len, uint8_t *send);

/**
 * @brief After the reduce-scatter: @p dst (this node's chunk) = every node's contribution in
 *        rank order, this node's from the array @p own; array positions below @p split times
 *        1, the others times @p weight.
 * @return COLL_OK; COLL_ERR_PROTOCOL for a malformed message; COLL_ERR_INVALID when a sum is
 *         not finite (it overflowed float32, or a contribution was not finite): the operation
 *         fails on every node, which hears it from this one in the next round.
 */
coll_status_t coll__dense_rs_reduce(coll_cx_t *cx, const float *own, uint64_t len,
                                    uint64_t split, float weight, float *dst);

/** @brief Point the all-gather's messages: this node's sums to every node from @p send, chunk p
 *         from node p into @p recv. */
void coll__dense_ag_place(coll_cx_t *cx, uint64_t len, uint8_t *send, uint8_t *recv);

/** @brief Write the all-gather's message of this node's chunk @p sums into @p send. */
void coll__dense_ag_write(coll_cx_t *cx, const float *sums, uint64_t len, uint8_t *send);

/** @brief After the all-gather: the whole array @p dst from every node's chunk (this node's
 *         from @p sums). @return COLL_OK; COLL_ERR_PROTOCOL for a malformed message. */
coll_status_t coll__dense_ag_collect(coll_cx_t *cx, const float *sums, uint64_t len, float *dst);

/** @return Bytes of the messages a dense reduce-scatter or all-gather of @p len elements sends
 *          or receives on @p n nodes (an upper bound, either direction). */
size_t coll__dense_msg_bytes(uint64_t len, uint32_t n);

#endif
