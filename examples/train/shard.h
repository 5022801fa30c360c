/**
 * @file shard.h
 * @brief One rank's part of a tensor- and pipeline-parallel MLP: the layers of its pipeline
 *        stage, split over its tensor-parallel group in Megatron-LM's pairing (Shoeybi et al.
 *        2019, Sec 3; megatron/core/tensor_parallel/layers.py).
 *
 * Stage k of pp holds the layers k L / pp .. (k + 1) L / pp - 1 (the same split as coll-plan,
 * tools/plan/model.py). Inside a stage, consecutive layers pair up: a column-parallel layer (tp
 * rank r keeps rows r out/tp .. of the weights and the bias: out/tp outputs, ReLU applied to its
 * slice) then a row-parallel layer (columns r in/tp .. of the weights, that is the inputs the
 * column layer computed here; the bias whole). A pair does exactly one allreduce (SUM, in the
 * tp group) forward, of the row layer's partial outputs before its bias, and one backward, of
 * the column layer's partial input gradients (Megatron's f operator, which allreduces that
 * gradient whatever consumes it; coll-plan counts it too). A layer left without a partner at
 * the end of a stage, and every layer when tp is 1, runs whole on every tp rank.
 *
 * The shard is an mlp_t (mlp.h) of the local shapes, created without activation buffers: the
 * caller gives every forward and backward its buffers (in the job's pool, where the tp
 * allreduces need them). Its weights start as the rows or columns of the whole network's
 * initial weights (mlp_init_block()), so that it trains as one process would. Not thread-safe.
 */
#ifndef COLL_TRAIN_SHARD_H
#define COLL_TRAIN_SHARD_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

#include "mlp.h"

/** How a layer is split over the tp group. */
typedef enum { SHARD_WHOLE, SHARD_COLUMN, SHARD_ROW } shard_role_t;

/** The layers of one stage and their local shapes: a pure function of the network and the
 *  layout (shard_layout()). */
typedef struct {
    int first;                    /**< first layer of the network on this stage */
    int count;                    /**< layers on this stage, >= 1 */
    int tp;                       /**< tensor-parallel size */
    shard_role_t role[MLP_MAX_LAYERS];
    int in[MLP_MAX_LAYERS];       /**< local input width of each layer */
    int out[MLP_MAX_LAYERS];      /**< local output width (the column layer's slice) */
    int relu[MLP_MAX_LAYERS];     /**< a ReLU follows (every layer but the network's last) */
    int pairs;                    /**< column/row pairs: allreduces per micro-batch each way */
} shard_layout_t;

/** One rank's shard. */
typedef struct {
    shard_layout_t lay;
    int tp_rank;
    mlp_t *mlp;            /**< local layers; gradients bound by the caller (dist_grads) */
    coll_comm_t *tp_comm;  /**< the tp group (NULL when tp is 1) */
    int timeout_ms;        /**< bound of each tp allreduce */
    long allreduces_fwd;   /**< tp allreduces done, forward and backward (for the report) */
    long allreduces_bwd;
} shard_t;

/**
 * @brief The layers of stage @p stage of @p pp for a network of @p sizes (n_layers + 1
 *        widths) under tensor parallelism @p tp.
 * @return 0; -1 with the reason in @p err (a stage without a layer, a split width that @p tp
 *         does not divide).
 */
int shard_layout(const int *sizes, int n_layers, int pp, int stage, int tp, shard_layout_t *lay,
                 char *err, size_t errlen);

/**
 * @brief Create the shard of tp rank @p tp_rank for @p lay, weights from the network of
 *        @p sizes and @p seed.
 * @return 0; -1 after printing the error (out of memory).
 */
int shard_init(shard_t *s, const shard_layout_t *lay, const int *sizes, int n_layers,
               uint64_t seed, int tp_rank, coll_comm_t *tp_comm, int timeout_ms);

/** @brief Free the shard's network. Safe on a zeroed shard. */
void shard_fini(shard_t *s);

/**
 * @brief Forward of @p n rows @p x (n x the stage's input width) into @p act[k] (n x local out
 *        of layer k, in the pool), with the row layers' tp allreduces.
 * @return 0; -1 after printing the error of a failed allreduce.
 */
int shard_forward(shard_t *s, const float *x, int n, float *const *act);

/**
 * @brief Backward of @p n rows: @p delta[count-1] holds the gradient of the loss wrt the last
 *        layer's pre-activation; writes the other deltas (pool buffers, n x local out each) and,
 *        when @p grad_in is not NULL, the gradient wrt the stage's input (n x input width, in
 *        the pool; the first layer's column allreduce lands there, else in @p scratch, n x the
 *        input width). Gradients are written (@p accumulate 0) or added to (1); @p ready is
 *        called for each layer when @p ready is not NULL (the last micro-batch), last layer
 *        first.
 * @return 0; -1 after printing the error of a failed allreduce.
 */
int shard_backward(shard_t *s, const float *x, int n, float *const *act, float *const *delta,
                   float *grad_in, float *scratch, int accumulate, mlp_grad_ready_fn ready,
                   void *arg);

/** @brief delta[i] = 0 where act[i] <= 0 (the ReLU after a stage's last layer, applied by the
 *         stage that receives the gradient wrt its output), over @p count values. */
void shard_relu_mask(float *delta, const float *act, size_t count);

/**
 * @brief Place the local parameters @p local (the shard's parameter layout, lay's shapes) of
 *        tp rank @p tp_rank into @p full (the whole network's layout of mlp.h).
 */
void shard_place(const shard_layout_t *lay, int tp_rank, const int *sizes, const float *local,
                 float *full);

#endif /* COLL_TRAIN_SHARD_H */
