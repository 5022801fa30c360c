/*
 * devpool_check: one rank of the device pool checks, started by collective-launch (or by
 * tests/system/gpu/gpu_test.py) with the COLL_* environment of its rank. On a machine with a
 * GPU it checks the real thing; with COLL_DEVICE_FAKE=1 (daemon and ranks) the same code runs
 * over the fake device layer, host memory standing for the device's.
 *
 * The local ranks share their job's pool on one device (--device, default 0):
 *  1. each allocates a buffer of its own size (--bytes + rank MiB), so the pool grows several
 *     times, in chunks, while the others allocate; the ranks exchange the buffers' pool offsets
 *     (an allreduce in the host pool);
 *  2. each allocates a small second buffer: its reply maps every chunk the pool has now, so
 *     the others' first buffers are mapped here too;
 *  3. each writes its pattern into its first buffer (a copy from the host on a stream of the
 *     device layer), a barrier, and each reads every other rank's buffer through its own
 *     mapping (pool base + that rank's offset) and checks the other's pattern;
 *  4. coll_mem_query() says what its buffers are; frees work once and then say not in pool.
 * --budget-bytes B (the daemon's device_pool_budget): an allocation beyond it is refused with
 *     COLL_ERR_POOL_FULL and a message that names the budget.
 * --hold-file F: after step 3 rank r creates F.<r> and waits (at most 60 s) for F.release, so a
 *     test can read the daemon's status while the pool is in use.
 * --refuse-collective: last, a compressed broadcast from a device buffer must be refused
 *     (COLL_ERR_UNSUPPORTED: the staged path compresses the allreduce only), which fails the
 *     job.
 * --expect-refused TEXT: no device memory is to be had; the first device allocation must fail
 *     with COLL_ERR_UNSUPPORTED and a message containing TEXT, and a host allreduce must still
 *     work (the daemon serves host jobs).
 *
 * Exit status: 0 success, 1 a failed check (with a message), 2 usage, 77 skipped (this process
 * has no device layer: no CUDA device, and COLL_DEVICE_FAKE is not set).
 */
#include <collective.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "device/dev.h"

#define MiB ((size_t)1 << 20)
#define SKIP 77

typedef struct {
    int device;
    size_t bytes;
    size_t budget;
    const char *hold_file;
    const char *expect_refused;
    int refuse_collective;
} opts_t;

static const coll_dev_ops_t *ops;
static coll_dev_stream_t stream;

static int parse(int argc, char **argv, opts_t *o)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},     {"bytes", required_argument, NULL, 'b'},
        {"budget-bytes", required_argument, NULL, 'B'}, {"hold-file", required_argument, NULL, 'h'},
        {"expect-refused", required_argument, NULL, 'e'},
        {"refuse-collective", no_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
    int c;

    *o = (opts_t){0, 3 * MiB, 0, NULL, NULL, 0};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o->device = atoi(optarg); break;
        case 'b': o->bytes = (size_t)atol(optarg); break;
        case 'B': o->budget = (size_t)atol(optarg); break;
        case 'h': o->hold_file = optarg; break;
        case 'e': o->expect_refused = optarg; break;
        case 'r': o->refuse_collective = 1; break;
        default: return -1;
        }
    }
    return optind == argc && o->bytes >= 64 ? 0 : -1;
}

static int fail(coll_comm_t *comm, const char *what, coll_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s: %s\n", coll_comm_rank(comm), what, coll_err_name(st),
            coll_comm_last_error(comm));
    return -1;
}

static uint8_t pattern(int rank, size_t i)
{
    return (uint8_t)(rank * 37 + i * 11 + 1);
}

/* Copy between host and device memory through the device layer's stream, and wait. */
static int copy(void *dst, const void *src, size_t n)
{
    if (ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src, n, stream) != COLL_OK ||
        ops->stream_sync(stream) != COLL_OK) {
        fprintf(stderr, "copy of %zu bytes: %s\n", n, coll_dev_error());
        return -1;
    }
    return 0;
}

/* Every rank's value of @p mine, through an allreduce in the host pool (zeros elsewhere). */
static int exchange(coll_comm_t *comm, int64_t *slots, int64_t mine, int64_t *all)
{
    int rank = coll_comm_rank(comm), world = coll_comm_world_size(comm);
    coll_status_t st;

    memset(slots, 0, (size_t)world * sizeof(*slots));
    slots[rank] = mine;
    if ((st = coll_allreduce(comm, slots, slots, (size_t)world, COLL_INT64, COLL_SUM)) != COLL_OK) {
        return fail(comm, "exchanging offsets", st);
    }
    memcpy(all, slots, (size_t)world * sizeof(*all));
    return 0;
}

static int check_query(coll_comm_t *comm, const opts_t *o, const uint8_t *buf, int64_t *off_p,
                       uint8_t **base_p)
{
    coll_mem_info_t info;
    coll_status_t st = coll_mem_query(comm, buf + 100, &info);

    if (st != COLL_OK) {
        return fail(comm, "coll_mem_query", st);
    }
    if (info.kind != COLL_MEMORY_CUDA || info.device != o->device ||
        (uint8_t *)info.pool_base + info.offset != buf + 100) {
        fprintf(stderr, "rank %d: coll_mem_query says kind %d device %d offset %llu base %p for "
                "%p\n", coll_comm_rank(comm), (int)info.kind, info.device,
                (unsigned long long)info.offset, info.pool_base, (void *)(buf + 100));
        return -1;
    }
    *off_p = (int64_t)info.offset - 100;
    *base_p = info.pool_base;
    return 0;
}

/* Steps 3: write this rank's pattern, then read and check every other rank's. */
static int check_others(coll_comm_t *comm, const opts_t *o, uint8_t *base, const int64_t *offs,
                        int64_t *slots, uint8_t *host)
{
    int rank = coll_comm_rank(comm), world = coll_comm_world_size(comm);
    int64_t all[64];

    for (size_t i = 0; i < o->bytes + (size_t)rank * MiB; i++) {
        host[i] = pattern(rank, i);
    }
    if (copy(base + offs[rank], host, o->bytes + (size_t)rank * MiB) < 0 ||
        exchange(comm, slots, 0, all) < 0) { /* a barrier: every pattern is written */
        return -1;
    }
    for (int r = 0; r < world; r++) {
        size_t n = o->bytes + (size_t)r * MiB;
        if (copy(host, base + offs[r], n) < 0) {
            return -1;
        }
        for (size_t i = 0; i < n; i++) {
            if (host[i] != pattern(r, i)) {
                fprintf(stderr, "rank %d: rank %d's buffer at offset %lld: byte %zu is %u, "
                        "expected %u\n", rank, r, (long long)offs[r], i, host[i], pattern(r, i));
                return -1;
            }
        }
    }
    printf("rank %d: read the patterns of all %d ranks through its own mapping\n", rank, world);
    return 0;
}

static int expect_status(coll_comm_t *comm, coll_status_t st, coll_status_t want,
                         const char *text, const char *what)
{
    const char *msg = coll_comm_last_error(comm);

    if (st != want || strstr(msg, text) == NULL) {
        fprintf(stderr, "rank %d: %s: expected %s with '%s', got %s: %s\n", coll_comm_rank(comm),
                what, coll_err_name(want), text, coll_err_name(st), msg);
        return -1;
    }
    printf("rank %d: %s refused as expected: %s: %s\n", coll_comm_rank(comm), what,
           coll_err_name(st), msg);
    return 0;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static void hold(const opts_t *o, int rank)
{
    char path[4096];
    int fd;

    snprintf(path, sizeof(path), "%s.%d", o->hold_file, rank);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)) >= 0) {
        close(fd);
    }
    snprintf(path, sizeof(path), "%s.release", o->hold_file);
    for (int i = 0; i < 3000 && access(path, F_OK) != 0; i++) {
        sleep_ms(20);
    }
}

/* An allocation beyond the daemon's device_pool_budget is refused and says so. */
static int check_budget(coll_comm_t *comm, const opts_t *o)
{
    void *p = NULL;

    coll_status_t st = coll_mem_alloc_on(comm, o->budget + 1, COLL_MEMORY_CUDA, o->device, &p);

    return expect_status(comm, st, COLL_ERR_POOL_FULL, "device_pool_budget",
                         "an allocation beyond the budget");
}

static int check_frees(coll_comm_t *comm, uint8_t *big, uint8_t *small)
{
    coll_status_t st;

    if ((st = coll_mem_free(comm, small)) != COLL_OK ||
        (st = coll_mem_free(comm, big)) != COLL_OK) {
        return fail(comm, "coll_mem_free", st);
    }
    return expect_status(comm, coll_mem_free(comm, big), COLL_ERR_NOT_IN_POOL,
                         "not an allocation", "a second free");
}

/* Steps 1 and 2: the first buffer (its offset to every rank), then the second. */
static int allocate(coll_comm_t *comm, const opts_t *o, int64_t *slots, int64_t *offs,
                    uint8_t **big_p, uint8_t **small_p, uint8_t **base_p)
{
    size_t mine = o->bytes + (size_t)coll_comm_rank(comm) * MiB;
    int64_t off = 0;
    coll_status_t st = coll_mem_alloc_on(comm, mine, COLL_MEMORY_CUDA, o->device,
                                         (void **)big_p);

    if (st != COLL_OK) {
        return fail(comm, "coll_mem_alloc_on (first buffer)", st);
    }
    if (check_query(comm, o, *big_p, &off, base_p) < 0 || exchange(comm, slots, off, offs) < 0) {
        return -1;
    }
    st = coll_mem_alloc_on(comm, 4096, COLL_MEMORY_CUDA, o->device, (void **)small_p);
    return st != COLL_OK ? fail(comm, "coll_mem_alloc_on (second buffer)", st) : 0;
}

/* A compressed broadcast from device memory is refused (the staged path compresses the
 * allreduce only), which fails the job: each rank hears its own refusal or, with the same
 * words, the job's failure. */
static int check_collective_refused(coll_comm_t *comm, uint8_t *small)
{
    coll_op_params_t p = {.field_mask = COLL_OP_PARAM_COMPRESSION};
    coll_request_t *req = NULL;
    coll_status_t st = coll_compression_parse("fp16", &p.compression);

    if (st == COLL_OK) {
        st = coll_broadcast_async(comm, small, small, 16, COLL_FLOAT32, 0, &p, &req);
    }
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(req, 30000);
        coll_req_free(req);
    }
    return expect_status(comm, st, COLL_ERR_UNSUPPORTED, "the staged path runs",
                         "a compressed broadcast from device memory");
}

static int run_pool(coll_comm_t *comm, const opts_t *o)
{
    int rank = coll_comm_rank(comm), world = coll_comm_world_size(comm);
    int64_t *slots = NULL, offs[64], all[64];
    uint8_t *big = NULL, *small = NULL, *base = NULL, *host = malloc(o->bytes + 64 * MiB);
    coll_status_t st = COLL_OK;
    int rc = -1;

    if (world > 64 || host == NULL ||
        (st = coll_mem_alloc(comm, (size_t)world * sizeof(int64_t), (void **)&slots)) != COLL_OK) {
        free(host);
        return world > 64 || host == NULL ? -1 : fail(comm, "coll_mem_alloc", st);
    }
    if (allocate(comm, o, slots, offs, &big, &small, &base) == 0) {
        rc = check_others(comm, o, base, offs, slots, host);
    }
    if (rc == 0 && o->hold_file != NULL) {
        hold(o, rank);
    }
    if (rc == 0 && o->budget > 0) {
        rc = check_budget(comm, o);
    }
    if (rc == 0 && o->refuse_collective) {
        /* After every rank's checks: the refusal fails the job. */
        rc = exchange(comm, slots, 0, all) < 0 ? -1 : check_collective_refused(comm, small);
    } else if (rc == 0) {
        rc = check_frees(comm, big, small);
    }
    free(host);
    return rc;
}

/* No device memory is to be had: refused with the reason, and host jobs still run. */
static int run_refused(coll_comm_t *comm, const opts_t *o)
{
    int world = coll_comm_world_size(comm);
    int64_t *slots = NULL, all[64];
    void *p = NULL;
    coll_status_t st;

    if (expect_status(comm, coll_mem_alloc_on(comm, MiB, COLL_MEMORY_CUDA, o->device, &p),
                      COLL_ERR_UNSUPPORTED, o->expect_refused, "a device allocation") < 0) {
        return -1;
    }
    if (world > 64 ||
        (st = coll_mem_alloc(comm, (size_t)world * sizeof(int64_t), (void **)&slots)) != COLL_OK) {
        return world > 64 ? -1 : fail(comm, "coll_mem_alloc", st);
    }
    if (exchange(comm, slots, coll_comm_rank(comm) + 1, all) < 0) {
        return -1;
    }
    for (int r = 0; r < world; r++) {
        if (all[r] != r + 1) {
            fprintf(stderr, "host allreduce: slot %d is %lld\n", r, (long long)all[r]);
            return -1;
        }
    }
    printf("rank %d: a host allreduce ran\n", coll_comm_rank(comm));
    return 0;
}

int main(int argc, char **argv)
{
    opts_t o;
    coll_comm_t *comm;
    coll_status_t st;
    int rc;

    if (parse(argc, argv, &o) < 0) {
        fprintf(stderr, "usage: devpool_check [--device D] [--bytes N] [--budget-bytes B] "
                "[--hold-file F] [--refuse-collective] [--expect-refused TEXT]\n");
        return 2;
    }
    if (o.expect_refused == NULL &&
        (coll_dev_open(&ops) != COLL_OK || ops->stream_create(o.device, &stream) != COLL_OK)) {
        printf("skipped: no CUDA device (%s%s%s)\n", coll_dev_status(),
               coll_dev_error()[0] != '\0' ? "; " : "", coll_dev_error());
        return SKIP;
    }
    if ((st = coll_comm_create(NULL, &comm)) != COLL_OK) {
        fprintf(stderr, "devpool_check: joining the job: %s: %s\n", coll_strerror(st),
                coll_comm_last_error(NULL));
        return 1;
    }
    rc = o.expect_refused != NULL ? run_refused(comm, &o) : run_pool(comm, &o);
    if (rc == 0) {
        printf("rank %d: done\n", coll_comm_rank(comm));
    }
    coll_comm_destroy(comm);
    if (stream != NULL) {
        ops->stream_destroy(stream);
    }
    return rc == 0 ? 0 : 1;
}
