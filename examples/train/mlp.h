/**
 * @file mlp.h
 * @brief A multilayer perceptron (fully connected layers, ReLU between them, softmax
 *        cross-entropy loss) trained with SGD with momentum; matrix products through CBLAS.
 *
 * Parameter layout, shared by the parameters and the momentum buffers and used by
 * `coll-train --dump-weights`: for each layer l = 0 .. n_layers-1 in order, its weights W_l as a
 * row-major out_l x in_l matrix (W_l[o][i] connects input i to output o), then its bias b_l
 * (out_l floats). A layer computes z = x W_l^T + b_l for a batch x of rows. The gradients are
 * either one caller buffer in the same layout, or per-layer views that the caller binds with
 * mlp_bind_grads() (e.g. slices of a bucketer's buckets, which need not be contiguous).
 *
 * Backward runs layer by layer from the output layer down, and can report each layer whose
 * gradient is final, so that a caller can start reducing it while the layers below are computed.
 *
 * Not thread-safe: one thread uses an mlp_t at a time.
 */
#ifndef COLL_TRAIN_MLP_H
#define COLL_TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

/** Most layers an mlp_t supports. */
#define MLP_MAX_LAYERS 16

/** One fully connected layer; all pointers point into buffers of its mlp_t or of the caller. */
typedef struct mlp_layer {
    int in;       /**< input features */
    int out;      /**< output features */
    float *w;     /**< weights, out x in, row-major (inside the parameter buffer) */
    float *b;     /**< bias, out (follows w) */
    float *gw;    /**< gradient of the loss wrt w, same shape (owned by the caller) */
    float *gb;    /**< gradient of the loss wrt b (owned by the caller; need not follow gw) */
    float *act;   /**< output of the last forward: max_batch x out, after ReLU except last layer */
    float *delta; /**< gradient of the loss wrt the pre-activation: max_batch x out */
} mlp_layer_t;

/** The model; create with mlp_create(), free with mlp_destroy(). */
typedef struct mlp {
    int n_layers;                        /**< number of layers, >= 1 */
    int max_batch;                       /**< most rows one forward may take */
    size_t n_params;                     /**< floats in the parameter and gradient buffers */
    float *params;                       /**< all parameters in the layout above; owned */
    float *grads;                        /**< gradients in the same layout, owned by the caller;
                                              NULL when bound per layer (mlp_bind_grads()) */
    float *velocity;                     /**< momentum buffer, same layout; owned */
    const float *input;                  /**< batch of the last forward; owned by the caller */
    mlp_layer_t layers[MLP_MAX_LAYERS];  /**< layer 0 takes the input, the last gives logits */
} mlp_t;

/**
 * Called by mlp_backward() when the gradient of @p layer (weights and bias) is final.
 * Layers arrive in the order n_layers-1, ..., 0.
 */
typedef void (*mlp_grad_ready_fn)(void *arg, const mlp_t *mlp, int layer);

/**
 * @brief Number of parameters (floats) of a network.
 * @param [in] sizes     n_layers + 1 widths: input features, hidden widths, number of classes.
 * @param [in] n_layers  Number of layers, 1 .. MLP_MAX_LAYERS.
 * @return The count; 0 when an argument is invalid.
 */
size_t mlp_param_count(const int *sizes, int n_layers);

/**
 * @brief Create a network with deterministic initial weights: the same @p seed gives the same
 *        parameters on every machine. Weights are drawn uniformly from +-sqrt(6 / fan_in) (He
 *        et al. 2015) for layers followed by a ReLU and from +-1/sqrt(fan_in) for the output
 *        layer; biases start at 0. Momentum starts at 0.
 * @param [in]  sizes      n_layers + 1 widths, each >= 1.
 * @param [in]  n_layers   1 .. MLP_MAX_LAYERS.
 * @param [in]  max_batch  Most rows of one forward, >= 1 (sizes the activation buffers); 0 for
 *                         a network whose layers the caller runs with its own activation
 *                         buffers (act and delta stay NULL; mlp_forward() and mlp_backward()
 *                         must not be used), such as one rank's shard of a parallel model.
 * @param [in]  seed       Seed of the initialisation.
 * @param [in]  grads      mlp_param_count() floats for the gradients, e.g. in a communication
 *                         pool; owned by the caller and must outlive the network. NULL: the
 *                         caller binds every layer's gradients with mlp_bind_grads() before
 *                         the first backward.
 * @param [out] mlp_p      The network, set only on success.
 * @return 0 on success; -1 for invalid sizes or out of memory (printed to stderr).
 */
int mlp_create(const int *sizes, int n_layers, int max_batch, uint64_t seed, float *grads,
               mlp_t **mlp_p);

/**
 * @brief The initial weights of a sub-block of layer @p layer of the network of @p sizes and
 *        @p seed, as mlp_create() would draw them: rows @p row0 .. row0 + rows - 1, columns
 *        @p col0 .. col0 + cols - 1 of its out x in matrix, into @p w (rows x cols, row-major).
 *        Draws the whole sequence up to the layer without keeping it: one rank of a tensor- or
 *        pipeline-parallel run starts from the same weights as one process, never holding the
 *        whole network.
 */
void mlp_init_block(const int *sizes, int n_layers, uint64_t seed, int layer, int row0,
                    int rows, int col0, int cols, float *w);

/** @brief a[r][o] += b[o] for each of @p n rows of @p out, then max(a, 0) when @p relu. */
void mlp_bias_act(float *a, const float *b, int n, int out, int relu);

/** @brief gb[o] = sum over @p n rows of delta[r][o] (added to gb when @p accumulate). */
void mlp_column_sums(const float *delta, int n, int out, float *gb, int accumulate);

/**
 * @brief Softmax cross-entropy of @p n rows of logits @p z (@p classes each, turned into
 *        probabilities in place): @p delta = (softmax - onehot) * @p scale, the gradient of
 *        @p scale times the summed loss.
 * @return The mean over the rows of -log p(label), in nats.
 */
float mlp_softmax_xent(float *z, float *delta, const uint8_t *labels, int n, int classes,
                       float scale);

/** @return The rows of @p logits (@p n x @p classes) whose largest logit is the label. */
int mlp_count_argmax(const float *logits, const uint8_t *labels, int n, int classes);

/**
 * @brief Write the parameters to @p path as raw little-endian float32 in the layout above,
 *        whatever the host byte order (coll-train --dump-weights).
 * @return 0; -1 after printing the file and the error to stderr.
 */
int mlp_dump(const mlp_t *mlp, const char *path);

/**
 * @brief Point layer @p layer's gradients at caller buffers: @p gw (out x in floats) and @p gb
 *        (out floats). Backward writes them, mlp_sgd_step() reads them.
 */
void mlp_bind_grads(mlp_t *mlp, int layer, float *gw, float *gb);

/** @brief Free a network (not the caller's gradient buffers). Safe with NULL. */
void mlp_destroy(mlp_t *mlp);

/**
 * @brief Forward pass; the logits land in the last layer's act (n x classes).
 * @param [in] x  n x sizes[0] floats, row-major; must stay valid until mlp_backward().
 * @param [in] n  Rows, 1 .. max_batch.
 */
void mlp_forward(mlp_t *mlp, const float *x, int n);

/**
 * @brief Softmax cross-entropy of the last forward: turns the logits into probabilities and
 *        sets the output layer's delta to the gradient of the mean loss.
 * @param [in] labels  n class indices, each < the number of classes.
 * @param [in] n       The rows of the last forward.
 * @return The mean over the n rows of -log p(label), in nats.
 */
float mlp_loss(mlp_t *mlp, const uint8_t *labels, int n);

/**
 * @brief Gradient of one layer: writes its gw and gb, and the delta of the layer below when
 *        there is one. Needs the deltas of the layers above, so call it from the output layer
 *        down, after mlp_loss().
 * @param [in] layer  0 .. n_layers-1.
 * @param [in] n      The rows of the last forward.
 */
void mlp_backward_layer(mlp_t *mlp, int layer, int n);

/**
 * @brief Whole backward pass: mlp_backward_layer() for every layer, output layer first, calling
 *        @p ready (when not NULL) after each one.
 */
void mlp_backward(mlp_t *mlp, int n, mlp_grad_ready_fn ready, void *arg);

/**
 * @brief SGD with momentum (the PyTorch form): v = momentum * v + g; w = w - lr * v,
 *        with g each layer's gradients (gw, gb).
 * @param [in] lr        Learning rate, > 0.
 * @param [in] momentum  0 <= momentum < 1; 0 gives plain SGD.
 */
void mlp_sgd_step(mlp_t *mlp, float lr, float momentum);

/**
 * @brief Count the rows of the last forward whose largest logit is the label.
 * @param [in] labels  n labels.
 * @param [in] n       The rows of the last forward.
 * @return Rows classified correctly, 0 .. n.
 */
int mlp_count_correct(const mlp_t *mlp, const uint8_t *labels, int n);

/**
 * @brief Offset and length, in floats, of one layer's weights and bias in the parameter and
 *        gradient layout (weights first, then bias, contiguous).
 */
void mlp_layer_range(const mlp_t *mlp, int layer, size_t *offset, size_t *count);

#endif /* COLL_TRAIN_MLP_H */
