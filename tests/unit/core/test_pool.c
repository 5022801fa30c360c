/* Unit tests of the memfd job pool (daemon/pool.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/pool.h"

#define POOL_BYTES 4096u

/* Owners are compared by address only. */
static const int owner_a, owner_b;
#define A ((const void *)&owner_a)
#define B ((const void *)&owner_b)

static int setup(void **state)
{
    coll_pool_t *pool;
    if (coll_pool_create("unit-pool", POOL_BYTES, &pool) != COLL_OK) {
        return -1;
    }
    *state = pool;
    return 0;
}

static int teardown(void **state)
{
    coll_pool_destroy(*state);
    return 0;
}

static size_t alloc_ok(coll_pool_t *pool, size_t bytes, const void *owner)
{
    size_t off = (size_t)-1;
    assert_int_equal(coll_pool_alloc(pool, bytes, owner, &off), COLL_OK);
    return off;
}

static void test_create_reports_size_and_fd(void **state)
{
    coll_pool_t *pool = *state;
    int fd = coll_pool_fd(pool);

    assert_int_equal(coll_pool_size(pool), POOL_BYTES);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES);
    assert_non_null(coll_pool_base(pool));
    assert_true(fd >= 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
}

static void test_create_zero_bytes_invalid(void **state)
{
    coll_pool_t *pool = NULL;
    assert_int_equal(coll_pool_create("unit-pool", 0, &pool), COLL_ERR_INVALID);
    assert_null(pool);
}

static void test_destroy_null_is_safe(void **state)
{
    coll_pool_destroy(NULL);
}

static void test_alloc_offsets_are_64_aligned(void **state)
{
    coll_pool_t *pool = *state;
    static const size_t sizes[] = {1, 63, 64, 65, 100, 128, 7};
    size_t expect = 0;

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t off = alloc_ok(pool, sizes[i], A);
        assert_int_equal(off, expect);
        assert_int_equal(off % COLL_POOL_ALIGN, 0);
        assert_int_equal((uintptr_t)(coll_pool_base(pool) + off) % COLL_POOL_ALIGN, 0);
        expect += (sizes[i] + 63) / 64 * 64;
    }
}

static void test_alloc_zero_bytes_invalid(void **state)
{
    size_t off;
    assert_int_equal(coll_pool_alloc(*state, 0, A, &off), COLL_ERR_INVALID);
}

static void test_alloc_whole_pool_then_full(void **state)
{
    coll_pool_t *pool = *state;
    size_t off;

    assert_int_equal(alloc_ok(pool, POOL_BYTES, A), 0);
    assert_int_equal(coll_pool_free_bytes(pool), 0);
    assert_int_equal(coll_pool_alloc(pool, 1, A, &off), COLL_ERR_POOL_FULL);
}

static void test_alloc_larger_than_pool_full(void **state)
{
    size_t off;
    assert_int_equal(coll_pool_alloc(*state, POOL_BYTES + 1, A, &off), COLL_ERR_POOL_FULL);
    assert_int_equal(coll_pool_alloc(*state, SIZE_MAX, A, &off), COLL_ERR_POOL_FULL);
    assert_int_equal(coll_pool_free_bytes(*state), POOL_BYTES);
}

/* Enough bytes are free in total, but in no single gap. */
static void test_alloc_fragmented_pool_full(void **state)
{
    coll_pool_t *pool = *state;
    size_t off;

    for (size_t i = 0; i < POOL_BYTES / 64; i++) {
        alloc_ok(pool, 64, A);
    }
    for (size_t i = 0; i < POOL_BYTES / 64; i += 2) {
        assert_int_equal(coll_pool_free(pool, i * 64, A), COLL_OK);
    }
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES / 2);
    assert_int_equal(coll_pool_alloc(pool, 128, A, &off), COLL_ERR_POOL_FULL);
    assert_int_equal(alloc_ok(pool, 64, B), 0);
}

static void test_first_fit_fills_gaps_after_free(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 64, A);
    size_t b = alloc_ok(pool, 256, A);
    size_t c = alloc_ok(pool, 64, A);

    assert_int_equal(a, 0);
    assert_int_equal(b, 64);
    assert_int_equal(c, 320);
    assert_int_equal(coll_pool_free(pool, b, A), COLL_OK);
    /* The 256-byte gap takes a 128 and a 64 in order; a second 128 no longer fits there. */
    assert_int_equal(alloc_ok(pool, 128, B), 64);
    assert_int_equal(alloc_ok(pool, 64, B), 192);
    assert_int_equal(alloc_ok(pool, 128, B), 384);
    assert_int_equal(alloc_ok(pool, 64, B), 256);
}

static void test_first_fit_reuses_freed_front(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 1024, A);

    alloc_ok(pool, 1024, A);
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    assert_int_equal(alloc_ok(pool, 512, B), 0);
}

static void test_free_wrong_owner_not_in_pool(void **state)
{
    coll_pool_t *pool = *state;
    size_t off = alloc_ok(pool, 128, A);

    assert_int_equal(coll_pool_free(pool, off, B), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 128);
    assert_true(coll_pool_range_owned(pool, off, 128, A));
    assert_int_equal(coll_pool_free(pool, off, A), COLL_OK);
}

static void test_free_wrong_offset_not_in_pool(void **state)
{
    coll_pool_t *pool = *state;
    size_t off = alloc_ok(pool, 128, A);

    assert_int_equal(coll_pool_free(pool, off + 64, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free(pool, off + 128, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free(pool, POOL_BYTES, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free(pool, SIZE_MAX, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 128);
}

static void test_double_free_not_in_pool(void **state)
{
    coll_pool_t *pool = *state;
    size_t off = alloc_ok(pool, 64, A);

    assert_int_equal(coll_pool_free(pool, off, A), COLL_OK);
    assert_int_equal(coll_pool_free(pool, off, A), COLL_ERR_NOT_IN_POOL);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES);
}

static void test_free_on_empty_pool_not_in_pool(void **state)
{
    assert_int_equal(coll_pool_free(*state, 0, A), COLL_ERR_NOT_IN_POOL);
}

static void test_free_owner_releases_only_that_owner(void **state)
{
    coll_pool_t *pool = *state;
    size_t offs[6];

    for (int i = 0; i < 6; i++) {
        offs[i] = alloc_ok(pool, 128, i % 2 ? B : A);
    }
    coll_pool_free_owner(pool, A);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 3 * 128);
    for (int i = 0; i < 6; i++) {
        if (i % 2) {
            assert_true(coll_pool_range_owned(pool, offs[i], 128, B));
        } else {
            assert_false(coll_pool_range_owned(pool, offs[i], 1, A));
            assert_int_equal(coll_pool_free(pool, offs[i], A), COLL_ERR_NOT_IN_POOL);
        }
    }
    /* A's gaps are reusable: the first one is at offset 0. */
    assert_int_equal(alloc_ok(pool, 128, A), 0);
}

static void test_free_owner_without_blocks_changes_nothing(void **state)
{
    coll_pool_t *pool = *state;
    alloc_ok(pool, 256, A);
    coll_pool_free_owner(pool, B);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 256);
}

static void test_free_bytes_accounting(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 100, A); /* rounded to 128 */
    size_t b = alloc_ok(pool, 64, B);
    size_t c = alloc_ok(pool, 1000, A); /* rounded to 1024 */

    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 128 - 64 - 1024);
    assert_int_equal(coll_pool_free(pool, b, B), COLL_OK);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES - 128 - 1024);
    assert_int_equal(coll_pool_free(pool, c, A), COLL_OK);
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES);
}

/* Many blocks: the bookkeeping array grows past its first capacity. */
static void test_many_blocks_tracked(void **state)
{
    coll_pool_t *pool = *state;

    for (size_t i = 0; i < POOL_BYTES / 64; i++) {
        assert_int_equal(alloc_ok(pool, 64, i % 3 ? A : B), i * 64);
    }
    for (size_t i = 0; i < POOL_BYTES / 64; i++) {
        assert_true(coll_pool_range_owned(pool, i * 64, 64, i % 3 ? A : B));
        assert_false(coll_pool_range_owned(pool, i * 64, 64, i % 3 ? B : A));
    }
    coll_pool_free_owner(pool, A);
    coll_pool_free_owner(pool, B);
    assert_int_equal(coll_pool_free_bytes(pool), POOL_BYTES);
}

static void test_range_owned_inside(void **state)
{
    coll_pool_t *pool = *state;
    size_t off;

    alloc_ok(pool, 64, B);
    off = alloc_ok(pool, 256, A);
    assert_true(coll_pool_range_owned(pool, off, 256, A));
    assert_true(coll_pool_range_owned(pool, off + 8, 16, A));
    assert_true(coll_pool_range_owned(pool, off + 255, 1, A));
}

static void test_range_owned_exact_end(void **state)
{
    coll_pool_t *pool = *state;
    size_t off = alloc_ok(pool, 256, A);

    assert_true(coll_pool_range_owned(pool, off + 192, 64, A));
    assert_false(coll_pool_range_owned(pool, off + 192, 65, A));
    assert_false(coll_pool_range_owned(pool, off, 257, A));
}

static void test_range_owned_len_zero(void **state)
{
    coll_pool_t *pool = *state;
    size_t off = alloc_ok(pool, 256, A);

    assert_true(coll_pool_range_owned(pool, off, 0, A));
    assert_true(coll_pool_range_owned(pool, off + 100, 0, A));
    /* At the end of the allocation, with free space after it. */
    assert_true(coll_pool_range_owned(pool, off + 256, 0, A));
    assert_false(coll_pool_range_owned(pool, off + 257, 0, A));
    assert_false(coll_pool_range_owned(pool, off, 0, B));
}

/* pool.h: "len 0 needs only offset inside or at the end of one [allocation]"; that must hold
 * when another owner's block starts right at that end too. */
static void test_range_owned_len_zero_at_end_before_other_owner(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 256, A);

    alloc_ok(pool, 256, B);
    assert_true(coll_pool_range_owned(pool, a + 256, 0, A));
}

static void test_range_owned_crossing_into_other_owner(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 256, A);
    size_t b = alloc_ok(pool, 256, B);

    assert_int_equal(b, a + 256);
    assert_false(coll_pool_range_owned(pool, a + 128, 256, A));
    assert_false(coll_pool_range_owned(pool, a + 255, 2, A));
    assert_false(coll_pool_range_owned(pool, a + 128, 256, B));
}

/* Two adjacent blocks of one owner are still two allocations: a range may not span both. */
static void test_range_owned_spanning_two_own_blocks(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 256, A);

    alloc_ok(pool, 256, A);
    assert_false(coll_pool_range_owned(pool, a + 128, 256, A));
}

static void test_range_owned_beyond_pool(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, POOL_BYTES, A);

    assert_true(coll_pool_range_owned(pool, a, POOL_BYTES, A));
    assert_false(coll_pool_range_owned(pool, a, POOL_BYTES + 1, A));
    assert_false(coll_pool_range_owned(pool, POOL_BYTES + 64, 1, A));
    assert_false(coll_pool_range_owned(pool, UINT64_MAX, 1, A));
    /* offset + len wraps around 2^64: must not look small. */
    assert_false(coll_pool_range_owned(pool, 64, UINT64_MAX, A));
    assert_false(coll_pool_range_owned(pool, UINT64_MAX - 10, 20, A));
}

static void test_range_owned_owner_mismatch(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 128, A);
    assert_false(coll_pool_range_owned(pool, a, 128, B));
    assert_false(coll_pool_range_owned(pool, a + 64, 1, NULL));
}

static void test_range_owned_in_gap_or_before_first_block(void **state)
{
    coll_pool_t *pool = *state;
    size_t a = alloc_ok(pool, 128, A);
    size_t b = alloc_ok(pool, 128, A);
    size_t c = alloc_ok(pool, 128, A);

    assert_int_equal(coll_pool_free(pool, b, A), COLL_OK);
    assert_false(coll_pool_range_owned(pool, b, 1, A));
    assert_false(coll_pool_range_owned(pool, b + 64, 64, A));
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    assert_false(coll_pool_range_owned(pool, 0, 1, A));
    assert_true(coll_pool_range_owned(pool, c, 128, A));
}

static void test_range_owned_empty_pool(void **state)
{
    assert_false(coll_pool_range_owned(*state, 0, 0, A));
    assert_false(coll_pool_range_owned(*state, 0, 1, A));
}

/* A client maps the pool through its own copy of the fd (SCM_RIGHTS is a dup across
 * processes); both mappings must see each other's writes. */
static void test_second_mapping_shares_memory(void **state)
{
    coll_pool_t *pool = *state;
    int fd = dup(coll_pool_fd(pool));
    uint8_t *base = coll_pool_base(pool), *client;

    assert_true(fd >= 0);
    client = mmap(NULL, POOL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    assert_true(client != MAP_FAILED);
    assert_true(client != base);
    for (size_t i = 0; i < POOL_BYTES; i++) {
        base[i] = (uint8_t)(i * 7 + 3);
    }
    for (size_t i = 0; i < POOL_BYTES; i++) {
        assert_int_equal(client[i], (uint8_t)(i * 7 + 3));
    }
    memset(client + 1000, 0x5a, 100);
    assert_int_equal(base[999], (uint8_t)(999 * 7 + 3));
    assert_int_equal(base[1000], 0x5a);
    assert_int_equal(base[1099], 0x5a);
    munmap(client, POOL_BYTES);
    close(fd);
}

static void test_fd_is_sealed(void **state)
{
    int fd = coll_pool_fd(*state);
    int seals = fcntl(fd, F_GET_SEALS);

    assert_true(seals >= 0);
    assert_true(seals & F_SEAL_SHRINK);
    assert_true(seals & F_SEAL_GROW);
    assert_true(seals & F_SEAL_SEAL);
    assert_int_equal(ftruncate(fd, POOL_BYTES / 2), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(ftruncate(fd, POOL_BYTES * 2), -1);
    assert_int_equal(errno, EPERM);
    assert_int_equal(lseek(fd, 0, SEEK_END), POOL_BYTES);
    /* F_SEAL_SEAL: nobody can add seals (e.g. F_SEAL_WRITE to freeze the daemon out). */
    assert_int_equal(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE), -1);
}

#define POOL_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        POOL_TEST(test_create_reports_size_and_fd),
        cmocka_unit_test(test_create_zero_bytes_invalid),
        cmocka_unit_test(test_destroy_null_is_safe),
        POOL_TEST(test_alloc_offsets_are_64_aligned),
        POOL_TEST(test_alloc_zero_bytes_invalid),
        POOL_TEST(test_alloc_whole_pool_then_full),
        POOL_TEST(test_alloc_larger_than_pool_full),
        POOL_TEST(test_alloc_fragmented_pool_full),
        POOL_TEST(test_first_fit_fills_gaps_after_free),
        POOL_TEST(test_first_fit_reuses_freed_front),
        POOL_TEST(test_free_wrong_owner_not_in_pool),
        POOL_TEST(test_free_wrong_offset_not_in_pool),
        POOL_TEST(test_double_free_not_in_pool),
        POOL_TEST(test_free_on_empty_pool_not_in_pool),
        POOL_TEST(test_free_owner_releases_only_that_owner),
        POOL_TEST(test_free_owner_without_blocks_changes_nothing),
        POOL_TEST(test_free_bytes_accounting),
        POOL_TEST(test_many_blocks_tracked),
        POOL_TEST(test_range_owned_inside),
        POOL_TEST(test_range_owned_exact_end),
        POOL_TEST(test_range_owned_len_zero),
        POOL_TEST(test_range_owned_len_zero_at_end_before_other_owner),
        POOL_TEST(test_range_owned_crossing_into_other_owner),
        POOL_TEST(test_range_owned_spanning_two_own_blocks),
        POOL_TEST(test_range_owned_beyond_pool),
        POOL_TEST(test_range_owned_owner_mismatch),
        POOL_TEST(test_range_owned_in_gap_or_before_first_block),
        POOL_TEST(test_range_owned_empty_pool),
        POOL_TEST(test_second_mapping_shares_memory),
        POOL_TEST(test_fd_is_sealed),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
