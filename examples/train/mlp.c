/* Multilayer perceptron: forward, softmax cross-entropy, per-layer backward, SGD with momentum.
 * Matrix products go through CBLAS; everything else is plain loops the compiler vectorises. */
#include "mlp.h"

#include "rng.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 64-byte aligned, zeroed floats. */
static float *mlp_alloc(size_t n)
{
    size_t bytes = (n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes != 0 ? bytes : 64);

    if (p != NULL) {
        memset(p, 0, bytes);
    }
    return p;
}

size_t mlp_param_count(const int *sizes, int n_layers)
{
    size_t n = 0;

    if (n_layers < 1 || n_layers > MLP_MAX_LAYERS) {
        return 0;
    }
    for (int l = 0; l <= n_layers; l++) {
        if (sizes[l] < 1) {
            return 0;
        }
    }
    for (int l = 0; l < n_layers; l++) {
        n += (size_t)sizes[l + 1] * ((size_t)sizes[l] + 1);
    }
    return n;
}

/* Points each layer at its slice of the parameter and gradient buffers and allocates its
 * activation and delta buffers. */
static int mlp_bind_layers(mlp_t *mlp, const int *sizes)
{
    size_t off = 0;

    for (int l = 0; l < mlp->n_layers; l++) {
        mlp_layer_t *layer = &mlp->layers[l];
        size_t nw = (size_t)sizes[l + 1] * (size_t)sizes[l];

        layer->in = sizes[l];
        layer->out = sizes[l + 1];
        layer->w = mlp->params + off;
        layer->b = layer->w + nw;
        if (mlp->grads != NULL) {
            layer->gw = mlp->grads + off;
            layer->gb = layer->gw + nw;
        }
        off += nw + (size_t)layer->out;
        if (mlp->max_batch == 0) {
            continue; /* the caller keeps the activations (shard.c) */
        }
        layer->act = mlp_alloc((size_t)mlp->max_batch * (size_t)layer->out);
        layer->delta = mlp_alloc((size_t)mlp->max_batch * (size_t)layer->out);
        if (layer->act == NULL || layer->delta == NULL) {
            return -1;
        }
    }
    return 0;
}

/* He et al. for a layer followed by a ReLU, 1/sqrt(fan_in) for the output layer. */
static float mlp_init_bound(const int *sizes, int n_layers, int l)
{
    float fan_in = (float)sizes[l];
    return l < n_layers - 1 ? sqrtf(6.0f / fan_in) : 1.0f / sqrtf(fan_in);
}

static float mlp_init_draw(rng_t *rng, float bound)
{
    return (2.0f * rng_uniform(rng) - 1.0f) * bound;
}

static void mlp_init_params(mlp_t *mlp, uint64_t seed, const int *sizes)
{
    rng_t rng = {seed};

    for (int l = 0; l < mlp->n_layers; l++) {
        mlp_layer_t *layer = &mlp->layers[l];
        size_t nw = (size_t)layer->out * (size_t)layer->in;
        float bound = mlp_init_bound(sizes, mlp->n_layers, l);

        for (size_t i = 0; i < nw; i++) {
            layer->w[i] = mlp_init_draw(&rng, bound);
        }
        memset(layer->b, 0, (size_t)layer->out * sizeof(float));
    }
}

void mlp_init_block(const int *sizes, int n_layers, uint64_t seed, int layer, int row0,
                    int rows, int col0, int cols, float *w)
{
    rng_t rng = {seed};
    size_t in = (size_t)sizes[layer], skip = 0;
    float bound = mlp_init_bound(sizes, n_layers, layer);

    for (int l = 0; l < layer; l++) {
        skip += (size_t)sizes[l + 1] * (size_t)sizes[l];
    }
    while (skip-- > 0) {
        rng_next(&rng);
    }
    for (size_t i = 0; i < (size_t)sizes[layer + 1] * in; i++) {
        float v = mlp_init_draw(&rng, bound);
        long r = (long)(i / in) - row0, c = (long)(i % in) - col0;
        if (r >= 0 && r < rows && c >= 0 && c < cols) {
            w[(size_t)r * (size_t)cols + (size_t)c] = v;
        }
    }
}

int mlp_create(const int *sizes, int n_layers, int max_batch, uint64_t seed, float *grads,
               mlp_t **mlp_p)
{
    size_t n = mlp_param_count(sizes, n_layers);
    mlp_t *mlp;

    if (n == 0 || max_batch < 0) {
        fprintf(stderr, "coll-train: invalid network: %d layers, max batch %d\n", n_layers,
                max_batch);
        return -1;
    }
    mlp = calloc(1, sizeof(*mlp));
    if (mlp == NULL) {
        goto err_nomem;
    }
    mlp->n_layers = n_layers;
    mlp->max_batch = max_batch;
    mlp->n_params = n;
    mlp->grads = grads;
    mlp->params = mlp_alloc(n);
    mlp->velocity = mlp_alloc(n);
    if (mlp->params == NULL || mlp->velocity == NULL || mlp_bind_layers(mlp, sizes) != 0) {
        goto err_nomem;
    }
    mlp_init_params(mlp, seed, sizes);
    *mlp_p = mlp;
    return 0;

err_nomem:
    mlp_destroy(mlp);
    fprintf(stderr, "coll-train: out of memory for a network of %zu parameters\n", n);
    return -1;
}

void mlp_bind_grads(mlp_t *mlp, int layer, float *gw, float *gb)
{
    mlp->layers[layer].gw = gw;
    mlp->layers[layer].gb = gb;
}

void mlp_destroy(mlp_t *mlp)
{
    if (mlp == NULL) {
        return;
    }
    for (int l = 0; l < mlp->n_layers; l++) {
        free(mlp->layers[l].act);
        free(mlp->layers[l].delta);
    }
    free(mlp->params);
    free(mlp->velocity);
    free(mlp);
}

void mlp_bias_act(float *a, const float *b, int n, int out, int relu)
{
    for (int r = 0; r < n; r++) {
        float *row = a + (size_t)r * (size_t)out;
        for (int o = 0; o < out; o++) {
            float v = row[o] + b[o];
            row[o] = relu && v < 0.0f ? 0.0f : v;
        }
    }
}

void mlp_forward(mlp_t *mlp, const float *x, int n)
{
    const float *in = x;

    mlp->input = x;
    for (int l = 0; l < mlp->n_layers; l++) {
        mlp_layer_t *layer = &mlp->layers[l];
        /* act (n x out) = in (n x in) * W^T (in x out) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, layer->out, layer->in, 1.0f, in,
                    layer->in, layer->w, layer->in, 0.0f, layer->act, layer->out);
        mlp_bias_act(layer->act, layer->b, n, layer->out, l < mlp->n_layers - 1);
        in = layer->act;
    }
}

/* Softmax of one row in place; returns -log p[label]. */
static double mlp_softmax_row(float *z, int classes, int label)
{
    float max = z[0];
    double sum = 0.0;
    double loss;

    for (int c = 1; c < classes; c++) {
        max = z[c] > max ? z[c] : max;
    }
    for (int c = 0; c < classes; c++) {
        sum += exp((double)(z[c] - max));
    }
    loss = log(sum) - (double)(z[label] - max);
    for (int c = 0; c < classes; c++) {
        z[c] = (float)(exp((double)(z[c] - max)) / sum);
    }
    return loss;
}

float mlp_softmax_xent(float *z, float *delta, const uint8_t *labels, int n, int classes,
                       float scale)
{
    double total = 0.0;

    for (int r = 0; r < n; r++) {
        float *p = z + (size_t)r * (size_t)classes;
        float *d = delta + (size_t)r * (size_t)classes;

        total += mlp_softmax_row(p, classes, labels[r]);
        /* d(scale * sum of losses)/dz = (softmax - onehot) * scale */
        for (int c = 0; c < classes; c++) {
            d[c] = (p[c] - (c == labels[r] ? 1.0f : 0.0f)) * scale;
        }
    }
    return (float)(total / n);
}

float mlp_loss(mlp_t *mlp, const uint8_t *labels, int n)
{
    mlp_layer_t *last = &mlp->layers[mlp->n_layers - 1];

    return mlp_softmax_xent(last->act, last->delta, labels, n, last->out, 1.0f / (float)n);
}

void mlp_column_sums(const float *delta, int n, int out, float *gb, int accumulate)
{
    if (!accumulate) {
        memset(gb, 0, (size_t)out * sizeof(float));
    }
    for (int r = 0; r < n; r++) {
        const float *row = delta + (size_t)r * (size_t)out;
        for (int o = 0; o < out; o++) {
            gb[o] += row[o];
        }
    }
}

void mlp_backward_layer(mlp_t *mlp, int l, int n)
{
    mlp_layer_t *layer = &mlp->layers[l];
    const float *in = l > 0 ? mlp->layers[l - 1].act : mlp->input;

    /* gW (out x in) = delta^T (out x n) * in (n x in) */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, layer->out, layer->in, n, 1.0f,
                layer->delta, layer->out, in, layer->in, 0.0f, layer->gw, layer->in);
    mlp_column_sums(layer->delta, n, layer->out, layer->gb, 0);
    if (l == 0) {
        return;
    }
    mlp_layer_t *below = &mlp->layers[l - 1];
    size_t m = (size_t)n * (size_t)below->out;
    /* delta_below (n x in) = delta (n x out) * W (out x in), masked by the ReLU below */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, layer->in, layer->out, 1.0f,
                layer->delta, layer->out, layer->w, layer->in, 0.0f, below->delta, layer->in);
    for (size_t i = 0; i < m; i++) {
        below->delta[i] = below->act[i] > 0.0f ? below->delta[i] : 0.0f;
    }
}

void mlp_backward(mlp_t *mlp, int n, mlp_grad_ready_fn ready, void *arg)
{
    for (int l = mlp->n_layers - 1; l >= 0; l--) {
        mlp_backward_layer(mlp, l, n);
        if (ready != NULL) {
            ready(arg, mlp, l);
        }
    }
}

/* v = momentum * v + g; p = p - lr * v over n floats. */
static void mlp_sgd_span(float *restrict p, float *restrict v, const float *restrict g, size_t n,
                         float lr, float momentum)
{
    for (size_t i = 0; i < n; i++) {
        v[i] = momentum * v[i] + g[i];
        p[i] -= lr * v[i];
    }
}

void mlp_sgd_step(mlp_t *mlp, float lr, float momentum)
{
    for (int l = 0; l < mlp->n_layers; l++) {
        mlp_layer_t *layer = &mlp->layers[l];
        size_t off = (size_t)(layer->w - mlp->params);
        size_t nw = (size_t)layer->out * (size_t)layer->in;

        mlp_sgd_span(layer->w, mlp->velocity + off, layer->gw, nw, lr, momentum);
        mlp_sgd_span(layer->b, mlp->velocity + off + nw, layer->gb, (size_t)layer->out, lr,
                     momentum);
    }
}

int mlp_count_argmax(const float *logits, const uint8_t *labels, int n, int classes)
{
    int correct = 0;

    for (int r = 0; r < n; r++) {
        const float *z = logits + (size_t)r * (size_t)classes;
        int best = 0;
        for (int c = 1; c < classes; c++) {
            best = z[c] > z[best] ? c : best;
        }
        correct += best == labels[r];
    }
    return correct;
}

int mlp_count_correct(const mlp_t *mlp, const uint8_t *labels, int n)
{
    const mlp_layer_t *last = &mlp->layers[mlp->n_layers - 1];

    return mlp_count_argmax(last->act, labels, n, last->out);
}

int mlp_dump(const mlp_t *mlp, const char *path)
{
    FILE *f = fopen(path, "wb");
    unsigned char le[4];

    if (f == NULL) {
        fprintf(stderr, "coll-train: cannot create %s: %s\n", path, strerror(errno));
        return -1;
    }
    for (size_t i = 0; i < mlp->n_params; i++) {
        uint32_t bits;
        memcpy(&bits, &mlp->params[i], sizeof(bits));
        for (int b = 0; b < 4; b++) {
            le[b] = (unsigned char)(bits >> (8 * b));
        }
        fwrite(le, 1, sizeof(le), f);
    }
    if (ferror(f) != 0 || fclose(f) != 0) {
        fprintf(stderr, "coll-train: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

void mlp_layer_range(const mlp_t *mlp, int layer, size_t *offset, size_t *count)
{
    const mlp_layer_t *l = &mlp->layers[layer];

    *offset = (size_t)(l->w - mlp->params);
    *count = (size_t)l->out * ((size_t)l->in + 1);
}
