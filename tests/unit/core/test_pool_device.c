/*
 * Unit tests of the device backend of a pool (daemon/core/pool_device.c) over the fake device
 * layer (device/dev_fake.c, COLL_DEVICE_FAKE=2 from ctest): a pool reserves its range and holds
 * nothing until allocations reach into it; it grows in chunks of whole granules, by what an
 * allocation needs and at least an eighth of what it holds, within the budget's room; another
 * process imports the exported chunks and shares the memory through its own mapping; bounds
 * and ownership are the host pool's; a refused or failed growth changes nothing; a failed
 * create leaves nothing behind; destroying the pool closes its chunks and gives the budget back.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/pool.h"
#include "device/dev.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)

static const int owner_a, owner_b;
#define A ((const void *)&owner_a)
#define B ((const void *)&owner_b)

static const coll_dev_ops_t *ops;

static int setup(void **state)
{
    (void)state;
    return coll_dev_open(&ops) == COLL_OK && strcmp(ops->name, "fake") == 0 ? 0 : -1;
}

/* Descriptors open now (the listing's own not counted). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = -1;

    while (d != NULL && (e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* The lowest descriptor number free now: a limit there makes the next open fail. */
static int lowest_free_fd(void)
{
    int fd = dup(0);

    assert_true(fd >= 0);
    close(fd);
    return fd;
}

static coll_pool_t *make(coll_pool_budget_t *budget, size_t bytes, int device)
{
    coll_pool_t *pool = NULL;

    assert_int_equal(coll_pool_create_on(&coll_pool_device, device, "unit-dev", bytes, &pool),
                     COLL_OK);
    coll_pool_set_budget(pool, budget, 1);
    return pool;
}

static size_t alloc_ok(coll_pool_t *pool, size_t bytes, const void *owner)
{
    size_t off = (size_t)-1;
    assert_int_equal(coll_pool_alloc(pool, bytes, owner, &off), COLL_OK);
    return off;
}

static size_t nchunks(const coll_pool_t *pool)
{
    coll_pool_chunk_t c;
    size_t n = 0;

    while (coll_pool_chunk(pool, n, &c)) {
        n++;
    }
    return n;
}

static void test_a_pool_holds_nothing_until_allocations_reach_it(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 64 * MiB, 1);
    coll_pool_chunk_t c;

    assert_string_equal(coll_pool_device.name, "device");
    assert_int_equal(coll_pool_kind(pool), COLL_MEM_CUDA);
    assert_int_equal(coll_pool_size(pool), 64 * MiB);
    assert_int_equal((uintptr_t)coll_pool_base(pool) % GRAN, 0);
    assert_int_equal(coll_pool_charged(pool), 0);
    assert_int_equal(coll_pool_fd(pool), -1);
    assert_int_equal(budget.used, 0);
    assert_int_equal(alloc_ok(pool, 100, A), 0);
    assert_int_equal(nchunks(pool), 1);
    assert_int_equal(coll_pool_chunk(pool, 0, &c), 1);
    assert_int_equal(c.offset, 0);
    assert_int_equal(c.bytes, GRAN);
    assert_int_equal(coll_pool_fd(pool), c.fd);
    assert_int_equal(budget.used, GRAN);
    assert_int_equal(coll_pool_charged(pool), GRAN);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
    errno = 0;
    assert_int_equal(fcntl(c.fd, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
}

/* Chunks follow each other in whole granules: one allocation's need, or an eighth of what the
 * pool holds when that is more. */
static void test_growth_in_chunks(void **state)
{
    coll_pool_budget_t budget = {.limit = 256 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 256 * MiB, 0);
    coll_pool_chunk_t c;
    size_t end = 0;

    alloc_ok(pool, 3 * MiB, A);  /* needs 2 granules: [0, 4M) */
    alloc_ok(pool, 60 * MiB, A); /* reaches 63M: [4M, 64M) */
    alloc_ok(pool, 2 * MiB, A);  /* reaches 65M: needs 1 granule, but an eighth is 8M */
    assert_int_equal(nchunks(pool), 3);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(coll_pool_chunk(pool, i, &c), 1);
        assert_int_equal(c.offset, end);
        assert_int_equal(c.bytes % GRAN, 0);
        end += c.bytes;
    }
    assert_int_equal(coll_pool_chunk(pool, 1, &c), 1);
    assert_int_equal(c.bytes, 60 * MiB);
    assert_int_equal(coll_pool_chunk(pool, 2, &c), 1);
    assert_int_equal(c.bytes, 8 * MiB);
    assert_int_equal(budget.used, 72 * MiB);
    /* Inside what is held, an allocation takes nothing more. */
    alloc_ok(pool, 4 * MiB, B);
    assert_int_equal(nchunks(pool), 3);
    assert_int_equal(budget.used, 72 * MiB);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
}

/* The budget refuses growth beyond its room and changes nothing; with room for what an
 * allocation needs but not an eighth more, the pool grows by what it needs. */
static void test_budget_bounds_growth(void **state)
{
    coll_pool_budget_t budget = {.limit = 34 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 64 * MiB, 0);
    size_t off;

    alloc_ok(pool, 32 * MiB, A);
    assert_int_equal(budget.used, 32 * MiB);
    assert_int_equal(coll_pool_alloc(pool, 3 * MiB, A, &off), COLL_ERR_POOL_FULL);
    assert_int_equal(budget.used, 32 * MiB);
    assert_int_equal(nchunks(pool), 1);
    alloc_ok(pool, MiB, A); /* an eighth would be 4M: only the 2M it needs fit */
    assert_int_equal(budget.used, 34 * MiB);
    assert_int_equal(nchunks(pool), 2);
    /* Beyond the pool's range, whatever the budget. */
    budget.limit = 1024 * MiB;
    assert_int_equal(coll_pool_alloc(pool, 64 * MiB, A, &off), COLL_ERR_POOL_FULL);
    coll_pool_destroy(pool);
}

/* A growth the device cannot make (here: no descriptor left for the chunk) fails the
 * allocation and leaves the pool as it was. */
static void test_failed_growth_changes_nothing(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 64 * MiB, 0);
    struct rlimit old, low;
    size_t off = 12345;
    coll_status_t st;

    alloc_ok(pool, MiB, A);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)lowest_free_fd();
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    st = coll_pool_alloc(pool, 3 * MiB, A, &off);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &old), 0);
    assert_int_equal(st, COLL_ERR_NOMEM);
    assert_int_equal(off, 12345);
    assert_int_equal(nchunks(pool), 1);
    assert_int_equal(budget.used, GRAN);
    assert_int_equal(coll_pool_allocations(pool), 1);
    assert_true(strstr(coll_dev_error(), "memfd_create") != NULL);
    coll_pool_destroy(pool);
}

static void test_bounds_and_ownership_as_host_pools(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 64 * MiB, 0);
    size_t a = alloc_ok(pool, 1000, A), b = alloc_ok(pool, 5000, B), off;

    assert_int_equal(b, 1024);
    assert_true(coll_pool_range_owned(pool, a, 1000, A));
    assert_true(coll_pool_range_owned(pool, a + 10, 990, A));
    assert_false(coll_pool_range_owned(pool, a, 1025, A));
    assert_false(coll_pool_range_owned(pool, b, 100, A));
    assert_true(coll_pool_range_owned(pool, b, 5000, B));
    assert_false(coll_pool_range_owned(pool, 64 * MiB - 8, 16, B));
    assert_int_equal(coll_pool_free(pool, b, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free(pool, b, B), COLL_OK);
    assert_int_equal(coll_pool_alloc(pool, 0, A, &off), COLL_ERR_INVALID);
    coll_pool_free_owner(pool, A);
    assert_int_equal(coll_pool_allocations(pool), 0);
    assert_int_equal(budget.used, GRAN); /* what was taken stays until the pool goes */
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
}

/* The child: import the pool's chunks from their fds (inherited here, passed with SCM_RIGHTS
 * in the daemon), map them in a range of its own, check the parent's bytes, write its own. */
static int child_side(const coll_pool_t *pool, size_t bytes)
{
    coll_pool_chunk_t c;
    uint64_t va;
    uint8_t *p;

    if (ops->va_reserve(0, coll_pool_size(pool), GRAN, &va) != COLL_OK) {
        return 2;
    }
    for (size_t i = 0; coll_pool_chunk(pool, i, &c); i++) {
        coll_dev_mem_t m = 0;
        if (ops->mem_import(0, c.fd, &m) != COLL_OK || ops->map(0, va + c.offset, c.bytes, m)) {
            return 3;
        }
        ops->mem_release(m);
    }
    p = (uint8_t *)(uintptr_t)va;
    for (size_t i = 0; i < bytes; i += 4093) {
        if (p[i] != (uint8_t)(i % 251)) {
            return 4;
        }
        p[i] = (uint8_t)(i % 241 + 1);
    }
    return 0;
}

static void test_another_process_maps_the_chunks(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool = make(&budget, 64 * MiB, 0);
    size_t bytes = 7 * MiB;
    uint8_t *base = coll_pool_base(pool);
    int status = -1;
    pid_t pid;

    alloc_ok(pool, MiB, A);
    alloc_ok(pool, bytes - MiB - 64, B); /* a second chunk */
    assert_int_equal(nchunks(pool), 2);
    for (size_t i = 0; i < bytes; i += 4093) {
        base[i] = (uint8_t)(i % 251);
    }
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(child_side(pool, bytes));
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    for (size_t i = 0; i < bytes; i += 4093) {
        assert_int_equal(base[i], (uint8_t)(i % 241 + 1));
    }
    coll_pool_destroy(pool);
}

/* A create the device refuses (no such device) or whose range cannot be reserved leaves no
 * descriptor, mapping or charge behind. */
static void test_failed_create_leaves_nothing(void **state)
{
    coll_pool_t *pool = NULL;
    int fds = open_fds();

    assert_int_equal(coll_pool_create_on(&coll_pool_device, 7, "unit-dev", 64 * MiB, &pool),
                     COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "granularity: no fake device 7 (2 present)");
    assert_int_equal(coll_pool_create_on(&coll_pool_device, 0, "unit-dev", (size_t)1 << 62,
                                         &pool),
                     COLL_ERR_NOMEM);
    assert_null(pool);
    assert_int_equal(open_fds(), fds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_pool_holds_nothing_until_allocations_reach_it),
        cmocka_unit_test(test_growth_in_chunks),
        cmocka_unit_test(test_budget_bounds_growth),
        cmocka_unit_test(test_failed_growth_changes_nothing),
        cmocka_unit_test(test_bounds_and_ownership_as_host_pools),
        cmocka_unit_test(test_another_process_maps_the_chunks),
        cmocka_unit_test(test_failed_create_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
