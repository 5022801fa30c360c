/*
 * The device check's shared helpers (kernel_check.h): memory on both sides, the generator, the
 * comparisons and the report.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "tests/gpu/kernel_check.h"

const size_t kc_counts[KC_NCOUNTS] = {0, 1, 1023, (1u << 20) + 3};
int kc_on_host;

size_t kc_ncounts(const kc_t *kc)
{
    return kc->quick ? KC_NCOUNTS - 1 : KC_NCOUNTS;
}

static void vreport(const char *fmt, va_list ap)
{
    fprintf(stderr, "kernel_check: FAIL: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void kc_fail(kc_t *kc, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vreport(fmt, ap);
    va_end(ap);
    kc->checks++;
    kc->failures++;
}

int kc_expect(kc_t *kc, int ok, const char *fmt, ...)
{
    va_list ap;

    kc->checks++;
    if (!ok) {
        kc->failures++;
        va_start(ap, fmt);
        vreport(fmt, ap);
        va_end(ap);
    }
    return ok;
}

static void need(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "kernel_check: %s: %s\n", what, cudaGetErrorString(e));
        exit(2);
    }
}

void *kc_dev(size_t bytes)
{
    void *p = NULL;

    if (kc_on_host) {
        return kc_host(bytes);
    }
    need(cudaMalloc(&p, bytes > 0 ? bytes : 1), "cudaMalloc");
    return p;
}

void kc_dev_free(void *p)
{
    if (kc_on_host) {
        free(p);
    } else {
        need(cudaFree(p), "cudaFree");
    }
}

void kc_up(void *dev, const void *host, size_t bytes)
{
    if (bytes > 0 && kc_on_host) {
        memcpy(dev, host, bytes);
    } else if (bytes > 0) {
        need(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to the device");
    }
}

void kc_down(void *host, const void *dev, size_t bytes)
{
    if (bytes > 0 && kc_on_host) {
        memcpy(host, dev, bytes);
    } else if (bytes > 0) {
        need(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to the host");
    }
}

void *kc_pinned(size_t bytes)
{
    void *p = NULL;

    if (kc_on_host) {
        return kc_host(bytes);
    }
    need(cudaMallocHost(&p, bytes > 0 ? bytes : 1), "cudaMallocHost");
    return p;
}

void kc_pinned_free(void *p)
{
    if (kc_on_host) {
        free(p);
    } else {
        need(cudaFreeHost(p), "cudaFreeHost");
    }
}

void kc_stream(coll_exec_ctx_t *ctx)
{
    cudaStream_t s = NULL;

    ctx->device = 0;
    ctx->stream = NULL;
    if (!kc_on_host) {
        need(cudaGetDevice(&ctx->device), "cudaGetDevice");
        need(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
        ctx->stream = s;
    }
}

void kc_stream_free(coll_exec_ctx_t *ctx)
{
    if (!kc_on_host) {
        need(cudaStreamDestroy((cudaStream_t)ctx->stream), "cudaStreamDestroy");
    }
}

void *kc_host(size_t bytes)
{
    void *p = calloc(1, bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "kernel_check: out of host memory\n");
        exit(2);
    }
    return p;
}

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

uint64_t kc_rand(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

void kc_floats(float *x, size_t n, double mag, unsigned levels, int specials)
{
    static const float sp[3] = {0.0f, -0.0f, 1e-41f};

    for (size_t i = 0; i < n; i++) {
        uint64_t r = kc_rand();
        double v = ((double)(r >> 11 & 0xfffff) / 1048576.0 - 0.5) * 2 * mag;
        if (levels > 0) {
            v = mag * (double)((int)((r >> 40) % (2 * levels)) - (int)levels) / levels;
        }
        x[i] = specials && r % 64 == 0 ? sp[(r >> 8) % 3] : (float)v;
    }
}

size_t kc_esize(coll_dtype_t dt)
{
    static const size_t size[COLL_DTYPE_COUNT] = {4, 8, 2, 2, 1, 1, 4, 8};
    return size[dt];
}

/* A float32 for element generation: ordinary, or one in 16 special. */
static float gen_float(uint64_t r)
{
    static const float sp[8] = {INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -3e-39f, 3e38f, NAN};
    return r % 16 == 0 ? sp[(r >> 8) % 8] : (float)((double)(r >> 11 & 0xffff) / 4096.0 - 8.0);
}

void kc_elements(coll_dtype_t dt, void *x, size_t n)
{
    uint8_t *b = x;

    for (size_t i = 0; i < n; i++) {
        uint64_t r = kc_rand();
        float f = gen_float(r);
        double d = f;
        uint16_t h;
        switch (dt) {
        case COLL_FLOAT32: memcpy(b + 4 * i, &f, 4); break;
        case COLL_FLOAT64: memcpy(b + 8 * i, &d, 8); break;
        case COLL_FLOAT16:
        case COLL_BFLOAT16:
            h = r % 32 == 1 ? (uint16_t)(r >> 40) /* any pattern: NaN payloads, subnormals */
                            : (uint16_t)(((uint32_t)(r >> 16) & 0x3fff) | 0x3c00u);
            memcpy(b + 2 * i, &h, 2);
            break;
        default: memcpy(b + kc_esize(dt) * i, &r, kc_esize(dt)); break;
        }
    }
}

int kc_same_floats(kc_t *kc, const float *dev, const float *host, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&dev[i], &host[i], sizeof(float)) != 0) {
            kc_fail(kc, "%s: element %zu of %zu is %a on the device, %a on the host", what, i,
                    n, (double)dev[i], (double)host[i]);
            return 0;
        }
    }
    kc->checks++;
    return 1;
}

int kc_close_floats(kc_t *kc, const float *dev, const float *host, const float *tol,
                    int per_elem, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++) {
        float t = tol[per_elem ? i : 0];
        if (!(fabsf(dev[i] - host[i]) <= t)) {
            kc_fail(kc, "%s: element %zu of %zu is %.9g on the device, %.9g on the host "
                        "(tolerance %.3g)", what, i, n, dev[i], host[i], t);
            return 0;
        }
    }
    kc->checks++;
    return 1;
}
