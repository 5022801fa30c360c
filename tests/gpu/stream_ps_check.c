/*
 * stream_ps_check: one rank of the checks of the parameter service's steps with a CUDA stream
 * (collective_ps.h coll_ps_step_bucket_params_async(); docs/gpu.md, "Streams"), started by
 * collective-launch with the COLL_* environment of its rank. With COLL_DEVICE_FAKE=1 (daemons and
 * ranks) it runs over the fake device layer, whose streams run their work at once: a stream's
 * wait on a word blocks the caller until the word is stored, and with
 * COLL_DEVICE_FAKE_COPY_DELAY_MS a stream's write of a word lands that long after it was queued
 * (a stream still busy). On a machine with a GPU it runs over the real one.
 *
 * A service of plain SGD (lr 0.5, no momentum, no weight decay) over two layers in two buckets,
 * its parameters and gradients in the job's pool on device 0, written and read through copies on
 * this rank's stream (rank_dev.h). The values are small integers and quarters, exact in float32:
 * rank r's gradient of element i is (r + 1)(i % 5 + 1), their average over the W ranks
 * (W + 1)/2 (i % 5 + 1), so each step takes 0.25 (W + 1)(i % 5 + 1) off every parameter; the
 * parameters start at i % 13. The test computes that reference itself, step by step.
 *   steps     (default) two steps, the first with the rank's stream, the second with CUDA's
 *             default stream (NULL, which is a stream, not none). Before each, the gradients and
 *             the parameters hold garbage (-1000, -7), and every bucket is submitted with the
 *             stream; the right values are written --late ms after the submissions (a backward
 *             still running on the stream when it was called): with the stream's word held back
 *             longer (COLL_DEVICE_FAKE_COPY_DELAY_MS > --late) the daemons must read the
 *             gradients and the first local rank's parameters only after it. With --late 0 (a
 *             real device, whose stream cannot be held back) the right values' copy is queued on
 *             the stream before the calls instead, and not waited for. Then coll_req_stream_wait()
 *             of each bucket's request on the rank's stream, before any wait on the CPU: when
 *             the stream goes on (on the fake, when the call returns) the parameters read
 *             through it must be the updated ones, also where the daemons' copies back land
 *             late (COLL_DEVICE_FAKE_COPY_MBPS, which this program clears for its own copies):
 *             the daemons must store the done word after them; then coll_req_wait() says
 *             COLL_OK and the request ran as staged+<the host's algorithm>.
 *   --host    (alone: the refusal ends the job) the service on host buffers and a step with a
 *             stream: COLL_ERR_INVALID from the call, the message naming the function and
 *             saying that a stream orders device buffers.
 *   --busy MS (alone; the fake, one rank) a service of 1025 buckets of one element; the
 *             stream's words land MS late, so the first 1024 steps with the stream hold every
 *             word pair and the 1025th is refused with COLL_ERR_BUSY, which must end the job:
 *             the first step then fails rather than completing once its word landed.
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (no device
 * layer in this process).
 */
#include <collective.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rank_dev.h"

/* Two layers, one bucket each; the second's count is not a multiple of anything. */
#define COUNT0 1000
#define COUNT (COUNT0 + 3001)
#define LR 0.5

static coll_comm_t *comm;
static int rank, world;

static int fail(const char *what, coll_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_err_name(st),
            coll_comm_last_error(comm));
    return 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Rank @p r's gradient of element @p i. */
static float grad_of(int r, size_t i)
{
    return (float)((r + 1) * (int)(i % 5 + 1));
}

/* The service: SGD at LR over COUNT0 and COUNT - COUNT0 elements, buckets 0 and 1, its
 * parameters @p params (COUNT floats, their start written there first). */
static coll_status_t create(float *params, int on_device, coll_ps_t **ps_p)
{
    static const coll_ps_layer_t layers[2] = {{COUNT0, 0, 0}, {COUNT - COUNT0, 0, 1}};
    coll_ps_params_t p = {.params = params, .layers = layers, .num_layers = 2};
    float h[COUNT];

    for (size_t i = 0; i < COUNT; i++) {
        h[i] = (float)(i % 13);
    }
    if (!on_device) {
        memcpy(params, h, sizeof(h));
    } else if (rank_dev_copy(params, h, sizeof(h)) != 0) {
        return COLL_ERR_INVALID;
    }
    coll_ps_optim_init(COLL_PS_SGD, &p.optim);
    p.optim.momentum = 0.0;
    p.optim.weight_decay = 0.0;
    coll_ps_schedule_constant(LR, &p.schedule);
    return coll_ps_create(comm, &p, ps_p);
}

/* @p n floats of @p value into @p dev, synchronously. */
static int fill(float *dev, size_t n, float value)
{
    static float h[COUNT];

    for (size_t i = 0; i < n; i++) {
        h[i] = value;
    }
    return rank_dev_copy(dev, h, n * sizeof(float));
}

/* The right values queued on @p stream, not waited for: this rank's gradients into @p grad, the
 * reference @p ref into @p params. (On the fake both land at once; a wait for the first, a
 * stream sync, would also wait for the stream's late words and write the second after them.) */
static int write_right(float *grad, float *params, const float *ref, void *stream)
{
    static float g[COUNT];

    for (size_t i = 0; i < COUNT; i++) {
        g[i] = grad_of(rank, i);
    }
    return rank_dev_copy_on(grad, g, sizeof(g), stream) != 0 ||
           rank_dev_copy_on(params, ref, COUNT * sizeof(float), stream) != 0;
}

/* The parameters on the device at @p dev equal @p want (COUNT floats). */
static int expect(const char *what, const float *dev, const float *want)
{
    static float h[COUNT];

    if (rank_dev_copy(h, dev, sizeof(h)) != 0) {
        return 1;
    }
    for (size_t i = 0; i < COUNT; i++) {
        if (h[i] != want[i]) {
            fprintf(stderr, "rank %d: %s: parameter %zu is %g, expected %g\n", rank, what, i,
                    (double)h[i], (double)want[i]);
            return 1;
        }
    }
    return 0;
}

/* The next step of the service, submitted with @p stream (see the top). @p ref holds the
 * parameters before it, and after it on return. */
static int step(coll_ps_t *ps, float *params, float *grad, float *ref, int late_ms, void *stream)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = stream};
    coll_request_t *req[2] = {NULL, NULL};
    const char *what = stream != NULL ? "a step with the stream" : "a step with the default stream";
    coll_status_t st;
    int rc = 0;

    if (fill(grad, COUNT, -1000.0f) != 0 || fill(params, COUNT, -7.0f) != 0 ||
        (late_ms == 0 && write_right(grad, params, ref, stream) != 0)) {
        return 1;
    }
    for (size_t b = 0; b < 2; b++) {
        size_t off = b == 0 ? 0 : COUNT0;
        if ((st = coll_ps_step_bucket_params_async(ps, b, grad + off, &p, &req[b])) !=
            COLL_INPROGRESS) {
            return fail(what, st);
        }
    }
    if (late_ms > 0) {
        sleep_ms(late_ms);
        if (write_right(grad, params, ref, rank_dev_stream()) != 0) {
            return 1;
        }
    }
    for (size_t i = 0; i < COUNT; i++) { /* the reference: SGD, independently */
        ref[i] -= (float)(LR * (world + 1) / 2.0 * (double)(i % 5 + 1));
    }
    for (size_t b = 0; b < 2; b++) {
        if ((st = coll_req_stream_wait(req[b], rank_dev_stream())) != COLL_OK) {
            return fail("coll_req_stream_wait of a step", st);
        }
    }
    rc = expect(stream != NULL ? "parameters after the stream's wait (the rank's stream)"
                               : "parameters after the stream's wait (the default stream)",
                params, ref);
    for (size_t b = 0; b < 2; b++) {
        if ((st = coll_req_wait(req[b], 30000)) != COLL_OK) {
            rc = fail(what, st);
        } else if (strncmp(coll_req_algo(req[b]), "staged+", 7) != 0) {
            fprintf(stderr, "rank %d: %s ran as '%s', not staged\n", rank, what,
                    coll_req_algo(req[b]));
            rc = 1;
        }
        coll_req_free(req[b]);
    }
    return rc;
}

static int run(int late_ms)
{
    float *params = rank_dev_alloc(COUNT * sizeof(float));
    float *grad = rank_dev_alloc(COUNT * sizeof(float));
    static float ref[COUNT];
    coll_ps_t *ps = NULL;
    coll_status_t st;
    int rc;

    if (params == NULL || grad == NULL) {
        return 1;
    }
    if ((st = create(params, 1, &ps)) != COLL_OK) {
        return fail("coll_ps_create", st);
    }
    for (size_t i = 0; i < COUNT; i++) {
        ref[i] = (float)(i % 13);
    }
    rc = step(ps, params, grad, ref, late_ms, rank_dev_stream()) != 0 ||
         step(ps, params, grad, ref, late_ms, NULL) != 0;
    coll_ps_destroy(ps);
    if (rc == 0) {
        printf("rank %d: steps with a stream checked\n", rank);
    }
    return rc;
}

/* --busy (fake only, one rank): 1024 steps with a stream in flight (their words landing
 * @p late_ms late) take every word pair; the next step with a stream is refused with
 * COLL_ERR_BUSY, which must end the job: the steps in flight fail instead of completing once their
 * words land. */
static int busy(int late_ms)
{
    enum { N = 1025 };
    static coll_ps_layer_t layers[N];
    static coll_request_t *req[N];
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    float *params = rank_dev_alloc(N * sizeof(float)), *grad = rank_dev_alloc(N * sizeof(float));
    coll_ps_params_t pp = {.params = params, .layers = layers, .num_layers = N};
    coll_ps_t *ps = NULL;
    coll_status_t st = COLL_OK, first;
    char delay[32];
    size_t b;

    for (b = 0; b < N; b++) {
        layers[b] = (coll_ps_layer_t){1, 0, b};
    }
    coll_ps_optim_init(COLL_PS_SGD, &pp.optim);
    coll_ps_schedule_constant(LR, &pp.schedule);
    if (params == NULL || grad == NULL || fill(params, N, 1.0f) != 0 ||
        fill(grad, N, 1.0f) != 0 || (st = coll_ps_create(comm, &pp, &ps)) != COLL_OK) {
        return fail("a service of 1025 buckets", st);
    }
    snprintf(delay, sizeof(delay), "%d", late_ms);
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", delay, 1);
    for (b = 0; b < N && st != COLL_ERR_BUSY; b++) {
        st = coll_ps_step_bucket_params_async(ps, b, grad + b, &p, &req[b]);
        if (st != COLL_INPROGRESS && (b != N - 1 || st != COLL_ERR_BUSY)) {
            return fail("a step with a stream", st);
        }
    }
    if (st != COLL_ERR_BUSY ||
        strstr(coll_comm_last_error(comm), "1024 operations with stream words") == NULL) {
        return fail("the step past 1024 with a stream", st);
    }
    first = coll_req_wait(req[0], 30000);
    printf("rank %d: refused: %s; the first step then %s\n", rank, coll_err_name(st),
           coll_err_name(first));
    for (b = 0; b < N - 1; b++) {
        coll_req_free(req[b]);
    }
    coll_ps_destroy(ps);
    if (first == COLL_OK) {
        fprintf(stderr, "rank %d: a step refused with COLL_ERR_BUSY did not end the job\n", rank);
        return 1;
    }
    return 0;
}

/* --host: a step with a stream on host buffers is refused by the call. */
static int host_stream(void)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    static const char func[] = "coll_ps_step_bucket_params_async: ";
    float *params = NULL, *grad = NULL;
    coll_request_t *req = NULL;
    coll_ps_t *ps = NULL;
    coll_status_t st;
    const char *msg;

    if ((st = coll_mem_alloc(comm, COUNT * sizeof(float), (void **)&params)) != COLL_OK ||
        (st = coll_mem_alloc(comm, COUNT * sizeof(float), (void **)&grad)) != COLL_OK ||
        (st = create(params, 0, &ps)) != COLL_OK) {
        return fail("a service on host buffers", st);
    }
    st = coll_ps_step_bucket_params_async(ps, 0, grad, &p, &req);
    msg = coll_comm_last_error(comm);
    coll_ps_destroy(ps);
    if (st != COLL_ERR_INVALID || strncmp(msg, func, sizeof(func) - 1) != 0 ||
        strstr(msg, "a stream orders operations on device buffers") == NULL ||
        strstr(msg, "bucket 0 are in the host pool") == NULL) {
        fprintf(stderr, "rank %d: a step with a stream on host buffers gave %s (%s)\n", rank,
                coll_err_name(st), msg);
        return 1;
    }
    printf("rank %d: refused: %s\n", rank, msg);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"late", 1, 0, 'l'}, {"host", 0, 0, 'h'},
                                          {"busy", 1, 0, 'b'}, {0, 0, 0, 0}};
    int late_ms = 0, host = 0, busy_ms = 0, c, rc;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c == 'l') {
            late_ms = atoi(optarg);
        } else if (c == 'h') {
            host = 1;
        } else if (c == 'b') {
            busy_ms = atoi(optarg);
        } else {
            fprintf(stderr, "usage: stream_ps_check [--late MS] [--host] [--busy MS]\n");
            return 2;
        }
    }
    /* The daemons' copies back may land late (the fake's rate), this rank's own must not: a
     * read that waits for its own slow copy would see the daemons' land meanwhile. */
    unsetenv("COLL_DEVICE_FAKE_COPY_MBPS");
    if ((comm = rank_dev_open("stream_ps_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rc = host ? host_stream() : busy_ms > 0 ? busy(busy_ms) : run(late_ms);
    rank_dev_close(comm);
    return rc;
}
