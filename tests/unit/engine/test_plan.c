/* Unit tests of the chunk and segment planner (daemon/plan.h). Plans are pure arithmetic, so
 * counts above 2^31 and 2^40 are checked without allocating anything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "engine/plan.h"

#define LINE 64u
/* Above this many segments per chunk only a sample of them is checked. */
#define SEG_CHECK_ALL 4096u

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Checks segment j of chunk c and returns its end. */
static uint64_t check_segment(const coll_plan_t *p, uint32_t c, coll_range_t chunk, uint64_t j,
                              uint64_t expect_off, size_t esize)
{
    coll_range_t s = coll_plan_segment(p, c, j);

    if (s.off != expect_off) {
        fail_msg("count %llu nnodes %u: chunk %u segment %llu starts at %llu, expected %llu",
                 (unsigned long long)p->count, p->nnodes, c, (unsigned long long)j,
                 (unsigned long long)s.off, (unsigned long long)expect_off);
    }
    assert_true(s.off >= chunk.off && s.off + s.len <= chunk.off + chunk.len);
    assert_true(s.len <= p->seg_elems);
    if (s.len > 0) {
        assert_int_equal(s.off * esize % LINE, 0);
    }
    return s.off + s.len;
}

/* Segments of chunk c tile it exactly, in order. */
static void check_segments(const coll_plan_t *p, uint32_t c, coll_range_t chunk, size_t esize)
{
    uint64_t end = chunk.off;

    if (p->nseg <= SEG_CHECK_ALL) {
        for (uint64_t j = 0; j < p->nseg; j++) {
            end = check_segment(p, c, chunk, j, end, esize);
        }
        assert_int_equal(end, chunk.off + chunk.len);
        return;
    }
    /* Sample the head, the middle and the tail; each full segment is seg_elems long. */
    const uint64_t picks[] = {0, 1, p->nseg / 2, p->nseg - 2, p->nseg - 1};
    for (size_t k = 0; k < sizeof(picks) / sizeof(picks[0]); k++) {
        uint64_t j = picks[k];
        uint64_t start = chunk.off + (j * p->seg_elems < chunk.len ? j * p->seg_elems : chunk.len);
        end = check_segment(p, c, chunk, j, start, esize);
    }
    assert_int_equal(end, chunk.off + chunk.len);
}

static void check_plan(uint64_t count, uint32_t nnodes, size_t esize, size_t seg_bytes)
{
    coll_plan_t p;
    uint64_t end = 0, largest = 0;
    uint64_t seg_line_bytes = max_u64(seg_bytes / LINE * LINE, LINE);

    coll_plan_init(&p, count, nnodes, esize, seg_bytes);
    assert_int_equal(p.count, count);
    assert_int_equal(p.nnodes, nnodes);
    /* Segments are the configured size rounded down to whole lines, at least one line. */
    assert_true(p.seg_elems >= 1);
    assert_int_equal(p.seg_elems * esize, seg_line_bytes);

    for (uint32_t c = 0; c < nnodes; c++) {
        coll_range_t chunk = coll_plan_chunk(&p, c);
        if (chunk.off != end) {
            fail_msg("count %llu nnodes %u esize %zu: chunk %u at %llu, expected %llu",
                     (unsigned long long)count, nnodes, esize, c, (unsigned long long)chunk.off,
                     (unsigned long long)end);
        }
        if (chunk.len > 0) {
            assert_int_equal(chunk.off * esize % LINE, 0);
        }
        end += chunk.len;
        largest = max_u64(largest, chunk.len);
        check_segments(&p, c, chunk, esize);
    }
    assert_int_equal(end, count);
    /* The fewest segments that cover the largest chunk. */
    assert_int_equal(p.nseg, (largest + p.seg_elems - 1) / p.seg_elems);
}

static const size_t esizes[] = {1, 2, 4, 8};

static void test_count_zero_has_empty_chunks_and_no_segments(void **state)
{
    for (uint32_t n = 1; n <= 7; n++) {
        coll_plan_t p;
        coll_plan_init(&p, 0, n, 4, 262144);
        assert_int_equal(p.nseg, 0);
        for (uint32_t c = 0; c < n; c++) {
            coll_range_t r = coll_plan_chunk(&p, c);
            assert_int_equal(r.off, 0);
            assert_int_equal(r.len, 0);
        }
        check_plan(0, n, 4, 262144);
    }
}

static void test_count_one_goes_to_chunk_zero(void **state)
{
    coll_plan_t p;
    coll_plan_init(&p, 1, 4, 4, 4096);
    assert_int_equal(coll_plan_chunk(&p, 0).len, 1);
    assert_int_equal(coll_plan_chunk(&p, 1).len, 0);
    assert_int_equal(p.nseg, 1);
    assert_int_equal(coll_plan_segment(&p, 0, 0).len, 1);
}

static void test_small_counts_around_nnodes(void **state)
{
    for (uint32_t n = 1; n <= 7; n++) {
        const uint64_t counts[] = {0, 1, 2, n - 1, n, n + 1, 2 * n + 1};
        for (size_t e = 0; e < 4; e++) {
            for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
                check_plan(counts[i], n, esizes[e], 4096);
                check_plan(counts[i], n, esizes[e], 64);
            }
        }
    }
}

/* Counts around whole lines and whole line-per-node multiples. */
static void test_counts_around_line_multiples(void **state)
{
    for (uint32_t n = 1; n <= 7; n++) {
        for (size_t e = 0; e < 4; e++) {
            uint64_t line = LINE / esizes[e];
            const uint64_t counts[] = {line - 1, line, line + 1, n * line - 1, n * line,
                                       n * line + 1, 3 * n * line + 5};
            for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
                check_plan(counts[i], n, esizes[e], 256);
            }
        }
    }
}

static void test_prime_counts(void **state)
{
    const uint64_t primes[] = {2, 3, 13, 17, 97, 997, 4099, 65521, 1000003, 16777259};
    const size_t segs[] = {64, 100, 4096, 262144};

    for (size_t i = 0; i < sizeof(primes) / sizeof(primes[0]); i++) {
        for (uint32_t n = 1; n <= 7; n++) {
            for (size_t e = 0; e < 4; e++) {
                for (size_t s = 0; s < sizeof(segs) / sizeof(segs[0]); s++) {
                    check_plan(primes[i], n, esizes[e], segs[s]);
                }
            }
        }
    }
}

static void test_4096_nodes(void **state)
{
    const uint64_t counts[] = {0, 1, 4095, 4096, 4097, 1000003, 1ULL << 30};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        check_plan(counts[i], 4096, 4, 262144);
        check_plan(counts[i], 4096, 2, 65536);
    }
}

/* Segment sizes below one line, not a multiple of a line, and of odd byte counts. */
static void test_segment_rounding(void **state)
{
    const size_t segs[] = {1, 3, 63, 64, 65, 127, 128, 4095, 262145};
    for (size_t s = 0; s < sizeof(segs) / sizeof(segs[0]); s++) {
        for (size_t e = 0; e < 4; e++) {
            check_plan(100003, 3, esizes[e], segs[s]);
        }
    }
}

static void test_segment_rounded_down_to_lines(void **state)
{
    coll_plan_t p;
    coll_plan_init(&p, 1 << 20, 2, 4, 1000);
    assert_int_equal(p.seg_elems, 960 / 4);
    coll_plan_init(&p, 1 << 20, 2, 4, 10);
    assert_int_equal(p.seg_elems, 16);
}

/* Segments beyond a short chunk's end are empty and sit at the chunk's end. */
static void test_short_last_chunk_has_empty_tail_segments(void **state)
{
    coll_plan_t p;
    coll_range_t last, seg;

    coll_plan_init(&p, 1000, 3, 4, 256); /* chunks of 336, 336, 328; 64-element segments */
    assert_int_equal(p.chunk_elems, 336);
    assert_int_equal(p.nseg, 6);
    last = coll_plan_chunk(&p, 2);
    assert_int_equal(last.off, 672);
    assert_int_equal(last.len, 328);
    seg = coll_plan_segment(&p, 2, 5);
    assert_int_equal(seg.off, 672 + 320);
    assert_int_equal(seg.len, 8);
    check_plan(1000, 3, 4, 256);
}

static void test_count_above_2_31(void **state)
{
    const uint64_t count = (1ULL << 31) + 5;
    for (uint32_t n = 1; n <= 7; n++) {
        check_plan(count, n, 4, 262144);
        check_plan(count, n, 2, 262144);
    }
    check_plan(count, 4096, 4, 262144);
}

static void test_count_2_40(void **state)
{
    const uint64_t count = 1ULL << 40;
    for (uint32_t n = 1; n <= 7; n++) {
        check_plan(count, n, 4, 64u << 20);
        check_plan(count, n, 2, 64u << 20);
        check_plan(count + 7, n, 2, 256u << 10);
    }
    check_plan(count, 4096, 4, 64u << 20);
    check_plan(count - 1, 4096, 2, 4096);
}

/* The largest count the wire accepts (UINT64_MAX / 16 elements). */
static void test_count_wire_maximum(void **state)
{
    const uint64_t count = UINT64_MAX / 16;
    check_plan(count, 1, 4, 64u << 20);
    check_plan(count, 7, 4, 64u << 20);
    check_plan(count, 4096, 4, 64u << 20);
    check_plan(count, 3, 8, 4096);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_count_zero_has_empty_chunks_and_no_segments),
        cmocka_unit_test(test_count_one_goes_to_chunk_zero),
        cmocka_unit_test(test_small_counts_around_nnodes),
        cmocka_unit_test(test_counts_around_line_multiples),
        cmocka_unit_test(test_prime_counts),
        cmocka_unit_test(test_4096_nodes),
        cmocka_unit_test(test_segment_rounding),
        cmocka_unit_test(test_segment_rounded_down_to_lines),
        cmocka_unit_test(test_short_last_chunk_has_empty_tail_segments),
        cmocka_unit_test(test_count_above_2_31),
        cmocka_unit_test(test_count_2_40),
        cmocka_unit_test(test_count_wire_maximum),
    };
    return cmocka_run_group_tests_name("plan", tests, NULL, NULL);
}
