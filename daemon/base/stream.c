#include "base/stream.h"

#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"

typedef struct {
    uv_write_t req;
    uint8_t data[]; /* the unwritten rest of a frame */
} frame_write_t;

static void write_cb(uv_write_t *req, int status)
{
    free(req);
}

coll_status_t coll_stream_write(uv_stream_t *stream, const uint8_t *frame, size_t len)
{
    frame_write_t *w;
    uv_buf_t buf = uv_buf_init((char *)frame, (unsigned)len);
    size_t done = 0;

    /* Most frames go out at once without a copy; only what the socket refuses is queued. */
    if (uv_stream_get_write_queue_size(stream) == 0) {
        int n = uv_try_write(stream, &buf, 1);
        if (n < 0 && n != UV_EAGAIN) {
            return COLL_ERR_IO;
        }
        done = n > 0 ? (size_t)n : 0;
    }
    if (done == len) {
        return COLL_OK;
    }
    w = malloc(sizeof(*w) + len - done);
    if (w == NULL) {
        return COLL_ERR_NOMEM;
    }
    memcpy(w->data, frame + done, len - done);
    buf = uv_buf_init((char *)w->data, (unsigned)(len - done));
    if (uv_write(&w->req, stream, &buf, 1, write_cb) != 0) {
        free(w);
        return COLL_ERR_IO;
    }
    return COLL_OK;
}

coll_status_t coll_stream_send(uv_stream_t *stream, const ProtobufCMessage *msg)
{
    uint8_t *frame;
    size_t len;
    coll_status_t st = coll_frame_pack(msg, &frame, &len);

    if (st == COLL_OK) {
        st = coll_stream_write(stream, frame, len);
        free(frame);
    }
    return st;
}

int coll_parse_hostport(const char *text, char *host, size_t hostlen, int *port_p)
{
    const char *colon, *h = text;
    size_t n;
    char *end;
    long port;

    if (text[0] == '[') {
        const char *close = strchr(text, ']');
        if (close == NULL || close[1] != ':') {
            return -1;
        }
        h = text + 1;
        n = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(text, ':');
        if (colon == NULL) {
            return -1;
        }
        n = (size_t)(colon - text);
        /* "fd00::1:2" could be [fd00::1]:2 or the address fd00::1:2 without a port. */
        if (memchr(text, ':', n) != NULL) {
            return -2;
        }
    }
    if (n == 0 || n >= hostlen) {
        return -1;
    }
    port = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || port < 0 || port > 65535) {
        return -1;
    }
    memcpy(host, h, n);
    host[n] = '\0';
    *port_p = (int)port;
    return 0;
}
