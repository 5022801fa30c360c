/*
 * The executor of device memory (dev_exec.h): the CUDA module's table, or the host's entries
 * over the fake device layer. Registered for the life of the process (kernels/exec.h).
 */
#include "core/dev_exec.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/log.h"
#include "kernels/cuda/module.h"

/* The host executor's entries under the kind COLL_MEM_CUDA: the fake layer's device memory is
 * host memory, so they compute on it as on any host buffer, at once where the fake's stream
 * holds nothing back, else in the stream's order when it lands (coll__dev_fake_exec_defer():
 * COLL_DEVICE_FAKE_LAZY, copies not landed, waits for words); those go through the fake's
 * count of launches, which faults a device where a test asks (COLL_DEVICE_FAKE_EXEC_FAIL:
 * coll__dev_fake_exec_launch()). Filled once. None where COLL_DEVICE_FAKE_NO_EXEC is set
 * (tests of what a daemon without one does). */
static coll_exec_t fake_exec;

/* A launch of the host's entries, kept while the fake's stream holds it back. */
typedef struct {
    enum { HELD_COPY, HELD_ZERO, HELD_REDUCE } kind;
    coll_exec_ctx_t ctx;
    void *dst;
    const void *src;
    size_t bytes;
    coll_reduce_args_t a; /* its sources in srcs */
    const void *srcs[COLL_REDUCE_MAX_SRCS];
} held_t;

/* Run @p h (a copy's, a zeroing's or a reduction's) on the host's entries. */
static coll_status_t held_do(const held_t *h)
{
    const coll_exec_t *host = coll_exec_get(COLL_MEM_HOST);

    switch (h->kind) {
    case HELD_COPY: return host->copy_async(&h->ctx, h->dst, h->src, h->bytes);
    case HELD_ZERO: return host->zero_async(&h->ctx, h->dst, h->bytes);
    default: return host->reduce_async(&h->ctx, &h->a);
    }
}

/* The fake stream's call once a held launch lands (@p go) or is dropped. */
static void held_run(void *arg, int go)
{
    if (go) {
        (void)held_do(arg); /* the arguments were the executor's own, checked as they came */
    }
    free(arg);
}

/* A launch on @p h->ctx's stream: counted (and faulted) by the fake, then run now or held. */
static coll_status_t fake_launch(const held_t *h)
{
    held_t *c;
    int run, r;
    coll_status_t st = coll__dev_fake_exec_launch(h->ctx.device, &run);

    if (!run) {
        return st;
    }
    if ((c = malloc(sizeof(*c))) == NULL) {
        return COLL_ERR_NOMEM;
    }
    *c = *h;
    if (h->kind == HELD_REDUCE) {
        for (unsigned k = 0; k < h->a.nsrc && k < COLL_REDUCE_MAX_SRCS; k++) {
            c->srcs[k] = h->a.src[k];
        }
        c->a.src = c->srcs;
    }
    if ((r = coll__dev_fake_exec_defer(h->ctx.stream, held_run, c)) == 1) {
        return COLL_OK;
    }
    free(c);
    return r == 0 ? held_do(h) : COLL_ERR_NOMEM;
}

static coll_status_t fake_copy_async(const coll_exec_ctx_t *ctx, void *dst, const void *src,
                                     size_t bytes)
{
    return fake_launch(&(held_t){.kind = HELD_COPY, .ctx = *ctx, .dst = dst, .src = src,
                                 .bytes = bytes});
}

static coll_status_t fake_zero_async(const coll_exec_ctx_t *ctx, void *dst, size_t bytes)
{
    return fake_launch(&(held_t){.kind = HELD_ZERO, .ctx = *ctx, .dst = dst, .bytes = bytes});
}

static coll_status_t fake_reduce_async(const coll_exec_ctx_t *ctx, const coll_reduce_args_t *a)
{
    if (a->nsrc > COLL_REDUCE_MAX_SRCS) { /* the host's entry refuses it */
        return coll_exec_get(COLL_MEM_HOST)->reduce_async(ctx, a);
    }
    return fake_launch(&(held_t){.kind = HELD_REDUCE, .ctx = *ctx, .a = *a});
}

static coll_status_t fake_sync(const coll_exec_ctx_t *ctx)
{
    return coll__dev_fake_exec_sync(ctx->device);
}

static const coll_exec_t *fake_open(char *text, size_t len)
{
    coll_status_t st;

    if (getenv("COLL_DEVICE_FAKE_NO_EXEC") != NULL) {
        snprintf(text, len, "none: COLL_DEVICE_FAKE_NO_EXEC is set (test only)");
        return NULL;
    }
    if (fake_exec.name == NULL) {
        fake_exec = *coll_exec_get(COLL_MEM_HOST);
        fake_exec.name = "fake";
        fake_exec.kind = COLL_MEM_CUDA;
        fake_exec.copy_async = fake_copy_async;
        fake_exec.zero_async = fake_zero_async;
        fake_exec.reduce_async = fake_reduce_async;
        fake_exec.sync = fake_sync;
    }
    if ((st = coll_exec_register(&fake_exec)) != COLL_OK) {
        snprintf(text, len, "the fake device's executor: not registered: %s", coll_strerror(st));
        return NULL;
    }
    snprintf(text, len, "fake: the host executor's entries (the fake device's memory is host "
             "memory)");
    return &fake_exec;
}

/* Where the module reports a device error an entry cannot return. */
static void module_log(const char *line)
{
    coll_error(COLL_SUB_CORE, "CUDA module: %s", line);
}

static const coll_exec_t *module_open(const char *module, char *text, size_t len)
{
    char why[COLL_DEV_TEXT_MAX] = "";
    void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    coll_cuda_module_exec_fn entry;
    const coll_exec_t *ex;
    coll_status_t st;

    if (h == NULL) {
        snprintf(text, len, "the CUDA module %s: not loaded: %s", module, dlerror());
        return NULL;
    }
    *(void **)&entry = dlsym(h, COLL_CUDA_MODULE_SYMBOL);
    if (entry == NULL) {
        snprintf(text, len, "the CUDA module %s: no entry point %s", module,
                 COLL_CUDA_MODULE_SYMBOL);
        return NULL;
    }
    if ((ex = entry(COLL_EXEC_ABI, module_log, why, sizeof(why))) == NULL) {
        snprintf(text, len, "the CUDA module %s refused: %s", module, why);
        return NULL;
    }
    if ((st = coll_exec_register(ex)) != COLL_OK) {
        snprintf(text, len, "the CUDA module %s: its executor not registered: %s", module,
                 coll_strerror(st));
        return NULL;
    }
    snprintf(text, len, "%s (%s)", ex->name, module);
    return ex;
}

const coll_exec_t *coll_dev_exec_open(const coll_dev_ops_t *ops, const char *module, char *text,
                                      size_t len)
{
    if (ops == NULL) {
        snprintf(text, len, "none: no device layer");
        return NULL;
    }
    return ops == &coll_dev_fake ? fake_open(text, len) : module_open(module, text, len);
}
