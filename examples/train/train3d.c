/* coll-train's 3D-parallel training: groups, shard, pipeline, dp reduction (train3d.h). */
#include "train3d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diverge.h"
#include "mnist.h"
#include "pipe.h"
#include "rng.h"
#include "shard.h"
#include "train3d_io.h"

/* The dimensions' sizes from the options: those not given are 1, dp what the world leaves. */
static int resolve_layout(const train_opts_t *o, int world, int dims[COLL_DIM_COUNT])
{
    dims[COLL_DIM_TP] = o->tp > 0 ? o->tp : 1;
    dims[COLL_DIM_PP] = o->pp > 0 ? o->pp : 1;
    dims[COLL_DIM_DP] = o->dp > 0 ? o->dp : world / (dims[COLL_DIM_TP] * dims[COLL_DIM_PP]);
    if (dims[COLL_DIM_DP] < 1 ||
        dims[COLL_DIM_TP] * dims[COLL_DIM_PP] * dims[COLL_DIM_DP] != world) {
        fprintf(stderr, "coll-train: --tp %d x --pp %d x --dp %d is not the world size %d\n",
                dims[COLL_DIM_TP], dims[COLL_DIM_PP], o->dp > 0 ? o->dp : 0, world);
        return -1;
    }
    return 0;
}

static int check_batch(t3_t *t)
{
    int dp = t->dims[COLL_DIM_DP], m = t->micro;

    if (t->opts->batch % (dp * m) != 0) {
        fprintf(stderr, "coll-train: --batch %d does not split into %d replicas of %d "
                "micro-batches\n", t->opts->batch, dp, m);
        return -1;
    }
    if ((size_t)t->opts->batch > t->train.count) {
        fprintf(stderr, "coll-train: --batch %d is larger than the %zu training images\n",
                t->opts->batch, t->train.count);
        return -1;
    }
    t->rows = t->opts->batch / (dp * m);
    t->steps_per_epoch = (long)(t->train.count / (size_t)t->opts->batch);
    return 0;
}

/* The tp, pp and dp groups of this rank (none standalone: every size is 1 then). Returns 0, 1
 * for a runtime error, 2 for a bad --order. */
static int make_groups(t3_t *t)
{
    coll_status_t st;

    if (coll_layout_init(&t->layout, t->dims[COLL_DIM_TP], t->dims[COLL_DIM_PP],
                         t->dims[COLL_DIM_DP], t->opts->order) != COLL_OK) {
        fprintf(stderr, "coll-train: --order '%s' is not an order of tp, pp and dp such as "
                "tp-dp-pp\n", t->opts->order);
        return 2;
    }
    coll_layout_coords(&t->layout, t->world.rank, t->coords);
    if (dist_standalone(&t->world)) {
        t->dp = t->world;
        return 0;
    }
    if ((st = coll_comm_groups(t->world.comm, &t->layout, &t->groups)) != COLL_OK) {
        fprintf(stderr, "coll-train: rank %d: making the tp, pp and dp groups: %s: %s\n",
                t->world.rank, coll_err_name(st), coll_comm_last_error(t->world.comm));
        return 1;
    }
    t->dp = (dist_t){.comm = t->groups.comm[COLL_DIM_DP], .rank = t->coords[COLL_DIM_DP],
                     .world_size = t->dims[COLL_DIM_DP],
                     .local_size = coll_comm_local_size(t->groups.comm[COLL_DIM_DP]),
                     .timeout_ms = t->world.timeout_ms};
    return 0;
}

static int build_model(t3_t *t)
{
    /* The dp reduction is uncompressed (options.c refuses --compression here). */
    dist_grads_opts_t go = {.comm = t->opts->comm, .cap_bytes = t->opts->bucket_cap_bytes,
                            .first_cap_bytes = t->opts->first_bucket_cap_bytes, .name = "grads",
                            .has_compression = 1};
    shard_layout_t lay;
    char err[256];

    t->sizes[0] = (int)mnist_image_size(&t->train);
    memcpy(t->sizes + 1, t->opts->hidden, (size_t)t->opts->n_hidden * sizeof(int));
    t->n_layers = t->opts->n_hidden + 1;
    t->sizes[t->n_layers] = MNIST_CLASSES;
    if (shard_layout(t->sizes, t->n_layers, t->dims[COLL_DIM_PP], t->coords[COLL_DIM_PP],
                     t->dims[COLL_DIM_TP], &lay, err, sizeof(err)) != 0) {
        fprintf(stderr, "coll-train: %s\n", err);
        return 2;
    }
    if (shard_init(&t->shard, &lay, t->sizes, t->n_layers, t->opts->seed,
                   t->coords[COLL_DIM_TP], t->groups.comm[COLL_DIM_TP], t->world.timeout_ms) !=
            0 ||
        dist_grads_init(&t->grads, &t->dp, t->shard.mlp, &go) != 0 ||
        pipe_init(&t->pipe, &t->world, &t->shard, t->groups.comm[COLL_DIM_PP],
                  t->coords[COLL_DIM_PP], t->dims[COLL_DIM_PP], t->micro, t->rows,
                  t->world.timeout_ms) != 0) {
        return 1;
    }
    return t3_io_init(t);
}

/* Returns the exit status: 0, 1 for a runtime error, 2 for a usage error. */
static int setup(t3_t *t)
{
    int rc;

    t->micro = t->opts->micro_batches > 0 ? t->opts->micro_batches : 1;
    if (t3_load_data(t) != 0 || dist_init(&t->world) != 0) {
        return 1;
    }
    t->world.timeout_ms = t->opts->timeout_ms;
    if (resolve_layout(t->opts, t->world.world_size, t->dims) != 0 || check_batch(t) != 0) {
        return 2;
    }
    if ((rc = make_groups(t)) != 0 || (rc = build_model(t)) != 0) {
        return rc;
    }
    t3_describe(t);
    return 0;
}

/* One step: the pipeline, the dp reduction it started, the update. */
static int step(t3_t *t, const uint32_t *batch)
{
    uint64_t t0 = dist_now_ns(), t1;
    dist_step_stats_t ds;
    pipe_io_t io = {t3_input, t3_loss, t};

    long fwd = t->shard.allreduces_fwd, bwd = t->shard.allreduces_bwd;

    t->batch = batch + (size_t)t->coords[COLL_DIM_DP] * (size_t)(t->rows * t->micro);
    if (pipe_step(&t->pipe, &io, dist_grad_ready, &t->grads) != 0 ||
        dist_grads_wait(&t->grads, &ds) != 0) {
        return -1;
    }
    t->acc.tp_fwd += t->shard.allreduces_fwd - fwd;
    t->acc.tp_bwd += t->shard.allreduces_bwd - bwd;
    mlp_sgd_step(t->shard.mlp, (float)t->opts->sched.lr, (float)t->opts->optim.momentum);
    t1 = dist_now_ns();
    if (t->steps_done > 0) { /* the first step lays out and rebuilds the buckets */
        t->acc.measured++;
        t->acc.step_s += (double)(t1 - t0) * 1e-9;
        t->acc.busy_s += (double)t->pipe.busy_ns * 1e-9;
        t->acc.idle_s += (double)t->pipe.idle_ns * 1e-9;
        t->acc.exposed_s += ds.exposed_s;
    }
    if (t->opts->report_steps && t->world.rank == 0) {
        printf("step %ld step_ms=%.2f busy_ms=%.2f idle_ms=%.2f dp_exposed_ms=%.2f\n",
               t->steps_done + 1, (double)(t1 - t0) * 1e-6, (double)t->pipe.busy_ns * 1e-6,
               (double)t->pipe.idle_ns * 1e-6, ds.exposed_s * 1e3);
    }
    t->steps_done++;
    return 0;
}

static int epoch(t3_t *t, int e, long *steps_p)
{
    long s;

    rng_epoch_order(t->order, (uint32_t)t->train.count, t->opts->seed, e);
    for (s = 0; s < t->steps_per_epoch; s++) {
        if (t->opts->max_steps > 0 && t->steps_done >= t->opts->max_steps) {
            break;
        }
        if (step(t, t->order + (size_t)s * (size_t)t->opts->batch) != 0) {
            return -1;
        }
    }
    *steps_p = s;
    return 0;
}

/* Returns 0, -1 on an error, or TRAIN_EXIT_DIVERGED (every rank alike). */
static int run(t3_t *t)
{
    double loss = 0.0, accuracy = -1.0;
    int epochs_run = 0, diverged;
    train_diverge_t watch;

    train_diverge_init(&watch, MNIST_CLASSES, t->opts->train_through);
    for (int e = 1; e <= t->opts->epochs; e++) {
        long steps = 0;
        if (t->opts->max_steps > 0 && t->steps_done >= t->opts->max_steps) {
            break;
        }
        t->pipe.loss_sum = 0.0;
        accuracy = -1.0;
        if (epoch(t, e, &steps) != 0 || t3_epoch_loss(t, steps, &loss) != 0 ||
            (t->opts->eval_every > 0 && e % t->opts->eval_every == 0 &&
             t3_evaluate(t, &accuracy) != 0)) {
            return -1;
        }
        t3_report_epoch(t, e, steps, loss, accuracy);
        epochs_run = e;
        diverged = train_diverge_check(&watch, e, loss, t->opts->sched.lr, "sgd",
                                       t->world.rank == 0);
        if (diverged != 0) {
            return diverged;
        }
    }
    if (accuracy < 0.0 && t3_evaluate(t, &accuracy) != 0) {
        return -1;
    }
    if (t->world.rank == 0) {
        printf("final: nodes=%d ranks=%d epochs=%d test_accuracy=%.4f train_loss=%.4f\n",
               t->world.world_size / t->world.local_size, t->world.world_size, epochs_run,
               accuracy, loss);
    }
    return t3_report_pipeline(t) == 0 && t3_dump(t) == 0 ? 0 : -1;
}

static void teardown(t3_t *t)
{
    t3_io_fini(t);
    pipe_fini(&t->pipe, &t->world);
    dist_grads_fini(&t->grads);
    shard_fini(&t->shard);
    coll_groups_destroy(&t->groups);
    dist_fini(&t->world);
    mnist_free(&t->train);
    mnist_free(&t->test);
}

int train3d_requested(const train_opts_t *opts)
{
    return opts->tp > 0 || opts->pp > 0 || opts->dp > 0 || opts->micro_batches > 0 ||
           opts->order != NULL;
}

int train3d_main(const train_opts_t *opts)
{
    t3_t *t = calloc(1, sizeof(*t));
    int rc;

    if (t == NULL) {
        fprintf(stderr, "coll-train: out of memory\n");
        return 1;
    }
    t->opts = opts;
    rc = setup(t);
    if (rc == 0) {
        rc = run(t);
        rc = rc == TRAIN_EXIT_DIVERGED ? rc : (rc != 0);
    }
    t3_report_memory(t);
    teardown(t);
    free(t);
    return rc;
}
