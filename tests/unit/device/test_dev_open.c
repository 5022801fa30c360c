/*
 * Unit tests of which device layer a process gets (device/dev.c), run three times by ctest:
 * without COLL_DEVICE_FAKE (CUDA's driver where the loader finds libcuda.so.1, else no device
 * layer and the loader's reason in the status; in a build without CUDA, that said), with
 * COLL_DEVICE_FAKE=3 (three fake devices) and with a malformed COLL_DEVICE_FAKE (no device
 * layer, and why); each time also the layer selected by name (coll_dev_layer(), opened or
 * not). What to expect is worked out here from the environment and the loader, not from the
 * layer's answer.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device/dev.h"

static void test_the_layer_the_environment_asks_for(void **state)
{
    const char *fake = getenv("COLL_DEVICE_FAKE");
    const coll_dev_ops_t *ops = NULL;
    coll_status_t st = coll_dev_open(&ops);
    char want[COLL_DEV_TEXT_MAX];
    void *lib;

    /* The layer selected, opened or not: the fake for any COLL_DEVICE_FAKE here (3, or
     * malformed), which the daemon and its ranks compare. */
    assert_string_equal(coll_dev_layer(), fake != NULL ? "fake" : "cuda");
    if (fake != NULL && strcmp(fake, "3") == 0) {
        assert_int_equal(st, COLL_OK);
        assert_string_equal(ops->name, "fake");
        assert_string_equal(coll_dev_status(), "fake (COLL_DEVICE_FAKE, test only), 3 devices");
    } else if (fake != NULL) {
        snprintf(want, sizeof(want), "COLL_DEVICE_FAKE=%s is not a count of fake devices "
                 "(0 .. %d)", fake, COLL_DEV_MAX);
        assert_int_equal(st, COLL_ERR_UNSUPPORTED);
        assert_string_equal(coll_dev_status(), want);
    } else if (!COLL_TEST_WITH_CUDA) {
        assert_int_equal(st, COLL_ERR_UNSUPPORTED);
        assert_string_equal(coll_dev_status(), "built without CUDA (COLL_WITH_CUDA=OFF)");
    } else if ((lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) == NULL) {
        /* The same loader, asked the same question, gives the same reason. */
        snprintf(want, sizeof(want), "no CUDA driver: %s", dlerror());
        assert_int_equal(st, COLL_ERR_UNSUPPORTED);
        assert_null(ops);
        assert_string_equal(coll_dev_status(), want);
    } else {
        dlclose(lib);
        /* A driver: usable (a CUDA build), or cuInit's refusal said (no device). */
        assert_true((st == COLL_OK && strncmp(coll_dev_status(), "cuda driver ", 12) == 0) ||
                    (st == COLL_ERR_UNSUPPORTED &&
                     strncmp(coll_dev_status(), "CUDA driver present, but cuInit failed: ",
                             40) == 0));
    }
    /* Asked again, the same answer. */
    assert_int_equal(coll_dev_open(&ops), st);
}

static void test_nccl_is_found_or_said_absent(void **state)
{
    const char *text = NULL;
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    int present = coll_nccl_probe(&text);
    int major = 0, minor = -1, patch = -1;
    char rest = 0;

    assert_non_null(text);
    if (lib == NULL || !present) {
        assert_int_equal(present, 0);
        assert_int_equal(strncmp(text, "absent: ", 8), 0);
    } else {
        /* "2.x.y": the version the library reports (its own header's numbers, here). */
        assert_int_equal(sscanf(text, "%d.%d.%d%c", &major, &minor, &patch, &rest), 3);
        assert_int_equal(major, 2);
        assert_true(minor >= 0 && patch >= 0);
    }
    if (lib != NULL) {
        dlclose(lib);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_layer_the_environment_asks_for),
        cmocka_unit_test(test_nccl_is_found_or_said_absent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
