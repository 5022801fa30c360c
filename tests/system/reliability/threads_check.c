/*
 * threads_check: one rank of a collective-launch job; 4 threads of each rank share one
 * communicator and each runs 50 allreduces of the same size on buffers of its own.
 *
 *   --keyed    each thread gives its operations keys (thread t, operation i: key t*1000+i),
 *              the documented way to run collectives from several threads: all 200 results
 *              must be correct.
 *   --unkeyed  no keys: the library matches unkeyed operations by call order, which only the
 *              communicator's creating thread has, so the workers' operations are refused and
 *              the job fails on every rank. What must never happen is a COLL_OK whose data is
 *              another thread's: every COLL_OK result is checked, and every rank must see an
 *              error (the main thread, which created the communicator, runs its 50 as the 4th
 *              thread and may complete some correctly before the job fails).
 *
 * Thread t's input on rank r is (t + 1) * (r + 1) + i (operation i), so a result from another
 * thread's bucket has another sum. Exit status: 0 the rule held, 1 a wrong COLL_OK (or, keyed,
 * any error), 2 usage.
 */
#include <collective.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define OPS 50
#define COUNT 4096

typedef struct {
    coll_comm_t *comm;
    int t, keyed;
    float *buf;
    int ok, wrong, failed;
    char first_error[256];
} worker_t;

static float expected(int world, int t, int i)
{
    double sum = 0;
    for (int r = 0; r < world; r++) {
        sum += (double)(t + 1) * (r + 1) + i;
    }
    return (float)sum;
}

static void one_op(worker_t *w, int i)
{
    coll_op_params_t p = {.field_mask = w->keyed ? COLL_OP_PARAM_KEY : 0,
                          .key = (uint64_t)w->t * 1000 + (uint64_t)i};
    int rank = coll_comm_rank(w->comm), world = coll_comm_world_size(w->comm);
    coll_request_t *req;
    coll_status_t st;

    for (int k = 0; k < COUNT; k++) {
        w->buf[k] = (float)((w->t + 1) * (rank + 1) + i);
    }
    st = coll_allreduce_async(w->comm, w->buf, w->buf, COUNT, COLL_FLOAT32, COLL_SUM, &p, &req);
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, -1);
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        if (w->failed++ == 0) {
            snprintf(w->first_error, sizeof(w->first_error), "%s: %s", coll_err_name(st),
                     coll_comm_last_error(w->comm));
        }
        return;
    }
    for (int k = 0; k < COUNT; k++) {
        if (w->buf[k] != expected(world, w->t, i)) {
            w->wrong++;
            return;
        }
    }
    w->ok++;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    for (int i = 0; i < OPS; i++) {
        one_op(w, i);
    }
    return NULL;
}

static int report(const worker_t *w, int keyed, int rank)
{
    int ok = 0, wrong = 0, failed = 0;

    for (int t = 0; t < THREADS; t++) {
        ok += w[t].ok;
        wrong += w[t].wrong;
        failed += w[t].failed;
        if (w[t].failed) {
            printf("rank %d thread %d: first error %s\n", rank, t, w[t].first_error);
        }
    }
    printf("threads_check: rank %d (%s): %d correct, %d wrong with COLL_OK, %d failed\n", rank,
           keyed ? "keyed" : "unkeyed", ok, wrong, failed);
    if (wrong > 0) {
        return 1;
    }
    return keyed ? failed != 0 : failed == 0;
}

static coll_status_t barrier(coll_comm_t *c)
{
    coll_request_t *req;
    coll_status_t st = coll_barrier_async(c, NULL, &req);

    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, -1);
        coll_req_free(req);
    }
    if (st != COLL_OK) {
        fprintf(stderr, "threads_check: barrier: %s: %s\n", coll_err_name(st),
                coll_comm_last_error(c));
    }
    return st;
}

int main(int argc, char **argv)
{
    int keyed = argc == 2 && strcmp(argv[1], "--keyed") == 0;
    worker_t w[THREADS] = {0};
    pthread_t th[THREADS - 1];
    coll_comm_t *c;

    if (argc != 2 || (!keyed && strcmp(argv[1], "--unkeyed") != 0)) {
        fprintf(stderr, "usage: threads_check --keyed|--unkeyed\n");
        return 2;
    }
    if (coll_comm_create(NULL, &c) != COLL_OK) {
        fprintf(stderr, "threads_check: joining: %s\n", coll_comm_last_error(NULL));
        return 1;
    }
    for (int t = 0; t < THREADS; t++) {
        w[t] = (worker_t){.comm = c, .t = t, .keyed = keyed};
        if (coll_mem_alloc(c, COUNT * sizeof(float), (void **)&w[t].buf) != COLL_OK) {
            fprintf(stderr, "threads_check: allocation: %s\n", coll_comm_last_error(c));
            return 1;
        }
    }
    /* Every rank has its buffers before any thread submits (a failed job allocates nothing). */
    if (barrier(c) != COLL_OK) {
        return 1;
    }
    for (int t = 0; t < THREADS - 1; t++) {
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    worker_main(&w[THREADS - 1]); /* the creating thread is one of the four */
    for (int t = 0; t < THREADS - 1; t++) {
        pthread_join(th[t], NULL);
    }
    int rc = report(w, keyed, coll_comm_rank(c));
    coll_comm_destroy(c);
    return rc;
}
