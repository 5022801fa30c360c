/*
 * The walk of a UCX 1.13 worker address (ucx_address.h). Field names and flag values are those of
 * src/ucp/wireup/address.c in UCX 1.13.1; every read is bounds-checked first.
 */
#include "net/ucx_address.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define HDR_VERSION_MASK 0x0fu  /* the header's low nibble: 0 version 1, 1 version 2 */
#define HDR_FLAG_DEBUG_INFO 0x01u
#define HDR_FLAG_WORKER_UUID 0x02u
#define HDR_FLAG_CLIENT_ID 0x04u
#define NULL_RESOURCE 0xffu     /* an address without devices */
#define FLAG_LAST 0x80u         /* last device, interface or endpoint address */
#define MD_EMPTY_DEV 0x80u
#define MD_MASK_V1 0x1fu
#define MD_MASK_V2 0x7fu
#define DEV_NUM_PATHS 0x40u
#define DEV_SYS_DEVICE 0x20u
#define DEV_LEN_MASK 0x1fu
#define IFACE_HAS_EP 0x40u
#define IFACE_LEN_MASK 0x3fu
#define ATTR_V1_BYTES 16u       /* float overhead, bandwidth, latency; uint32 prio and caps */
#define ATTR_V2_BYTES 8u        /* 8-bit overhead, bandwidth, latency; prio; seg size; flags */
#define FP8_NAN_EXPONENT 0x0fu  /* an 8-bit float whose exponent is all ones: NaN or inf */
#define MAX_MDS 64u             /* UCX shifts a 64-bit map by the memory domain index */
#define MAX_IFACES 128u         /* UCP_MAX_RESOURCES */
#define MAX_EP_ADDRS 6u         /* UCP_MAX_LANES */

typedef struct {
    const uint8_t *p, *end;
    int v2;
    unsigned ifaces;
    char *why;
    size_t whylen;
} walk_t;

static int fault(walk_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fault(walk_t *w, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(w->why, w->whylen, fmt, ap);
    va_end(ap);
    return -1;
}

/* @p n bytes at *at, or a fault naming @p what. */
static int take(walk_t *w, size_t n, const uint8_t **at, const char *what)
{
    if ((size_t)(w->end - w->p) < n) {
        return fault(w, "%s of %zu bytes past the end (%zu left)", what, n,
                     (size_t)(w->end - w->p));
    }
    if (at != NULL) {
        *at = w->p;
    }
    w->p += n;
    return 0;
}

static int byte(walk_t *w, uint8_t *v, const char *what)
{
    const uint8_t *at = NULL;

    if (take(w, 1, &at, what) < 0) {
        return -1;
    }
    *v = *at;
    return 0;
}

/* The value in the low bits @p mask of @p first; in version 2 all ones there means that the
 * next byte holds it. */
static int extended(walk_t *w, uint8_t first, uint8_t mask, uint8_t *v, const char *what)
{
    *v = first & mask;
    return w->v2 && *v == mask ? byte(w, v, what) : 0;
}

/* Version, flags, worker uuid, client id, worker name. */
static int header(walk_t *w)
{
    uint8_t b, flags, name_len;

    if (byte(w, &b, "header") < 0) {
        return -1;
    }
    if ((b & HDR_VERSION_MASK) > 1) {
        return fault(w, "address version %u unknown (UCX knows 1 and 2)",
                     (b & HDR_VERSION_MASK) + 1);
    }
    w->v2 = (b & HDR_VERSION_MASK) == 1;
    flags = (uint8_t)(b >> 4);
    if (w->v2 && byte(w, &flags, "header flags") < 0) {
        return -1;
    }
    /* A version 1 address always has the uuid (the flag came with UCX 1.12). */
    if (((!w->v2 || (flags & HDR_FLAG_WORKER_UUID)) && take(w, 8, NULL, "worker uuid") < 0) ||
        ((flags & HDR_FLAG_CLIENT_ID) && take(w, 8, NULL, "client id") < 0)) {
        return -1;
    }
    if (flags & HDR_FLAG_DEBUG_INFO) {
        if (byte(w, &name_len, "worker name length") < 0 ||
            take(w, name_len, NULL, "worker name") < 0) {
            return -1;
        }
    }
    return 0;
}

static int finite_float(const uint8_t *at)
{
    float f;

    memcpy(&f, at, sizeof(f));
    return isfinite(f);
}

/* Version 1: floats UCX scores interfaces with; version 2: 8-bit floats of the same. */
static int iface_attrs(walk_t *w)
{
    const uint8_t *a = NULL;
    float bw;

    if (take(w, w->v2 ? ATTR_V2_BYTES : ATTR_V1_BYTES, &a, "interface attributes") < 0) {
        return -1;
    }
    if (w->v2) {
        for (int i = 0; i < 3; i++) {
            if ((a[i] & FP8_NAN_EXPONENT) == FP8_NAN_EXPONENT) {
                return fault(w, "interface %u: attribute %d is not a finite number", w->ifaces,
                             i);
            }
        }
        return 0;
    }
    memcpy(&bw, a + 4, sizeof(bw));
    if (!finite_float(a) || !finite_float(a + 4) || !finite_float(a + 8) || bw == 0.0f) {
        return fault(w, "interface %u: overhead, bandwidth or latency not a finite number "
                     "(or no bandwidth)", w->ifaces);
    }
    return 0;
}

/* The endpoint addresses after an interface: length, address, lane (its LAST flag ends). */
static int ep_addrs(walk_t *w)
{
    uint8_t len, lane = 0;

    for (unsigned n = 0; !(lane & FLAG_LAST); n++) {
        if (n == MAX_EP_ADDRS) {
            return fault(w, "interface %u: more than %u endpoint addresses", w->ifaces,
                         MAX_EP_ADDRS);
        }
        if (byte(w, &len, "endpoint address length") < 0 ||
            take(w, len, NULL, "endpoint address") < 0 || byte(w, &lane, "lane") < 0) {
            return -1;
        }
    }
    return 0;
}

/* One interface; @p last is set when it is its device's last. */
static int iface(walk_t *w, int *last)
{
    uint8_t b, len;

    if (++w->ifaces > MAX_IFACES) {
        return fault(w, "more than %u interfaces", MAX_IFACES);
    }
    if (take(w, 2, NULL, "transport checksum") < 0 || iface_attrs(w) < 0 ||
        byte(w, &b, "interface address length") < 0 ||
        extended(w, b, IFACE_LEN_MASK, &len, "interface address length") < 0 ||
        take(w, len, NULL, "interface address") < 0) {
        return -1;
    }
    *last = (b & FLAG_LAST) != 0;
    return (b & IFACE_HAS_EP) ? ep_addrs(w) : 0;
}

/* One device and its interfaces; @p last is set when it is the address's last. */
static int device(walk_t *w, int *last)
{
    uint8_t md, md_index, dev, dev_len, paths = 1;
    int last_iface;

    if (byte(w, &md, "memory domain") < 0 ||
        extended(w, md, w->v2 ? MD_MASK_V2 : MD_MASK_V1, &md_index, "memory domain") < 0 ||
        byte(w, &dev, "device address length") < 0 ||
        extended(w, dev, DEV_LEN_MASK, &dev_len, "device address length") < 0) {
        return -1;
    }
    if (md_index >= MAX_MDS) {
        return fault(w, "memory domain index %u (UCX has at most %u)", md_index, MAX_MDS);
    }
    if (((dev & DEV_NUM_PATHS) && byte(w, &paths, "path count") < 0) ||
        ((dev & DEV_SYS_DEVICE) && take(w, 1, NULL, "system device") < 0) ||
        take(w, dev_len, NULL, "device address") < 0) {
        return -1;
    }
    if (paths == 0) {
        return fault(w, "a device with no path");
    }
    *last = (dev & FLAG_LAST) != 0;
    last_iface = (md & MD_EMPTY_DEV) != 0;
    while (!last_iface) {
        if (iface(w, &last_iface) < 0) {
            return -1;
        }
    }
    return 0;
}

coll_status_t coll_ucx_address_check(const uint8_t *addr, size_t len, char *why, size_t whylen)
{
    walk_t w = {.p = addr, .end = addr + len, .why = why, .whylen = whylen};
    int last = 0;

    if (header(&w) < 0) {
        return COLL_ERR_PROTOCOL;
    }
    if (w.p < w.end && *w.p == NULL_RESOURCE) {
        w.p++;
        last = 1;
    }
    while (!last) {
        if (device(&w, &last) < 0) {
            return COLL_ERR_PROTOCOL;
        }
    }
    if (w.p != w.end) {
        fault(&w, "%zu bytes after the last device", (size_t)(w.end - w.p));
        return COLL_ERR_PROTOCOL;
    }
    return COLL_OK;
}
