/*
 * Unit tests of the CUDA device layer (device/dev_cuda.c) over a stand-in for the driver
 * (fake_libcuda.c, built as libcuda.so.1 and found first on LD_LIBRARY_PATH): the driver is
 * loaded and its entries found by their versioned names; what a device is; contexts pushed for
 * the calls that need one and popped again (the caller's stack is as it was); memory created,
 * exported, imported and mapped by a second process, accessible only once the layer set its
 * access; the driver's errors converted (out of memory to COLL_ERR_NOMEM, with the call and the
 * driver's words); streams, copies and events; page-locked host memory (cuMemHostAlloc in the
 * device's context, out of memory converted); host memory registered for the devices and
 * 64-bit words on it waited for and written by streams (each call reaching the driver's
 * versioned entry with the right arguments and flags, a driver without stream memory operations
 * converted to COLL_ERR_UNSUPPORTED). Run a second time with cuInit failing
 * (FAKE_CUDA_INIT_ERROR=100): no device layer, and cuInit's words say why.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>

#include "device/dev.h"
#include "fake_libcuda.h"

#define GRAN ((size_t)2 << 20)

static const coll_dev_ops_t *ops;
static int (*depth)(void);
static const fake_cuda_call_t *(*calls)(int *n);
static void (*calls_reset)(void);

/* The stand-in, as the layer loaded it, for its context counter and its record of calls. */
static int setup(void **state)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);

    (void)state;
    if (lib == NULL) {
        return -1;
    }
    *(void **)&depth = dlsym(lib, "fake_cuda_depth");
    *(void **)&calls = dlsym(lib, "fake_cuda_calls");
    *(void **)&calls_reset = dlsym(lib, "fake_cuda_calls_reset");
    return depth != NULL && calls != NULL && calls_reset != NULL ? 0 : -1;
}

/* How many calls the driver recorded since the last reset of its record. */
static int ncalls(void)
{
    int n = -1;

    calls(&n);
    return n;
}

/* The @p i-th of them. */
static const fake_cuda_call_t *call(int i)
{
    int n = -1;
    const fake_cuda_call_t *c = calls(&n);

    assert_in_range(i, 0, n - 1);
    return &c[i];
}

static void test_cuinit_failure_is_said(void **state)
{
    char why[COLL_DEV_TEXT_MAX];

    assert_int_equal(coll__dev_cuda_open(&ops, why, sizeof(why)), COLL_ERR_UNSUPPORTED);
    assert_string_equal(why, "CUDA driver present, but cuInit failed: CUDA_ERROR_NO_DEVICE: no "
                             "CUDA-capable device is detected");
}

static void test_devices(void **state)
{
    coll_dev_info_t info;
    char version[16];

    assert_int_equal(ops->count(), 2);
    assert_int_equal(ops->info(1, &info), COLL_OK);
    assert_string_equal(info.name, "Fake GPU 1");
    assert_int_equal(info.mem_bytes, (uint64_t)16 << 30);
    assert_int_equal(info.cc_major, 9);
    assert_int_equal(info.cc_minor, 0);
    assert_int_equal(info.shareable, 1);
    assert_memory_equal(info.uuid, "fake-gpu", 8);
    assert_int_equal(info.uuid[15], 1);
    assert_int_equal(ops->info(2, &info), COLL_ERR_INVALID);
    assert_string_equal(coll_dev_error(), "cuDeviceGet(2): CUDA_ERROR_INVALID_DEVICE: invalid "
                                          "device ordinal");
    coll__dev_cuda_version(version, sizeof(version));
    assert_string_equal(version, "13.0");
}

static void test_contexts_pushed_and_popped(void **state)
{
    size_t gran = 0;
    coll_dev_mem_t m = 0;

    assert_int_equal(ops->granularity(0, &gran), COLL_OK);
    assert_int_equal(gran, GRAN);
    assert_int_equal(depth(), 0);
    assert_int_equal(ops->mem_create(0, GRAN, &m), COLL_OK);
    assert_int_equal(depth(), 0);
    ops->mem_release(m);
    assert_int_equal(ops->granularity(5, &gran), COLL_ERR_INVALID);
    assert_int_equal(depth(), 0);
}

static void test_out_of_memory_is_converted(void **state)
{
    coll_dev_mem_t m = 0;

    assert_int_equal(ops->mem_create(0, (size_t)2 << 30, &m), COLL_ERR_NOMEM);
    assert_string_equal(coll_dev_error(), "cuMemCreate(device 0, 2147483648 bytes): "
                                          "CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    assert_int_equal(depth(), 0);
    assert_int_equal(ops->mem_create(0, GRAN + 1, &m), COLL_ERR_INVALID);
}

/* The child imports the exported allocation, maps it in its own range (accessible only once
 * the layer set its access), checks the parent's bytes and writes its own. */
static int child_side(int fd)
{
    coll_dev_mem_t m = 0;
    uint64_t va = 0;
    uint8_t *p;

    if (ops->mem_import(0, fd, &m) != COLL_OK || ops->va_reserve(0, GRAN, GRAN, &va) != COLL_OK ||
        ops->map(0, va, GRAN, m) != COLL_OK || depth() != 0) {
        return 2;
    }
    ops->mem_release(m);
    p = (uint8_t *)(uintptr_t)va;
    if (p[0] != 0x11 || p[GRAN - 1] != 0x22) {
        return 3;
    }
    p[4096] = 0x33;
    return 0;
}

static void test_memory_shared_with_another_process(void **state)
{
    coll_dev_mem_t m = 0;
    uint64_t va = 0;
    uint8_t *p;
    int fd = -1, status = -1;
    pid_t pid;

    assert_int_equal(ops->mem_create(1, GRAN, &m), COLL_OK);
    assert_int_equal(ops->mem_export(m, &fd), COLL_OK);
    assert_int_equal(ops->va_reserve(1, 4 * GRAN, GRAN, &va), COLL_OK);
    assert_int_equal(va % GRAN, 0);
    assert_int_equal(ops->map(1, va + GRAN, GRAN, m), COLL_OK);
    p = (uint8_t *)(uintptr_t)(va + GRAN);
    p[0] = 0x11;
    p[GRAN - 1] = 0x22;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(child_side(fd));
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_int_equal(p[4096], 0x33);
    close(fd);
    ops->mem_release(m);
    ops->unmap(va + GRAN, GRAN);
    ops->va_free(va, 4 * GRAN);
}

/* Peer access asked of the driver (FAKE_CUDA_PEER); a grant is one cuMemSetAccess for the
 * peer device alone, in a context, over the range a map() of another device made. */
static void test_peer_access_and_grant(void **state)
{
    coll_dev_mem_t m = 0;
    uint64_t va = 0;
    int can = -1;

    assert_int_equal(ops->peer_access(0, 1, &can), COLL_OK);
    assert_int_equal(can, 1);
    assert_int_equal(ops->peer_access(1, 1, &can), COLL_OK);
    assert_int_equal(can, 1);
    setenv("FAKE_CUDA_PEER", "0", 1);
    assert_int_equal(ops->peer_access(1, 0, &can), COLL_OK);
    assert_int_equal(can, 0);
    unsetenv("FAKE_CUDA_PEER");
    assert_int_equal(ops->peer_access(0, 2, &can), COLL_ERR_INVALID); /* 2 devices */
    assert_int_equal(ops->mem_create(1, GRAN, &m), COLL_OK);
    assert_int_equal(ops->va_reserve(1, GRAN, GRAN, &va), COLL_OK);
    assert_int_equal(ops->map(1, va, GRAN, m), COLL_OK);
    calls_reset();
    assert_int_equal(ops->grant(0, va, GRAN), COLL_OK);
    assert_int_equal(ncalls(), 1);
    assert_string_equal(call(0)->fn, "cuMemSetAccess");
    assert_int_equal(call(0)->addr, va);
    assert_int_equal(call(0)->arg, GRAN);
    assert_int_equal(call(0)->flags, 0); /* the peer's descriptor only */
    assert_int_equal(depth(), 0);
    assert_int_equal(ops->grant(3, va, GRAN), COLL_ERR_INVALID);
    ops->mem_release(m);
    ops->unmap(va, GRAN);
    ops->va_free(va, GRAN);
}

static void test_streams_copies_events(void **state)
{
    coll_dev_stream_t s = NULL;
    coll_dev_event_t e = NULL;
    uint64_t src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8] = {0};

    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    assert_int_equal(ops->event_create(0, &e), COLL_OK);
    assert_int_equal(ops->copy_async((uint64_t)(uintptr_t)dst, (uint64_t)(uintptr_t)src,
                                     sizeof(src), s), COLL_OK);
    assert_int_equal(ops->event_record(e, s), COLL_OK);
    assert_int_equal(ops->stream_wait(s, e), COLL_OK);
    assert_int_equal(ops->event_query(e), COLL_OK);
    assert_int_equal(ops->stream_sync(s), COLL_OK);
    assert_memory_equal(dst, src, sizeof(src));
    assert_int_equal(depth(), 0);
    ops->event_destroy(e);
    ops->stream_destroy(s);
}

static void test_pinned_host_memory(void **state)
{
    uint8_t *p = NULL;
    void *big = NULL;

    assert_int_equal(ops->host_alloc(0, 4096, (void **)&p), COLL_OK);
    assert_non_null(p);
    assert_int_equal(depth(), 0);
    memset(p, 0x5a, 4096);
    assert_int_equal(p[4095], 0x5a);
    ops->host_free(0, p);
    assert_int_equal(depth(), 0);
    ops->host_free(0, NULL);
    assert_int_equal(ops->host_alloc(0, (size_t)2 << 30, &big), COLL_ERR_NOMEM);
    assert_null(big);
    assert_string_equal(coll_dev_error(), "cuMemHostAlloc(2147483648 bytes, device 0): "
                                          "CUDA_ERROR_OUT_OF_MEMORY: out of memory");
    assert_int_equal(ops->host_alloc(0, 0, &big), COLL_ERR_INVALID);
    assert_int_equal(ops->host_alloc(7, 64, &big), COLL_ERR_INVALID);
    assert_int_equal(depth(), 0);
}

/* A page of a shared mapping, as a completion word's page is. */
static uint64_t *shared_page(void)
{
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    assert_true(p != MAP_FAILED);
    return p;
}

static void test_host_register_maps_for_every_device(void **state)
{
    uint64_t *page = shared_page(), dev = 0;
    char want[COLL_DEV_TEXT_MAX];

    calls_reset();
    assert_int_equal(ops->host_register(page, 4096, &dev), COLL_OK);
    assert_int_equal(dev, (uint64_t)(uintptr_t)page + FAKE_CUDA_DEVMAP_BIAS);
    assert_int_equal(ncalls(), 2);
    assert_string_equal(call(0)->fn, "cuMemHostRegister_v2");
    assert_int_equal(call(0)->addr, (uintptr_t)page);
    assert_int_equal(call(0)->arg, 4096);
    assert_int_equal(call(0)->flags, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP);
    assert_string_equal(call(1)->fn, "cuMemHostGetDevicePointer_v2");
    assert_int_equal(call(1)->addr, (uintptr_t)page);
    assert_int_equal(call(1)->flags, 0);
    assert_int_equal(depth(), 0);
    /* Twice: the driver's refusal, in its words. */
    assert_int_equal(ops->host_register(page, 4096, &dev), COLL_ERR_IO);
    snprintf(want, sizeof(want), "cuMemHostRegister(4096 bytes at %p): CUDA_ERROR_HOST_MEMORY_"
             "ALREADY_REGISTERED: part or all of the requested memory range is already mapped",
             (void *)page);
    assert_string_equal(coll_dev_error(), want);
    assert_int_equal(depth(), 0);
    /* Unregistered, it registers again. */
    calls_reset();
    ops->host_unregister(page);
    assert_int_equal(ncalls(), 1);
    assert_string_equal(call(0)->fn, "cuMemHostUnregister");
    assert_int_equal(call(0)->addr, (uintptr_t)page);
    ops->host_unregister(NULL);
    assert_int_equal(ncalls(), 1);
    assert_int_equal(depth(), 0);
    assert_int_equal(ops->host_register(page, 4096, &dev), COLL_OK);
    ops->host_unregister(page);
    munmap(page, 4096);
}

static void test_host_register_refusals(void **state)
{
    uint64_t *page = shared_page(), dev = 0;

    calls_reset();
    assert_int_equal(ops->host_register(NULL, 4096, &dev), COLL_ERR_INVALID);
    assert_int_equal(ops->host_register(page, 0, &dev), COLL_ERR_INVALID);
    assert_int_equal(ops->host_register(page, 4096, NULL), COLL_ERR_INVALID);
    assert_int_equal(ops->host_register(page + 1, 8, &dev), COLL_ERR_INVALID);
    assert_int_equal(ncalls(), 0);
    /* More than the driver can lock (the stand-in's limit, 1 GiB): out of memory. */
    assert_int_equal(ops->host_register(page, (size_t)2 << 30, &dev), COLL_ERR_NOMEM);
    assert_int_equal(depth(), 0);
    munmap(page, 4096);
}

static void test_stream_words_wait_and_write(void **state)
{
    uint64_t *page = shared_page(), dev = 0;
    coll_dev_stream_t s = NULL;

    assert_int_equal(ops->host_register(page, 4096, &dev), COLL_OK);
    assert_int_equal(ops->stream_create(1, &s), COLL_OK);
    calls_reset();
    assert_int_equal(ops->stream_write_word(s, dev + 8, 77), COLL_OK);
    assert_int_equal(page[1], 77);
    assert_int_equal(ncalls(), 1);
    assert_string_equal(call(0)->fn, "cuStreamWriteValue64_v2");
    assert_ptr_equal(call(0)->stream, s);
    assert_int_equal(call(0)->addr, dev + 8);
    assert_int_equal(call(0)->arg, 77);
    assert_int_equal(call(0)->flags, CU_STREAM_WRITE_VALUE_DEFAULT);
    calls_reset();
    assert_int_equal(ops->stream_wait_word(s, dev + 16, 5), COLL_OK);
    assert_int_equal(ncalls(), 1);
    assert_string_equal(call(0)->fn, "cuStreamWaitValue64_v2");
    assert_ptr_equal(call(0)->stream, s);
    assert_int_equal(call(0)->addr, dev + 16);
    assert_int_equal(call(0)->arg, 5);
    assert_int_equal(call(0)->flags, CU_STREAM_WAIT_VALUE_GEQ);
    assert_int_equal(depth(), 0);
    /* A misaligned word is refused before the driver. */
    calls_reset();
    assert_int_equal(ops->stream_wait_word(s, dev + 4, 5), COLL_ERR_INVALID);
    assert_int_equal(ops->stream_write_word(s, dev + 12, 5), COLL_ERR_INVALID);
    assert_int_equal(ncalls(), 0);
    /* NULL is the default stream (a framework's of handle 0): CU_STREAM_LEGACY, said so. */
    calls_reset();
    assert_int_equal(ops->stream_write_word(NULL, dev + 24, 9), COLL_OK);
    assert_int_equal(ops->stream_wait_word(NULL, dev + 24, 9), COLL_OK);
    assert_int_equal(ncalls(), 2);
    assert_ptr_equal(call(0)->stream, CU_STREAM_LEGACY);
    assert_ptr_equal(call(1)->stream, CU_STREAM_LEGACY);
    assert_int_equal(page[3], 9);
    assert_int_equal(depth(), 0);
    ops->stream_destroy(s);
    ops->host_unregister(page);
    munmap(page, 4096);
}

/* A driver without 64-bit stream memory operations: unsupported, in its words. */
static void test_stream_words_unsupported(void **state)
{
    uint64_t *page = shared_page(), dev = 0;
    coll_dev_stream_t s = NULL;
    char want[COLL_DEV_TEXT_MAX];

    assert_int_equal(ops->host_register(page, 4096, &dev), COLL_OK);
    assert_int_equal(ops->stream_create(0, &s), COLL_OK);
    setenv("FAKE_CUDA_MEMOP_ERROR", "801", 1);
    assert_int_equal(ops->stream_wait_word(s, dev, 3), COLL_ERR_UNSUPPORTED);
    snprintf(want, sizeof(want), "cuStreamWaitValue64(word at %#llx, >= 3): "
             "CUDA_ERROR_NOT_SUPPORTED: operation not supported", (unsigned long long)dev);
    assert_string_equal(coll_dev_error(), want);
    assert_int_equal(ops->stream_write_word(s, dev, 4), COLL_ERR_UNSUPPORTED);
    snprintf(want, sizeof(want), "cuStreamWriteValue64(word at %#llx, 4): "
             "CUDA_ERROR_NOT_SUPPORTED: operation not supported", (unsigned long long)dev);
    assert_string_equal(coll_dev_error(), want);
    unsetenv("FAKE_CUDA_MEMOP_ERROR");
    assert_int_equal(page[0], 0);
    assert_int_equal(depth(), 0);
    ops->stream_destroy(s);
    ops->host_unregister(page);
    munmap(page, 4096);
}

int main(void)
{
    char why[COLL_DEV_TEXT_MAX];
    const struct CMUnitTest fails[] = {
        cmocka_unit_test(test_cuinit_failure_is_said),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_devices),
        cmocka_unit_test(test_contexts_pushed_and_popped),
        cmocka_unit_test(test_out_of_memory_is_converted),
        cmocka_unit_test(test_memory_shared_with_another_process),
        cmocka_unit_test(test_peer_access_and_grant),
        cmocka_unit_test(test_streams_copies_events),
        cmocka_unit_test(test_pinned_host_memory),
        cmocka_unit_test(test_host_register_maps_for_every_device),
        cmocka_unit_test(test_host_register_refusals),
        cmocka_unit_test(test_stream_words_wait_and_write),
        cmocka_unit_test(test_stream_words_unsupported),
    };

    if (getenv("FAKE_CUDA_INIT_ERROR") != NULL) {
        return cmocka_run_group_tests(fails, NULL, NULL);
    }
    if (coll__dev_cuda_open(&ops, why, sizeof(why)) != COLL_OK) {
        print_error("opening the stand-in driver: %s\n", why);
        return 1;
    }
    return cmocka_run_group_tests(tests, setup, NULL);
}
