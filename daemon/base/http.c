#include "base/http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int on_url(http_parser *p, const char *at, size_t len)
{
    coll_http_request_t *r = p->data;

    if (r->url_len + len > COLL_HTTP_URL_MAX) {
        r->error = 414;
        return -1;
    }
    memcpy(r->url + r->url_len, at, len);
    r->url_len += len;
    r->url[r->url_len] = '\0';
    return 0;
}

/* The answer needs only the request line and headers; pausing stops the parser here, so a
 * body (or a second, pipelined request) is never parsed. */
static int on_headers_complete(http_parser *p)
{
    coll_http_request_t *r = p->data;

    r->complete = 1;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_headers_complete = on_headers_complete,
};

void coll_http_request_init(coll_http_request_t *r)
{
    memset(r, 0, sizeof(*r));
    http_parser_init(&r->parser, HTTP_REQUEST);
    r->parser.data = r;
}

int coll_http_request_feed(coll_http_request_t *r, const char *data, size_t len)
{
    if (r->complete) {
        return 1;
    }
    if (r->error) {
        return -1;
    }
    r->total += len;
    http_parser_execute(&r->parser, &settings, data, len);
    if (r->complete) {
        return 1;
    }
    if (r->error == 0 && HTTP_PARSER_ERRNO(&r->parser) != HPE_OK) {
        r->error = HTTP_PARSER_ERRNO(&r->parser) == HPE_HEADER_OVERFLOW ? 431 : 400;
    }
    if (r->error == 0 && r->total > COLL_HTTP_REQUEST_MAX) {
        r->error = 431;
    }
    return r->error ? -1 : 0;
}

const char *coll_http_request_method(const coll_http_request_t *r)
{
    return http_method_str((enum http_method)r->parser.method);
}

int coll_http_request_path(const coll_http_request_t *r, char *path, size_t len)
{
    struct http_parser_url u;
    size_t n;

    http_parser_url_init(&u);
    if (r->url_len == 0 || r->url[0] != '/' ||
        http_parser_parse_url(r->url, r->url_len, 0, &u) != 0 ||
        !(u.field_set & (1u << UF_PATH))) {
        return -1;
    }
    n = u.field_data[UF_PATH].len;
    if (n >= len) {
        return -1;
    }
    memcpy(path, r->url + u.field_data[UF_PATH].off, n);
    path[n] = '\0';
    return 0;
}

const char *coll_http_reason(int code)
{
    switch (code) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
    }
}

char *coll_http_response(int code, const char *content_type, const char *extra_headers,
                         const char *body, size_t body_len, int head_only, size_t *len_p)
{
    char head[512];
    size_t hl, total;
    char *out;

    hl = (size_t)snprintf(head, sizeof(head),
                          "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                          "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                          code, coll_http_reason(code), content_type, body_len,
                          extra_headers != NULL ? extra_headers : "");
    if (hl >= sizeof(head)) {
        return NULL;
    }
    total = hl + (head_only ? 0 : body_len);
    out = malloc(total + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, head, hl);
    if (!head_only && body_len > 0) {
        memcpy(out + hl, body, body_len);
    }
    out[total] = '\0';
    *len_p = total;
    return out;
}
