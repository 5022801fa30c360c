/* One rank's shard of a tensor- and pipeline-parallel MLP (shard.h). */
#include "shard.h"

#include <cblas.h>
#include <stdio.h>
#include <string.h>

int shard_layout(const int *sizes, int n_layers, int pp, int stage, int tp, shard_layout_t *lay,
                 char *err, size_t errlen)
{
    memset(lay, 0, sizeof(*lay));
    lay->first = stage * n_layers / pp;
    lay->count = (stage + 1) * n_layers / pp - lay->first;
    lay->tp = tp;
    if (lay->count < 1) {
        snprintf(err, errlen, "pipeline stage %d of %d has no layer: the network has %d (give "
                 "more --hidden layers or a smaller --pp)", stage, pp, n_layers);
        return -1;
    }
    for (int i = 0; i < lay->count; i++) {
        int l = lay->first + i, whole = tp == 1 || (i % 2 == 0 && i + 1 == lay->count);
        lay->role[i] = whole ? SHARD_WHOLE : i % 2 == 0 ? SHARD_COLUMN : SHARD_ROW;
        lay->in[i] = lay->role[i] == SHARD_ROW ? sizes[l] / tp : sizes[l];
        lay->out[i] = lay->role[i] == SHARD_COLUMN ? sizes[l + 1] / tp : sizes[l + 1];
        lay->relu[i] = l < n_layers - 1;
        if (lay->role[i] == SHARD_COLUMN && sizes[l + 1] % tp != 0) {
            snprintf(err, errlen, "--tp %d does not divide the width %d of layer %d, which "
                     "stage %d splits", tp, sizes[l + 1], l, stage);
            return -1;
        }
        lay->pairs += lay->role[i] == SHARD_COLUMN;
    }
    return 0;
}

int shard_init(shard_t *s, const shard_layout_t *lay, const int *sizes, int n_layers,
               uint64_t seed, int tp_rank, coll_comm_t *tp_comm, int timeout_ms)
{
    int local[MLP_MAX_LAYERS + 1];

    memset(s, 0, sizeof(*s));
    s->lay = *lay;
    s->tp_rank = tp_rank;
    s->tp_comm = tp_comm;
    s->timeout_ms = timeout_ms;
    local[0] = lay->in[0];
    for (int k = 0; k < lay->count; k++) {
        local[k + 1] = lay->out[k];
    }
    if (mlp_create(local, lay->count, 0, seed, NULL, &s->mlp) != 0) {
        return -1;
    }
    for (int k = 0; k < lay->count; k++) {
        int l = lay->first + k, in = lay->in[k], out = lay->out[k];
        int row0 = lay->role[k] == SHARD_COLUMN ? tp_rank * out : 0;
        int col0 = lay->role[k] == SHARD_ROW ? tp_rank * in : 0;
        mlp_init_block(sizes, n_layers, seed, l, row0, out, col0, in, s->mlp->layers[k].w);
    }
    return 0;
}

void shard_fini(shard_t *s)
{
    mlp_destroy(s->mlp);
    s->mlp = NULL;
}

/* Sum @p n floats of @p buf over the tp group, in place. */
static int tp_allreduce(shard_t *s, float *buf, size_t n, long *counter)
{
    coll_request_t *r = NULL;
    coll_status_t st = coll_allreduce_async(s->tp_comm, buf, buf, n, COLL_FLOAT32, COLL_SUM,
                                            NULL, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, s->timeout_ms);
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "coll-train: tp allreduce of %zu floats: %s (%s): %s\n", n,
                coll_strerror(st), coll_err_name(st), coll_comm_last_error(s->tp_comm));
        return -1;
    }
    (*counter)++;
    return 0;
}

int shard_forward(shard_t *s, const float *x, int n, float *const *act)
{
    for (int k = 0; k < s->lay.count; k++) {
        const mlp_layer_t *L = &s->mlp->layers[k];
        const float *in = k > 0 ? act[k - 1] : x;

        /* act (n x out) = in (n x in) * W^T: the whole layer, the column's rows, or the row
         * layer's partial sum over its columns */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, L->out, L->in, 1.0f, in, L->in,
                    L->w, L->in, 0.0f, act[k], L->out);
        if (s->lay.role[k] == SHARD_ROW &&
            tp_allreduce(s, act[k], (size_t)n * (size_t)L->out, &s->allreduces_fwd) != 0) {
            return -1;
        }
        mlp_bias_act(act[k], L->b, n, L->out, s->lay.relu[k]);
    }
    return 0;
}

void shard_relu_mask(float *delta, const float *act, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        delta[i] = act[i] > 0.0f ? delta[i] : 0.0f;
    }
}

/* The gradient wrt layer k's input, into @p dst (n x in): delta_k W, summed over the tp group
 * for a column layer, masked by the ReLU of the layer below. */
static int input_grad(shard_t *s, int k, int n, float *const *act, const float *d, float *dst)
{
    const mlp_layer_t *L = &s->mlp->layers[k];

    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, L->in, L->out, 1.0f, d, L->out,
                L->w, L->in, 0.0f, dst, L->in);
    if (s->lay.role[k] == SHARD_COLUMN &&
        tp_allreduce(s, dst, (size_t)n * (size_t)L->in, &s->allreduces_bwd) != 0) {
        return -1;
    }
    if (k > 0 && s->lay.relu[k - 1]) {
        shard_relu_mask(dst, act[k - 1], (size_t)n * (size_t)L->in);
    }
    return 0;
}

int shard_backward(shard_t *s, const float *x, int n, float *const *act, float *const *delta,
                   float *grad_in, float *scratch, int accumulate, mlp_grad_ready_fn ready,
                   void *arg)
{
    for (int k = s->lay.count - 1; k >= 0; k--) {
        const mlp_layer_t *L = &s->mlp->layers[k];
        const float *in = k > 0 ? act[k - 1] : x;
        float *dst = k > 0 ? delta[k - 1] : grad_in;

        /* gW (out x in) (+)= delta^T (out x n) * in (n x in) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L->out, L->in, n, 1.0f, delta[k],
                    L->out, in, L->in, accumulate ? 1.0f : 0.0f, L->gw, L->in);
        mlp_column_sums(delta[k], n, L->out, L->gb, accumulate);
        if (dst == NULL && s->lay.role[k] == SHARD_COLUMN) {
            dst = scratch; /* nothing consumes it, but the pair's backward allreduce runs */
        }
        if (dst != NULL && input_grad(s, k, n, act, delta[k], dst) != 0) {
            return -1;
        }
        if (ready != NULL) {
            ready(arg, s->mlp, k);
        }
    }
    return 0;
}

/* Offset of layer @p l in the whole network's parameter layout. */
static size_t full_offset(const int *sizes, int l)
{
    size_t off = 0;
    for (int j = 0; j < l; j++) {
        off += (size_t)sizes[j + 1] * ((size_t)sizes[j] + 1);
    }
    return off;
}

void shard_place(const shard_layout_t *lay, int tp_rank, const int *sizes, const float *local,
                 float *full)
{
    for (int k = 0; k < lay->count; k++) {
        int l = lay->first + k, in = lay->in[k], out = lay->out[k], fin = sizes[l];
        int row0 = lay->role[k] == SHARD_COLUMN ? tp_rank * out : 0;
        int col0 = lay->role[k] == SHARD_ROW ? tp_rank * in : 0;
        float *w = full + full_offset(sizes, l), *b = w + (size_t)sizes[l + 1] * (size_t)fin;

        for (int o = 0; o < out; o++) {
            memcpy(w + (size_t)(row0 + o) * (size_t)fin + (size_t)col0,
                   local + (size_t)o * (size_t)in, (size_t)in * sizeof(float));
        }
        memcpy(b + row0, local + (size_t)out * (size_t)in, (size_t)out * sizeof(float));
        local += (size_t)out * ((size_t)in + 1);
    }
}
