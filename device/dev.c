/*
 * Which device layer a process gets (dev.h): the fake when COLL_DEVICE_FAKE says so, else CUDA's
 * driver, opened once; what it found, in words; the calling thread's last device error; the
 * argument checks the implementations share.
 */
#include "device/dev.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const coll_dev_ops_t *opened;
static coll_status_t open_status;
static char status_text[COLL_DEV_TEXT_MAX];
static _Thread_local char last_error[COLL_DEV_TEXT_MAX];

coll_status_t coll__dev_fail(coll_status_t st, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return st;
}

const char *coll_dev_error(void)
{
    return last_error;
}

coll_status_t coll__dev_check_register(const void *p, size_t bytes, const uint64_t *dev_p,
                                       const char *who)
{
    long page = sysconf(_SC_PAGESIZE);

    if (p == NULL || dev_p == NULL) {
        return coll__dev_fail(COLL_ERR_INVALID, "%s: NULL %s", who, p == NULL ? "memory" :
                              "place for the device address");
    }
    if (bytes == 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "%s of 0 bytes at %p", who, p);
    }
    if ((uintptr_t)p % (uintptr_t)page != 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "%s of %zu bytes at %p: not aligned to the page "
                              "size (%ld bytes)", who, bytes, p, page);
    }
    return COLL_OK;
}

coll_status_t coll__dev_check_word(uint64_t word, const char *who)
{
    if (word == 0 || word % sizeof(uint64_t) != 0) {
        return coll__dev_fail(COLL_ERR_INVALID, "%s: the word at %#llx is not an 8-byte aligned "
                              "address", who, (unsigned long long)word);
    }
    return COLL_OK;
}

/* COLL_DEVICE_FAKE: a count of fake devices, 1 .. COLL_DEV_MAX; 0 or empty means no fake. */
static int fake_count(const char *v, int *n_p)
{
    char *end;
    long n = *v == '\0' ? 0 : strtol(v, &end, 10);

    if ((*v != '\0' && *end != '\0') || n < 0 || n > COLL_DEV_MAX) {
        return -1;
    }
    *n_p = (int)n;
    return 0;
}

static void describe(const coll_dev_ops_t *ops, const char *what)
{
    int n = ops->count();

    snprintf(status_text, sizeof(status_text), "%s, %d device%s", what, n, n == 1 ? "" : "s");
}

static void open_once(void)
{
    const char *fake = getenv("COLL_DEVICE_FAKE");
    char version[32], why[COLL_DEV_TEXT_MAX - 32];
    int n = 0;

    if (fake != NULL && fake_count(fake, &n) < 0) {
        open_status = COLL_ERR_UNSUPPORTED;
        snprintf(status_text, sizeof(status_text), "COLL_DEVICE_FAKE=%.64s is not a count of "
                 "fake devices (0 .. %d)", fake, COLL_DEV_MAX);
        return;
    }
    if (n > 0) {
        open_status = coll__dev_fake_init(n);
        opened = &coll_dev_fake;
        describe(opened, "fake (COLL_DEVICE_FAKE, test only)");
        return;
    }
    open_status = coll__dev_cuda_open(&opened, why, sizeof(why));
    if (open_status != COLL_OK) {
        opened = NULL;
        snprintf(status_text, sizeof(status_text), "%s", why);
        return;
    }
    coll__dev_cuda_version(version, sizeof(version));
    snprintf(why, sizeof(why), "cuda driver %s", version);
    describe(opened, why);
}

coll_status_t coll_dev_open(const coll_dev_ops_t **ops_p)
{
    pthread_once(&once, open_once);
    if (open_status == COLL_OK) {
        *ops_p = opened;
    }
    return open_status;
}

const char *coll_dev_layer(void)
{
    const char *fake = getenv("COLL_DEVICE_FAKE");
    int n = 0;

    return fake != NULL && (fake_count(fake, &n) < 0 || n > 0) ? "fake" : "cuda";
}

const char *coll_dev_status(void)
{
    pthread_once(&once, open_once);
    return status_text;
}
