/*
 * Helpers of the engine integration tests; see check_common.h. The float16 and bfloat16 codecs
 * here are deliberately the test's own (not kernels/cpu/half.h), so that expected values do not
 * share a bug with the code under test.
 */
#include "check_common.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *g_prog = "check";
static int g_rank = -1;

void check_set_prog(const char *prog)
{
    const char *slash = strrchr(prog, '/');
    g_prog = slash != NULL ? slash + 1 : prog;
}

void check_die(const char *fmt, ...)
{
    /* One write: the launcher may end this rank as soon as another one exits. */
    char msg[2048];
    va_list ap;
    int n = snprintf(msg, sizeof(msg), "%s: rank %d: FAIL: ", g_prog, g_rank);

    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
    exit(1);
}

void check_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", g_prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputs(" (see --help)\n", stderr);
    exit(2);
}

void check_say(const check_ctx_t *c, int only_rank0, const char *fmt, ...)
{
    va_list ap;
    if (only_rank0 && c->rank != 0) {
        return;
    }
    printf("%s: ", g_prog);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

double check_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int64_t check_realtime_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int check_parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
        return -1;
    }
    *out = v;
    return 0;
}

void check_env_sizes(int *world, int *local_size)
{
    const char *w = getenv("COLL_WORLD_SIZE"), *l = getenv("COLL_LOCAL_SIZE");
    long wv, lv;
    if (w == NULL || l == NULL || check_parse_int(w, 1, 1 << 20, &wv) < 0 ||
        check_parse_int(l, 1, wv, &lv) < 0 || wv % lv != 0) {
        check_usage_error("run me under collective-launch (COLL_WORLD_SIZE and COLL_LOCAL_SIZE "
                          "must be set, the local size dividing the world size)");
    }
    *world = (int)wv;
    *local_size = (int)lv;
}

void check_join(check_ctx_t *c, uint64_t pool_bytes)
{
    /* COLL_POOL_SIZE, when set, says more than the estimate (which leaves no room for the
     * fragmentation of several ranks' first-fit allocations). */
    coll_comm_params_t params = {.field_mask = getenv("COLL_POOL_SIZE") != NULL
                                                   ? 0
                                                   : COLL_COMM_PARAM_POOL_SIZE,
                                 .pool_bytes = pool_bytes};
    int world, local;
    coll_status_t st;

    check_env_sizes(&world, &local);
    memset(c, 0, sizeof(*c));
    st = coll_comm_create(&params, &c->comm);
    if (st != COLL_OK) {
        check_die("coll_comm_create (pool %" PRIu64 " bytes): %s: %s", pool_bytes,
                  coll_err_name(st), coll_comm_last_error(NULL));
    }
    c->rank = g_rank = coll_comm_rank(c->comm);
    c->world = coll_comm_world_size(c->comm);
    c->local_size = coll_comm_local_size(c->comm);
    c->local_rank = coll_comm_local_rank(c->comm);
    if (c->world != world || c->local_size != local) {
        check_die("communicator has world %d local %d, the environment said %d and %d", c->world,
                  c->local_size, world, local);
    }
    c->nodes = c->world / c->local_size;
}

coll_status_t check_wait(const check_ctx_t *c, coll_request_t *req, int timeout_ms,
                         const char *what, char *algo, size_t algo_len)
{
    coll_status_t st = coll_req_wait(req, timeout_ms);
    if (st == COLL_ERR_TIMEDOUT) {
        check_die("%s: not complete after %d ms (last error: '%s')", what, timeout_ms,
                  coll_comm_last_error(c->comm));
    }
    if (algo != NULL) {
        snprintf(algo, algo_len, "%s", coll_req_algo(req));
    }
    coll_req_free(req);
    return st;
}

/* Guard byte @p k (0..2*CHECK_GUARD_BYTES-1) of buffer @p which: different for every rank,
 * buffer and position, so that bytes copied from another buffer do not look intact. */
static uint8_t guard_byte(size_t k, int which)
{
    return (uint8_t)(0xa5u + 29u * (unsigned)g_rank + 101u * (unsigned)which + 7u * (unsigned)k);
}

void check_buf_alloc(const check_ctx_t *c, size_t bytes, int which, check_buf_t *b)
{
    void *p = NULL;
    coll_status_t st = coll_mem_alloc(c->comm, bytes + 2 * CHECK_GUARD_BYTES, &p);
    uint8_t *tail;

    if (st != COLL_OK) {
        check_die("coll_mem_alloc(%zu bytes): %s: %s", bytes + 2 * CHECK_GUARD_BYTES,
                  coll_err_name(st), coll_comm_last_error(c->comm));
    }
    b->alloc = p;
    b->data = b->alloc + CHECK_GUARD_BYTES;
    b->bytes = bytes;
    b->which = which;
    tail = b->data + bytes;
    for (size_t k = 0; k < CHECK_GUARD_BYTES; k++) {
        b->alloc[k] = guard_byte(k, which);
        tail[k] = guard_byte(CHECK_GUARD_BYTES + k, which);
    }
}

void check_buf_guards(const check_ctx_t *c, const check_buf_t *b, const char *what)
{
    const uint8_t *tail = b->data + b->bytes;
    (void)c;
    for (size_t k = 0; k < CHECK_GUARD_BYTES; k++) {
        if (b->alloc[k] != guard_byte(k, b->which)) {
            check_die("%s: guard byte %zu before the buffer (of %zu bytes) was written: 0x%02x, "
                      "expected 0x%02x", what, CHECK_GUARD_BYTES - k, b->bytes, b->alloc[k],
                      guard_byte(k, b->which));
        }
        if (tail[k] != guard_byte(CHECK_GUARD_BYTES + k, b->which)) {
            check_die("%s: guard byte %zu after the buffer (of %zu bytes) was written: 0x%02x, "
                      "expected 0x%02x", what, k, b->bytes, tail[k],
                      guard_byte(CHECK_GUARD_BYTES + k, b->which));
        }
    }
}

void check_buf_free(const check_ctx_t *c, check_buf_t *b)
{
    if (b->alloc != NULL) {
        coll_mem_free(c->comm, b->alloc);
    }
    memset(b, 0, sizeof(*b));
}

long long check_parse_count(const char *t, int nodes)
{
    char *end;
    long long v;
    if (t[0] == 'N') {
        if (t[1] == '\0') {
            return nodes;
        }
        errno = 0;
        v = strtoll(t + 2, &end, 10);
        if ((t[1] != '+' && t[1] != '-') || end == t + 2 || *end != '\0' || errno != 0) {
            return -1;
        }
        v = t[1] == '+' ? nodes + v : nodes - v;
        return v >= 0 ? v : -1;
    }
    errno = 0;
    v = strtoll(t, &end, 10);
    if (errno != 0 || end == t || v < 0) {
        return -1;
    }
    if (strcmp(end, "Ki") == 0) {
        return v << 10;
    }
    if (strcmp(end, "Mi") == 0) {
        return v << 20;
    }
    return *end == '\0' ? v : -1;
}

uint64_t check_mix(uint64_t x)
{
    /* splitmix64 (Steele, Lea & Flood 2014): consecutive inputs give unrelated outputs. */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* ---- datatypes ------------------------------------------------------------------------------ */

int check_dtype_is_float(coll_dtype_t dt)
{
    return dt == COLL_FLOAT32 || dt == COLL_FLOAT64 || dt == COLL_FLOAT16 || dt == COLL_BFLOAT16;
}

int check_dtype_is_signed(coll_dtype_t dt)
{
    return dt == COLL_INT8 || dt == COLL_INT32 || dt == COLL_INT64;
}

int check_dtype_bits(coll_dtype_t dt)
{
    switch (dt) {
    case COLL_INT8:
    case COLL_UINT8: return 8;
    case COLL_FLOAT16:
    case COLL_BFLOAT16: return 16;
    case COLL_FLOAT32:
    case COLL_INT32: return 32;
    default: return 64;
    }
}

int check_dtype_parse(const char *s)
{
    for (int d = 0; d < COLL_DTYPE_COUNT; d++) {
        if (strcmp(s, coll_dtype_name((coll_dtype_t)d)) == 0) {
            return d;
        }
    }
    return -1;
}

int check_redop_parse(const char *s)
{
    for (int o = 0; o < COLL_REDOP_COUNT; o++) {
        if (strcmp(s, coll_redop_name((coll_redop_t)o)) == 0) {
            return o;
        }
    }
    return -1;
}

int64_t check_int_wrap(coll_dtype_t dt, uint64_t i)
{
    int bits = check_dtype_bits(dt);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    uint64_t v = i & mask;
    if (check_dtype_is_signed(dt) && bits < 64 && (v >> (bits - 1)) != 0) {
        v |= ~mask;
    }
    return (int64_t)v;
}

/* binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. */
static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f;
    double m = (double)(h & 0x3ff);
    double v;
    if (e == 0x1f) {
        v = m != 0 ? NAN : INFINITY;
    } else if (e == 0) {
        v = ldexp(m, -24);
    } else {
        v = ldexp(m + 1024.0, e - 25);
    }
    return (h & 0x8000) ? -v : v;
}

/* The binary16 bits of @p v when it is exactly representable; -1 when not. */
static int32_t double_to_half_exact(double v)
{
    uint32_t sign = signbit(v) ? 0x8000u : 0;
    double a = fabs(v), m;
    int e;
    uint32_t bits;
    if (isnan(v)) {
        return 0x7e00;
    }
    if (isinf(v)) {
        return (int32_t)(sign | 0x7c00u);
    }
    if (a == 0) {
        return (int32_t)sign;
    }
    m = frexp(a, &e); /* a = m * 2^e, 0.5 <= m < 1 */
    if (e - 1 >= -14) {
        double frac = (2 * m - 1) * 1024.0;
        if (e - 1 > 15 || frac != floor(frac)) {
            return -1;
        }
        bits = (uint32_t)(e - 1 + 15) << 10 | (uint32_t)frac;
    } else {
        double sub = ldexp(a, 24);
        if (sub != floor(sub)) {
            return -1;
        }
        bits = (uint32_t)sub;
    }
    return (int32_t)(sign | bits);
}

static double bf16_to_double(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* The bfloat16 bits of @p v when it is exactly representable; -1 when not. */
static int32_t double_to_bf16_exact(double v)
{
    float f = (float)v;
    uint32_t u;
    if (isnan(v)) {
        return 0x7fc0;
    }
    memcpy(&u, &f, sizeof(u));
    if ((double)f != v || (u & 0xffffu) != 0) {
        return -1;
    }
    return (int32_t)(u >> 16);
}

check_val_t check_load(coll_dtype_t dt, const void *p, size_t k)
{
    check_val_t v = {0, 0};
    switch (dt) {
    case COLL_FLOAT32: v.f = ((const float *)p)[k]; break;
    case COLL_FLOAT64: v.f = ((const double *)p)[k]; break;
    case COLL_FLOAT16: v.f = half_to_double(((const uint16_t *)p)[k]); break;
    case COLL_BFLOAT16: v.f = bf16_to_double(((const uint16_t *)p)[k]); break;
    case COLL_INT8: v.i = ((const int8_t *)p)[k]; break;
    case COLL_UINT8: v.i = ((const uint8_t *)p)[k]; break;
    case COLL_INT32: v.i = ((const int32_t *)p)[k]; break;
    default: v.i = ((const int64_t *)p)[k]; break;
    }
    return v;
}

static void store_float(coll_dtype_t dt, void *p, size_t k, double f)
{
    int32_t bits = 0;
    switch (dt) {
    case COLL_FLOAT32:
        if (!isnan(f) && (double)(float)f != f) {
            bits = -1;
        }
        ((float *)p)[k] = (float)f;
        break;
    case COLL_FLOAT64: ((double *)p)[k] = f; break;
    case COLL_FLOAT16:
        bits = double_to_half_exact(f);
        ((uint16_t *)p)[k] = (uint16_t)bits;
        break;
    default:
        bits = double_to_bf16_exact(f);
        ((uint16_t *)p)[k] = (uint16_t)bits;
        break;
    }
    if (bits < 0) {
        check_die("test data: %.17g is not exactly representable in %s", f, coll_dtype_name(dt));
    }
}

void check_store(coll_dtype_t dt, void *p, size_t k, check_val_t v)
{
    switch (dt) {
    case COLL_INT8: ((int8_t *)p)[k] = (int8_t)v.i; break;
    case COLL_UINT8: ((uint8_t *)p)[k] = (uint8_t)v.i; break;
    case COLL_INT32: ((int32_t *)p)[k] = (int32_t)v.i; break;
    case COLL_INT64: ((int64_t *)p)[k] = v.i; break;
    default: store_float(dt, p, k, v.f); break;
    }
}

int check_val_equal(coll_dtype_t dt, check_val_t a, check_val_t b)
{
    if (!check_dtype_is_float(dt)) {
        return a.i == b.i;
    }
    if (isnan(a.f) || isnan(b.f)) {
        return isnan(a.f) && isnan(b.f);
    }
    return a.f == b.f;
}

const char *check_val_str(coll_dtype_t dt, check_val_t v, char *buf, size_t len)
{
    if (check_dtype_is_float(dt)) {
        snprintf(buf, len, "%.9g", v.f);
    } else {
        snprintf(buf, len, "%" PRId64, v.i);
    }
    return buf;
}

double check_float_max(coll_dtype_t dt)
{
    switch (dt) {
    case COLL_FLOAT16: return 65504.0;
    case COLL_BFLOAT16: return ldexp(255.0, 120); /* 0x7f7f: 1.1111111b * 2^127 */
    case COLL_FLOAT32: return 3.4028234663852886e38;
    default: return 1.7976931348623157e308;
    }
}
