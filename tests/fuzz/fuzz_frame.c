/*
 * libFuzzer harness: the frame reader (proto/frame.c) fed an arbitrary byte stream in arbitrary
 * chunks, used as the daemon and the library use it: space(), read into it, commit(), then
 * next() until it asks for more bytes.
 *
 * Input: 2 bytes of maximum payload (0x8000 and up: the client link's COLL_FRAME_MAX_CLIENT,
 * else the value itself), 8 bytes seeding the chunk sizes, then the stream.
 *
 * Invariants, against a reference parser of the stream: next() returns exactly the stream's
 * frames, in order, with their payloads; COLL_ERR_PROTOCOL exactly when the next header
 * announces more than the maximum; COLL_INPROGRESS exactly when the next frame is incomplete;
 * space() always offers room while the reader waits for more bytes; the buffer never grows
 * past twice the largest frame it may hold.
 */
#include "fuzz.h"

#include "proto/frame.h"

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

typedef struct {
    const uint8_t *stream;
    size_t len;       /* bytes of the stream */
    size_t committed; /* bytes given to the reader so far */
    size_t pos;       /* start of the next frame the reader must return */
} ref_t;

/* What next() must return now. */
static coll_status_t ref_next(const ref_t *ref, size_t max, uint32_t *len_p)
{
    size_t avail = ref->committed - ref->pos;
    uint32_t len;

    if (avail < COLL_FRAME_HDR) {
        return COLL_INPROGRESS;
    }
    len = le32(ref->stream + ref->pos);
    if (len > max) {
        return COLL_ERR_PROTOCOL;
    }
    *len_p = len;
    return avail < COLL_FRAME_HDR + (size_t)len ? COLL_INPROGRESS : COLL_OK;
}

/* Take every complete frame; returns 0 once the stream was refused. */
static int drain(coll_frame_reader_t *r, ref_t *ref, size_t max)
{
    for (;;) {
        const uint8_t *payload = NULL;
        size_t len = 0;
        uint32_t want = 0;
        coll_status_t expect = ref_next(ref, max, &want);
        coll_status_t st = coll_frame_reader_next(r, &payload, &len);

        FUZZ_CHECK(st == expect, "next() gave %s where %s was due (frame at %zu of %zu bytes)",
                   coll_err_name(st), coll_err_name(expect), ref->pos, ref->committed);
        if (st != COLL_OK) {
            return st != COLL_ERR_PROTOCOL;
        }
        FUZZ_CHECK(len == want && memcmp(payload, ref->stream + ref->pos + COLL_FRAME_HDR, len) == 0,
                   "frame at %zu: %zu bytes returned, %u due, or other bytes", ref->pos, len, want);
        ref->pos += COLL_FRAME_HDR + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint64_t m = fuzz_take(&in, 2);
    size_t max = m >= 0x8000 ? COLL_FRAME_MAX_CLIENT : (size_t)m;
    uint64_t seed = fuzz_take(&in, 8) | 1;
    ref_t ref = {in.p, in.left, 0, 0};
    size_t cap_bound = 2 * (max + COLL_FRAME_HDR);
    coll_frame_reader_t r;

    FUZZ_CHECK(coll_frame_reader_init(&r, max) == COLL_OK, "init");
    cap_bound = cap_bound > r.cap ? cap_bound : r.cap;
    while (ref.committed < ref.len) {
        /* The daemon asks for 4096 bytes or libuv's suggestion (64 KiB); vary it. */
        uint32_t x = fuzz_rand(&seed);
        size_t want = x % 4 == 0 ? 65536 : 1 + x % 5000, room = 0, n;
        uint8_t *dst = NULL;
        coll_status_t st = coll_frame_reader_space(&r, want, &dst, &room);

        FUZZ_CHECK(st == COLL_OK && room > 0, "space() refused (%s) with %zu bytes pending",
                   coll_err_name(st), ref.committed - ref.pos);
        FUZZ_CHECK(r.cap <= cap_bound, "buffer of %zu bytes for frames of at most %zu", r.cap,
                   max);
        /* A read returns anything from one byte to the room offered; often a few bytes. */
        x = fuzz_rand(&seed);
        n = 1 + (x >> 1) % (x & 1 ? room : (room < 16 ? room : 16));
        n = n < ref.len - ref.committed ? n : ref.len - ref.committed;
        memcpy(dst, ref.stream + ref.committed, n);
        coll_frame_reader_commit(&r, n);
        ref.committed += n;
        if (!drain(&r, &ref, max)) {
            break;
        }
    }
    coll_frame_reader_cleanup(&r);
    return 0;
}
