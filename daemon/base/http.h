/**
 * @file http.h
 * @brief The HTTP/1.1 of the status server: one request per connection, parsed with
 *        libhttp-parser (Node.js's parser, as packaged by Debian), and the responses.
 *
 * The status server answers GET and HEAD only, with bodies it builds whole, and closes the
 * connection after each response (Connection: close), which is what curl, Prometheus and
 * collectivectl expect. Request bodies are not read: a request with one is answered after its
 * headers.
 */
#ifndef COLL_HTTP_H
#define COLL_HTTP_H

#include <http_parser.h>
#include <stddef.h>

/** Longest request target accepted (path and query), bytes. */
#define COLL_HTTP_URL_MAX 1024
/** Most bytes read for one request before it is refused (431). */
#define COLL_HTTP_REQUEST_MAX 16384

/** One request being read. */
typedef struct {
    http_parser parser;
    char url[COLL_HTTP_URL_MAX + 1];
    size_t url_len;
    size_t total;  /**< bytes fed so far */
    int complete;  /**< headers read: method and url are valid */
    int error;     /**< HTTP status to refuse the request with (400, 414, 431), or 0 */
} coll_http_request_t;

/** @brief Prepare @p r to read a request. */
void coll_http_request_init(coll_http_request_t *r);

/**
 * @brief Feed bytes received on the connection.
 * @return 1 when the request is complete, 0 when more bytes are needed, -1 when the request is
 *         refused (r->error holds the HTTP status to answer with).
 */
int coll_http_request_feed(coll_http_request_t *r, const char *data, size_t len);

/** @return The request's method name ("GET"), once complete. */
const char *coll_http_request_method(const coll_http_request_t *r);

/**
 * @brief The path of the request target without query or fragment ("/metrics").
 * @return 0, or -1 when the target is not a valid origin-form URL.
 */
int coll_http_request_path(const coll_http_request_t *r, char *path, size_t len);

/** @return The reason phrase of HTTP status @p code ("Not Found"). */
const char *coll_http_reason(int code);

/**
 * @brief Format a complete response: status line, Content-Type, Content-Length,
 *        Connection: close, optional extra header lines (each ending in CRLF) and the body.
 * @param [in] head_only  Leave the body out (HEAD), keeping its Content-Length.
 * @param [out] len_p     Bytes of the response.
 * @return The response (free() it), or NULL when out of memory.
 */
char *coll_http_response(int code, const char *content_type, const char *extra_headers,
                         const char *body, size_t body_len, int head_only, size_t *len_p);

#endif
