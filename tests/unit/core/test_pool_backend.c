/*
 * Unit tests of a pool's backend table (daemon/core/pool.h): the pool over a fake backend of the
 * test's own (the layer below it) calls create, map, punch, chunk and destroy when it should,
 * with the pages a free leaves, and cleans up after a failed create or map; over a fake that
 * commits memory (as a device pool's backend does) it asks for the reach of each allocation,
 * charges what was taken, refuses growth beyond the budget and never punches; the memfd
 * backend, driven through the same table, makes a sealed file of the size that a second
 * mapping shares, gives punched pages back and closes its file.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/pool.h"

#define MiB ((size_t)1 << 20)
#define FAKE_BYTES (4 * MiB)
#define FAKE_FD 12345
#define MAX_PUNCHES 8

static const int owner_a;
#define A ((const void *)&owner_a)

/* What the fake backend was asked to do. */
static struct {
    int creates, maps, destroys;
    int fail_create, fail_map;
    int created_device;
    size_t created_bytes;
    size_t committed;   /* the committing fake: [0, committed) backed */
    size_t last_room;   /* the room its last commit was given */
    void *destroyed_base;
    size_t npunch;
    size_t punch_off[MAX_PUNCHES], punch_len[MAX_PUNCHES];
} fake;

static coll_status_t fake_create(int device, const char *name, size_t bytes, void **mem_p)
{
    fake.creates++;
    if (fake.fail_create) {
        return COLL_ERR_NOMEM;
    }
    fake.created_device = device;
    fake.created_bytes = bytes;
    *mem_p = &fake;
    return COLL_OK;
}

static coll_status_t fake_map(void *mem, size_t bytes, uint8_t **base_p)
{
    fake.maps++;
    assert_ptr_equal(mem, &fake);
    if (fake.fail_map) {
        return COLL_ERR_NOMEM;
    }
    *base_p = aligned_alloc(4096, bytes);
    assert_non_null(*base_p);
    return COLL_OK;
}

static void fake_punch(void *mem, size_t offset, size_t len)
{
    assert_ptr_equal(mem, &fake);
    assert_true(fake.npunch < MAX_PUNCHES);
    fake.punch_off[fake.npunch] = offset;
    fake.punch_len[fake.npunch++] = len;
}

static int fake_chunk(const void *mem, size_t i, coll_pool_chunk_t *c)
{
    assert_ptr_equal(mem, &fake);
    if (i > 0) {
        return 0;
    }
    *c = (coll_pool_chunk_t){0, FAKE_BYTES, FAKE_FD};
    return 1;
}

/* Commits in whole MiB, as a device pool's backend commits in granules. */
static coll_status_t fake_commit(void *mem, size_t end, size_t room, size_t *grown_p)
{
    size_t want = end <= fake.committed ? 0 : (end - fake.committed + MiB - 1) / MiB * MiB;

    assert_ptr_equal(mem, &fake);
    fake.last_room = room;
    if (want > room) {
        return COLL_ERR_POOL_FULL;
    }
    fake.committed += want;
    *grown_p = want;
    return COLL_OK;
}

static void fake_destroy(void *mem, uint8_t *base, size_t bytes)
{
    assert_ptr_equal(mem, &fake);
    fake.destroys++;
    fake.destroyed_base = base;
    free(base);
}

/* A kind that is not the memfd backend's, to see where the pool's kind comes from (a name the
 * pool never reads). */
static const coll_pool_backend_t fake_backend = {
    .kind = COLL_MEM_KINDS,
    .create = fake_create, .map = fake_map, .punch = fake_punch,
    .chunk = fake_chunk, .destroy = fake_destroy,
};

/* The same with memory committed as allocations reach further, and nothing given back. */
static const coll_pool_backend_t fake_committing = {
    .kind = COLL_MEM_KINDS,
    .create = fake_create, .map = fake_map, .commit = fake_commit,
    .chunk = fake_chunk, .destroy = fake_destroy,
};

static int reset(void **state)
{
    (void)state;
    memset(&fake, 0, sizeof(fake));
    return 0;
}

static size_t alloc_ok(coll_pool_t *pool, size_t bytes)
{
    size_t off = (size_t)-1;
    assert_int_equal(coll_pool_alloc(pool, bytes, A, &off), COLL_OK);
    return off;
}

static void test_create_maps_once_and_destroy_frees(void **state)
{
    coll_pool_t *pool = NULL;
    uint8_t *base;

    assert_int_equal(coll_pool_create_on(&fake_backend, 0, "unit-fake", FAKE_BYTES, &pool), COLL_OK);
    assert_int_equal(fake.creates, 1);
    assert_int_equal(fake.maps, 1);
    assert_int_equal(fake.created_bytes, FAKE_BYTES);
    base = coll_pool_base(pool);
    assert_non_null(base);
    assert_int_equal(coll_pool_size(pool), FAKE_BYTES);
    assert_int_equal(coll_pool_fd(pool), FAKE_FD);
    assert_int_equal(coll_pool_kind(pool), COLL_MEM_KINDS);
    assert_int_equal(fake.created_device, 0);
    assert_int_equal(fake.destroys, 0);
    coll_pool_destroy(pool);
    assert_int_equal(fake.destroys, 1);
    assert_ptr_equal(fake.destroyed_base, base);
}

/* A failed create leaves nothing to destroy; a failed map destroys the unmapped backing. */
static void test_failures_leave_nothing(void **state)
{
    for (int map_fails = 0; map_fails <= 1; map_fails++) {
        coll_pool_t *pool = NULL;

        reset(state);
        fake.fail_create = !map_fails;
        fake.fail_map = map_fails;
        assert_int_equal(coll_pool_create_on(&fake_backend, 0, "unit-fake", FAKE_BYTES, &pool),
                         COLL_ERR_NOMEM);
        assert_null(pool);
        assert_int_equal(fake.maps, map_fails);
        assert_int_equal(fake.destroys, map_fails);
        assert_null(fake.destroyed_base);
    }
}

static void test_zero_bytes_never_reach_the_backend(void **state)
{
    coll_pool_t *pool = NULL;

    assert_int_equal(coll_pool_create_on(&fake_backend, 0, "unit-fake", 0, &pool), COLL_ERR_INVALID);
    assert_null(pool);
    assert_int_equal(fake.creates, 0);
}

/* On demand, a free gives the backend the whole pages of the gap it leaves: here the pages
 * between the first block's end, rounded up, and the third block's start, rounded down. */
static void test_on_demand_free_punches_the_gap_pages(void **state)
{
    coll_pool_budget_t budget = {.limit = FAKE_BYTES, .used = 0};
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    coll_pool_t *pool;

    assert_int_equal(coll_pool_create_on(&fake_backend, 0, "unit-fake", FAKE_BYTES, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 1);
    size_t a = alloc_ok(pool, 100), b = alloc_ok(pool, 3 * page), c = alloc_ok(pool, 64);
    assert_int_equal(a, 0);
    assert_int_equal(coll_pool_free(pool, b, A), COLL_OK);
    assert_int_equal(fake.npunch, 1);
    assert_int_equal(fake.punch_off[0], page);
    assert_int_equal(fake.punch_len[0], c / page * page - page);
    /* The last block freed: the gap runs to the end of the pool. */
    assert_int_equal(coll_pool_free(pool, c, A), COLL_OK);
    assert_int_equal(fake.npunch, 2);
    assert_int_equal(fake.punch_off[1], page);
    assert_int_equal(fake.punch_len[1], FAKE_BYTES - page);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
}

/* A pool charged for its size keeps its pages: no free reaches the backend. */
static void test_fixed_pool_never_punches(void **state)
{
    coll_pool_budget_t budget = {.limit = FAKE_BYTES, .used = 0};
    coll_pool_t *pool;

    assert_int_equal(coll_pool_create_on(&fake_backend, 0, "unit-fake", FAKE_BYTES, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 0);
    size_t b = alloc_ok(pool, MiB);
    assert_int_equal(coll_pool_free(pool, b, A), COLL_OK);
    coll_pool_free_owner(pool, A);
    assert_int_equal(fake.npunch, 0);
    coll_pool_destroy(pool);
}

/* A committing backend is asked for the end of every allocation with the budget's room; the
 * pool is charged what it took (not the allocations), refused when the backend has no room,
 * never punched, and gives its charge back when destroyed. */
static void test_committing_backend_is_charged_what_it_took(void **state)
{
    coll_pool_budget_t budget = {.limit = 3 * MiB, .used = 0};
    coll_pool_t *pool;
    size_t off = 0;

    assert_int_equal(coll_pool_create_on(&fake_committing, 3, "unit-commit", FAKE_BYTES, &pool),
                     COLL_OK);
    assert_int_equal(fake.created_device, 3);
    coll_pool_set_budget(pool, &budget, 1);
    size_t a = alloc_ok(pool, 100);
    assert_int_equal(fake.committed, MiB);
    assert_int_equal(fake.last_room, 3 * MiB);
    assert_int_equal(budget.used, MiB);
    assert_int_equal(coll_pool_charged(pool), MiB);
    size_t b = alloc_ok(pool, MiB); /* reaches past the first MiB: one more */
    assert_int_equal(b, 128);
    assert_int_equal(fake.last_room, 2 * MiB);
    assert_int_equal(budget.used, 2 * MiB);
    /* 2 MiB more would need 2 more: the budget has 1. */
    assert_int_equal(coll_pool_alloc(pool, 2 * MiB, A, &off), COLL_ERR_POOL_FULL);
    assert_int_equal(budget.used, 2 * MiB);
    assert_int_equal(coll_pool_allocations(pool), 2);
    assert_int_equal(coll_pool_free(pool, b, A), COLL_OK);
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    assert_int_equal(fake.npunch, 0);
    assert_int_equal(budget.used, 2 * MiB); /* kept until the pool goes */
    /* The freed range is backed: an allocation inside it takes nothing more. */
    assert_int_equal(coll_pool_alloc(pool, MiB + MiB / 2, A, &off), COLL_OK);
    assert_int_equal(budget.used, 2 * MiB);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
    assert_int_equal(fake.destroys, 1);
}

/* ---- the memfd backend through its table ---------------------------------------------------- */

static void test_memfd_table_is_host_memory(void **state)
{
    assert_string_equal(coll_pool_memfd.name, "memfd");
    assert_int_equal(coll_pool_memfd.kind, COLL_MEM_HOST);
}

/* create makes a sealed file of the size; map and a second mapping of the exported fd share
 * the bytes; punch gives the pages back (they read zero, the file holds fewer blocks); destroy
 * closes the file. */
static void test_memfd_backend_round_trip(void **state)
{
    const coll_pool_backend_t *be = &coll_pool_memfd;
    void *mem = NULL;
    uint8_t *base = NULL, *other;
    struct stat st;

    coll_pool_chunk_t c;

    assert_int_equal(be->create(0, "unit-memfd", 4 * MiB, &mem), COLL_OK);
    assert_null(be->commit);
    assert_int_equal(be->chunk(mem, 0, &c), 1);
    assert_int_equal(be->chunk(mem, 1, &c), 0);
    int fd = c.fd;
    assert_int_equal(c.offset, 0);
    assert_int_equal(c.bytes, 4 * MiB);
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 4 * MiB);
    assert_int_equal(fcntl(fd, F_GET_SEALS) & (F_SEAL_SHRINK | F_SEAL_GROW),
                     F_SEAL_SHRINK | F_SEAL_GROW);
    assert_int_equal(be->map(mem, 4 * MiB, &base), COLL_OK);
    other = mmap(NULL, 4 * MiB, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(other != MAP_FAILED);
    memset(base, 7, 4 * MiB);
    assert_int_equal(other[3 * MiB + 5], 7);
    assert_int_equal(fstat(fd, &st), 0);
    blkcnt_t before = st.st_blocks;
    be->punch(mem, MiB, 2 * MiB);
    assert_int_equal(other[MiB], 0);
    assert_int_equal(base[2 * MiB + 77], 0);
    assert_int_equal(base[3 * MiB], 7);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(st.st_blocks < before);
    munmap(other, 4 * MiB);
    be->destroy(mem, base, 4 * MiB);
    errno = 0;
    assert_int_equal(fcntl(fd, F_GETFD), -1);
    assert_int_equal(errno, EBADF);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_create_maps_once_and_destroy_frees, reset),
        cmocka_unit_test_setup(test_failures_leave_nothing, reset),
        cmocka_unit_test_setup(test_zero_bytes_never_reach_the_backend, reset),
        cmocka_unit_test_setup(test_on_demand_free_punches_the_gap_pages, reset),
        cmocka_unit_test_setup(test_fixed_pool_never_punches, reset),
        cmocka_unit_test_setup(test_committing_backend_is_charged_what_it_took, reset),
        cmocka_unit_test(test_memfd_table_is_host_memory),
        cmocka_unit_test(test_memfd_backend_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
