/**
 * @file collective_ps.h
 * @brief libcollective's parameter service: the daemons run the optimizer, each on its node's
 *        shard of the optimizer state (ZeRO-1; docs/parameter-service.md). Included by
 *        collective.h; not meant to be included alone.
 */
#ifndef COLLECTIVE_PS_H
#define COLLECTIVE_PS_H

#include <collective.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== The parameter service ===================================================================
 *
 * A job registers its parameters once (coll_ps_create()): one flat float32 buffer per rank in
 * the job's pool, cut into layers (a tensor each, e.g. "fc1.weight"), the layers grouped into
 * buckets (consecutive layers; one operation per bucket and step), and an optimizer with its
 * settings and learning-rate schedule. Each step every rank submits its gradients, bucket by
 * bucket; the daemons average them over the ranks with a reduce-scatter (the local ranks in one
 * pass, then the ring over the nodes), each daemon applies the optimizer to its node's chunk of
 * the bucket (its shard: the optimizer state of the other chunks lives on the other nodes), and
 * an all-gather writes the updated parameters into every rank's buffer. The bytes between nodes
 * per step are those of one allreduce of the gradients; LARS and LAMB add one small exchange of
 * per-layer sums of squares per bucket, so that a layer cut between two shards gets the norm of
 * the whole layer.
 *
 * The parameters the optimizer updates are read, at every step, from the buffer of each node's
 * first local rank: they are the float32 master weights. Every rank must hold the same values
 * (every step leaves them so; coll_ps_create() broadcasts rank 0's). The optimizer state
 * (momentum, moments) lives in the daemons, inside the job's pool, zero at registration.
 *
 * Errors of a step: a submission refused or a mismatch between ranks fails the job, as for every
 * collective; a gradient that is not finite (NaN, infinity) fails the job on every rank with
 * COLL_ERR_INVALID and a message naming the step, the bucket and the layer. A step that
 * reports COLL_OK has every parameter of its bucket updated on this rank; one that fails may
 * have left the bucket's parameters partly updated (and the gradient buffer overwritten): the
 * job is over then, resume it from a checkpoint (coll_ps_save()).
 *
 * Compression (coll_ps_params_t.compression; docs/parameter-service.md): compressed gradients
 * in, exact parameters out. With fp16, bf16 or onebit each step is round 0 of the compressed
 * allreduce of 1-bit Adam (Tang et al. 2021; DeepSpeed's compressed_allreduce): every node
 * sends each other node its chunk of (its local ranks' gradients + its residual) encoded, and
 * keeps the encoding error as the bucket's residual; the owner of a chunk sums the decoded
 * contributions exactly, in float32, and its optimizer updates the chunk from that average;
 * the updated parameters are all-gathered in float32. There is no server-side compression
 * (the gradient is not sent back). With topk every node sends its selected entries of the
 * whole bucket to every node and each owner takes its chunk of the sum. Bytes between nodes per
 * step: the compressed reduce-scatter (or the TopK sets) plus a float32 all-gather of the
 * parameters, about half of an uncompressed step's for 1-bit, three quarters for fp16. A job on
 * one node never compresses. The residuals are not in checkpoints (coll_ps_save()): a resumed
 * job starts them from zero.
 *
 * Threads: a service is used from one thread at a time, except that requests of
 * coll_ps_step_bucket_async() and coll_ps_step_bucket_params_async() may be waited on from any
 * thread.
 */

/** Opaque parameter service of a communicator. */
typedef struct coll_ps coll_ps_t;

/** Which optimizer the daemons run (the kernels of kernels/cpu/optim.h). */
typedef enum {
    COLL_PS_SGD = 0,   /**< torch.optim.SGD: momentum, dampening, Nesterov, L2 weight decay */
    COLL_PS_ADAMW = 1, /**< torch.optim.AdamW: decoupled weight decay, bias correction */
    COLL_PS_LARS = 2,  /**< LARS as the MLPerf reference (You et al. 2017) */
    COLL_PS_LAMB = 3,  /**< LAMB, the paper's Algorithm 2 (You et al. 2019), with options */
    COLL_PS_OPTIMIZER_COUNT
} coll_ps_optimizer_t;

/** LAMB's bias correction (kernels/cpu/optim.h coll_optim_lamb_bias_t). */
typedef enum {
    COLL_PS_LAMB_BIAS_PAPER = 0,    /**< m / (1 - beta1^t), v / (1 - beta2^t) inside r */
    COLL_PS_LAMB_BIAS_NONE = 1,     /**< none (apex and DeepSpeed bias_correction=False) */
    COLL_PS_LAMB_BIAS_STEPSIZE = 2, /**< DeepSpeed FusedLamb: outside the trust ratio */
} coll_ps_lamb_bias_t;

/**
 * An optimizer and its settings. coll_ps_optim_init() gives each kind the defaults of its
 * reference; a field a kind does not use is ignored. Global gradient-norm clipping applies to
 * every kind: with N the norm of all gradients of the step (every bucket) and
 * q = (N + clip_eps) / clip_grad_norm, every gradient is multiplied by (float)(1 / q) when
 * q > 1, before the update (apex FusedLAMB's pre-normalization with clip_eps 0, DeepSpeed's with
 * 1e-6; torch.nn.utils.clip_grad_norm_ up to its 1e-6). Clipping makes every bucket of a step
 * wait until all buckets of the step are reduced.
 */
typedef struct {
    coll_ps_optimizer_t kind;
    double momentum;         /**< SGD, LARS: >= 0 (LARS: <= 1) */
    double dampening;        /**< SGD */
    double weight_decay;     /**< >= 0: SGD's L2, AdamW's and LAMB's decoupled decay, LARS's */
    int nesterov;            /**< SGD, LARS */
    double beta1, beta2;     /**< AdamW, LAMB: in [0, 1) */
    double eps;              /**< AdamW, LARS, LAMB: >= 0 */
    double eta;              /**< LARS: the trust coefficient, > 0 */
    coll_ps_lamb_bias_t lamb_bias; /**< LAMB */
    int eps_inside_sqrt;     /**< LAMB: sqrt(v_hat + eps) (DeepSpeed) instead of sqrt(v_hat) + eps */
    double trust_min, trust_max; /**< LAMB: clamp of the trust ratio (0, INFINITY: none) */
    double phi_min, phi_max; /**< LAMB: clamp of ||w|| (0, INFINITY: none) */
    int grad_averaging;      /**< LAMB: (1 - beta1) g in m (default 1) */
    int l2;                  /**< LAMB: weight decay as L2 on g (apex adam_w_mode=False) */
    double clip_grad_norm;   /**< > 0: global gradient-norm clipping (see above); 0: off */
    double clip_eps;         /**< added to the global norm before comparing; >= 0 */
} coll_ps_optim_t;

/**
 * @brief The defaults of @p kind, those of its reference: SGD momentum 0 (PyTorch's: plain
 *        SGD), AdamW betas (0.9, 0.999), eps 1e-8, weight decay 0.01; LARS momentum 0.9,
 *        weight decay 1e-4, eta 1e-3, eps 1e-7; LAMB betas (0.9, 0.999), eps 1e-6, weight decay
 *        0.01, bias PAPER, no clamps, grad_averaging 1; no clipping.
 * @param [out] o Every field set; with @p o NULL nothing is done (the message in
 *                 coll_comm_last_error(NULL)). Thread-safe.
 */
COLL_API void coll_ps_optim_init(coll_ps_optimizer_t kind, coll_ps_optim_t *o);

/**
 * @brief The default base learning rate of @p kind, for a global batch of 256 (coll-train's
 *        demo), each from a published value, square-root scaled to that batch where it was
 *        published for another (the rule You et al. 2020 use for LAMB):
 *        SGD 0.05, coll-train's own (half Goyal et al. 2017's 0.1 per 256 samples;
 *        torch.optim.SGD has no default);
 *        AdamW 1e-3, torch.optim.AdamW's default, Adam's (Kingma & Ba 2015) as Loshchilov &
 *        Hutter 2019 use it;
 *        LARS 1.77: the MLPerf reference's base lr 10 (mlcommons/training
 *        image_classification/tensorflow2/lars_util.py, batches below 16384), at batch 8192
 *        as docs/large-batch.md runs it, times sqrt(256 / 8192);
 *        LAMB 0.014: cybertronai/pytorch-lamb's MNIST example, lr 0.02 at batch 512 (the
 *        PyTorch reference most ports cite), times sqrt(256 / 512).
 *        A run at another batch, or of another model, tunes its own.
 * @return The rate; 0 for a kind out of range. Thread-safe.
 */
COLL_API double coll_ps_optim_default_lr(coll_ps_optimizer_t kind);

/** @return "sgd", "adamw", "lars", "lamb"; "unknown" when out of range. Thread-safe. */
COLL_API const char *coll_ps_optimizer_name(coll_ps_optimizer_t kind);

/**
 * @brief Parse an optimizer name ("sgd", "adamw", "lars", "lamb").
 * @return COLL_OK; COLL_ERR_INVALID for anything else, and for a NULL @p name or @p kind (the
 *         message in coll_comm_last_error(NULL)). Thread-safe.
 */
COLL_API coll_status_t coll_ps_optimizer_parse(const char *name, coll_ps_optimizer_t *kind);

/** What follows the warmup (common/schedule.h). */
typedef enum {
    COLL_PS_DECAY_CONSTANT = 0,
    COLL_PS_DECAY_STEP = 1,   /**< times gamma at each milestone */
    COLL_PS_DECAY_COSINE = 2, /**< half a cosine from the peak to final_lr at total_steps */
} coll_ps_decay_t;

/** Most milestones of a step decay. */
#define COLL_PS_MAX_MILESTONES 16

/**
 * The learning rate of each step, the closed forms of common/schedule.h (Goyal et al. 2017):
 * peak = base_lr * global_batch / base_batch when both batches are non-zero (the linear scaling
 * rule), else base_lr; a linear warmup over warmup_steps from warmup_start_lr (negative: from
 * base_lr, as Goyal et al.) to the peak; then constant, step or cosine decay. Step t of the
 * service (1, 2, ...) uses the schedule's lr of t - 1.
 */
typedef struct {
    double base_lr;          /**< >= 0 */
    uint64_t base_batch;     /**< 0: no scaling */
    uint64_t global_batch;   /**< 0: no scaling */
    uint64_t warmup_steps;   /**< 0: none */
    double warmup_start_lr;  /**< < 0: base_lr */
    coll_ps_decay_t decay;
    uint64_t milestones[COLL_PS_MAX_MILESTONES]; /**< STEP: increasing, >= warmup_steps */
    unsigned num_milestones;
    double gamma;            /**< STEP: > 0 */
    uint64_t total_steps;    /**< COSINE: > warmup_steps */
    double final_lr;         /**< COSINE: >= 0 */
} coll_ps_schedule_t;

/** @brief A constant learning rate @p lr: no scaling, no warmup, no decay; with @p s NULL
 *         nothing is done (the message in coll_comm_last_error(NULL)). Thread-safe. */
COLL_API void coll_ps_schedule_constant(double lr, coll_ps_schedule_t *s);

/** Layer flags. */
enum {
    COLL_PS_NO_WEIGHT_DECAY = 1u << 0, /**< no weight decay (biases, normalization layers) */
    COLL_PS_NO_TRUST = 1u << 1,        /**< LARS, LAMB: no trust ratio (trust = 1) */
    /** The MLPerf LARS skip list and tensorflow/addons LAMB exclusions: neither. */
    COLL_PS_EXCLUDE = COLL_PS_NO_WEIGHT_DECAY | COLL_PS_NO_TRUST,
};

/** One layer (tensor) of the flat parameter buffer; layers follow each other without gaps. */
typedef struct {
    size_t count;   /**< elements, >= 1 */
    unsigned flags; /**< COLL_PS_NO_WEIGHT_DECAY, COLL_PS_NO_TRUST */
    size_t bucket;  /**< its bucket: 0 for the first layer, then the same or one more */
} coll_ps_layer_t;

/** Most layers of a service, and most buckets. */
#define COLL_PS_MAX_LAYERS (1u << 20)
#define COLL_PS_MAX_BUCKETS 4096u

/** Fields of ::coll_ps_params_t that are set. */
enum {
    COLL_PS_PARAM_KEY_SPACE = 1u << 0,   /**< key_space */
    COLL_PS_PARAM_COMPRESSION = 1u << 1, /**< compression */
};

/** Parameters of coll_ps_create(). */
typedef struct {
    uint64_t field_mask;
    float *params;                 /**< the rank's parameters: sum of the layers' counts
                                        elements in the pool (coll_mem_alloc()) or in a device
                                        pool (coll_mem_alloc_on(): the daemons stage each step,
                                        docs/gpu.md), 64-byte aligned; the library's until
                                        coll_ps_destroy() */
    const coll_ps_layer_t *layers; /**< in buffer order; copied */
    size_t num_layers;             /**< 1 .. COLL_PS_MAX_LAYERS */
    coll_ps_optim_t optim;
    coll_ps_schedule_t schedule;
    unsigned key_space;            /**< 0 .. COLL_BUCKETER_KEY_SPACES-1 (default 7): keys of
                                        its operations, apart from the bucketers' */
    coll_compression_t compression; /**< how every step's gradients travel between nodes
                                        (see above): NONE (the default: exact), FP16, BF16,
                                        ONEBIT or TOPK, with their ratio, COLL_COMPRESS_NO_EF
                                        and warmup (coll_compression_parse() reads the text
                                        form); its bucket is ignored: bucket k of the service
                                        keeps its own residual, compression bucket
                                        (key_space << 16 | k) as a bucketer's. The
                                        communicator's default (COLL_COMPRESSION) does not
                                        apply to the service. */
} coll_ps_params_t;

/**
 * @brief Register the parameters and the optimizer with the daemons; collective over the job.
 *        Broadcasts rank 0's parameters to every rank first, then registers (every rank must
 *        pass the same layers, optimizer and schedule: a difference fails the job with
 *        COLL_ERR_MISMATCH on every rank). The daemons allocate their shard of the optimizer
 *        state in the job's pool. One service per job.
 * @param [out] ps_p The service; free it with coll_ps_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p comm (nothing else happens); for bad
 *         parameters (a NULL @p params or @p ps_p, no layers, a count of 0, buckets
 *         out of order, settings the optimizer refuses, a bad schedule, an invalid compression
 *         spec; the message names it) or a job that has a service already;
 *         COLL_ERR_UNSUPPORTED for compression with POWERSGD (the service has no matrix shapes)
 *         or AUTO; ranks that ask for different compression register, and their first step
 *         fails with COLL_ERR_MISMATCH on every rank; COLL_ERR_NOT_IN_POOL for a buffer outside the
 *         rank's allocations; COLL_ERR_POOL_FULL when a node's pool cannot hold its shard of
 *         the state (the message gives the bytes); COLL_ERR_MISMATCH; the errors of a
 *         collective (COLL_ERR_JOB, COLL_ERR_PEER, COLL_ERR_CLOSED, COLL_ERR_TIMEDOUT);
 *         COLL_ERR_NOMEM.
 */
COLL_API coll_status_t coll_ps_create(coll_comm_t *comm, const coll_ps_params_t *params,
                                      coll_ps_t **ps_p);

/** @brief Free the client side of a service (the daemons keep its state until the job ends).
 *         Safe with NULL. */
COLL_API void coll_ps_destroy(coll_ps_t *ps);

/** @return Buckets of the service; 0 for a NULL @p ps. */
COLL_API size_t coll_ps_num_buckets(const coll_ps_t *ps);

/**
 * @brief Elements and first element of bucket @p bucket in the flat buffer.
 * @return COLL_OK; COLL_ERR_INVALID for an unknown bucket, or a NULL @p ps, @p offset or
 *         @p count (the message, naming the function and the bucket or argument, in
 *         coll_comm_last_error() of the service's communicator; of NULL for a NULL @p ps).
 */
COLL_API coll_status_t coll_ps_bucket_range(const coll_ps_t *ps, size_t bucket, size_t *offset,
                                            size_t *count);

/** @return Steps done: the next step is this + 1; 0 for a NULL @p ps. */
COLL_API uint64_t coll_ps_steps(const coll_ps_t *ps);

/**
 * @brief Submit bucket @p bucket of the next step: @p grad holds its gradients (the bucket's
 *        count elements, float32, in the pool of the parameters, host or device, not
 *        overlapping them); when the request completes with COLL_OK the bucket's parameters
 *        are updated in the buffer of coll_ps_create(). Every bucket of a step must be
 *        submitted before the next step's (the step counts once every bucket was submitted);
 *        buckets of one step may go in any order and overlap each other. Wait for a bucket's
 *        step before submitting its next (with one bucket, a second submission is the next
 *        step): on one node the two run one after the other, but between nodes the daemons
 *        refuse the second while the first is in flight, and both requests fail with
 *        COLL_ERR_INVALID, as does the job. @p grad is the
 *        library's until completion, and holds undefined values afterwards.
 * @return COLL_INPROGRESS and a request (wait, free); COLL_ERR_INVALID for an unknown bucket,
 *         one submitted twice in a step, gradients and parameters in different pools or
 *         overlapping, or a NULL @p grad or @p req_p (each of these fails the job), or a NULL
 *         @p ps;
 *         COLL_ERR_NOT_IN_POOL for buffers in no pool; the errors of coll_allreduce_async().
 *         Every refusal but a NULL @p ps fails the job (the other ranks would wait for this
 *         bucket). The request completes with COLL_OK or the errors of a collective, and
 *         COLL_ERR_INVALID for a non-finite gradient (see above).
 */
COLL_API coll_status_t coll_ps_step_bucket_async(coll_ps_t *ps, size_t bucket,
                                                 const float *grad, coll_request_t **req_p);

/**
 * @brief coll_ps_step_bucket_async() with per-operation parameters, of which a step takes only
 *        a CUDA stream (COLL_OP_PARAM_STREAM; ::coll_op_params_t): with device buffers, the
 *        step reads @p grad and the parameters (those of the node's first local rank, the
 *        master weights) only once the work queued on @p params->stream before the call is
 *        done (e.g. the backward that wrote the gradients), without blocking this thread; and
 *        coll_req_stream_wait() on its request makes the work queued on a stream from then on
 *        (e.g. the next forward) wait until the updated parameters are back in this rank's
 *        device buffer. docs/gpu.md, "Streams". The stream's word pair and its limits are a
 *        collective's: a stream that never gets there holds the step until the job's timeout.
 *        @p params NULL, or without the stream's bit: as coll_ps_step_bucket_async() (whose
 *        requests on device buffers can be waited on by a stream too).
 * @param [in] params Read during the call only; NULL: none.
 * @return As coll_ps_step_bucket_async(), and (each failing the job, as every refused step):
 *         COLL_ERR_INVALID for another field of @p params set (a step's key, algorithm, layout
 *         and compression are the service's: the message gives the mask), and for a stream with
 *         gradients and parameters in the host pool; COLL_ERR_BUSY for a stream with 1024
 *         requests with a stream in flight; COLL_ERR_UNSUPPORTED for a stream where the device
 *         layer could not register the stream words (the message gives the driver's reason);
 *         the device layer's error for a stream on which it cannot queue the ready word's write.
 *         The request completes as coll_ps_step_bucket_async()'s.
 */
COLL_API coll_status_t coll_ps_step_bucket_params_async(coll_ps_t *ps, size_t bucket,
                                                        const float *grad,
                                                        const coll_op_params_t *params,
                                                        coll_request_t **req_p);

/**
 * @brief One whole step: every bucket of @p grads (the flat layout, in the pool) submitted at
 *        once, then waited for.
 * @return COLL_OK; the first error of a bucket (after waiting for the others);
 *         COLL_ERR_INVALID for a NULL @p ps, or a NULL @p grads (which fails the job).
 */
COLL_API coll_status_t coll_ps_step(coll_ps_t *ps, const float *grads);

/**
 * @brief This node's shard of the optimizer state as a checkpoint image (proto/ps_records.h: header,
 *        the layout of its chunks, then the state), between steps; collective over the job
 *        (every rank calls it; every rank of a node gets the same image).
 * @param [out] image_p malloc()ed image; the caller frees it with free().
 * @param [out] bytes_p Its size.
 * @return COLL_OK; COLL_ERR_INVALID with a bucket of the step still in flight, for a NULL
 *         @p ps, and for a NULL @p image_p or @p bytes_p (which fails the job); the errors of a
 *         collective; COLL_ERR_NOMEM.
 */
COLL_API coll_status_t coll_ps_save(coll_ps_t *ps, void **image_p, size_t *bytes_p);

/**
 * @brief Restore the optimizer state and the step from checkpoint images; collective over the
 *        job, between steps. With the same number of nodes, the image of this node is enough
 *        (others may be passed too); with another number, pass every node's image of the
 *        checkpoint: each node takes its new shard out of them (re-sharding).
 * @param [in] images  @p n images of coll_ps_save(); read only during the call.
 * @param [in] bytes   Their sizes.
 * @return COLL_OK; COLL_ERR_INVALID for an image that is not one (the message says which
 *         field), of another registration (layers, buckets or optimizer differ), two images of
 *         one node, images of different steps, missing images (the message names the nodes
 *         whose shards are needed), or a NULL @p images, @p bytes or image (each of these fails
 *         the job), and for a NULL @p ps; COLL_ERR_POOL_FULL; the errors of a collective.
 */
COLL_API coll_status_t coll_ps_load(coll_ps_t *ps, const void *const *images,
                                    const size_t *bytes, size_t n);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_PS_H */
