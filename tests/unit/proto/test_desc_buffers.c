/*
 * What a rank's buffers may be (proto/desc.h), the one rule the library checks at submission
 * and the daemon again: the extents of each collective and role, and which overlaps of the
 * send and receive bytes are in place (allowed) and which are partial (refused). Expected
 * answers are written out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "proto/desc.h"

static void extent_is(coll_kind_t kind, uint32_t rank, uint32_t root, uint64_t send,
                      uint64_t recv)
{
    uint64_t s, r;

    coll_kind_extent(kind, 10, 4, rank, root, &s, &r);
    assert_int_equal(s, send);
    assert_int_equal(r, recv);
}

static void test_extents(void **state)
{
    extent_is(COLL_KIND_ALLREDUCE, 1, 0, 10, 10);
    extent_is(COLL_KIND_REDUCE_SCATTER, 1, 0, 40, 10);
    extent_is(COLL_KIND_ALLGATHER, 1, 0, 10, 40);
    extent_is(COLL_KIND_BROADCAST, 2, 2, 10, 10);
    extent_is(COLL_KIND_BROADCAST, 1, 2, 0, 10);
    extent_is(COLL_KIND_REDUCE, 2, 2, 10, 10);
    extent_is(COLL_KIND_REDUCE, 1, 2, 10, 0);
    extent_is(COLL_KIND_BARRIER, 1, 0, 0, 0);
    extent_is(COLL_KIND_SEND, 1, 0, 10, 0);
    extent_is(COLL_KIND_RECV, 1, 0, 0, 10);
}

static void test_overlap(void **state)
{
    /* Apart, touching, or one side empty: always allowed. */
    assert_true(coll_kind_overlap_ok(COLL_KIND_ALLREDUCE, 0, 0, 400, 400, 400));
    assert_true(coll_kind_overlap_ok(COLL_KIND_ALLREDUCE, 0, 400, 400, 0, 400));
    assert_true(coll_kind_overlap_ok(COLL_KIND_BROADCAST, 1, 100, 0, 100, 400));
    /* In place: the same buffer. Partly overlapping (a shift of 17 floats): no. */
    assert_true(coll_kind_overlap_ok(COLL_KIND_ALLREDUCE, 3, 64, 400, 64, 400));
    assert_false(coll_kind_overlap_ok(COLL_KIND_ALLREDUCE, 3, 64, 400, 64 + 68, 400));
    assert_false(coll_kind_overlap_ok(COLL_KIND_ALLREDUCE, 3, 64 + 68, 400, 64, 400));
    assert_false(coll_kind_overlap_ok(COLL_KIND_BROADCAST, 0, 64, 400, 64, 200));
    assert_false(coll_kind_overlap_ok(COLL_KIND_REDUCE, 0, 0, 400, 396, 400));
    /* Reduce-scatter in place: the receive buffer is the rank's own block of the send buffer. */
    assert_true(coll_kind_overlap_ok(COLL_KIND_REDUCE_SCATTER, 2, 1000, 1600, 1800, 400));
    assert_false(coll_kind_overlap_ok(COLL_KIND_REDUCE_SCATTER, 2, 1000, 1600, 1400, 400));
    assert_false(coll_kind_overlap_ok(COLL_KIND_REDUCE_SCATTER, 2, 1000, 1600, 1000, 1600));
    /* All-gather in place: the send buffer is the rank's own block of the receive buffer. */
    assert_true(coll_kind_overlap_ok(COLL_KIND_ALLGATHER, 1, 1400, 400, 1000, 1600));
    assert_false(coll_kind_overlap_ok(COLL_KIND_ALLGATHER, 1, 1000, 400, 1000, 1600));
    /* A parameter-service step never in place: its gradients are scratch. */
    assert_false(coll_kind_overlap_ok(COLL_KIND_PS_STEP, 0, 64, 400, 64, 400));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extents),
        cmocka_unit_test(test_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
