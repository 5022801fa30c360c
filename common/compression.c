/*
 * Compression specs as text (collective.h, coll_compression_parse()): the syntax of
 * COLL_COMPRESSION, coll-train --compression and the Python API, and its inverse.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <collective.h>

#include "common/arg.h"
#include "common/compression.h"

static const char *const names[COLL_COMPRESS_COUNT] = {
    [COLL_COMPRESS_NONE] = "none",     [COLL_COMPRESS_FP16] = "fp16",
    [COLL_COMPRESS_BF16] = "bf16",     [COLL_COMPRESS_TOPK] = "topk",
    [COLL_COMPRESS_ONEBIT] = "onebit", [COLL_COMPRESS_POWERSGD] = "powersgd",
    [COLL_COMPRESS_AUTO] = "auto",
};

const char *coll_compress_method_name(coll_compress_method_t method)
{
    return (unsigned)method < COLL_COMPRESS_COUNT ? names[method] : "unknown";
}

/* Rounded half up by hand: libcollective.a must link statically without libm. */
uint32_t coll__compress_ratio_units(double ratio)
{
    double u = ratio * COLL_COMPRESS_RATIO_UNITS + 0.5;

    if (!(u >= 1.0)) {
        return 1u; /* also NaN */
    }
    return u >= 4294967295.0 ? UINT32_MAX : (uint32_t)u;
}

coll_status_t coll__compression_check(const coll_compression_t *c)
{
    int topk = c->method == COLL_COMPRESS_TOPK, psgd = c->method == COLL_COMPRESS_POWERSGD;

    if ((unsigned)c->method >= COLL_COMPRESS_COUNT || (c->flags & ~COLL_COMPRESS_NO_EF) != 0) {
        return COLL_ERR_INVALID;
    }
    if (topk && !(c->ratio > 0.0 && c->ratio <= 1.0)) {
        return COLL_ERR_INVALID;
    }
    if (psgd && (c->rank < 1 || c->rank > COLL_COMPRESS_MAX_RANK)) {
        return COLL_ERR_INVALID;
    }
    if (c->method == COLL_COMPRESS_NONE && (c->flags != 0 || c->warmup != 0)) {
        return COLL_ERR_INVALID; /* nothing to feed back, nothing to warm up */
    }
    return COLL_OK;
}

/* The parameter after "method:"; 0 when there is none. */
static int parse_param(coll_compression_t *c, const char *p, size_t len)
{
    char buf[32], *end;
    double v;

    if (len == 0 || len >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, p, len);
    buf[len] = '\0';
    errno = 0;
    v = strtod(buf, &end);
    if (*end != '\0' || errno != 0) {
        return -1;
    }
    if (c->method == COLL_COMPRESS_TOPK) {
        c->ratio = v;
        return 0;
    }
    if (c->method == COLL_COMPRESS_POWERSGD && v >= 1 && v <= COLL_COMPRESS_MAX_RANK &&
        v == (double)(unsigned)v) {
        c->rank = (unsigned)v;
        return 0;
    }
    return -1;
}

/* "noef" or "warmup=N". */
static int parse_option(coll_compression_t *c, const char *p, size_t len)
{
    char *end;
    unsigned long n;

    if (len == 4 && strncmp(p, "noef", 4) == 0) {
        c->flags |= COLL_COMPRESS_NO_EF;
        return 0;
    }
    if (len > 7 && strncmp(p, "warmup=", 7) == 0 && p[7] >= '0' && p[7] <= '9') {
        errno = 0;
        n = strtoul(p + 7, &end, 10);
        if (end == p + len && errno == 0 && n <= UINT32_MAX) {
            c->warmup = (unsigned)n;
            return 0;
        }
    }
    return -1;
}

static int parse_method(coll_compression_t *c, const char *p, size_t len)
{
    const char *colon = memchr(p, ':', len);
    size_t mlen = colon != NULL ? (size_t)(colon - p) : len;

    for (unsigned m = 0; m < COLL_COMPRESS_COUNT; m++) {
        if (strlen(names[m]) == mlen && strncmp(p, names[m], mlen) == 0) {
            c->method = (coll_compress_method_t)m;
            if (colon != NULL) {
                return parse_param(c, colon + 1, len - mlen - 1);
            }
            return m == COLL_COMPRESS_TOPK || m == COLL_COMPRESS_POWERSGD ? -1 : 0;
        }
    }
    return -1;
}

coll_status_t coll_compression_parse(const char *text, coll_compression_t *out)
{
    coll_compression_t c = {COLL_COMPRESS_NONE, 0.0, 0, 0, 0, 0};
    const char *p = text;
    int first = 1;

    COLL_ARG_NONNULL(text, COLL_ERR_INVALID);
    COLL_ARG_NONNULL(out, COLL_ERR_INVALID);
    do {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if ((first ? parse_method(&c, p, len) : parse_option(&c, p, len)) != 0) {
            return COLL_ERR_INVALID;
        }
        first = 0;
        p = comma != NULL ? comma + 1 : NULL;
    } while (p != NULL);
    if (coll__compression_check(&c) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    *out = c;
    return COLL_OK;
}

int coll_compression_format(const coll_compression_t *c, char *buf, size_t len)
{
    char param[32] = "";
    int n;

    COLL_ARG_NONNULL(c, -1);
    if (buf == NULL && len > 0) {
        coll__thread_arg_null(__func__, "buf");
        return -1;
    }
    if (c->method == COLL_COMPRESS_TOPK) {
        snprintf(param, sizeof(param), ":%g",
                 (double)coll__compress_ratio_units(c->ratio) / COLL_COMPRESS_RATIO_UNITS);
    } else if (c->method == COLL_COMPRESS_POWERSGD) {
        snprintf(param, sizeof(param), ":%u", c->rank);
    }
    n = snprintf(buf, len, "%s%s%s", coll_compress_method_name(c->method), param,
                 (c->flags & COLL_COMPRESS_NO_EF) ? ",noef" : "");
    if (c->warmup > 0 && n >= 0) {
        n += snprintf(len > (size_t)n ? buf + n : NULL, len > (size_t)n ? len - (size_t)n : 0,
                      ",warmup=%u", c->warmup);
    }
    return n;
}
