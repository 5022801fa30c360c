/* The 3D-parallel trainer's data, reductions, reports and dump (train3d_io.h). */
#include "train3d_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dim_names[COLL_DIM_COUNT] = {"tp", "pp", "dp"};

int t3_load_data(t3_t *t)
{
    const char *dir = t->opts->data_dir;

    if (mnist_load(dir, "train", &t->train) != 0 || mnist_load(dir, "t10k", &t->test) != 0) {
        return -1;
    }
    if (mnist_image_size(&t->test) != mnist_image_size(&t->train) ||
        t->train.count > UINT32_MAX) {
        fprintf(stderr, "coll-train: %s: test and training images differ in size, or there "
                "are more than 2^32 of them\n", dir);
        return -1;
    }
    t->mean = t->opts->normalize ? MNIST_FASHION_MEAN : 0.0f;
    t->std = t->opts->normalize ? MNIST_FASHION_STD : 1.0f;
    return 0;
}

static int first_stage(const t3_t *t)
{
    return t->coords[COLL_DIM_PP] == 0;
}

static int last_stage(const t3_t *t)
{
    return t->coords[COLL_DIM_PP] == t->dims[COLL_DIM_PP] - 1;
}

/* One rank per replica speaks for the last stage's results (its tp ranks hold the same). */
static int speaks_for_replica(const t3_t *t)
{
    return last_stage(t) && t->coords[COLL_DIM_TP] == 0;
}

int t3_io_init(t3_t *t)
{
    size_t in = mnist_image_size(&t->train);

    t->order = malloc(t->train.count * sizeof(uint32_t));
    t->labels = malloc((size_t)t->rows);
    t->x_eval = first_stage(t) ? malloc((size_t)t->rows * in * sizeof(float)) : NULL;
    t->stats = dist_alloc(&t->world, 4 + 4 * (size_t)t->dims[COLL_DIM_PP]);
    if (t->order == NULL || t->labels == NULL || (first_stage(t) && t->x_eval == NULL) ||
        t->stats == NULL) {
        fprintf(stderr, "coll-train: out of memory for the batch buffers\n");
        return 1;
    }
    return 0;
}

void t3_io_fini(t3_t *t)
{
    free(t->order);
    free(t->labels);
    free(t->x_eval);
    dist_free(&t->world, t->stats);
}

void t3_input(void *arg, int m, float *x)
{
    t3_t *t = arg;
    mnist_gather(&t->train, t->batch + (size_t)m * (size_t)t->rows, 0, (size_t)t->rows, t->mean,
                 t->std, x, t->labels);
}

float t3_loss(void *arg, int m, float *logits, float *delta)
{
    t3_t *t = arg;
    const uint32_t *mine = t->batch + (size_t)m * (size_t)t->rows;

    for (int i = 0; i < t->rows; i++) {
        t->labels[i] = t->train.labels[mine[i]];
    }
    return mlp_softmax_xent(logits, delta, t->labels, t->rows, MNIST_CLASSES,
                            1.0f / (float)(t->rows * t->micro));
}

int t3_epoch_loss(t3_t *t, long steps, double *loss)
{
    double mine = steps > 0 ? t->pipe.loss_sum / ((double)t->micro * (double)steps) : 0.0;

    t->stats[0] = speaks_for_replica(t) ? (float)mine : 0.0f;
    if (dist_allreduce(&t->world, t->stats, 1, COLL_SUM) != 0) {
        return -1;
    }
    *loss = (double)t->stats[0] / t->dims[COLL_DIM_DP];
    return 0;
}

int t3_evaluate(t3_t *t, double *accuracy)
{
    size_t n = t->test.count, dp = (size_t)t->dims[COLL_DIM_DP];
    size_t begin = n * (size_t)t->coords[COLL_DIM_DP] / dp;
    size_t end = n * ((size_t)t->coords[COLL_DIM_DP] + 1) / dp;
    long correct = 0;

    for (size_t i = begin; i < end; i += (size_t)t->rows) {
        int k = end - i < (size_t)t->rows ? (int)(end - i) : t->rows;
        float *logits = NULL;
        if (first_stage(t)) {
            mnist_gather(&t->test, NULL, i, (size_t)k, t->mean, t->std, t->x_eval, t->labels);
        }
        if (pipe_infer(&t->pipe, k, t->x_eval, &logits) != 0) {
            return -1;
        }
        if (last_stage(t)) {
            correct += mlp_count_argmax(logits, t->test.labels + i, k, MNIST_CLASSES);
        }
    }
    t->stats[0] = speaks_for_replica(t) ? (float)correct : 0.0f;
    t->stats[1] = speaks_for_replica(t) ? (float)(end - begin) : 0.0f;
    if (dist_allreduce(&t->world, t->stats, 2, COLL_SUM) != 0) {
        return -1;
    }
    *accuracy = t->stats[1] > 0.0f ? (double)t->stats[0] / (double)t->stats[1] : 0.0;
    return 0;
}

void t3_describe(const t3_t *t)
{
    if (t->world.rank != 0) {
        return;
    }
    printf("layout: tp=%d pp=%d dp=%d micro_batches=%d micro_batch=%d order=%s groups:",
           t->dims[COLL_DIM_TP], t->dims[COLL_DIM_PP], t->dims[COLL_DIM_DP], t->micro, t->rows,
           t->opts->order != NULL ? t->opts->order : "tp-dp-pp");
    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        printf(" %s=%s", dim_names[d], t->groups.comm[d] == NULL || t->groups.intra_node[d]
                                           ? "intra-node" : "inter-node");
    }
    printf("\n");
}

static double per_step(const t3_t *t, double total)
{
    return t->acc.measured > 0 ? total / (double)t->acc.measured : 0.0;
}

void t3_report_epoch(const t3_t *t, int epoch, long steps, double loss, double accuracy)
{
    double step_s = per_step(t, t->acc.step_s);

    if (t->world.rank != 0) {
        return;
    }
    printf("epoch %d/%d loss=%.4f steps=%ld samples/s=%.0f step_ms=%.2f busy_ms=%.2f "
           "idle_ms=%.2f dp_exposed_ms=%.2f", epoch, t->opts->epochs, loss, steps,
           step_s > 0 ? t->opts->batch / step_s : 0.0, 1e3 * step_s,
           1e3 * per_step(t, t->acc.busy_s), 1e3 * per_step(t, t->acc.idle_s),
           1e3 * per_step(t, t->acc.exposed_s));
    if (accuracy >= 0.0) {
        printf(" test_accuracy=%.4f", accuracy);
    }
    printf("\n");
}

/* The stage's tp allreduces per micro-batch (its first replica's tp rank 0 says it). */
static void report_stage(const t3_t *t)
{
    const shard_layout_t *lay = &t->shard.lay;
    double mb = (double)t->steps_done * (double)t->micro;

    if (t->coords[COLL_DIM_TP] != 0 || t->coords[COLL_DIM_DP] != 0) {
        return;
    }
    printf("stage %d: layers=%d..%d pairs=%d tp_allreduces_per_micro_batch forward=%.2f "
           "backward=%.2f\n", t->coords[COLL_DIM_PP], lay->first, lay->first + lay->count - 1,
           lay->pairs, mb > 0 ? (double)t->acc.tp_fwd / mb : 0.0,
           mb > 0 ? (double)t->acc.tp_bwd / mb : 0.0);
}

int t3_report_pipeline(t3_t *t)
{
    int pp = t->dims[COLL_DIM_PP], s = t->coords[COLL_DIM_PP];
    float *busy = t->stats + 4, *idle = busy + pp;

    report_stage(t);
    memset(t->stats, 0, (4 + 4 * (size_t)pp) * sizeof(float));
    if (t->coords[COLL_DIM_TP] == 0 && t->coords[COLL_DIM_DP] == 0) {
        busy[s] = (float)(1e3 * per_step(t, t->acc.busy_s));
        idle[s] = (float)(1e3 * per_step(t, t->acc.idle_s));
    }
    if (dist_allreduce(&t->world, t->stats, 4 + 2 * (size_t)pp, COLL_SUM) != 0) {
        return -1;
    }
    for (int k = 0; k < pp && t->world.rank == 0; k++) {
        printf("stage %d: bubble measured=%.3f ideal=(pp-1)/m=%.3f busy_ms=%.2f idle_ms=%.2f\n",
               k, busy[k] > 0 ? idle[k] / busy[k] : 0.0, (double)(pp - 1) / t->micro,
               (double)busy[k], (double)idle[k]);
    }
    return 0;
}

void t3_report_memory(const t3_t *t)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    printf("memory: rank %d tp=%d pp=%d dp=%d vmhwm_kb=%ld\n", t->world.rank,
           t->coords[COLL_DIM_TP], t->coords[COLL_DIM_PP], t->coords[COLL_DIM_DP], kb);
}

/* Send or receive the @p n floats of @p buf to or from world rank @p peer, and wait. */
static int world_p2p(t3_t *t, int send, float *buf, size_t n, int peer)
{
    coll_request_t *r = NULL;
    coll_status_t st = send ? coll_send_async(t->world.comm, buf, n, COLL_FLOAT32, peer, NULL, &r)
                            : coll_recv_async(t->world.comm, buf, n, COLL_FLOAT32, peer, NULL, &r);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, t->world.timeout_ms);
        coll_req_free(r);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "coll-train: rank %d: %s rank %d's shard: %s: %s\n", t->world.rank,
                send ? "sending" : "receiving", send ? t->world.rank : peer, coll_err_name(st),
                coll_comm_last_error(t->world.comm));
        return -1;
    }
    return 0;
}

/* Rank @p r's shard, received and placed into @p full. */
static int receive_shard(t3_t *t, int r, mlp_t *full)
{
    int c[COLL_DIM_COUNT];
    shard_layout_t lay;
    char err[256];
    size_t n = 0;
    float *buf;
    int rc = -1;

    coll_layout_coords(&t->layout, r, c);
    if (shard_layout(t->sizes, t->n_layers, t->dims[COLL_DIM_PP], c[COLL_DIM_PP],
                     t->dims[COLL_DIM_TP], &lay, err, sizeof(err)) != 0) {
        fprintf(stderr, "coll-train: %s\n", err);
        return -1;
    }
    for (int k = 0; k < lay.count; k++) {
        n += (size_t)lay.out[k] * ((size_t)lay.in[k] + 1);
    }
    if ((buf = dist_alloc(&t->world, n)) != NULL && world_p2p(t, 0, buf, n, r) == 0) {
        shard_place(&lay, c[COLL_DIM_TP], t->sizes, buf, full->params);
        rc = 0;
    }
    dist_free(&t->world, buf);
    return rc;
}

static int send_shard(t3_t *t)
{
    size_t n = t->shard.mlp->n_params;
    float *buf = dist_alloc(&t->world, n);
    int rc = -1;

    if (buf != NULL) {
        memcpy(buf, t->shard.mlp->params, n * sizeof(float));
        rc = world_p2p(t, 1, buf, n, 0);
    }
    dist_free(&t->world, buf);
    return rc;
}

int t3_dump(t3_t *t)
{
    mlp_t *full = NULL;
    int rc = 0;

    if (t->opts->dump_path == NULL || t->coords[COLL_DIM_DP] != 0) {
        return 0;
    }
    if (t->world.rank != 0) {
        return send_shard(t);
    }
    if (mlp_create(t->sizes, t->n_layers, 0, t->opts->seed, NULL, &full) != 0) {
        return -1;
    }
    shard_place(&t->shard.lay, t->coords[COLL_DIM_TP], t->sizes, t->shard.mlp->params,
                full->params);
    for (int r = 1; r < t->world.world_size && rc == 0; r++) {
        int c[COLL_DIM_COUNT];
        coll_layout_coords(&t->layout, r, c);
        rc = c[COLL_DIM_DP] == 0 ? receive_shard(t, r, full) : 0;
    }
    rc = rc == 0 ? mlp_dump(full, t->opts->dump_path) : rc;
    mlp_destroy(full);
    return rc;
}
