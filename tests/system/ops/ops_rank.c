/*
 * ops_rank: one rank of the operations tests (tests/system/ops), started by the test scripts with the
 * COLL_* environment of its rank. It joins the job, then runs --iters float32 sum allreduces of
 * --count elements and checks every result (rank r contributes r + 1 + iteration).
 *
 * --stall-rank R --release-file F: rank R waits until F exists before submitting its first
 * allreduce, so the other ranks wait on it: the status server must name it.
 * --ready-file F: after joining, every rank creates F.<rank>; the test knows the job met.
 * --sleep-ms MS: pause between iterations (a job that keeps running while it is observed).
 * --expect-error TEXT: the first allreduce must fail with a message containing TEXT (the
 * daemon is stopped under it); exit 0 when it does.
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage error.
 *
 * The install test builds this file outside the project with `cc -std=c11 $(pkg-config ...)`.
 */
#define _POSIX_C_SOURCE 200809L
#include <collective.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    long iters;
    size_t count;
    int stall_rank;
    const char *release_file;
    const char *ready_file;
    long sleep_ms;
    const char *expect_error;
} opts_t;

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option opts[] = {
        {"iters", required_argument, NULL, 'i'},        {"count", required_argument, NULL, 'c'},
        {"stall-rank", required_argument, NULL, 's'},   {"release-file", required_argument, NULL, 'r'},
        {"ready-file", required_argument, NULL, 'R'},   {"sleep-ms", required_argument, NULL, 'S'},
        {"expect-error", required_argument, NULL, 'e'}, {NULL, 0, NULL, 0}};
    int c;

    *o = (opts_t){1, 1u << 20, -1, NULL, NULL, 0, NULL};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'i': o->iters = atol(optarg); break;
        case 'c': o->count = (size_t)atol(optarg); break;
        case 's': o->stall_rank = atoi(optarg); break;
        case 'r': o->release_file = optarg; break;
        case 'R': o->ready_file = optarg; break;
        case 'S': o->sleep_ms = atol(optarg); break;
        case 'e': o->expect_error = optarg; break;
        default: return -1;
        }
    }
    return optind == argc && (o->stall_rank < 0 || o->release_file != NULL) ? 0 : -1;
}

static void touch(const char *prefix, int rank)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s.%d", prefix, rank);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        close(fd);
    }
}

/* The stalled rank holds its first submission until the test releases it (at most 120 s). */
static void wait_release(const opts_t *o, int rank)
{
    for (int i = 0; rank == o->stall_rank && i < 6000 && access(o->release_file, F_OK) != 0; i++) {
        sleep_ms(20);
    }
}

static int check(const float *buf, size_t n, int world, long it, int rank)
{
    float want = (float)(world * (world + 1) / 2 + world * it);
    for (size_t i = 0; i < n; i++) {
        if (buf[i] != want) {
            fprintf(stderr, "rank %d: iteration %ld: element %zu is %g, expected %g\n", rank, it,
                    i, (double)buf[i], (double)want);
            return -1;
        }
    }
    return 0;
}

static int iterate(coll_comm_t *comm, const opts_t *o, float *buf)
{
    int rank = coll_comm_rank(comm), world = coll_comm_world_size(comm);

    for (long it = 0; it < o->iters; it++) {
        coll_status_t st;
        for (size_t i = 0; i < o->count; i++) {
            buf[i] = (float)(rank + 1 + it);
        }
        if (it == 0) {
            wait_release(o, rank);
        }
        st = coll_allreduce(comm, buf, buf, o->count, COLL_FLOAT32, COLL_SUM);
        if (o->expect_error != NULL) {
            const char *msg = coll_comm_last_error(comm);
            if (st != COLL_OK && strstr(msg, o->expect_error) != NULL) {
                printf("rank %d: failed as expected: %s: %s\n", rank, coll_err_name(st), msg);
                return 0;
            }
            fprintf(stderr, "rank %d: expected an error with '%s', got %s: %s\n", rank,
                    o->expect_error, coll_err_name(st), msg);
            return -1;
        }
        if (st != COLL_OK) {
            fprintf(stderr, "rank %d: allreduce %ld: %s: %s\n", rank, it, coll_err_name(st),
                    coll_comm_last_error(comm));
            return -1;
        }
        if (check(buf, o->count, world, it, rank) < 0) {
            return -1;
        }
        sleep_ms(o->sleep_ms);
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    coll_comm_t *comm;
    float *buf = NULL;
    coll_status_t st;
    int rc;

    if (parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: ops_rank [--iters N] [--count C] [--stall-rank R --release-file F] "
                        "[--ready-file F] [--sleep-ms MS] [--expect-error TEXT]\n");
        return 2;
    }
    st = coll_comm_create(NULL, &comm);
    if (st != COLL_OK) {
        fprintf(stderr, "ops_rank: joining the job: %s: %s\n", coll_strerror(st),
                coll_comm_last_error(NULL));
        return 1;
    }
    if (o.ready_file != NULL) {
        touch(o.ready_file, coll_comm_rank(comm));
    }
    st = coll_mem_alloc(comm, o.count * sizeof(float) + 64, (void **)&buf);
    if (st != COLL_OK) {
        fprintf(stderr, "ops_rank: coll_mem_alloc: %s: %s\n", coll_strerror(st),
                coll_comm_last_error(comm));
        coll_comm_destroy(comm);
        return 1;
    }
    rc = iterate(comm, &o, buf);
    if (rc == 0) {
        printf("rank %d: done\n", coll_comm_rank(comm));
    }
    coll_comm_destroy(comm);
    return rc == 0 ? 0 : 1;
}
