/* Unit tests of a pool's charge to its daemon's budget (daemon/core/pool.h): a fixed pool is
 * charged its size, one on demand what its allocations hold, and what they free goes back to
 * the kernel (the memfd's allocated blocks, fstat st_blocks, fall again). Why on demand: DDP's
 * first bucket holds the whole model, which a fixed default pool shared by the node's ranks did
 * not. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/pool.h"

#define MiB ((size_t)1 << 20)
/* What a partly used page may add to what the memfd holds: a transparent huge page of tmpfs. */
#define SLACK (2 * MiB)
/* Far more address space than the budget: only what is allocated may count. */
#define SPARSE_BYTES ((size_t)1 << 34)

static const int owner_a, owner_b;
#define A ((const void *)&owner_a)
#define B ((const void *)&owner_b)

/* Bytes of memory the pool's memfd holds (tmpfs counts the pages it allocated). */
static size_t held_bytes(const coll_pool_t *pool)
{
    struct stat st;
    assert_int_equal(fstat(coll_pool_fd(pool), &st), 0);
    return (size_t)st.st_blocks * 512;
}

static size_t alloc_ok(coll_pool_t *pool, size_t bytes, const void *owner)
{
    size_t off = (size_t)-1;
    assert_int_equal(coll_pool_alloc(pool, bytes, owner, &off), COLL_OK);
    return off;
}

static void test_fixed_pool_charged_its_size(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 5};
    coll_pool_t *pool;

    (void)state;
    assert_int_equal(coll_pool_create("unit-fixed", 8 * MiB, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 0);
    assert_int_equal(budget.used, 5 + 8 * MiB);
    assert_false(coll_pool_on_demand(pool));
    alloc_ok(pool, MiB, A);
    assert_int_equal(budget.used, 5 + 8 * MiB);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 5);
}

/* 16 GiB of address space, 4 MiB of budget: allocations are charged (rounded to 64 bytes)
 * and refused only when the budget is spent, whatever the pool's size. */
static void test_on_demand_charged_by_allocation(void **state)
{
    coll_pool_budget_t budget = {.limit = 4 * MiB, .used = MiB};
    coll_pool_t *pool;
    size_t off;

    (void)state;
    assert_int_equal(coll_pool_create("unit-demand", SPARSE_BYTES, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 1);
    assert_true(coll_pool_on_demand(pool));
    assert_int_equal(budget.used, MiB);
    assert_int_equal(coll_pool_reserve(pool, 4096), COLL_OK);
    assert_int_equal(budget.used, MiB + 4096);
    alloc_ok(pool, MiB, A);
    alloc_ok(pool, MiB + 1, B);
    assert_int_equal(budget.used, MiB + 4096 + MiB + (MiB + 64));
    /* 1 MiB - 4096 - 64 bytes of budget are left. */
    assert_int_equal(coll_pool_alloc(pool, MiB, A, &off), COLL_ERR_POOL_FULL);
    alloc_ok(pool, MiB - 4096 - 64, A);
    assert_int_equal(budget.used, budget.limit);
    assert_int_equal(coll_pool_alloc(pool, 1, B, &off), COLL_ERR_POOL_FULL);
    coll_pool_free_owner(pool, B);
    assert_int_equal(budget.used, 3 * MiB - 64);
    alloc_ok(pool, MiB, B);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, MiB);
}

/* A budget lowered below what is charged (a reload) lets nothing more in. */
static void test_on_demand_budget_lowered(void **state)
{
    coll_pool_budget_t budget = {.limit = 4 * MiB, .used = 0};
    coll_pool_t *pool;
    size_t off;

    (void)state;
    assert_int_equal(coll_pool_create("unit-lowered", SPARSE_BYTES, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 1);
    alloc_ok(pool, 2 * MiB, A);
    budget.limit = MiB;
    assert_int_equal(coll_pool_alloc(pool, 64, A, &off), COLL_ERR_POOL_FULL);
    coll_pool_destroy(pool);
    assert_int_equal(budget.used, 0);
}

/* Memory is taken when written and given back when freed: a pool of 16 GiB holds only the
 * pages its live allocations touched. */
static void test_on_demand_gives_memory_back(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool;
    size_t a, b;

    (void)state;
    assert_int_equal(coll_pool_create("unit-punch", SPARSE_BYTES, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 1);
    assert_int_equal(held_bytes(pool), 0);
    a = alloc_ok(pool, 8 * MiB, A);
    b = alloc_ok(pool, 4 * MiB + 100, B);
    memset(coll_pool_base(pool) + a, 1, 8 * MiB);
    memset(coll_pool_base(pool) + b, 2, 4 * MiB + 100);
    assert_true(held_bytes(pool) >= 12 * MiB);
    assert_true(held_bytes(pool) <= 12 * MiB + SLACK);
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    /* B's block is untouched by A's free, and B's pages stay. */
    assert_int_equal(coll_pool_base(pool)[b], 2);
    assert_int_equal(coll_pool_base(pool)[b + 4 * MiB + 99], 2);
    assert_true(held_bytes(pool) >= 4 * MiB);
    assert_true(held_bytes(pool) <= 4 * MiB + SLACK);
    assert_int_equal(coll_pool_free(pool, b, B), COLL_OK);
    assert_int_equal(held_bytes(pool), 0);
    assert_int_equal(budget.used, 0);
    /* What was punched out reads as zeros when allocated again. */
    a = alloc_ok(pool, MiB, A);
    assert_int_equal(coll_pool_base(pool)[a + 12345], 0);
    coll_pool_destroy(pool);
}

/* A fixed pool keeps its pages across frees (the caller pays for its whole size anyway). */
static void test_fixed_pool_keeps_pages(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB, .used = 0};
    coll_pool_t *pool;
    size_t a;

    (void)state;
    assert_int_equal(coll_pool_create("unit-keep", 4 * MiB, &pool), COLL_OK);
    coll_pool_set_budget(pool, &budget, 0);
    a = alloc_ok(pool, MiB, A);
    memset(coll_pool_base(pool) + a, 3, MiB);
    assert_int_equal(coll_pool_free(pool, a, A), COLL_OK);
    assert_true(held_bytes(pool) >= MiB);
    coll_pool_destroy(pool);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_pool_charged_its_size),
        cmocka_unit_test(test_on_demand_charged_by_allocation),
        cmocka_unit_test(test_on_demand_budget_lowered),
        cmocka_unit_test(test_on_demand_gives_memory_back),
        cmocka_unit_test(test_fixed_pool_keeps_pages),
    };
    return cmocka_run_group_tests_name("pool_budget", tests, NULL, NULL);
}
