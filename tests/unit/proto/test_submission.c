/*
 * The submission record (proto/submission.h) and the descriptor made from it (proto/desc.h):
 * every byte of a record survives the socket's Submit and a post of the shared-memory area,
 * and the one descriptor constructor keeps what the daemons compare and zeroes the rest.
 * Expected values are written out by hand.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <collective.h>

#include "proto/desc.h"
#include "proto/frame.h"
#include "proto/shm_area.h"
#include "proto/submission.h"

/* A record whose every byte differs from the others (byte i is i + 1): a field that a
 * conversion forgets, or puts in another field's place, shows. */
static coll_submission_t patterned(void)
{
    coll_submission_t s;
    uint8_t *b = (uint8_t *)&s;

    for (size_t i = 0; i < sizeof(s); i++) {
        b[i] = (uint8_t)(i + 1);
    }
    return s;
}

static void test_wire_round_trip(void **state)
{
    coll_submission_t s = patterned(), back;
    Coll__Wire__Submit m;

    coll_submission_to_wire(&s, &m);
    assert_int_equal(m.key, 0x0807060504030201ull);
    assert_int_equal(m.op, s.redop);
    assert_int_equal(m.pool, s.pool);
    assert_int_equal(m.flags, s.flags);
    assert_int_equal(m.peer, s.peer);
    coll_submission_from_wire(&m, &back);
    assert_memory_equal(&back, &s, sizeof(s));
}

/* A post carries the whole record: what the daemon reads back is what the rank wrote. */
static void test_post_carries_the_record(void **state)
{
    static coll_shm_rank_t area;
    coll_shm_rec_t rec = {.sub = patterned(), .post_ns = 77, .node_off = 4096}, got;
    uint64_t st;
    uint32_t slot;

    rec.sub.key = 12345;
    slot = coll_shm_slot_of(rec.sub.key);
    coll_shm_write_rec(&area.post[slot], &rec);
    atomic_store(&area.post[slot].state, coll_shm_state(1, COLL_SHM_POSTED));
    assert_true(coll_shm_find(&area, rec.sub.key, COLL_SHM_POSTED, &slot, &st, &got));
    assert_int_equal(slot, coll_shm_slot_of(12345));
    assert_memory_equal(&got, &rec, sizeof(rec));
}

static const coll_desc_ctx_t ctx = {.world_size = 8, .seg_bytes = 65536, .node = 3,
                                    .first_rank = 12, .algo = 2, .epoch = 9, .shapes = 0xabc};

static void test_desc_fields(void **state)
{
    coll_submission_t s = {.key = 7, .count = 100, .layout = 0x55, .coll = COLL_KIND_REDUCE,
                           .dtype = 5, .redop = 1, .root = 6, .peer = 4, .algo = 1,
                           .group = 2, .send_offset = 64, .recv_offset = 128, .req_id = 99,
                           .bucket = 3, .warmup = 2};
    coll_desc_t d;

    /* The context's algorithm, not the one asked for; uncompressed, no compression, shapes,
     * bucket or warm-up whatever the record says; every other byte zero. */
    coll_desc_t want = {.magic = COLL_DESC_MAGIC, .version = COLL_WIRE_VERSION,
                        .coll = COLL_KIND_REDUCE, .key = 7, .count = 100, .dtype = 5, .op = 1,
                        .seg_bytes = 65536, .world_size = 8, .node = 3, .first_rank = 12,
                        .root = 6, .algo = 2, .epoch = 9, .layout = 0x55, .group = 2};

    coll_desc_make(&s, &ctx, &d);
    assert_memory_equal(&d, &want, sizeof(d));
}

/* A root only where the kind has one; compression's fields only with compression. */
static void test_desc_rules(void **state)
{
    coll_submission_t s = {.coll = COLL_KIND_ALLREDUCE, .root = 6, .bucket = 3, .warmup = 2};
    coll_desc_t a, b;

    coll_desc_make(&s, &ctx, &a);
    assert_int_equal(a.root, 0);
    assert_int_equal(a.bucket, 0);
    s.coll = COLL_KIND_BROADCAST;
    coll_desc_make(&s, &ctx, &a);
    assert_int_equal(a.root, 6);
    s.coll = COLL_KIND_PS_STEP;
    coll_desc_make(&s, &ctx, &a);
    assert_int_equal(a.root, 6);
    s.coll = COLL_KIND_ALLREDUCE;
    s.compression = 0x1234;
    coll_desc_make(&s, &ctx, &a);
    assert_int_equal(a.compression, 0x1234);
    assert_int_equal(a.bucket, 3);
    assert_int_equal(a.warmup, 2);
    assert_int_equal(a.shapes, 0xabc);
    /* What only the sender is (its node, its first rank) is not compared. */
    coll_desc_make(&s, &(coll_desc_ctx_t){.world_size = 8, .seg_bytes = 65536, .node = 4,
                                          .first_rank = 0, .algo = 2, .epoch = 9,
                                          .shapes = 0xabc}, &b);
    assert_true(coll_desc_equal(&a, &b));
    s.count = 1;
    coll_desc_make(&s, &ctx, &b);
    assert_false(coll_desc_equal(&a, &b));
}

/* A mismatch message quotes the descriptor: only the fields its kind has a meaning for. */
static void test_desc_format(void **state)
{
    coll_desc_t d = {.coll = COLL_KIND_ALLGATHER, .count = 10, .dtype = COLL_FLOAT32,
                     .op = COLL_SUM, .seg_bytes = 4096, .world_size = 4};
    char buf[256];

    d.algo = COLL_ALGO_RING;
    coll_desc_format(&d, buf, sizeof(buf));
    assert_string_equal(buf, "all-gather count=10 dtype=float32 algo=ring segment=4096 world=4");
    d.coll = COLL_KIND_BROADCAST;
    d.root = 2;
    coll_desc_format(&d, buf, sizeof(buf));
    assert_string_equal(buf, "broadcast count=10 dtype=float32 root=2 algo=ring segment=4096 "
                             "world=4");
    d.coll = COLL_KIND_REDUCE;
    d.op = COLL_MAX;
    coll_desc_format(&d, buf, sizeof(buf));
    assert_string_equal(buf, "reduce count=10 dtype=float32 op=max root=2 algo=ring "
                             "segment=4096 world=4");
    d.coll = COLL_KIND_ALLREDUCE;
    d.root = 0;
    coll_desc_format(&d, buf, sizeof(buf));
    assert_string_equal(buf, "allreduce count=10 dtype=float32 op=max algo=ring segment=4096 "
                             "world=4");
    d = (coll_desc_t){.coll = COLL_KIND_BARRIER, .dtype = COLL_UINT8, .algo = COLL_ALGO_RING,
                      .world_size = 4};
    coll_desc_format(&d, buf, sizeof(buf));
    assert_string_equal(buf, "barrier algo=ring segment=0 world=4");
}

/* A mismatch names the operation by its collective where both ranks called the same one, and
 * as "operation" where they did not (neither's is the operation's). */
static void test_desc_mismatch(void **state)
{
    coll_desc_t a = {.coll = COLL_KIND_ALLREDUCE, .count = 8, .dtype = COLL_FLOAT32,
                     .op = COLL_SUM, .algo = COLL_ALGO_RING, .world_size = 2,
                     .key = (1ull << 39) | 3};
    coll_desc_t b = a;
    char buf[600];
    (void)state;

    b.count = 9;
    coll_desc_mismatch(&a, "rank 0", &b, 1, buf, sizeof(buf));
    assert_string_equal(buf, "allreduce #3: rank 0 submitted allreduce count=8 dtype=float32 "
                             "op=sum algo=ring segment=0 world=2 but rank 1 submitted allreduce "
                             "count=9 dtype=float32 op=sum algo=ring segment=0 world=2");
    b = a;
    b.coll = COLL_KIND_BROADCAST;
    coll_desc_mismatch(&a, "an earlier rank", &b, 1, buf, sizeof(buf));
    assert_string_equal(buf, "operation #3: an earlier rank submitted allreduce count=8 "
                             "dtype=float32 op=sum algo=ring segment=0 world=2 but rank 1 "
                             "submitted broadcast count=8 dtype=float32 root=0 algo=ring "
                             "segment=0 world=2");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_round_trip),
        cmocka_unit_test(test_post_carries_the_record),
        cmocka_unit_test(test_desc_fields),
        cmocka_unit_test(test_desc_rules),
        cmocka_unit_test(test_desc_format),
        cmocka_unit_test(test_desc_mismatch),
    };
    return cmocka_run_group_tests_name("submission", tests, NULL, NULL);
}
