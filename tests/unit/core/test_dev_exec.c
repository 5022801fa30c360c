/*
 * Unit tests of the executor of device memory (daemon/core/dev_exec.c) and the daemon's device
 * scratch (daemon/core/dev_scratch.c), run by ctest over two device layers:
 *
 *   fake (COLL_DEVICE_FAKE=1): the host executor's entries registered as the table of kind
 *   COLL_MEM_CUDA, found by coll_exec_get(), the same table again on a second call; its queued
 *   reduction and copy on a stream compute on the fake's device memory what this test computes
 *   itself; scratch rounded to the granularity and charged to the budget while it lives, a
 *   scratch beyond the budget refused with COLL_ERR_NOMEM and the reason, nothing charged after;
 *   last (the fault is sticky for the process), a fault injected at the second launch
 *   (COLL_DEVICE_FAKE_EXEC_FAIL=2): the first launch's copy done, the second's launch and the
 *   third's queued without their work, the next event query failing with
 *   CUDA_ERROR_ILLEGAL_ADDRESS's text, and from then every launch, sync, event, stream and
 *   allocation on the device failing with it;
 *
 *   cuda (the CUDA layer over the stand-in driver, tests/unit/device/fake_libcuda.c): a module
 *   that is not there leaves the kind without an executor and says so, naming the module and the
 *   loader's reason; and, with TEST_DEV_EXEC_MODULE naming the built CUDA module, that module
 *   refuses the stand-in (whose driver the CUDA runtime cannot use) with its own reason, and the
 *   kind still has no executor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dev_exec.h"
#include "core/dev_scratch.h"

#define MiB ((size_t)1 << 20)
#define COUNT 1000

static const coll_dev_ops_t *ops;

static int setup(void **state)
{
    (void)state;
    return coll_dev_open(&ops) == COLL_OK ? 0 : -1;
}

/* ---- fake -------------------------------------------------------------------------------- */

static void test_fake_registers_the_host_entries_for_device_memory(void **state)
{
    char text[COLL_DEV_TEXT_MAX];
    const coll_exec_t *ex = coll_dev_exec_open(ops, "/nonexistent/module.so", text, sizeof(text));

    (void)state;
    assert_non_null(ex);
    assert_int_equal(ex->kind, COLL_MEM_CUDA);
    assert_string_equal(ex->name, "fake");
    assert_ptr_equal(coll_exec_get(COLL_MEM_CUDA), ex);
    assert_ptr_equal(ex->reduce, coll_exec_get(COLL_MEM_HOST)->reduce);
    assert_string_equal(text, "fake: the host executor's entries (the fake device's memory is "
                              "host memory)");
    assert_ptr_equal(coll_dev_exec_open(ops, "/nonexistent/module.so", text, sizeof(text)), ex);
}

static void test_fake_reduces_and_copies_on_a_stream(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB};
    coll_dev_scratch_t s = {0};
    coll_dev_stream_t stream;
    char text[COLL_DEV_TEXT_MAX];
    const coll_exec_t *ex = coll_dev_exec_open(ops, "unused", text, sizeof(text));

    (void)state;
    assert_int_equal(coll_dev_scratch_alloc(ops, 0, &budget, 4 * COUNT * sizeof(float), &s),
                     COLL_OK);
    assert_int_equal(ops->stream_create(0, &stream), COLL_OK);
    float *a = (float *)(uintptr_t)s.va, *b = a + COUNT, *sum = b + COUNT, *copy = sum + COUNT;
    for (size_t i = 0; i < COUNT; i++) {
        a[i] = (float)i;
        b[i] = (float)(3 * i + 1);
    }
    const void *src[2] = {a, b};
    coll_reduce_args_t r = {.dtype = COLL_FLOAT32, .op = COLL_SUM, .world_size = 2,
                            .finalize = 1, .dst = sum, .src = src, .nsrc = 2, .count = COUNT,
                            .raw_mask = 3};
    coll_exec_ctx_t ctx = {.device = 0, .stream = stream};
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_OK);
    assert_int_equal(ex->copy_async(&ctx, copy, sum, COUNT * sizeof(float)), COLL_OK);
    assert_int_equal(ex->sync(&ctx), COLL_OK);
    for (size_t i = 0; i < COUNT; i++) {
        assert_true(sum[i] == (float)(4 * i + 1) && copy[i] == sum[i]);
    }
    ops->stream_destroy(stream);
    coll_dev_scratch_free(&s);
}

static void test_scratch_is_charged_to_the_budget(void **state)
{
    coll_pool_budget_t budget = {.limit = 6 * MiB};
    coll_dev_scratch_t s = {0}, t = {0};
    size_t gran;

    (void)state;
    assert_int_equal(ops->granularity(0, &gran), COLL_OK);
    assert_int_equal(gran, 2 * MiB);
    assert_int_equal(coll_dev_scratch_alloc(ops, 0, &budget, 1, &s), COLL_OK);
    assert_true(s.va != 0 && s.bytes == gran && budget.used == gran);
    *(volatile uint8_t *)(uintptr_t)(s.va + gran - 1) = 7; /* all of it mapped */
    assert_int_equal(coll_dev_scratch_alloc(ops, 0, &budget, 4 * MiB + 1, &t),
                     COLL_ERR_NOMEM);
    assert_int_equal(t.va, 0);
    assert_non_null(strstr(coll_dev_error(), "beyond the device's budget"));
    assert_int_equal(budget.used, gran);
    coll_dev_scratch_free(&s);
    assert_int_equal(budget.used, 0);
    assert_int_equal(s.va, 0);
    coll_dev_scratch_free(&s); /* none: nothing happens */
    assert_int_equal(budget.used, 0);
}

/* The call @p st failed with the device's sticky fault. */
static void assert_fault(coll_status_t st)
{
    assert_int_equal(st, COLL_ERR_IO);
    assert_non_null(strstr(coll_dev_error(), "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory "
                                             "access was encountered"));
}

static void test_fake_fault_is_reported_later_and_sticks(void **state)
{
    coll_pool_budget_t budget = {.limit = 64 * MiB};
    coll_dev_scratch_t s = {0};
    coll_dev_stream_t stream, other;
    coll_dev_event_t ev, ev2;
    coll_dev_mem_t mem;
    char text[COLL_DEV_TEXT_MAX];
    const coll_exec_t *ex = coll_dev_exec_open(ops, "unused", text, sizeof(text));

    (void)state;
    assert_int_equal(coll_dev_scratch_alloc(ops, 0, &budget, 3 * COUNT * sizeof(float), &s),
                     COLL_OK);
    assert_int_equal(ops->stream_create(0, &stream), COLL_OK);
    assert_int_equal(ops->event_create(0, &ev), COLL_OK);
    float *a = (float *)(uintptr_t)s.va, *b = a + COUNT, *c = b + COUNT;
    for (size_t i = 0; i < COUNT; i++) {
        a[i] = (float)i + 1;
        b[i] = c[i] = -1;
    }
    const void *src[1] = {a};
    coll_reduce_args_t r = {.dtype = COLL_FLOAT32, .op = COLL_SUM, .world_size = 1, .dst = c,
                            .src = src, .nsrc = 1, .count = COUNT, .raw_mask = 1};
    coll_exec_ctx_t ctx = {.device = 0, .stream = stream};
    setenv("COLL_DEVICE_FAKE_EXEC_FAIL", "2", 1);
    assert_int_equal(ex->copy_async(&ctx, b, a, COUNT * sizeof(float)), COLL_OK);
    assert_int_equal(ex->reduce_async(&ctx, &r), COLL_OK); /* faults, asynchronously */
    assert_int_equal(ex->copy_async(&ctx, c, a, COUNT * sizeof(float)), COLL_OK);
    assert_int_equal(ops->event_record(ev, stream), COLL_OK);
    for (size_t i = 0; i < COUNT; i++) {
        assert_true(b[i] == a[i] && c[i] == -1); /* the first ran; nothing after it */
    }
    assert_fault(ops->event_query(ev));
    assert_fault(ops->event_query(ev));
    assert_fault(ex->copy_async(&ctx, c, a, COUNT * sizeof(float)));
    assert_fault(ex->sync(&ctx));
    assert_fault(ops->stream_sync(stream));
    assert_fault(ops->event_record(ev, stream));
    assert_fault(ops->copy_async(s.va, s.va + 4, 4, stream));
    assert_fault(ops->event_create(0, &ev2));
    assert_fault(ops->stream_create(0, &other));
    assert_fault(ops->mem_create(0, 2 * MiB, &mem));
    assert_true(c[0] == -1);
    unsetenv("COLL_DEVICE_FAKE_EXEC_FAIL");
    ops->event_destroy(ev);
    ops->stream_destroy(stream);
    coll_dev_scratch_free(&s);
}

/* ---- cuda over the stand-in driver ---------------------------------------------------------- */

static void test_a_missing_module_leaves_no_executor(void **state)
{
    char text[COLL_DEV_TEXT_MAX];
    const char *want = "the CUDA module /nonexistent/libcollective_cuda.so: not loaded: "
                       "/nonexistent/libcollective_cuda.so: cannot open shared object file: "
                       "No such file or directory";

    (void)state;
    assert_string_equal(ops->name, "cuda");
    assert_null(coll_dev_exec_open(ops, "/nonexistent/libcollective_cuda.so", text,
                                   sizeof(text)));
    assert_string_equal(text, want);
    assert_null(coll_exec_get(COLL_MEM_CUDA));
}

static void test_a_refusing_module_leaves_no_executor(void **state)
{
    const char *module = getenv("TEST_DEV_EXEC_MODULE");
    char text[COLL_DEV_TEXT_MAX], want[COLL_DEV_TEXT_MAX];

    (void)state;
    if (module == NULL) {
        print_message("skipped: TEST_DEV_EXEC_MODULE names no CUDA module (a build without "
                      "CUDA)\n");
        skip();
    }
    snprintf(want, sizeof(want), "the CUDA module %s refused: ", module);
    assert_null(coll_dev_exec_open(ops, module, text, sizeof(text)));
    assert_memory_equal(text, want, strlen(want));
    assert_true(strlen(text) > strlen(want)); /* the module's reason follows */
    assert_null(coll_exec_get(COLL_MEM_CUDA));
}

int main(void)
{
    const struct CMUnitTest fake[] = {
        cmocka_unit_test(test_fake_registers_the_host_entries_for_device_memory),
        cmocka_unit_test(test_fake_reduces_and_copies_on_a_stream),
        cmocka_unit_test(test_scratch_is_charged_to_the_budget),
        cmocka_unit_test(test_fake_fault_is_reported_later_and_sticks), /* last: it sticks */
    };
    const struct CMUnitTest cuda[] = {
        cmocka_unit_test(test_a_missing_module_leaves_no_executor),
        cmocka_unit_test(test_a_refusing_module_leaves_no_executor),
    };

    if (getenv("COLL_DEVICE_FAKE") != NULL) {
        return cmocka_run_group_tests_name("dev_exec_fake", fake, setup, NULL);
    }
    return cmocka_run_group_tests_name("dev_exec_cuda", cuda, setup, NULL);
}
