/* Unit tests of the frame reader and packer (proto/frame.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "proto/frame.h"
#include "proto/wire.h"

#define SMALL_MAX 16384u

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* A frame of @p len payload bytes whose byte i is (seed + i) mod 251; the caller frees it. */
static uint8_t *make_frame(uint32_t len, unsigned seed)
{
    uint8_t *f = malloc(COLL_FRAME_HDR + (size_t)len);
    assert_non_null(f);
    put_le32(f, len);
    for (uint32_t i = 0; i < len; i++) {
        f[COLL_FRAME_HDR + i] = (uint8_t)((seed + i) % 251);
    }
    return f;
}

static void assert_payload(const uint8_t *p, size_t len, unsigned seed)
{
    for (size_t i = 0; i < len; i++) {
        if (p[i] != (uint8_t)((seed + i) % 251)) {
            fail_msg("payload byte %zu is %u, expected %u", i, p[i], (seed + i) % 251);
        }
    }
}

/* Write @p len bytes into the reader, at most @p step bytes per space/commit round. */
static void feed(coll_frame_reader_t *r, const uint8_t *data, size_t len, size_t step)
{
    while (len > 0) {
        uint8_t *dst;
        size_t room, n = len < step ? len : step;
        assert_int_equal(coll_frame_reader_space(r, n, &dst, &room), COLL_OK);
        assert_true(room > 0);
        n = n < room ? n : room;
        memcpy(dst, data, n);
        coll_frame_reader_commit(r, n);
        data += n;
        len -= n;
    }
}

static void expect_frame(coll_frame_reader_t *r, uint32_t len, unsigned seed)
{
    const uint8_t *payload;
    size_t got;
    assert_int_equal(coll_frame_reader_next(r, &payload, &got), COLL_OK);
    assert_int_equal(got, len);
    assert_payload(payload, got, seed);
}

static void expect_more(coll_frame_reader_t *r)
{
    const uint8_t *payload;
    size_t got;
    assert_int_equal(coll_frame_reader_next(r, &payload, &got), COLL_INPROGRESS);
}

static void test_empty_reader_needs_more(void **state)
{
    coll_frame_reader_t r;
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
}

static void test_single_frame(void **state)
{
    coll_frame_reader_t r;
    uint8_t *f = make_frame(100, 7);

    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, f, COLL_FRAME_HDR + 100, 4096);
    expect_frame(&r, 100, 7);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
    free(f);
}

static void test_several_frames_in_one_read(void **state)
{
    const uint32_t lens[] = {10, 0, 333, 1};
    uint8_t buf[512];
    size_t off = 0;
    coll_frame_reader_t r;

    for (unsigned i = 0; i < 4; i++) {
        uint8_t *f = make_frame(lens[i], i);
        memcpy(buf + off, f, COLL_FRAME_HDR + lens[i]);
        off += COLL_FRAME_HDR + lens[i];
        free(f);
    }
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, buf, off, off);
    for (unsigned i = 0; i < 4; i++) {
        expect_frame(&r, lens[i], i);
    }
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
}

static void test_frame_split_byte_by_byte(void **state)
{
    const uint32_t len = 300;
    uint8_t *f = make_frame(len, 3);
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    for (size_t i = 0; i + 1 < COLL_FRAME_HDR + len; i++) {
        feed(&r, f + i, 1, 1);
        expect_more(&r);
    }
    feed(&r, f + COLL_FRAME_HDR + len - 1, 1, 1);
    expect_frame(&r, len, 3);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
    free(f);
}

/* The second frame straddles two reads with the first one consumed in between, so the reader
 * must move the tail to the front and keep it intact. */
static void test_partial_tail_survives_compaction(void **state)
{
    uint8_t *a = make_frame(1000, 1), *b = make_frame(3000, 2);
    uint8_t buf[COLL_FRAME_HDR * 2 + 4000];
    size_t first = COLL_FRAME_HDR + 1000 + 1500;
    coll_frame_reader_t r;

    memcpy(buf, a, COLL_FRAME_HDR + 1000);
    memcpy(buf + COLL_FRAME_HDR + 1000, b, COLL_FRAME_HDR + 3000);
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, buf, first, first);
    expect_frame(&r, 1000, 1);
    expect_more(&r);
    feed(&r, buf + first, sizeof(buf) - first, sizeof(buf));
    expect_frame(&r, 3000, 2);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
    free(a);
    free(b);
}

static void test_zero_length_payload(void **state)
{
    uint8_t hdr[COLL_FRAME_HDR] = {0, 0, 0, 0};
    const uint8_t *payload;
    size_t len = 99;
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, hdr, sizeof(hdr), sizeof(hdr));
    assert_int_equal(coll_frame_reader_next(&r, &payload, &len), COLL_OK);
    assert_int_equal(len, 0);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
}

static void test_length_exactly_max_accepted(void **state)
{
    uint8_t *f = make_frame(COLL_FRAME_MAX_CLIENT, 5);
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, COLL_FRAME_MAX_CLIENT), COLL_OK);
    feed(&r, f, COLL_FRAME_HDR + COLL_FRAME_MAX_CLIENT, 1500);
    expect_frame(&r, COLL_FRAME_MAX_CLIENT, 5);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
    free(f);
}

/* Header plus maximum payload fill the initial 4 KiB buffer exactly: no growth, still accepted. */
static void test_max_frame_filling_initial_buffer_exactly(void **state)
{
    const uint32_t max = 4096 - COLL_FRAME_HDR;
    uint8_t *f = make_frame(max, 13);
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, max), COLL_OK);
    feed(&r, f, COLL_FRAME_HDR + max, 1000);
    assert_int_equal(r.cap, 4096);
    expect_frame(&r, max, 13);
    coll_frame_reader_cleanup(&r);
    free(f);
}

static void test_length_max_plus_one_rejected_before_buffering(void **state)
{
    uint8_t hdr[COLL_FRAME_HDR];
    const uint8_t *payload;
    size_t len;
    coll_frame_reader_t r;

    put_le32(hdr, SMALL_MAX + 1);
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, hdr, sizeof(hdr), sizeof(hdr));
    /* The header alone decides: no payload byte was sent and the buffer did not grow. */
    assert_int_equal(coll_frame_reader_next(&r, &payload, &len), COLL_ERR_PROTOCOL);
    assert_int_equal(r.cap, 4096);
    coll_frame_reader_cleanup(&r);
}

static void test_length_4g_minus_1_rejected(void **state)
{
    uint8_t hdr[COLL_FRAME_HDR] = {0xff, 0xff, 0xff, 0xff};
    const uint8_t *payload;
    size_t len;
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, COLL_FRAME_MAX_PEER), COLL_OK);
    feed(&r, hdr, sizeof(hdr), sizeof(hdr));
    assert_int_equal(coll_frame_reader_next(&r, &payload, &len), COLL_ERR_PROTOCOL);
    coll_frame_reader_cleanup(&r);
}

static void test_oversized_frame_after_good_one_rejected(void **state)
{
    uint8_t *good = make_frame(20, 9);
    uint8_t hdr[COLL_FRAME_HDR];
    const uint8_t *payload;
    size_t len;
    coll_frame_reader_t r;

    put_le32(hdr, SMALL_MAX + 1);
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    feed(&r, good, COLL_FRAME_HDR + 20, 4096);
    feed(&r, hdr, sizeof(hdr), sizeof(hdr));
    expect_frame(&r, 20, 9);
    assert_int_equal(coll_frame_reader_next(&r, &payload, &len), COLL_ERR_PROTOCOL);
    coll_frame_reader_cleanup(&r);
    free(good);
}

static void test_reader_grows_from_4k_to_1m_frame(void **state)
{
    const uint32_t len = 1u << 20;
    uint8_t *f = make_frame(len, 11);
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, COLL_FRAME_MAX_PEER), COLL_OK);
    assert_int_equal(r.cap, 4096);
    feed(&r, f, COLL_FRAME_HDR + len, 65536);
    assert_true(r.cap >= COLL_FRAME_HDR + len);
    /* Grown by doubling to fit the frame, not to the 16 MiB maximum. */
    assert_true(r.cap <= 2 * (COLL_FRAME_HDR + len));
    expect_frame(&r, len, 11);
    expect_more(&r);
    coll_frame_reader_cleanup(&r);
    free(f);
}

static void test_space_offers_at_least_want_below_max(void **state)
{
    uint8_t *dst;
    size_t room;
    coll_frame_reader_t r;

    assert_int_equal(coll_frame_reader_init(&r, COLL_FRAME_MAX_PEER), COLL_OK);
    assert_int_equal(coll_frame_reader_space(&r, 100000, &dst, &room), COLL_OK);
    assert_true(room >= 100000);
    coll_frame_reader_cleanup(&r);
}

static void test_cleanup_twice_is_safe(void **state)
{
    coll_frame_reader_t r;
    assert_int_equal(coll_frame_reader_init(&r, SMALL_MAX), COLL_OK);
    coll_frame_reader_cleanup(&r);
    assert_null(r.buf);
    coll_frame_reader_cleanup(&r);
}

static void test_pack_writes_le_length_header(void **state)
{
    Coll__Wire__ClientMsg msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__Hello hello = COLL__WIRE__HELLO__INIT;
    uint8_t *frame;
    size_t len, payload;

    hello.client = "unit test";
    msg.version = COLL_WIRE_VERSION;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_HELLO;
    msg.hello = &hello;
    payload = coll__wire__client_msg__get_packed_size(&msg);
    assert_int_equal(coll_frame_pack(&msg.base, &frame, &len), COLL_OK);
    assert_int_equal(len, COLL_FRAME_HDR + payload);
    assert_int_equal(frame[0] | frame[1] << 8 | frame[2] << 16 | (uint32_t)frame[3] << 24,
                     payload);
    free(frame);
}

static void test_pack_read_roundtrip_submit(void **state)
{
    Coll__Wire__ClientMsg msg = COLL__WIRE__CLIENT_MSG__INIT, *got;
    Coll__Wire__Submit sub = COLL__WIRE__SUBMIT__INIT;
    coll_frame_reader_t r;
    const uint8_t *payload;
    uint8_t *frame;
    size_t len, plen;
    char err[256];

    sub.req_id = 42;
    sub.key = 0x123456789aULL;
    sub.dtype = COLL_FLOAT32;
    sub.op = COLL_AVG;
    sub.count = (1ULL << 31) + 5;
    sub.send_offset = 4096;
    sub.recv_offset = 8192;
    msg.version = COLL_WIRE_VERSION;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_SUBMIT;
    msg.submit = &sub;
    assert_int_equal(coll_frame_pack(&msg.base, &frame, &len), COLL_OK);

    assert_int_equal(coll_frame_reader_init(&r, COLL_FRAME_MAX_CLIENT), COLL_OK);
    feed(&r, frame, len, 7);
    assert_int_equal(coll_frame_reader_next(&r, &payload, &plen), COLL_OK);
    assert_int_equal(plen, len - COLL_FRAME_HDR);
    assert_int_equal(coll_wire_unpack_client(payload, plen, &got, err, sizeof(err)), COLL_OK);
    assert_int_equal(got->body_case, COLL__WIRE__CLIENT_MSG__BODY_SUBMIT);
    assert_int_equal(got->submit->req_id, 42);
    assert_int_equal(got->submit->key, 0x123456789aULL);
    assert_int_equal(got->submit->op, COLL_AVG);
    assert_int_equal(got->submit->count, (1ULL << 31) + 5);
    assert_int_equal(got->submit->send_offset, 4096);
    assert_int_equal(got->submit->recv_offset, 8192);
    coll__wire__client_msg__free_unpacked(got, NULL);
    coll_frame_reader_cleanup(&r);
    free(frame);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_reader_needs_more),
        cmocka_unit_test(test_single_frame),
        cmocka_unit_test(test_several_frames_in_one_read),
        cmocka_unit_test(test_frame_split_byte_by_byte),
        cmocka_unit_test(test_partial_tail_survives_compaction),
        cmocka_unit_test(test_zero_length_payload),
        cmocka_unit_test(test_length_exactly_max_accepted),
        cmocka_unit_test(test_max_frame_filling_initial_buffer_exactly),
        cmocka_unit_test(test_length_max_plus_one_rejected_before_buffering),
        cmocka_unit_test(test_length_4g_minus_1_rejected),
        cmocka_unit_test(test_oversized_frame_after_good_one_rejected),
        cmocka_unit_test(test_reader_grows_from_4k_to_1m_frame),
        cmocka_unit_test(test_space_offers_at_least_want_below_max),
        cmocka_unit_test(test_cleanup_twice_is_safe),
        cmocka_unit_test(test_pack_writes_le_length_header),
        cmocka_unit_test(test_pack_read_roundtrip_submit),
    };
    return cmocka_run_group_tests_name("frame", tests, NULL, NULL);
}
