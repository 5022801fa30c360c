/*
 * stream_check: one rank of the checks of stream ordering on device buffers (docs/gpu.md,
 * "Streams"; collective.h COLL_OP_PARAM_STREAM, coll_req_stream_wait()), started by
 * collective-launch with the COLL_* environment of its rank. With COLL_DEVICE_FAKE=1 (daemons and
 * ranks) it runs over the fake device layer, whose streams run their work at once but what a
 * wait on a word holds (the work after it waits for the word, not the caller), and with
 * COLL_DEVICE_FAKE_COPY_DELAY_MS a stream's write of a word lands that long after it was queued
 * (a stream still busy). On a machine with a GPU it runs over the real one.
 *
 * Every buffer is in the job's pool on device 0 (--spread N: on device rank % N, one GPU per rank
 * where N is the ranks on a node), written and read through copies on this rank's stream
 * (rank_dev.h); the values are small integers, exact in float32 sums:
 *   inputs    an allreduce submitted with the stream: the inputs are written --late ms after the
 *             submission (a kernel still running on the stream when it was called); with the
 *             stream's word held back longer (COLL_DEVICE_FAKE_COPY_DELAY_MS > --late) the sum
 *             must be of those inputs, not of what the buffer held at the call; then the same
 *             with the default stream (NULL, which is a stream, not none). With --late 0 (a
 *             real device, whose stream cannot be held back) the inputs' copy is queued on the
 *             stream before the call instead, and not waited for: the daemon must read them
 *             after it;
 *   outputs   an allreduce, then coll_req_stream_wait() before any wait on the CPU: when the
 *             stream goes on (the copy behind the wait is done) the output must already be
 *             the sum, though the library has not seen the completion yet; then coll_req_wait()
 *             says COLL_OK, and a second stream wait after it returns at once, as does one on
 *             the default stream (NULL);
 *   messages  a ring of sends and receives with the stream, each receive waited on by the
 *             stream first;
 *   refusals  coll_req_stream_wait() of a request on host buffers: COLL_ERR_INVALID;
 *   --host    (alone, last: the refusal ends the job) an allreduce of host buffers with a
 *             stream: COLL_ERR_INVALID from the call.
 *   --stuck MS (alone; the fake, with COLL_TIMEOUT_MS) rank 0's stream writes its ready word MS
 *             late, past the job's timeout: every rank's allreduce fails within the timeout +
 *             2 s, the message naming rank 0's stream.
 *   --silent  (alone; the fake, one rank, COLL_TIMEOUT_MS, COLL_DEVICE_FAKE_WAIT_MS) the rank
 *             stops its daemon (SIGSTOP) and submits an allreduce with its stream: the library's
 *             own verdict (COLL_ERR_TIMEDOUT, the daemon answered nothing) must let a stream
 *             waiting for the request go on at once (before, it waited for a word nobody would
 *             store: the fake's wait timed out); then the daemon is let go (SIGCONT).
 *   --time REPS (with --late MS; the fake; benchmarks, never a test) REPS allreduces with the
 *             stream, whose ready word comes MS late: rank 0 prints the median time from the word
 *             to the request's end.
 *   --abandon MS (alone; the fake) every rank's stream writes its ready word MS late, and the
 *             rank destroys its communicator at once, the allreduce in flight, then its stream
 *             (which waits for the write): the write must land in words the library kept
 *             mapped, not in unmapped memory (a crash).
 * The allreduces must name an algorithm that starts with --algo (default "staged+"; "nccl"
 * where the daemons run NCCL between them, which waits for the ready words as well).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (no device
 * layer in this process).
 */
#include <collective.h>

#include <dirent.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rank_dev.h"

#define COUNT 4099

static coll_comm_t *comm;
static int rank, world;
static const char *algo = "staged+"; /* --algo */

static int fail(const char *what, coll_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, coll_err_name(st),
            coll_comm_last_error(comm));
    return 1;
}

/* Every element of @p n floats on the device at @p dev is @p want. */
static int expect(const char *what, const float *dev, size_t n, float want)
{
    float *h = malloc(n * sizeof(float));
    int rc = h == NULL || rank_dev_copy(h, dev, n * sizeof(float)) != 0;

    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (h[i] != want) {
            fprintf(stderr, "rank %d: %s: element %zu is %g, expected %g\n", rank, what, i,
                    (double)h[i], (double)want);
            rc = 1;
        }
    }
    free(h);
    return rc;
}

/* @p n floats of @p value into @p dev. */
static int fill(float *dev, size_t n, float value)
{
    float *h = malloc(n * sizeof(float));
    int rc = h == NULL;

    for (size_t i = 0; rc == 0 && i < n; i++) {
        h[i] = value;
    }
    rc = rc || rank_dev_copy(dev, h, n * sizeof(float)) != 0;
    free(h);
    return rc;
}

/* Wait for @p req (of @p what) and free it; it must have run as --algo says. */
static int finish(const char *what, coll_request_t *req)
{
    coll_status_t st = coll_req_wait(req, 30000);
    int rc = st != COLL_OK ? fail(what, st) : 0;

    if (rc == 0 && strncmp(coll_req_algo(req), algo, strlen(algo)) != 0) {
        fprintf(stderr, "rank %d: %s ran as '%s', not '%s...'\n", rank, what,
                coll_req_algo(req), algo);
        rc = 1;
    }
    coll_req_free(req);
    return rc;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* COUNT floats of this rank's input into @p dev, queued on @p stream, not waited for. */
static int queue_fill(float *dev, void *stream)
{
    static float h[COUNT];

    for (size_t i = 0; i < COUNT; i++) {
        h[i] = (float)(rank + 1);
    }
    return rank_dev_copy_on(dev, h, sizeof(h), stream);
}

/* @p stream: the rank's, or NULL, CUDA's default stream (not none: the mask says so). */
static int inputs(float *buf, int late_ms, void *stream)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = stream};
    coll_request_t *req = NULL;
    coll_status_t st;

    if (fill(buf, COUNT, -1000.0f) != 0 || (late_ms == 0 && queue_fill(buf, stream) != 0)) {
        return 1;
    }
    st = coll_allreduce_async(comm, buf, buf, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st != COLL_INPROGRESS) {
        return fail(stream != NULL ? "allreduce with the stream"
                                   : "allreduce with the default stream", st);
    }
    if (late_ms > 0) {
        sleep_ms(late_ms);
        if (fill(buf, COUNT, (float)(rank + 1)) != 0) {
            return 1;
        }
    }
    if (finish("allreduce with the stream", req) != 0) {
        return 1;
    }
    return expect(stream != NULL ? "inputs written after the call"
                                 : "inputs written after the call, the default stream",
                  buf, COUNT, world * (world + 1) / 2.0f);
}

static int outputs(const float *in, float *out)
{
    coll_request_t *req = NULL;
    coll_status_t st;

    if (fill((float *)in, COUNT, (float)(2 * rank)) != 0 || fill(out, COUNT, -1.0f) != 0) {
        return 1;
    }
    st = coll_allreduce_async(comm, in, out, COUNT, COLL_FLOAT32, COLL_SUM, NULL, &req);
    if (st != COLL_INPROGRESS) {
        return fail("allreduce", st);
    }
    if ((st = coll_req_stream_wait(req, rank_dev_stream())) != COLL_OK) {
        return fail("coll_req_stream_wait", st);
    }
    if (expect("output after the stream's wait", out, COUNT, (float)(world * (world - 1))) != 0) {
        return 1;
    }
    if ((st = coll_req_wait(req, 30000)) != COLL_OK ||
        (st = coll_req_stream_wait(req, rank_dev_stream())) != COLL_OK ||
        (st = coll_req_stream_wait(req, NULL)) != COLL_OK) {
        return fail("the waits after the stream's (the rank's stream, the default stream)", st);
    }
    return finish("allreduce", req);
}

/* Rank r sends to r + 1 and receives from r - 1, both with the stream; the receive's result
 * read after the stream waited for it. */
static int messages(float *sbuf, float *rbuf)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    coll_request_t *s = NULL, *r = NULL;
    coll_status_t st;

    if (fill(sbuf, COUNT, (float)(100 + rank)) != 0 || fill(rbuf, COUNT, -1.0f) != 0) {
        return 1;
    }
    if ((st = coll_recv_async(comm, rbuf, COUNT, COLL_FLOAT32, (rank + world - 1) % world, &p,
                              &r)) != COLL_INPROGRESS ||
        (st = coll_send_async(comm, sbuf, COUNT, COLL_FLOAT32, (rank + 1) % world, &p, &s)) !=
            COLL_INPROGRESS) {
        return fail("send and receive with the stream", st);
    }
    if ((st = coll_req_stream_wait(r, rank_dev_stream())) != COLL_OK) {
        return fail("coll_req_stream_wait of the receive", st);
    }
    if (expect("received", rbuf, COUNT, (float)(100 + (rank + world - 1) % world)) != 0) {
        return 1;
    }
    if ((st = coll_req_wait(r, 30000)) != COLL_OK || (st = coll_req_wait(s, 30000)) != COLL_OK) {
        return fail("send and receive: wait", st);
    }
    coll_req_free(r);
    coll_req_free(s);
    return 0;
}

/* coll_req_stream_wait() of a request on host buffers is refused, the request unharmed. */
static int host_request(void)
{
    float *h = NULL;
    coll_request_t *req = NULL;
    coll_status_t st;

    if ((st = coll_mem_alloc(comm, 64 * sizeof(float), (void **)&h)) != COLL_OK) {
        return fail("coll_mem_alloc", st);
    }
    for (int i = 0; i < 64; i++) {
        h[i] = 1.0f;
    }
    if ((st = coll_allreduce_async(comm, h, h, 64, COLL_FLOAT32, COLL_SUM, NULL, &req)) !=
        COLL_INPROGRESS) {
        return fail("host allreduce", st);
    }
    if ((st = coll_req_stream_wait(req, rank_dev_stream())) != COLL_ERR_INVALID) {
        fprintf(stderr, "rank %d: a stream wait on host buffers gave %s\n", rank,
                coll_err_name(st));
        return 1;
    }
    if ((st = coll_req_wait(req, 30000)) != COLL_OK || h[63] != (float)world) {
        return fail("host allreduce: wait", st);
    }
    coll_req_free(req);
    coll_mem_free(comm, h);
    return 0;
}

/* --host: a stream on host buffers is refused by the call. */
static int host_stream(void)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    float *h = NULL;
    coll_request_t *req = NULL;
    coll_status_t st;

    if ((st = coll_mem_alloc(comm, 64 * sizeof(float), (void **)&h)) != COLL_OK) {
        return fail("coll_mem_alloc", st);
    }
    st = coll_allreduce_async(comm, h, h, 64, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st != COLL_ERR_INVALID || strstr(coll_comm_last_error(comm), "stream") == NULL) {
        fprintf(stderr, "rank %d: a stream on host buffers gave %s (%s)\n", rank,
                coll_err_name(st), coll_comm_last_error(comm));
        return 1;
    }
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --stuck MS (fake only): rank 0's stream writes its ready word @p stuck_ms late, past the job's
 * timeout (COLL_TIMEOUT_MS): every rank's allreduce fails within the timeout + 2 s, and the
 * message names the rank whose stream the operation waited for. */
static int stuck(int stuck_ms)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    float *a = rank_dev_alloc(COUNT * sizeof(float));
    const char *t = getenv("COLL_TIMEOUT_MS");
    coll_request_t *req = NULL;
    coll_status_t st;
    char delay[32];
    double t0, took;

    if (a == NULL || t == NULL) {
        fprintf(stderr, "rank %d: --stuck wants COLL_TIMEOUT_MS\n", rank);
        return 1;
    }
    snprintf(delay, sizeof(delay), "%d", rank == 0 ? stuck_ms : 0);
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", delay, 1);
    t0 = now_ms();
    st = coll_allreduce_async(comm, a, a, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, -1);
        coll_req_free(req);
    }
    took = now_ms() - t0;
    if (fill(a, 1, 0.0f) != 0) { /* after the stream's late write (the fake's sync waits) */
        return 1;
    }
    printf("rank %d: %s after %.0f ms: %s\n", rank, coll_err_name(st), took,
           coll_comm_last_error(comm));
    if (st == COLL_OK || took > atof(t) + 2000.0) {
        fprintf(stderr, "rank %d: a stream that never wrote its word gave %s after %.0f ms\n",
                rank, coll_err_name(st), took);
        return 1;
    }
    if (strstr(coll_comm_last_error(comm), "rank 0's stream") == NULL) {
        fprintf(stderr, "rank %d: the error does not name rank 0's stream: %s\n", rank,
                coll_comm_last_error(comm));
        return 1;
    }
    return 0;
}

/* The pid of this rank's daemon: the process whose command line has "--socket $COLL_SOCKET"
 * (as collective-launch starts it); 0 when none is found. */
static pid_t daemon_pid(void)
{
    const char *sock = getenv("COLL_SOCKET");
    DIR *proc = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;

    while (sock != NULL && proc != NULL && found == 0 && (e = readdir(proc)) != NULL) {
        char path[300], cmd[4096];
        size_t n;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        if (atoi(e->d_name) <= 0 || (f = fopen(path, "r")) == NULL) {
            continue;
        }
        n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        cmd[n] = '\0';
        for (size_t i = 0, next; i + 1 < n; i = next) {
            next = i + strlen(cmd + i) + 1;
            if (strcmp(cmd + i, "--socket") == 0 && next < n && strcmp(cmd + next, sock) == 0) {
                found = (pid_t)atoi(e->d_name);
            }
        }
    }
    if (proc != NULL) {
        closedir(proc);
    }
    return found;
}

/* --silent (fake only, one rank): a stream waiting for a request the daemon never answers. */
static int silent(void)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    float *a = rank_dev_alloc(COUNT * sizeof(float));
    pid_t d = daemon_pid();
    coll_request_t *req = NULL;
    coll_status_t st, waited;
    double t0, took;

    if (a == NULL || d == 0) {
        fprintf(stderr, "rank %d: --silent: %s\n", rank, a == NULL ? "no buffer" : "no daemon");
        return 1;
    }
    kill(d, SIGSTOP);
    st = coll_allreduce_async(comm, a, a, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, -1);
    }
    t0 = now_ms();
    waited = req != NULL ? coll_req_stream_wait(req, rank_dev_stream()) : COLL_ERR_INVALID;
    took = now_ms() - t0;
    kill(d, SIGCONT);
    printf("rank %d: %s from the daemon's silence; the stream's wait then %s after %.0f ms\n",
           rank, coll_err_name(st), coll_err_name(waited), took);
    coll_req_free(req);
    if (st != COLL_ERR_TIMEDOUT || waited != COLL_OK || took > 500.0) {
        fprintf(stderr, "rank %d: a stream waiting for a request the daemon never answered was "
                "not let go: %s, %s after %.0f ms\n", rank, coll_err_name(st),
                coll_err_name(waited), took);
        return 1;
    }
    return 0;
}

/* --abandon MS (fake only): the communicator goes while its stream's ready word is still due. */
static int abandon(int abandon_ms)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    float *a = rank_dev_alloc(COUNT * sizeof(float));
    coll_request_t *req = NULL;
    coll_status_t st;
    char delay[32];

    if (a == NULL) {
        return 1;
    }
    snprintf(delay, sizeof(delay), "%d", abandon_ms);
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", delay, 1);
    st = coll_allreduce_async(comm, a, a, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st != COLL_INPROGRESS) {
        return fail("allreduce with a late stream", st);
    }
    rank_dev_close(comm); /* frees req too; the stream's write lands while this waits */
    comm = NULL;
    printf("rank %d: the stream wrote its word %d ms after the communicator went, unharmed\n",
           rank, abandon_ms);
    return 0;
}

static int run(int late_ms)
{
    float *a = rank_dev_alloc(COUNT * sizeof(float));
    float *b = rank_dev_alloc(COUNT * sizeof(float));

    if (a == NULL || b == NULL) {
        return 1;
    }
    if (inputs(a, late_ms, rank_dev_stream()) != 0 || inputs(a, late_ms, NULL) != 0 ||
        outputs(a, b) != 0 || messages(a, b) != 0 || host_request() != 0) {
        return 1;
    }
    printf("rank %d: stream ordering checked\n", rank);
    return 0;
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;

    return a < b ? -1 : a > b;
}

/* --time @p reps (benchmarks, the fake): @p reps allreduces of COUNT floats with the stream,
 * each after a barrier, whose ready word the fake writes @p late_ms after the call
 * (COLL_DEVICE_FAKE_COPY_DELAY_MS, set here); rank 0 prints the median time from the word to
 * the request's end (bench/stream-wait.sh). */
static int timed(int reps, int late_ms, float *a)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_STREAM, .stream = rank_dev_stream()};
    double *ms = calloc((size_t)reps, sizeof(double));
    char delay[32];
    coll_status_t st = ms != NULL ? COLL_OK : COLL_ERR_NOMEM;

    snprintf(delay, sizeof(delay), "%d", late_ms);
    setenv("COLL_DEVICE_FAKE_COPY_DELAY_MS", delay, 1);
    for (int k = 0; k < reps && st == COLL_OK; k++) {
        coll_request_t *req = NULL;
        double t0;
        st = coll_barrier_async(comm, NULL, &req);
        st = st == COLL_INPROGRESS ? coll_req_wait(req, 30000) : st;
        coll_req_free(req);
        if (st != COLL_OK) {
            break;
        }
        t0 = now_ms();
        st = coll_allreduce_async(comm, a, a, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
        st = st == COLL_INPROGRESS ? coll_req_wait(req, 30000) : st;
        ms[k] = now_ms() - t0 - late_ms;
        coll_req_free(req);
    }
    if (st == COLL_OK && rank == 0) {
        qsort(ms, (size_t)reps, sizeof(*ms), by_value);
        printf("stream allreduce of %d bytes, ready word %d ms late: from the word to the end "
               "median %.2f ms, fastest %.2f, slowest %.2f over %d\n", COUNT * 4, late_ms,
               ms[reps / 2], ms[0], ms[reps - 1], reps);
    }
    free(ms);
    return st == COLL_OK ? 0 : fail("timed allreduce with the stream", st);
}

int main(int argc, char **argv)
{
    static const struct option longs[] = {{"late", 1, 0, 'l'}, {"host", 0, 0, 'h'},
                                          {"algo", 1, 0, 'a'}, {"stuck", 1, 0, 's'},
                                          {"abandon", 1, 0, 'b'}, {"silent", 0, 0, 'q'},
                                          {"time", 1, 0, 't'}, {"spread", 1, 0, 'S'},
                                          {0, 0, 0, 0}};
    int late_ms = 0, host = 0, stuck_ms = 0, abandon_ms = 0, quiet = 0, reps = 0, spread = 0;
    int c, rc;

    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c == 'l') {
            late_ms = atoi(optarg);
        } else if (c == 'h') {
            host = 1;
        } else if (c == 'a') {
            algo = optarg;
        } else if (c == 's') {
            stuck_ms = atoi(optarg);
        } else if (c == 'b') {
            abandon_ms = atoi(optarg);
        } else if (c == 'q') {
            quiet = 1;
        } else if (c == 't') {
            reps = atoi(optarg);
        } else if (c == 'S' && atoi(optarg) > 0) {
            spread = atoi(optarg);
        } else {
            fprintf(stderr, "usage: stream_check [--late MS] [--host] [--algo PREFIX] "
                    "[--stuck MS] [--abandon MS] [--silent] [--time REPS] [--spread N]\n");
            return 2;
        }
    }
    if ((comm = rank_dev_open("stream_check", &rc)) == NULL) {
        return rc;
    }
    rank = coll_comm_rank(comm);
    world = coll_comm_world_size(comm);
    rank_dev_device = spread > 0 ? rank % spread : 0;
    if (abandon_ms > 0) {
        return abandon(abandon_ms);
    }
    rc = host        ? host_stream()
         : quiet     ? silent()
         : stuck_ms > 0 ? stuck(stuck_ms)
         : reps > 0  ? timed(reps, late_ms, rank_dev_alloc(COUNT * sizeof(float)))
                     : run(late_ms);
    rank_dev_close(comm);
    return rc;
}
