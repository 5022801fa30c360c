/**
 * @file collective_compress.h
 * @brief Gradient compression between nodes with error feedback (docs/compression.md): the
 *        methods, one operation's spec, its parsing and the communicator's default, and the
 *        registered tensor layouts PowerSGD needs. Included by collective.h, before
 *        collective_ops.h, whose operation parameters carry a spec.
 */
#ifndef COLLECTIVE_COMPRESS_H
#define COLLECTIVE_COMPRESS_H

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Gradient compression between nodes (docs/compression.md). The daemons reduce a bucket's local
 * ranks densely and exactly first; what goes between nodes is compressed, with error feedback:
 * what compression drops on a node is kept in that node's residual for the bucket and added to
 * the bucket's next operation. Compression applies to allreduce with COLL_SUM or COLL_AVG of
 * COLL_FLOAT32, COLL_FLOAT16 and COLL_BFLOAT16 on jobs of two or more nodes; any other
 * operation asking for it runs uncompressed (logged once per job and reason, counted in
 * collectived_compression_fallbacks_total). A job on one node is exact and never compresses.
 */
typedef enum {
    COLL_COMPRESS_NONE = 0,     /**< dense, exact */
    COLL_COMPRESS_FP16 = 1,     /**< float16 on the wire, a power-of-two scale per chunk, sums in
                                     float32 (kernels/cpu/cast.h) */
    COLL_COMPRESS_BF16 = 2,     /**< bfloat16 on the wire, as FP16 */
    COLL_COMPRESS_TOPK = 3,     /**< the k = max(1, ceil(ratio x count)) largest magnitudes as
                                     (index, value) pairs, all-gathered and summed (Stich et al.
                                     2018; Lin et al. 2018) */
    COLL_COMPRESS_ONEBIT = 4,   /**< signs and one scale ||x||_2 / sqrt(n) per chunk, worker and
                                     server error (Tang et al. 2021, 1-bit Adam) */
    COLL_COMPRESS_POWERSGD = 5, /**< rank-r factors of each matrix of the bucket (Vogels et al.
                                     2019); needs the bucket's shapes (coll_layout_register()) */
    COLL_COMPRESS_AUTO = 6,     /**< the daemons choose per bucket between none and the methods
                                     above from the measured link and compressor speed */
    COLL_COMPRESS_COUNT
} coll_compress_method_t;

/** Flags of ::coll_compression_t. */
enum {
    COLL_COMPRESS_NO_EF = 1u << 0, /**< no error feedback: what compression drops is lost */
};

/** Largest PowerSGD rank. */
#define COLL_COMPRESS_MAX_RANK 64
/** TopK ratios travel in millionths: 0.01 is exactly 10000 of them. */
#define COLL_COMPRESS_RATIO_UNITS 1000000

/**
 * How one operation's data travel between nodes. Every rank of the job must ask for the same
 * (method, ratio, rank, flags, warmup and bucket): a difference fails the operation on every
 * rank with COLL_ERR_MISMATCH, as a count does.
 */
typedef struct {
    coll_compress_method_t method;
    double ratio;      /**< TOPK: fraction of the elements sent, in (0, 1]; rounded to the
                            nearest 1e-6 (at least 1e-6) */
    unsigned rank;     /**< POWERSGD: the rank r, 1 .. COLL_COMPRESS_MAX_RANK */
    unsigned flags;    /**< COLL_COMPRESS_NO_EF */
    unsigned warmup;   /**< this many operations of the bucket run uncompressed first (PowerSGD's
                            start iteration, DGC's warm-up); counted per bucket from its first
                            operation and from every reset of its residual */
    uint32_t bucket;   /**< which residual: each node keeps one per (job, bucket), with
                            PowerSGD's warm-started Q; operations of one bucket must not be in
                            flight together (the second fails the job with COLL_ERR_INVALID).
                            The residual resets when the bucket's count, datatype, layout or
                            method changes (counted in collectived_compression_resets_total) */
} coll_compression_t;

/**
 * @brief Parse a compression spec: "none", "fp16", "bf16", "topk:RATIO", "onebit",
 *        "powersgd:RANK", "auto", each optionally followed by ",noef" and ",warmup=N", e.g.
 *        "topk:0.01", "powersgd:2,warmup=100", "topk:0.01,noef" (the syntax of
 *        COLL_COMPRESSION, coll-train --compression and the Python API).
 * @param [in]  text The spec.
 * @param [out] out  Filled on COLL_OK (bucket 0).
 * @return COLL_OK; COLL_ERR_INVALID for anything else (unknown method, a ratio outside (0, 1],
 *         a rank outside 1..COLL_COMPRESS_MAX_RANK, an option a method does not take), and for
 *         a NULL @p text or @p out (the message in coll_comm_last_error(NULL)). Thread-safe.
 */
COLL_API coll_status_t coll_compression_parse(const char *text, coll_compression_t *out);

/**
 * @brief Write @p c as coll_compression_parse() reads it (without the bucket), e.g.
 *        "topk:0.01,warmup=10", into @p buf (NUL-terminated, cut at @p len).
 * @return The length of the full text (as snprintf; @p buf may be NULL when @p len is 0);
 *         -1 for a NULL @p c, or a NULL @p buf with @p len above 0 (the message in
 *         coll_comm_last_error(NULL)). Thread-safe.
 */
COLL_API int coll_compression_format(const coll_compression_t *c, char *buf, size_t len);

/**
 * @brief Set the compression of every later operation of @p comm that does not ask for its own
 *        (coll_op_params_t.compression). The initial default comes from COLL_COMPRESSION (none
 *        when unset; coll_comm_create() fails with COLL_ERR_INVALID on a malformed value).
 * @return COLL_OK; COLL_ERR_INVALID for a method, ratio or rank out of range (nothing changes;
 *         coll_comm_last_error() names the function and @p c's fields), or a NULL @p comm or
 *         @p c. Local: the job goes on. Thread-safe.
 */
COLL_API coll_status_t coll_comm_set_compression(coll_comm_t *comm, const coll_compression_t *c);

/**
 * @brief The compression default of @p comm into @p out.
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p comm or @p out. Thread-safe.
 */
COLL_API coll_status_t coll_comm_compression(coll_comm_t *comm, coll_compression_t *out);

/** @return The name of @p method, e.g. "topk"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_compress_method_name(coll_compress_method_t method);

/** Most tensors in one registered layout. */
#define COLL_LAYOUT_MAX_TENSORS 4096

/**
 * @brief Tell the daemon the tensors a layout fingerprint stands for, as PowerSGD needs them:
 *        tensor t is a matrix of @p shapes[2t] rows and @p shapes[2t+1] columns (a tensor of
 *        shape (d0, d1, ...) is d0 x (d1 * ...), a vector (n) is n x 1, a scalar 1 x 1), laid
 *        out one after the other in the bucket. Operations that name @p layout
 *        (coll_op_params_t.layout) get their bucket split so. Register before the first
 *        operation that names it; registering the same layout again with the same shapes is a
 *        no-op. Blocks for one round trip to the daemon.
 * @param [in] layout   The fingerprint, non-zero.
 * @param [in] ntensors 1 .. COLL_LAYOUT_MAX_TENSORS.
 * @param [in] shapes   2 * ntensors sizes, each >= 1. Copied.
 * @return COLL_OK; COLL_ERR_INVALID for a zero layout, a count out of range, a zero size or a
 *         product that overflows, a layout already registered on this node with other shapes
 *         (the message says so), or a NULL @p comm or @p shapes; COLL_ERR_JOB when the job
 *         failed; COLL_ERR_CLOSED, COLL_ERR_TIMEDOUT (no answer within 30 s). An operation
 *         whose count is not the sum of its layout's sizes fails on every rank with
 *         COLL_ERR_INVALID. Thread-safe.
 */
COLL_API coll_status_t coll_layout_register(coll_comm_t *comm, uint64_t layout, size_t ntensors,
                                            const uint64_t *shapes);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_COMPRESS_H */
