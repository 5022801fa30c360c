/*
 * Unit tests of the CUDA module's entry point (kernels/cuda/module.h), loaded as the daemon and
 * the library load it: dlopen() of the built module, dlsym() of its one symbol. Where no driver
 * is (this machine, CI) it refuses with "no CUDA driver"; where one is, it gives the CUDA table,
 * which registers as the executor of COLL_MEM_CUDA. Either way a caller of another ABI is
 * refused, the reason fits the caller's buffer, and nothing but the entry point is exported
 * (the CUDA runtime linked into it stays hidden).
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "kernels/cuda/module.h"

static void *module;
static coll_cuda_module_exec_fn entry;

static int load(void **state)
{
    module = dlopen(COLL_TEST_CUDA_MODULE, RTLD_NOW | RTLD_LOCAL);
    if (module == NULL) {
        print_error("%s\n", dlerror());
        return -1;
    }
    *(void **)&entry = dlsym(module, COLL_CUDA_MODULE_SYMBOL);
    return entry != NULL ? 0 : -1;
}

/* Whether this machine has a CUDA driver: what the module's answer depends on. */
static int have_driver(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

    if (cuda != NULL) {
        dlclose(cuda);
    }
    return cuda != NULL;
}

static void test_other_abi_refused(void **state)
{
    char why[128] = "";

    assert_null(entry(COLL_EXEC_ABI + 1, NULL, why, sizeof(why)));
    assert_non_null(strstr(why, "ABI"));
}

static void test_driver_or_reason(void **state)
{
    char why[160] = "";
    const coll_exec_t *ex = entry(COLL_EXEC_ABI, NULL, why, sizeof(why));

    if (!have_driver()) {
        print_message("no driver: the module says \"%s\"\n", why);
        assert_null(ex);
        assert_int_equal(strncmp(why, "no CUDA driver", 14), 0);
        assert_null(coll_exec_get(COLL_MEM_CUDA));
        return;
    }
    if (ex == NULL) { /* a driver but no device this module can use: it says why */
        print_message("driver present, no device: %s\n", why);
        assert_true(strlen(why) > 0);
        return;
    }
    assert_string_equal(ex->name, "cuda");
    assert_int_equal(ex->kind, COLL_MEM_CUDA);
    assert_int_equal(coll_exec_register(ex), COLL_OK);
    assert_ptr_equal(coll_exec_get(COLL_MEM_CUDA), ex);
    assert_ptr_equal(entry(COLL_EXEC_ABI, NULL, why, sizeof(why)), ex);
}

/* The reason is cut to the caller's buffer and NUL-terminated. */
static void test_reason_fits(void **state)
{
    char why[8];

    memset(why, 'x', sizeof(why));
    if (entry(COLL_EXEC_ABI + 1, NULL, why, 5) == NULL) {
        assert_int_equal(strlen(why), 4);
        assert_int_equal(why[5], 'x');
    }
}

/* Only the entry point is visible: the module's own functions, the host kernels it links and
 * the CUDA runtime inside it are not. */
static void test_only_the_entry_is_exported(void **state)
{
    static const char *const hidden[] = {"coll__cuda_log", "coll__cuda_reduce",
                                         "coll_reduce_args_check", "coll_cast_scale_exp",
                                         "cudaMalloc", "cudaGetDeviceCount"};

    for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
        if (dlsym(module, hidden[i]) != NULL) {
            fail_msg("%s is exported by the module", hidden[i]);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_abi_refused),
        cmocka_unit_test(test_driver_or_reason),
        cmocka_unit_test(test_reason_fits),
        cmocka_unit_test(test_only_the_entry_is_exported),
    };
    return cmocka_run_group_tests(tests, load, NULL);
}
