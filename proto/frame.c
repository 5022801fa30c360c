#include "proto/frame.h"

#include <stdlib.h>
#include <string.h>

/* A fresh reader holds one small frame; it grows up to max_frame only when a peer sends one. */
#define COLL_FRAME_INITIAL_CAP 4096u

coll_status_t coll_frame_reader_init(coll_frame_reader_t *r, size_t max_frame)
{
    memset(r, 0, sizeof(*r));
    r->buf = malloc(COLL_FRAME_INITIAL_CAP);
    if (r->buf == NULL) {
        return COLL_ERR_NOMEM;
    }
    r->cap = COLL_FRAME_INITIAL_CAP;
    r->max_frame = max_frame;
    return COLL_OK;
}

void coll_frame_reader_cleanup(coll_frame_reader_t *r)
{
    free(r->buf);
    memset(r, 0, sizeof(*r));
}

static uint32_t load_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void store_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

coll_status_t coll_frame_reader_space(coll_frame_reader_t *r, size_t want, uint8_t **ptr_p,
                                      size_t *len_p)
{
    size_t used = r->end - r->start;
    size_t limit = r->max_frame + COLL_FRAME_HDR;

    if (r->start > 0) {
        /* Keep the unconsumed tail at the front so a frame is always contiguous. */
        memmove(r->buf, r->buf + r->start, used);
        r->start = 0;
        r->end = used;
    }
    if (r->cap - r->end < want && r->cap < limit) {
        size_t cap = r->cap;
        while (cap - r->end < want && cap < limit) {
            cap *= 2;
        }
        uint8_t *buf = realloc(r->buf, cap);
        if (buf == NULL) {
            return COLL_ERR_NOMEM;
        }
        r->buf = buf;
        r->cap = cap;
    }
    if (r->cap == r->end) {
        /* Full of one incomplete frame: next() reports it as too large before we get here. */
        return COLL_ERR_NOMEM;
    }
    *ptr_p = r->buf + r->end;
    *len_p = r->cap - r->end;
    return COLL_OK;
}

void coll_frame_reader_commit(coll_frame_reader_t *r, size_t n)
{
    r->end += n;
}

coll_status_t coll_frame_reader_next(coll_frame_reader_t *r, const uint8_t **payload_p,
                                     size_t *len_p)
{
    size_t avail = r->end - r->start;
    if (avail < COLL_FRAME_HDR) {
        return COLL_INPROGRESS;
    }
    uint32_t len = load_le32(r->buf + r->start);
    if (len > r->max_frame) {
        return COLL_ERR_PROTOCOL;
    }
    if (avail < COLL_FRAME_HDR + (size_t)len) {
        return COLL_INPROGRESS;
    }
    *payload_p = r->buf + r->start + COLL_FRAME_HDR;
    *len_p = len;
    r->start += COLL_FRAME_HDR + (size_t)len;
    return COLL_OK;
}

coll_status_t coll_frame_pack(const ProtobufCMessage *msg, uint8_t **frame_p, size_t *len_p)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *frame = malloc(COLL_FRAME_HDR + len);
    if (frame == NULL) {
        return COLL_ERR_NOMEM;
    }
    store_le32(frame, (uint32_t)len);
    protobuf_c_message_pack(msg, frame + COLL_FRAME_HDR);
    *frame_p = frame;
    *len_p = COLL_FRAME_HDR + len;
    return COLL_OK;
}
