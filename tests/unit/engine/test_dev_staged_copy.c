/*
 * Unit tests of the staged path's copies (engine/dev_staged_copy.h) over the fake device
 * layer, wrapped so that every call is recorded: the extents copied in and back (a send's input
 * only, a receive's output only, a collective's as coll_kind_extent() gives them, an
 * all-to-all's from its count table: its furthest blocks in, its receive blocks back, sorted,
 * adjacent ones merged, the gaps between them not), the chunk plan (every byte once, in order,
 * alternate streams, the last chunk short), the copies queued in that order with the data
 * where it belongs, both streams waited for, and a refused chunk that stops the queue but not
 * the wait; the batches of a pipelined allreduce (whole ring columns up to the target bytes, one
 * at least; each batch's piece of a chunk the union of its columns' segments there; the
 * batches of a chunk covering it once, in order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine/dev_staged_copy.h"
#include "proto/a2a.h"

#define MAX_CALLS 64

/* One call the wrapped layer was asked. */
typedef struct {
    int sync;                 /* 1: a stream sync, 0: a copy */
    uint64_t dst, src, bytes;
    coll_dev_stream_t stream;
} call_t;

static call_t calls[MAX_CALLS]; /* in order */
static int ncalls;
static int refuse_copy = -1; /* the copy call (0-based) refused with COLL_ERR_IO, -1: none */
static int ncopies;

static coll_status_t rec_copy(uint64_t dst, uint64_t src, size_t bytes, coll_dev_stream_t s)
{
    assert_true(ncalls < MAX_CALLS);
    calls[ncalls++] = (call_t){0, dst, src, bytes, s};
    if (ncopies++ == refuse_copy) {
        return coll__dev_fail(COLL_ERR_IO, "copy refused by the test");
    }
    return coll_dev_fake.copy_async(dst, src, bytes, s);
}

static coll_status_t rec_sync(coll_dev_stream_t s)
{
    assert_true(ncalls < MAX_CALLS);
    calls[ncalls++] = (call_t){1, 0, 0, 0, s};
    return coll_dev_fake.stream_sync(s);
}

static coll_dev_ops_t rec;
static coll_dev_stream_t streams[2];

static int setup(void **state)
{
    (void)state;
    rec = coll_dev_fake;
    rec.copy_async = rec_copy;
    rec.stream_sync = rec_sync;
    return coll__dev_fake_init(1) != COLL_OK ||
                   coll_dev_fake.stream_create(0, &streams[0]) != COLL_OK ||
                   coll_dev_fake.stream_create(0, &streams[1]) != COLL_OK
               ? -1
               : 0;
}

static int teardown(void **state)
{
    (void)state;
    coll_dev_fake.stream_destroy(streams[0]);
    coll_dev_fake.stream_destroy(streams[1]);
    return 0;
}

static void reset(int refuse)
{
    ncalls = ncopies = 0;
    refuse_copy = refuse;
}

static void test_plan(void **state)
{
    static const uint64_t sizes[] = {0, 1, 4095, 4096, 4097, 3 * 4096, 3 * 4096 + 7};
    (void)state;

    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        uint64_t bytes = sizes[k], n = coll_dev_staged_nchunks(bytes, 4096), end = 0;
        assert_int_equal(n, (bytes + 4095) / 4096);
        for (uint64_t i = 0; i < n; i++) {
            coll_dev_staged_chunk_t c = coll_dev_staged_chunk(bytes, 4096, i);
            assert_int_equal(c.off, end);
            assert_true(c.len > 0 && c.len <= 4096);
            assert_true(i + 1 == n || c.len == 4096);
            assert_int_equal(c.stream, i % 2);
            end += c.len;
        }
        assert_int_equal(end, bytes);
    }
}

/* A member of rank 1 of 4, root 0, of @p kind with 10 elements of 4 bytes. */
static coll_dev_staged_member_t member(coll_kind_t kind, const uint64_t *table)
{
    return (coll_dev_staged_member_t){kind, 10, 4, 4, 1, 0, table};
}

/* Send and receive: one side each; collectives: their extents, all of the output back. */
static void test_extents(void **state)
{
    static const struct {
        coll_kind_t kind;
        uint64_t in, out;
    } cases[] = {{COLL_KIND_SEND, 40, 0},          {COLL_KIND_RECV, 0, 40},
                 {COLL_KIND_ALLREDUCE, 40, 40},    {COLL_KIND_ALLGATHER, 40, 160},
                 {COLL_KIND_REDUCE_SCATTER, 160, 40}, {COLL_KIND_REDUCE, 40, 0},
                 {COLL_KIND_GATHER, 40, 0},        {COLL_KIND_SCATTER, 0, 40}};
    (void)state;

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        coll_dev_staged_member_t m = member(cases[k].kind, NULL);
        coll_dev_staged_range_t r[4];
        uint64_t in = 1, out = 1;
        coll_dev_staged_extent(&m, &in, &out);
        assert_int_equal(in, cases[k].in);
        assert_int_equal(out, cases[k].out);
        assert_int_equal(coll_dev_staged_out_ranges(&m, r), cases[k].out > 0);
        assert_true(cases[k].out == 0 || (r[0].off == 0 && r[0].len == cases[k].out));
    }
}

/* An all-to-all of 4 ranks: from its table, the furthest send block's end in; back, its receive
 * blocks of more than 0 elements by displacement (given out of order), the two adjacent ones
 * merged, the gaps before and between them left out. */
static void test_alltoall_extents(void **state)
{
    /* counts, displacements (elements) to and from ranks 0..3 */
    static const uint64_t table[4 * 4] = {2, 0, 3, 1,   0, 9, 2, 6,
                                          3, 5, 0, 2,   20, 10, 99, 15};
    static const uint64_t equal[4 * 4] = {10, 10, 10, 10, 0, 10, 20, 30,
                                          10, 10, 10, 10, 0, 10, 20, 30};
    coll_dev_staged_member_t m = member(COLL_KIND_ALLTOALLV, table);
    coll_dev_staged_range_t r[4];
    uint64_t in, out;
    (void)state;

    coll_dev_staged_extent(&m, &in, &out);
    assert_int_equal(in, 7 * 4);   /* rank 3's [6, 7); rank 1's empty block at 9 touches nothing */
    assert_int_equal(out, 23 * 4); /* rank 0's [20, 23); rank 2's empty block at 99 nothing */
    assert_int_equal(coll_dev_staged_out_ranges(&m, r), 2);
    assert_true(r[0].off == 10 * 4 && r[0].len == (5 + 2) * 4); /* ranks 1 and 3: [10, 17) */
    assert_true(r[1].off == 20 * 4 && r[1].len == 3 * 4);       /* rank 0 */
    m.table = equal;
    coll_dev_staged_extent(&m, &in, &out);
    assert_true(in == 160 && out == 160);
    assert_int_equal(coll_dev_staged_out_ranges(&m, r), 1);
    assert_true(r[0].off == 0 && r[0].len == 160);
}

/* 10 KiB in chunks of 4 KiB: three copies in order on streams 0, 1, 0, then both waited for. */
static void test_queue_and_wait(void **state)
{
    size_t bytes = 10 * 1024;
    uint8_t *src = malloc(bytes), *dst = calloc(1, bytes);
    (void)state;

    for (size_t i = 0; i < bytes; i++) {
        src[i] = (uint8_t)(i * 7 + 3);
    }
    unsigned turn = 0;

    reset(-1);
    assert_int_equal(coll_dev_staged_queue(&rec, streams, (uint64_t)(uintptr_t)dst,
                                           (uint64_t)(uintptr_t)src, bytes, 4096, &turn),
                     COLL_OK);
    assert_int_equal(turn, 1); /* 3 chunks from stream 0: the next goes on stream 1 */
    assert_int_equal(coll_dev_staged_wait(&rec, streams), COLL_OK);
    assert_int_equal(ncalls, 5);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(calls[i].sync, 0);
        assert_int_equal(calls[i].dst, (uint64_t)(uintptr_t)dst + (uint64_t)i * 4096);
        assert_int_equal(calls[i].src, (uint64_t)(uintptr_t)src + (uint64_t)i * 4096);
        assert_int_equal(calls[i].bytes, i < 2 ? 4096 : 2048);
        assert_ptr_equal(calls[i].stream, streams[i % 2]);
    }
    assert_true(calls[3].sync && calls[3].stream == streams[0]);
    assert_true(calls[4].sync && calls[4].stream == streams[1]);
    assert_memory_equal(dst, src, bytes);
    /* Pieces shorter than a chunk, one after the other, alternate from where the last ended. */
    reset(-1);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(coll_dev_staged_queue(&rec, streams, (uint64_t)(uintptr_t)dst,
                                               (uint64_t)(uintptr_t)src, 1024, 4096, &turn),
                         COLL_OK);
        assert_ptr_equal(calls[i].stream, streams[(i + 1) % 2]);
    }
    assert_int_equal(turn, 0);
    free(src);
    free(dst);
}

/* The second chunk refused: no third is queued, the error comes back with the layer's words,
 * and the wait still syncs both streams. */
static void test_refused_chunk(void **state)
{
    size_t bytes = 10 * 1024;
    uint8_t *src = calloc(1, bytes), *dst = calloc(1, bytes);
    (void)state;

    unsigned turn = 0;

    reset(1);
    assert_int_equal(coll_dev_staged_queue(&rec, streams, (uint64_t)(uintptr_t)dst,
                                           (uint64_t)(uintptr_t)src, bytes, 4096, &turn),
                     COLL_ERR_IO);
    assert_int_equal(ncalls, 2);
    assert_non_null(strstr(coll_dev_error(), "refused by the test"));
    assert_int_equal(coll_dev_staged_wait(&rec, streams), COLL_OK);
    assert_int_equal(ncalls, 4);
    assert_true(calls[2].sync && calls[3].sync && calls[2].stream != calls[3].stream);
    free(src);
    free(dst);
}

/* 64 MiB of float32 over 2 nodes in segments of 256 KiB (the defaults): columns of 2 x 64 Ki
 * elements (512 KiB), 8 to a batch of 4 MiB, 16 batches; batch 3's piece of chunk 1 starts 3 x 8
 * segments into that chunk. */
static void test_batches_of_a_bucket(void **state)
{
    coll_plan_t plan;
    coll_dev_staged_batches_t bt;
    coll_range_t r;

    (void)state;
    coll_plan_init(&plan, 16u << 20, 2, 4, 256u << 10);
    bt = coll_dev_staged_batches(&plan, 4, COLL_DEV_STAGED_BATCH_BYTES);
    assert_int_equal(bt.cols, 8);
    assert_int_equal(bt.nbatches, 16);
    r = coll_dev_staged_batch_piece(&plan, &bt, 3, 1);
    assert_int_equal(r.off, (8u << 20) + 3 * 8 * (64u << 10));
    assert_int_equal(r.len, 8 * (64u << 10));
    /* A column larger than the target: one a batch. A plan without columns: no batch. */
    bt = coll_dev_staged_batches(&plan, 4, 100);
    assert_int_equal(bt.cols, 1);
    assert_int_equal(bt.nbatches, 128);
    coll_plan_init(&plan, 0, 2, 4, 256u << 10);
    assert_int_equal(coll_dev_staged_batches(&plan, 4, COLL_DEV_STAGED_BATCH_BYTES).nbatches, 0);
}

/* For plans of odd counts, node counts, element sizes (a 16-bit buffer planned by its float32
 * partials, as the ring plans it) and targets: each batch's piece of a chunk is exactly the
 * union of its columns' segments there, and a chunk's pieces cover it once, in order. */
static void test_batches_cover_the_plan(void **state)
{
    static const struct {
        uint64_t count;
        uint32_t nnodes;
        size_t plan_esize, esize, seg;
        uint64_t target;
    } cases[] = {{1000003, 3, 4, 4, 4096, 3 * 4096 * 3},
                 {1000003, 3, 4, 2, 4096, 50000},
                 {77, 4, 8, 8, 4096, 1},
                 {5u << 20, 2, 4, 4, 256u << 10, 4u << 20},
                 {(1u << 20) + 3, 5, 4, 4, 65536, 1u << 20}};

    (void)state;
    for (size_t t = 0; t < sizeof(cases) / sizeof(cases[0]); t++) {
        coll_plan_t plan;
        coll_dev_staged_batches_t bt;

        coll_plan_init(&plan, cases[t].count, cases[t].nnodes, cases[t].plan_esize,
                       cases[t].seg);
        bt = coll_dev_staged_batches(&plan, cases[t].esize, cases[t].target);
        assert_true(bt.cols >= 1 && (bt.nbatches - 1) * bt.cols < plan.nseg &&
                    bt.nbatches * bt.cols >= plan.nseg);
        for (uint32_t c = 0; c < plan.nnodes; c++) {
            coll_range_t chunk = coll_plan_chunk(&plan, c);
            uint64_t at = chunk.off;
            for (uint64_t b = 0; b < bt.nbatches; b++) {
                coll_range_t r = coll_dev_staged_batch_piece(&plan, &bt, b, c);
                uint64_t seg_at = r.off, j;
                assert_int_equal(r.off, at);
                for (j = b * bt.cols; j < (b + 1) * bt.cols && j < plan.nseg; j++) {
                    coll_range_t g = coll_plan_segment(&plan, c, j);
                    assert_true(g.len == 0 || g.off == seg_at);
                    seg_at += g.len;
                }
                assert_int_equal(seg_at, r.off + r.len);
                at += r.len;
            }
            assert_int_equal(at, chunk.off + chunk.len);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_extents),
        cmocka_unit_test(test_alltoall_extents),
        cmocka_unit_test(test_plan),
        cmocka_unit_test(test_queue_and_wait),
        cmocka_unit_test(test_refused_chunk),
        cmocka_unit_test(test_batches_of_a_bucket),
        cmocka_unit_test(test_batches_cover_the_plan),
    };
    return cmocka_run_group_tests_name("dev_staged_copy", tests, setup, teardown);
}
