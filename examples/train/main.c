/* coll-train: data-parallel MLP training on Fashion-MNIST over libcollective.
 *
 * Every rank loads the whole data set, builds the same network from the same seed and walks the
 * same shuffled order; of each global batch it trains on its own contiguous shard, then the
 * gradients are averaged, so every rank applies the same update (optimizer.h, with the lr of
 * the schedule, lr.h) and the weights stay identical. The gradients live in the buckets of a
 * libcollective bucketer: backward reports each layer as it finishes and a full bucket is
 * reduced while backward goes on (--comm). With --service the daemons' parameter service
 * runs the optimizer instead (service.h): backward submits each layer's gradients to it and
 * the updated parameters come back. Standalone (no communicator) it is the single-process
 * reference. */
#include "dist.h"
#include "dump.h"
#include "lr.h"
#include "mlp.h"
#include "mnist.h"
#include "optimizer.h"
#include "options.h"
#include "rng.h"
#include "service.h"
#include "diverge.h"
#include "train3d.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Everything one rank trains with. */
typedef struct trainer {
    train_opts_t opts;
    dist_t dist;
    mnist_set_t train;
    mnist_set_t test;
    mlp_t *mlp;
    train_optim_t optim;   /* the optimizer and its state */
    coll_schedule_t sched; /* the learning rate of every step */
    double lr;             /* the learning rate of the last step */
    train_tensor_stats_t layer_stats[TRAIN_MAX_TENSORS]; /* --report-layers: last step's */
    dist_grads_t grads;    /* the gradients (bucket views in the job's pool) and their exchange */
    train_service_t svc;   /* --service: the parameter service, instead of grads and optim */
    float *stats;          /* small buffer for the loss and accuracy reductions, in the pool */
    float *x;              /* input rows: shard x image size */
    uint8_t *y;            /* labels of x */
    uint32_t *order;       /* training order of the current epoch, the same on every rank */
    int shard;             /* images per rank per step: batch / world_size */
    long steps_per_epoch;  /* full global batches per epoch */
    long total_steps;      /* steps of the whole run: epochs, or --steps when fewer */
    long steps_done;       /* optimizer steps so far */
    float mean;            /* pixel standardisation */
    float std;
} trainer_t;

/* One rank's totals over an epoch. */
typedef struct epoch_stats {
    double loss_sum;    /* sum over steps of the mean loss of this rank's shard */
    long steps;
    double step_s;      /* seconds in steps, from gathering the batch to the update */
    /* Over the measured steps (all but the first step of the run, which lays out and rebuilds
     * the buckets): */
    long measured;
    double mstep_s;     /* the whole step */
    double compute_s;   /* forward and backward */
    double comm_s;      /* union over buckets of [submit, seen by this rank] */
    double exposed_s;   /* the part of comm_s spent waiting after backward (<= comm_s) */
    uint64_t wire_bytes;  /* this node sent for the gradients, every step */
    uint64_t dense_bytes; /* what the uncompressed ring would have sent */
} epoch_stats_t;

static int steps_exhausted(const trainer_t *t)
{
    return t->opts.max_steps > 0 && t->steps_done >= t->opts.max_steps;
}


/* ts: start, forward, backward, backward end, wait end, update end (CLOCK_MONOTONIC ns). */
static void account_step(trainer_t *t, epoch_stats_t *es, const uint64_t ts[6],
                         const dist_step_stats_t *ds)
{
    double step_s = (double)(ts[5] - ts[0]) * 1e-9, compute_s = (double)(ts[3] - ts[1]) * 1e-9;

    es->step_s += step_s;
    es->steps++;
    es->wire_bytes += ds->wire_bytes;
    es->dense_bytes += ds->dense_bytes;
    if (t->steps_done > 0) {
        es->measured++;
        es->mstep_s += step_s;
        es->compute_s += compute_s;
        es->comm_s += ds->comm_s;
        es->exposed_s += ds->exposed_s;
    }
    if (t->opts.report_steps && t->dist.rank == 0) {
        printf("step %ld step_ms=%.2f compute_ms=%.2f comm_ms=%.2f exposed_ms=%.2f overlap=%.3f "
               "buckets=%zu\n", t->steps_done + 1, step_s * 1e3, compute_s * 1e3,
               ds->comm_s * 1e3, ds->exposed_s * 1e3, ds->overlap, ds->buckets);
    }
}

/* Rank 0's --report-lr and --report-layers lines of the step just done (steps_done not
 * counted yet). */
static void report_step_optim(const trainer_t *t, int with_stats)
{
    long step = t->steps_done + 1;
    char name[32];

    if (t->opts.report_lr && t->dist.rank == 0) {
        printf("lr step=%ld lr=%.17g\n", step, t->lr);
    }
    for (int i = 0; with_stats && i < t->optim.n_tensors; i++) {
        const train_tensor_stats_t *s = &t->layer_stats[i];
        train_tensor_name(i, name, sizeof(name));
        printf("layer step=%ld tensor=%s w_norm=%.6g g_norm=%.6g trust=%.6g update_norm=%.6g "
               "update_ratio=%.6g\n", step, name, s->w_norm, s->g_norm, s->trust,
               s->update_norm, s->w_norm > 0 ? s->update_norm / s->w_norm : 0.0);
    }
}

/* The update of step steps_done + 1 with its scheduled learning rate; rank 0 also measures
 * the first --report-layers steps. */
static void optimizer_step(trainer_t *t)
{
    int with_stats = t->dist.rank == 0 && t->steps_done < t->opts.report_layers;

    t->lr = coll_schedule_lr(&t->sched, (uint64_t)t->steps_done);
    train_optim_step(&t->optim, t->mlp, t->lr, with_stats ? t->layer_stats : NULL);
    report_step_optim(t, with_stats);
}

/* Backward, reporting each layer to the bucketer (which reduces full buckets meanwhile) or
 * to the parameter service (which updates it meanwhile). */
static void backward(trainer_t *t)
{
    if (t->opts.service) {
        mlp_backward(t->mlp, t->shard, train_service_grad_ready, &t->svc);
    } else {
        mlp_backward(t->mlp, t->shard, dist_grad_ready, &t->grads);
    }
}

/* The end of the step's exchange (of the service's, only the bytes on the wire). */
static int exchange_wait(trainer_t *t, dist_step_stats_t *ds)
{
    if (!t->opts.service) {
        return dist_grads_wait(&t->grads, ds);
    }
    memset(ds, 0, sizeof(*ds));
    return train_service_wait(&t->svc, &ds->wire_bytes, &ds->dense_bytes);
}

/* The update after the exchange: the trainer's optimizer, or only the lr of the step that the
 * service applied (--report-lr). */
static void update_step(trainer_t *t)
{
    if (!t->opts.service) {
        optimizer_step(t);
        return;
    }
    t->lr = coll_schedule_lr(&t->sched, (uint64_t)t->steps_done);
    report_step_optim(t, 0);
}

/* One optimizer step on the global batch starting at batch[0]; this rank takes its shard. */
static int train_step(trainer_t *t, const uint32_t *batch, epoch_stats_t *es)
{
    const uint32_t *mine = batch + (size_t)t->dist.rank * (size_t)t->shard;
    uint64_t ts[6]; /* start, forward, backward, backward end, wait end, update end */
    dist_step_stats_t ds;

    ts[0] = dist_now_ns();
    mnist_gather(&t->train, mine, 0, (size_t)t->shard, t->mean, t->std, t->x, t->y);
    ts[1] = dist_now_ns();
    mlp_forward(t->mlp, t->x, t->shard);
    es->loss_sum += mlp_loss(t->mlp, t->y, t->shard);
    ts[2] = dist_now_ns();
    backward(t);
    ts[3] = dist_now_ns();
    if (exchange_wait(t, &ds) != 0) {
        return -1;
    }
    ts[4] = dist_now_ns();
    update_step(t);
    ts[5] = dist_now_ns();
    dist_span(&t->dist, "forward", ts[1], ts[2]);
    dist_span(&t->dist, "backward", ts[2], ts[3]);
    dist_span(&t->dist, "optimizer", ts[4], ts[5]);
    account_step(t, es, ts, &ds);
    t->steps_done++;
    return 0;
}

static int train_epoch(trainer_t *t, int epoch, epoch_stats_t *es)
{
    memset(es, 0, sizeof(*es));
    rng_epoch_order(t->order, (uint32_t)t->train.count, t->opts.seed, epoch);
    for (long s = 0; s < t->steps_per_epoch && !steps_exhausted(t); s++) {
        if (train_step(t, t->order + (size_t)s * (size_t)t->opts.batch, es) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Mean loss of the epoch over its steps and all ranks. */
static int global_loss(trainer_t *t, const epoch_stats_t *es, double *loss)
{
    t->stats[0] = es->steps > 0 ? (float)(es->loss_sum / (double)es->steps) : 0.0f;
    if (dist_allreduce(&t->dist, t->stats, 1, COLL_AVG) != 0) {
        return -1;
    }
    *loss = t->stats[0];
    return 0;
}

/* Test accuracy over the whole test set: each rank classifies a contiguous shard, a SUM
 * allreduce adds up the counts (exact in float32 below 2^24). */
static int evaluate(trainer_t *t, double *accuracy)
{
    size_t n = t->test.count, w = (size_t)t->dist.world_size, r = (size_t)t->dist.rank;
    size_t begin = n * r / w, end = n * (r + 1) / w;
    long correct = 0;

    for (size_t i = begin; i < end; i += (size_t)t->shard) {
        int m = end - i < (size_t)t->shard ? (int)(end - i) : t->shard;
        mnist_gather(&t->test, NULL, i, (size_t)m, t->mean, t->std, t->x, t->y);
        mlp_forward(t->mlp, t->x, m);
        correct += mlp_count_correct(t->mlp, t->y, m);
    }
    t->stats[0] = (float)correct;
    t->stats[1] = (float)(end - begin);
    if (dist_allreduce(&t->dist, t->stats, 2, COLL_SUM) != 0) {
        return -1;
    }
    *accuracy = t->stats[1] > 0.0f ? (double)t->stats[0] / (double)t->stats[1] : 0.0;
    return 0;
}

static void report_epoch(const trainer_t *t, int epoch, const epoch_stats_t *es, double loss,
                         double accuracy)
{
    double samples = (double)es->steps * (double)t->opts.batch;
    double step_s = es->step_s > 0.0 ? es->step_s : 1e-9;

    double m = es->measured > 0 ? (double)es->measured : 1.0;
    /* Of the epoch's times, so that it agrees with the means printed beside it; in [0, 1], as
     * every step's exposed_s is at most its comm_s. */
    double overlap = es->comm_s > 0.0 ? 1.0 - es->exposed_s / es->comm_s : 0.0;

    if (t->dist.rank != 0) {
        return;
    }
    printf("epoch %d/%d loss=%.4f lr=%.6g samples/s=%.0f epoch_s=%.2f step_ms=%.2f "
           "compute_ms=%.2f comm_ms=%.2f exposed_ms=%.2f overlap=%.3f", epoch, t->opts.epochs,
           loss, t->lr, samples / step_s, es->step_s, 1e3 * es->mstep_s / m,
           1e3 * es->compute_s / m, 1e3 * es->comm_s / m, 1e3 * es->exposed_s / m, overlap);
    if (es->wire_bytes > 0) {
        printf(" wire_mb_per_step=%.4f dense_mb_per_step=%.4f compression_ratio=%.1f",
               (double)es->wire_bytes / 1e6 / (double)es->steps,
               (double)es->dense_bytes / 1e6 / (double)es->steps,
               (double)es->dense_bytes / (double)es->wire_bytes);
    }
    if (accuracy >= 0.0) {
        printf(" test_accuracy=%.4f", accuracy);
    }
    printf("\n");
}

/* Rank 0's --dump-weights and --dump-grads. */
static int dump_all(const trainer_t *t)
{
    if (t->opts.dump_path != NULL && dump_tensors(t->mlp, DUMP_PARAMS, t->opts.dump_path) != 0) {
        return -1;
    }
    if (t->opts.dump_grads_path != NULL &&
        dump_tensors(t->mlp, DUMP_GRADS, t->opts.dump_grads_path) != 0) {
        return -1;
    }
    return 0;
}

/* Epoch loop, final evaluation, summary line and dumps. Returns 0, -1 on an error, or
 * TRAIN_EXIT_DIVERGED when the loss diverged (every rank alike: the loss is global). */
static int train_run(trainer_t *t)
{
    double loss = 0.0, accuracy = -1.0;
    int epochs_run = 0, diverged;
    epoch_stats_t es;
    train_diverge_t watch;

    train_diverge_init(&watch, MNIST_CLASSES, t->opts.train_through);
    for (int e = 1; e <= t->opts.epochs && !steps_exhausted(t); e++) {
        int eval_now = t->opts.eval_every > 0 && e % t->opts.eval_every == 0;
        accuracy = -1.0;
        if (train_epoch(t, e, &es) != 0 || global_loss(t, &es, &loss) != 0 ||
            (eval_now && evaluate(t, &accuracy) != 0)) {
            return -1;
        }
        report_epoch(t, e, &es, loss, accuracy);
        epochs_run = e;
        diverged = train_diverge_check(&watch, e, loss, t->lr,
                                       train_optim_name(t->opts.optim.kind), t->dist.rank == 0);
        if (diverged != 0) {
            return diverged;
        }
    }
    if (accuracy < 0.0 && evaluate(t, &accuracy) != 0) {
        return -1;
    }
    if (t->dist.rank != 0) {
        return 0;
    }
    printf("final: nodes=%d ranks=%d epochs=%d test_accuracy=%.4f train_loss=%.4f\n",
           t->dist.world_size / t->dist.local_size, t->dist.world_size, epochs_run, accuracy,
           loss);
    return dump_all(t);
}

static int trainer_load_data(trainer_t *t)
{
    const char *dir = t->opts.data_dir;

    if (mnist_load(dir, "train", &t->train) != 0 || mnist_load(dir, "t10k", &t->test) != 0) {
        return -1;
    }
    if (mnist_image_size(&t->test) != mnist_image_size(&t->train)) {
        fprintf(stderr, "coll-train: %s: test images are %zux%zu but training images %zux%zu\n",
                dir, t->test.rows, t->test.cols, t->train.rows, t->train.cols);
        return -1;
    }
    if (t->train.count > UINT32_MAX) {
        fprintf(stderr, "coll-train: %s: %zu training images, at most %u supported\n", dir,
                t->train.count, UINT32_MAX);
        return -1;
    }
    t->mean = t->opts.normalize ? MNIST_FASHION_MEAN : 0.0f;
    t->std = t->opts.normalize ? MNIST_FASHION_STD : 1.0f;
    return 0;
}

/* The global batch must split evenly over the ranks and fit the training set. */
static int trainer_check_batch(trainer_t *t)
{
    int w = t->dist.world_size;

    if (t->opts.batch % w != 0) {
        fprintf(stderr,
                "coll-train: --batch %d is not divisible by the world size %d (each rank "
                "trains on batch/world images of every global batch)\n",
                t->opts.batch, w);
        return -1;
    }
    if ((size_t)t->opts.batch > t->train.count) {
        fprintf(stderr, "coll-train: --batch %d is larger than the %zu training images\n",
                t->opts.batch, t->train.count);
        return -1;
    }
    t->shard = t->opts.batch / w;
    t->steps_per_epoch = (long)(t->train.count / (size_t)t->opts.batch);
    t->total_steps = t->steps_per_epoch * (long)t->opts.epochs;
    if (t->opts.max_steps > 0 && t->opts.max_steps < t->total_steps) {
        t->total_steps = t->opts.max_steps;
    }
    return 0;
}

/* The optimizer and the gradients' exchange: the trainer's optimizer and a bucketer, or the
 * parameter service. Returns the exit status: 0, 1 for a runtime error, 2 for a usage error. */
static int trainer_exchange_init(trainer_t *t)
{
    dist_grads_opts_t go = {t->opts.comm, t->opts.bucket_cap_bytes,
                            t->opts.first_bucket_cap_bytes, 0, "grads", t->opts.has_compression,
                            t->opts.compression};

    if (t->opts.service) {
        return train_service_init(&t->svc, &t->dist, t->mlp, &t->opts.optim, &t->sched,
                                  t->opts.has_compression ? &t->opts.compression : NULL);
    }
    if (train_optim_init(&t->optim, &t->opts.optim, t->mlp,
                         t->dist.rank == 0 && t->opts.report_layers > 0) != 0 ||
        dist_grads_init(&t->grads, &t->dist, t->mlp, &go) != 0) {
        return 1;
    }
    return 0;
}

/* Returns the exit status, as trainer_exchange_init(). */
static int trainer_build_model(trainer_t *t)
{
    int sizes[MLP_MAX_LAYERS + 1];
    int n_layers = t->opts.n_hidden + 1;
    size_t dim = mnist_image_size(&t->train);

    sizes[0] = (int)dim;
    memcpy(sizes + 1, t->opts.hidden, (size_t)t->opts.n_hidden * sizeof(int));
    sizes[n_layers] = MNIST_CLASSES;
    t->stats = dist_alloc(&t->dist, 16);
    if (t->stats == NULL ||
        mlp_create(sizes, n_layers, t->shard, t->opts.seed, NULL, &t->mlp) != 0) {
        return 1;
    }
    t->x = malloc((size_t)t->shard * dim * sizeof(float));
    t->y = malloc((size_t)t->shard);
    t->order = malloc(t->train.count * sizeof(uint32_t));
    if (t->x == NULL || t->y == NULL || t->order == NULL) {
        fprintf(stderr, "coll-train: out of memory for the batch buffers\n");
        return 1;
    }
    return trainer_exchange_init(t);
}

static void trainer_describe(const trainer_t *t)
{
    if (t->dist.rank != 0) {
        return;
    }
    fprintf(stderr, "coll-train: %s, %d rank%s on %d node%s, global batch %d (%d per rank), "
                    "%ld steps/epoch, %zu parameters, ",
            dist_standalone(&t->dist) ? "standalone" : "collective", t->dist.world_size,
            t->dist.world_size > 1 ? "s" : "", t->dist.world_size / t->dist.local_size,
            t->dist.world_size / t->dist.local_size > 1 ? "s" : "", t->opts.batch, t->shard,
            t->steps_per_epoch, t->mlp->n_params);
    train_lr_describe(&t->sched, stderr);
    fputs(", ", stderr);
    train_optim_describe(&t->opts.optim, stderr);
    fputs(t->opts.service ? ", in the parameter service\n" : "\n", stderr);
}

/* Returns the exit status: 0, 1 for a runtime error, 2 for a usage error. */
static int trainer_init(trainer_t *t)
{
    if (trainer_load_data(t) != 0 || dist_init(&t->dist) != 0) {
        return 1;
    }
    t->dist.timeout_ms = t->opts.timeout_ms;
    if (trainer_check_batch(t) != 0 ||
        train_lr_schedule(&t->opts.sched, t->opts.batch, t->steps_per_epoch, t->total_steps,
                          &t->sched) != 0) {
        return 2;
    }
    int rc = trainer_build_model(t);
    if (rc != 0) {
        return rc;
    }
    trainer_describe(t);
    return 0;
}

static void trainer_fini(trainer_t *t)
{
    train_service_fini(&t->svc);
    dist_grads_fini(&t->grads);
    train_optim_fini(&t->optim);
    mlp_destroy(t->mlp);
    dist_free(&t->dist, t->stats);
    dist_fini(&t->dist);
    mnist_free(&t->train);
    mnist_free(&t->test);
    free(t->x);
    free(t->y);
    free(t->order);
}

int main(int argc, char **argv)
{
    trainer_t t;
    int rc;

    memset(&t, 0, sizeof(t));
    /* Progress lines reach a launcher's pipe as they are printed. */
    setvbuf(stdout, NULL, _IOLBF, 0);
    rc = train_parse_args(argc, argv, &t.opts);
    if (rc != 0) {
        return rc > 0 ? 0 : 2;
    }
    openblas_set_num_threads(t.opts.threads);
    if (train3d_requested(&t.opts)) {
        return train3d_main(&t.opts);
    }
    rc = trainer_init(&t);
    if (rc == 0) {
        rc = train_run(&t);
        rc = rc == TRAIN_EXIT_DIVERGED ? rc : (rc != 0);
    }
    trainer_fini(&t);
    return rc;
}
