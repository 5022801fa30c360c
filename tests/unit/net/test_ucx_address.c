/* Unit tests of the check of peers' UCX worker addresses (daemon/net/ucx_address.h): the
 * addresses of real UCX 1.13 workers, in both packed versions, pass whole; every cut, an
 * unknown version, a byte too many and non-finite interface attributes are refused with a
 * reason; and arbitrary bytes are walked within their length (no crash, a status). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <ucp/api/ucp.h>

#include "net/ucx_address.h"

/* A worker's address, packed by UCX with UCX_ADDRESS_VERSION @p version ("v1" or "v2"). */
typedef struct {
    ucp_context_h ctx;
    ucp_worker_h worker;
    uint8_t *addr;
    size_t len;
} real_t;

static void real_open(real_t *r, const char *version)
{
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_TAG | UCP_FEATURE_AM};
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ucp_config_t *config;
    ucp_address_t *a;

    assert_int_equal(ucp_config_read(NULL, NULL, &config), UCS_OK);
    assert_int_equal(ucp_config_modify(config, "ADDRESS_VERSION", version), UCS_OK);
    assert_int_equal(ucp_init(&params, config, &r->ctx), UCS_OK);
    ucp_config_release(config);
    assert_int_equal(ucp_worker_create(r->ctx, &wp, &r->worker), UCS_OK);
    assert_int_equal(ucp_worker_get_address(r->worker, &a, &r->len), UCS_OK);
    r->addr = malloc(r->len);
    assert_non_null(r->addr);
    memcpy(r->addr, a, r->len);
    ucp_worker_release_address(r->worker, a);
}

static void real_close(real_t *r)
{
    free(r->addr);
    ucp_worker_destroy(r->worker);
    ucp_cleanup(r->ctx);
}

static coll_status_t check(const uint8_t *p, size_t n, char *why)
{
    return coll_ucx_address_check(p, n, why, 160);
}

/* The whole address passes; every shorter cut of it, and one more byte, do not. */
static void whole_and_cut(const char *version)
{
    real_t r;
    char why[160] = "";
    uint8_t *longer;

    real_open(&r, version);
    assert_true(r.len > 8);
    if (check(r.addr, r.len, why) != COLL_OK) {
        fail_msg("UCX %s address of %zu bytes refused: %s", version, r.len, why);
    }
    for (size_t n = 0; n < r.len; n++) {
        assert_int_equal(check(r.addr, n, why), COLL_ERR_PROTOCOL);
        assert_true(why[0] != '\0');
    }
    longer = calloc(1, r.len + 1);
    assert_non_null(longer);
    memcpy(longer, r.addr, r.len);
    assert_int_equal(check(longer, r.len + 1, why), COLL_ERR_PROTOCOL);
    assert_non_null(strstr(why, "after the last device"));
    free(longer);
    real_close(&r);
}

static void test_real_address_v1(void **state)
{
    whole_and_cut("v1");
}

static void test_real_address_v2(void **state)
{
    whole_and_cut("v2");
}

/* The abort this check prevents: a version UCX does not know (its assertion), here a refusal. */
static void test_unknown_version(void **state)
{
    uint8_t forged[64];
    char why[160];

    memset(forged, 0x41, sizeof(forged));
    forged[0] = 0x07;
    assert_int_equal(check(forged, sizeof(forged), why), COLL_ERR_PROTOCOL);
    assert_non_null(strstr(why, "version 8 unknown"));
}

/* An empty address (no device) is one UCX packs: header, uuid, then 0xff. */
static void test_empty_address(void **state)
{
    uint8_t empty[10] = {0x00};
    char why[160];

    empty[9] = 0xff;
    assert_int_equal(check(empty, sizeof(empty), why), COLL_OK);
    assert_int_equal(check(empty, 9, why), COLL_ERR_PROTOCOL);
}

/* Version 1 interface attributes are floats UCX scores with: NaN is refused. */
static void test_nonfinite_attributes(void **state)
{
    /* v1 header, uuid; device: md 0, one-byte address, last; interface: checksum, attrs with
     * a NaN bandwidth, address length 0, last. */
    uint8_t a[64] = {0x00, 1, 2, 3, 4, 5, 6, 7, 8, 0x00, 0x81, 0xaa, 0x11, 0x22};
    float attrs[3] = {1e-9f, 1e9f, 1e-6f};
    size_t n = 14;
    char why[160];

    memcpy(a + n, attrs, sizeof(attrs));
    memset(a + n + 12, 0, 4);
    n += 16;
    a[n++] = 0x80;
    assert_int_equal(check(a, n, why), COLL_OK);
    attrs[1] = __builtin_nanf("");
    memcpy(a + 14, attrs, sizeof(attrs));
    assert_int_equal(check(a, n, why), COLL_ERR_PROTOCOL);
    assert_non_null(strstr(why, "not a finite number"));
}

/* Arbitrary bytes: a status, never a read past the end (ASan builds check that). */
static void test_random_bytes(void **state)
{
    uint32_t x = 12345;
    uint8_t buf[96];
    char why[160];

    for (int i = 0; i < 200000; i++) {
        size_t n = 1 + (size_t)(x % sizeof(buf));
        uint8_t *p = malloc(n);
        assert_non_null(p);
        for (size_t k = 0; k < n; k++) {
            x = x * 1664525u + 1013904223u;
            buf[k] = (uint8_t)(x >> 24);
        }
        buf[0] &= 0xf1; /* mostly versions 1 and 2, to go deep */
        memcpy(p, buf, n);
        coll_status_t st = check(p, n, why);
        assert_true(st == COLL_OK || st == COLL_ERR_PROTOCOL);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_address_v1), cmocka_unit_test(test_real_address_v2),
        cmocka_unit_test(test_unknown_version), cmocka_unit_test(test_empty_address),
        cmocka_unit_test(test_nonfinite_attributes), cmocka_unit_test(test_random_bytes),
    };
    return cmocka_run_group_tests_name("ucx_address", tests, NULL, NULL);
}
