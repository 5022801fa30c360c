/*
 * libFuzzer harness: the status server's request parsing (daemon/http.c) fed one connection's
 * bytes in arbitrary chunks, then the request target's path and a response built from it, as
 * daemon/status.c does.
 *
 * Input: 8 bytes seeding the chunk sizes, then the bytes the connection receives.
 *
 * Invariants: feed() returns 0 (more), 1 (complete) or -1 (refused), and once it returned 1 or
 * -1 it keeps returning that; a refusal carries 400, 414 or 431; 0 never comes after more than
 * COLL_HTTP_REQUEST_MAX bytes; a complete request has a known method and a terminated target
 * of at most COLL_HTTP_URL_MAX bytes; a path extracted from it starts with '/', is a prefix of
 * the target and fits the buffer given (or is refused); coll_http_response() gives exactly the
 * header and body it announces.
 */
#include "fuzz.h"

#include "base/http.h"

static void check_path(const coll_http_request_t *r)
{
    char path[COLL_HTTP_URL_MAX + 1], small[8];

    if (coll_http_request_path(r, path, sizeof(path)) == 0) {
        FUZZ_CHECK(path[0] == '/' && strlen(path) <= r->url_len &&
                       memcmp(path, r->url, strlen(path)) == 0,
                   "path '%s' of target '%s'", path, r->url);
        /* The same target into a buffer too small for most paths: refused, never overrun. */
        if (coll_http_request_path(r, small, sizeof(small)) == 0) {
            FUZZ_CHECK(strcmp(small, path) == 0, "short path '%s', long path '%s'", small, path);
        } else {
            FUZZ_CHECK(strlen(path) >= sizeof(small), "path '%s' refused in 8 bytes", path);
        }
    }
}

static void check_response(const coll_http_request_t *r, int code)
{
    size_t len = 0, hl;
    int head = r->complete && r->parser.method == HTTP_HEAD;
    char *resp = coll_http_response(code, "text/plain", "X-Fuzz: 1\r\n", r->url, r->url_len, head,
                                    &len);
    const char *end;

    FUZZ_CHECK(resp != NULL, "no response");
    end = strstr(resp, "\r\n\r\n");
    FUZZ_CHECK(end != NULL, "response without the end of its header");
    hl = (size_t)(end - resp) + 4;
    FUZZ_CHECK(len == hl + (head ? 0 : r->url_len) &&
                   (head || memcmp(resp + hl, r->url, r->url_len) == 0),
               "response of %zu bytes for a %zu-byte header and %zu-byte body", len, hl,
               r->url_len);
    free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_in_t in = {data, size};
    uint64_t seed = fuzz_take(&in, 8) | 1;
    coll_http_request_t r;
    int rc = 0;

    coll_http_request_init(&r);
    while (in.left > 0) {
        size_t n = 1 + fuzz_rand(&seed) % (fuzz_rand(&seed) & 1 ? 4096 : 16);
        int again;
        n = n < in.left ? n : in.left;
        again = coll_http_request_feed(&r, (const char *)in.p, n);
        FUZZ_CHECK(again >= -1 && again <= 1, "feed() returned %d", again);
        FUZZ_CHECK(rc == 0 || again == rc, "feed() returned %d after %d", again, rc);
        rc = again;
        in.p += n;
        in.left -= n;
    }
    if (rc == 0) {
        FUZZ_CHECK(r.total <= COLL_HTTP_REQUEST_MAX && !r.complete && r.error == 0,
                   "still reading after %zu bytes", r.total);
        return 0;
    }
    if (rc < 0) {
        FUZZ_CHECK(r.error == 400 || r.error == 414 || r.error == 431, "refused with %d",
                   r.error);
        FUZZ_CHECK(strcmp(coll_http_reason(r.error), "Unknown") != 0, "no reason for %d",
                   r.error);
        check_response(&r, r.error);
        return 0;
    }
    FUZZ_CHECK(r.complete && r.url_len <= COLL_HTTP_URL_MAX && r.url[r.url_len] == '\0',
               "complete request with a %zu-byte target", r.url_len);
    FUZZ_CHECK(coll_http_request_method(&r) != NULL &&
                   strcmp(coll_http_request_method(&r), "<unknown>") != 0,
               "complete request with method %u", (unsigned)r.parser.method);
    check_path(&r);
    check_response(&r, 200);
    return 0;
}
