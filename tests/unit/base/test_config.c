/* Unit tests of the daemon configuration (daemon/config.h): sizes, precedence of default,
 * environment and flags, and the messages of invalid input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "capture.h"
#include "base/config.h"
#include "common/size.h"

#define KiB (1ULL << 10)
#define MiB (1ULL << 20)
#define GiB (1ULL << 30)
#define TiB (1ULL << 40)

extern char **environ;

static coll_config_t cfg;

/* Unset every COLLD_* variable, whatever keys the table has grown since. */
static void clear_env(void)
{
    char name[128];
    size_t i = 0;

    while (environ[i] != NULL) {
        const char *eq = strchr(environ[i], '=');
        size_t n = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        if (strncmp(environ[i], "COLLD_", 6) == 0 && n < sizeof(name)) {
            memcpy(name, environ[i], n);
            name[n] = '\0';
            unsetenv(name); /* shifts environ down: look at index i again */
        } else {
            i++;
        }
    }
}

static int setup(void **state)
{
    clear_env();
    /* No configuration file of the machine running the tests (test_config_file.c tests the
     * file layer), and none of the log aliases. */
    setenv("COLLD_CONFIG", "none", 1);
    unsetenv("COLL_LOG_LEVEL");
    unsetenv("COLL_LOG_SUBSYS");
    memset(&cfg, 0, sizeof(cfg));
    return 0;
}

static int teardown(void **state)
{
    capture_end();
    coll_config_cleanup(&cfg);
    return setup(state);
}

#define ARGC(argv) ((int)(sizeof(argv) / sizeof((argv)[0])) - 1)

/* Load expecting COLL_CONFIG_ERROR; returns what was printed on stderr. */
static const char *load_error(int argc, char **argv)
{
    coll_config_result_t res;
    capture_start(STDERR_FILENO);
    res = coll_config_load(argc, argv, &cfg);
    capture_end();
    assert_int_equal(res, COLL_CONFIG_ERROR);
    assert_true(capture_text()[0] != '\0');
    return capture_text();
}

/* ---- coll_parse_size ---- */

static void expect_size(const char *text, uint64_t want)
{
    uint64_t v = 12345;
    if (coll_parse_size(text, &v) != 0) {
        fail_msg("\"%s\" rejected", text);
    }
    if (v != want) {
        fail_msg("\"%s\" gave %llu, expected %llu", text, (unsigned long long)v,
                 (unsigned long long)want);
    }
}

static void expect_bad_size(const char *text)
{
    uint64_t v;
    if (coll_parse_size(text, &v) != -1) {
        fail_msg("\"%s\" accepted as %llu", text, (unsigned long long)v);
    }
}

static void test_parse_size_units(void **state)
{
    expect_size("0", 0);
    expect_size("4096", 4096);
    expect_size("256K", 256 * KiB);
    expect_size("64M", 64 * MiB);
    expect_size("2G", 2 * GiB);
    expect_size("1T", TiB);
    expect_size("18446744073709551615", UINT64_MAX);
}

static void test_parse_size_lowercase_and_b_suffix(void **state)
{
    expect_size("256k", 256 * KiB);
    expect_size("64m", 64 * MiB);
    expect_size("2g", 2 * GiB);
    expect_size("1t", TiB);
    expect_size("256KB", 256 * KiB);
    expect_size("64mb", 64 * MiB);
    expect_size("2Gb", 2 * GiB);
    expect_size("1tB", TiB);
}

/* "B" alone means bytes, as it does after a unit. */
static void test_parse_size_bytes_suffix(void **state)
{
    expect_size("4096B", 4096);
    expect_size("4096b", 4096);
}

static void test_parse_size_largest_of_each_unit(void **state)
{
    expect_size("17179869183G", 17179869183ULL * GiB);
    expect_size("16777215T", 16777215ULL * TiB);
    expect_bad_size("16777216T"); /* 2^64 */
    expect_bad_size("17179869184G");
}

static void test_parse_size_rejects_malformed(void **state)
{
    const char *bad[] = {"", "-1", "12X", "1.5G", "K", "B", " 12", "12 ", "12KK", "12KBB",
                         "0x10", "+5", "12 K", "1e6"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect_bad_size(bad[i]);
    }
}

static void test_parse_size_rejects_overflow(void **state)
{
    expect_bad_size("99999999999999999999");
    expect_bad_size("18446744073709551616");
    expect_bad_size("18446744073709551615K");
    expect_bad_size("18014398509481984K"); /* 2^54 K = 2^64 */
}

/* ---- coll_config_load ---- */

static void test_defaults(void **state)
{
    char *argv[] = {"collectived", NULL};

    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_string_equal(cfg.socket, "/run/collectived/collectived.sock");
    assert_string_equal(cfg.listen, "127.0.0.1:29510");
    assert_string_equal(cfg.addr_file, "");
    assert_int_equal(cfg.pool_size, 0); /* on demand */
    assert_int_equal(cfg.pool_max, 16 * GiB);
    assert_int_equal(cfg.segment_size, 256 * KiB);
    assert_int_equal(cfg.pipeline_depth, 4);
    assert_string_equal(cfg.log_level, "info");
    assert_string_equal(cfg.log_subsys, "all");
}

static void test_env_overrides_default(void **state)
{
    char *argv[] = {"collectived", NULL};

    setenv("COLLD_POOL_SIZE", "64M", 1);
    setenv("COLLD_SOCKET", "/tmp/env.sock", 1);
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 64 * MiB);
    assert_string_equal(cfg.socket, "/tmp/env.sock");
    assert_int_equal(cfg.segment_size, 256 * KiB);
}

static void test_flag_overrides_env(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "32M", "--socket=/tmp/flag.sock", NULL};

    setenv("COLLD_POOL_SIZE", "64M", 1);
    setenv("COLLD_SOCKET", "/tmp/env.sock", 1);
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 32 * MiB);
    assert_string_equal(cfg.socket, "/tmp/flag.sock");
}

static void test_every_key_has_a_flag(void **state)
{
    char *argv[] = {"collectived",        "--socket",        "/tmp/s", "--listen",
                    "127.0.0.1:0",        "--addr-file",     "/tmp/a", "--pool-size",
                    "1M",                 "--pool-max",      "2M",     "--segment-size",
                    "8K",                 "--pipeline-depth", "64",    "--log-level",
                    "trace",              "--log-subsys",    "job,engine",
                    "--allow-unauthenticated-peers", "1", NULL};

    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_string_equal(cfg.socket, "/tmp/s");
    assert_string_equal(cfg.listen, "127.0.0.1:0");
    assert_string_equal(cfg.addr_file, "/tmp/a");
    assert_int_equal(cfg.pool_size, MiB);
    assert_int_equal(cfg.pool_max, 2 * MiB);
    assert_int_equal(cfg.segment_size, 8 * KiB);
    assert_int_equal(cfg.pipeline_depth, 64);
    assert_string_equal(cfg.log_level, "trace");
    assert_string_equal(cfg.log_subsys, "job,engine");
}

static void test_later_flag_wins(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "1M", "--pool-size", "2M", NULL};
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 2 * MiB);
}

static void test_print_config_names_sources(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "32M", "--print-config", NULL};
    coll_config_result_t res;
    const char *out;

    setenv("COLLD_SEGMENT_SIZE", "1M", 1);
    capture_start(STDOUT_FILENO);
    res = coll_config_load(ARGC(argv), argv, &cfg);
    out = capture_end();
    assert_int_equal(res, COLL_CONFIG_EXIT);
    assert_contains(out, "pool_size = 33554432  # flag\n");
    assert_contains(out, "segment_size = 1048576  # env\n");
    assert_contains(out, "pipeline_depth = 4  # default\n");
    assert_contains(out, "socket = /run/collectived/collectived.sock  # default\n");
    assert_contains(out, "log_level = info  # default\n");
}

static void test_help_prints_usage_and_exits(void **state)
{
    char *argv[] = {"collectived", "--help", NULL};
    coll_config_result_t res;
    const char *out;

    capture_start(STDOUT_FILENO);
    res = coll_config_load(ARGC(argv), argv, &cfg);
    out = capture_end();
    assert_int_equal(res, COLL_CONFIG_EXIT);
    assert_contains(out, "usage: collectived");
    assert_contains(out, "--pool-size");
    assert_contains(out, "COLLD_POOL_SIZE");
    assert_contains(out, "--print-config");
}

static void test_short_h_is_help(void **state)
{
    char *argv[] = {"collectived", "-h", NULL};
    coll_config_result_t res;

    capture_start(STDOUT_FILENO);
    res = coll_config_load(ARGC(argv), argv, &cfg);
    assert_contains(capture_end(), "usage: collectived");
    assert_int_equal(res, COLL_CONFIG_EXIT);
}

static void test_invalid_size_flag_names_key_and_value(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "12X", NULL};
    const char *err = load_error(ARGC(argv), argv);
    assert_contains(err, "pool_size=12X");
    assert_contains(err, "--pool-size");
}

static void test_invalid_size_env_names_key_and_variable(void **state)
{
    char *argv[] = {"collectived", NULL};
    const char *err;

    setenv("COLLD_SEGMENT_SIZE", "1.5M", 1);
    err = load_error(ARGC(argv), argv);
    assert_contains(err, "segment_size=1.5M");
    assert_contains(err, "COLLD_SEGMENT_SIZE");
}

static void test_invalid_env_fails_even_when_flag_given(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "1M", NULL};
    setenv("COLLD_POOL_SIZE", "lots", 1);
    assert_contains(load_error(ARGC(argv), argv), "pool_size=lots");
}

static void test_pipeline_depth_negative_rejected(void **state)
{
    char *argv[] = {"collectived", "--pipeline-depth", "-1", NULL};
    assert_contains(load_error(ARGC(argv), argv), "pipeline_depth=-1");
}

static void test_pipeline_depth_not_a_number_rejected(void **state)
{
    char *argv[] = {"collectived", "--pipeline-depth", "4x", NULL};
    assert_contains(load_error(ARGC(argv), argv), "pipeline_depth=4x");
}

static void test_pipeline_depth_range(void **state)
{
    char *zero[] = {"collectived", "--pipeline-depth", "0", NULL};
    char *over[] = {"collectived", "--pipeline-depth", "65", NULL};

    assert_contains(load_error(ARGC(zero), zero), "pipeline_depth=0");
    coll_config_cleanup(&cfg);
    assert_contains(load_error(ARGC(over), over), "pipeline_depth=65");
}

static void test_segment_size_range(void **state)
{
    char *small[] = {"collectived", "--segment-size", "4095", NULL};
    char *big[] = {"collectived", "--segment-size", "65M", NULL};
    char *edge[] = {"collectived", "--segment-size", "64M", NULL};

    assert_contains(load_error(ARGC(small), small), "segment_size=4095");
    coll_config_cleanup(&cfg);
    assert_contains(load_error(ARGC(big), big), "segment_size=68157440");
    coll_config_cleanup(&cfg);
    assert_int_equal(coll_config_load(ARGC(edge), edge, &cfg), COLL_CONFIG_RUN);
}

static void test_pool_size_above_pool_max_rejected(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "32G", NULL};
    char *raised[] = {"collectived", "--pool-size", "32G", "--pool-max", "64G", NULL};

    assert_contains(load_error(ARGC(argv), argv), "pool_size=34359738368");
    coll_config_cleanup(&cfg);
    assert_int_equal(coll_config_load(ARGC(raised), raised, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 32 * GiB);
}

/* 0 is the default: a job's pool taken on demand up to pool_max. */
static void test_pool_size_zero_is_on_demand(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "256M", "--pool-size", "0", NULL};
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 0);
}

static void test_log_level_unknown_rejected(void **state)
{
    char *argv[] = {"collectived", "--log-level", "loud", NULL};
    assert_contains(load_error(ARGC(argv), argv), "log_level=loud");
}

static void test_socket_path_length(void **state)
{
    char path[109];
    char *argv[] = {"collectived", "--socket", path, NULL};
    char *empty[] = {"collectived", "--socket", "", NULL};

    memset(path, 's', 108);
    path[0] = '/';
    path[108] = '\0';
    assert_contains(load_error(ARGC(argv), argv), "socket=");
    coll_config_cleanup(&cfg);
    path[107] = '\0'; /* 107 bytes fit sun_path with its NUL */
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_RUN);
    coll_config_cleanup(&cfg);
    assert_contains(load_error(ARGC(empty), empty), "socket=");
}

static void test_unknown_option_rejected(void **state)
{
    char *argv[] = {"collectived", "--bogus", "1", NULL};
    assert_contains(load_error(ARGC(argv), argv), "--bogus");
}

static void test_missing_flag_value_rejected(void **state)
{
    char *argv[] = {"collectived", "--pool-size", NULL};
    assert_contains(load_error(ARGC(argv), argv), "pool-size");
}

static void test_positional_argument_rejected(void **state)
{
    char *argv[] = {"collectived", "extra", NULL};
    assert_contains(load_error(ARGC(argv), argv), "'extra'");
}

/* Every bad flag is reported in one run, not only the first: a value that does not parse, an
 * unknown option, values out of range and stray arguments, each on a line of its own. */
static void test_every_bad_flag_reported(void **state)
{
    char *argv[] = {"collectived", "--pool-size", "lots", "--bogus", "1", "--pipeline-depth",
                    "0", "--timeout-ms", "5", "--listen", "nowhere", "stray", "more", NULL};
    const char *text = load_error(ARGC(argv), argv);

    (void)state;
    assert_contains(text, "pool-size");
    assert_contains(text, "--bogus");
    assert_contains(text, "pipeline_depth=0");
    assert_contains(text, "timeout_ms=5");
    assert_contains(text, "listen=nowhere");
    assert_contains(text, "'stray'");
    assert_contains(text, "'more'");
}

/* A flag of one load must not leak into the next (getopt keeps state between calls). */
static void test_reload_starts_from_defaults(void **state)
{
    char *first[] = {"collectived", "--pool-size", "1M", NULL};
    char *second[] = {"collectived", NULL};

    assert_int_equal(coll_config_load(ARGC(first), first, &cfg), COLL_CONFIG_RUN);
    coll_config_cleanup(&cfg);
    assert_int_equal(coll_config_load(ARGC(second), second, &cfg), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 0); /* on demand */
}

/* A load that stopped inside a cluster of short options ("-hh": help served at the first h)
 * leaves getopt's position in the old argv; the next load must start afresh. */
static void test_reload_after_clustered_short_options(void **state)
{
    char first0[] = "collectived", first1[] = "-hh";
    char *first[] = {first0, first1, NULL};
    char *second[] = {"collectived", "--pool-size", "1M", NULL};
    coll_config_result_t res;

    capture_start(STDOUT_FILENO);
    res = coll_config_load(ARGC(first), first, &cfg);
    capture_end();
    assert_int_equal(res, COLL_CONFIG_EXIT);
    coll_config_cleanup(&cfg);
    capture_start(STDOUT_FILENO);
    res = coll_config_load(ARGC(second), second, &cfg);
    capture_end();
    assert_int_equal(res, COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, MiB);
}

#define CFG_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size_units),
        cmocka_unit_test(test_parse_size_lowercase_and_b_suffix),
        cmocka_unit_test(test_parse_size_bytes_suffix),
        cmocka_unit_test(test_parse_size_largest_of_each_unit),
        cmocka_unit_test(test_parse_size_rejects_malformed),
        cmocka_unit_test(test_parse_size_rejects_overflow),
        CFG_TEST(test_defaults),
        CFG_TEST(test_env_overrides_default),
        CFG_TEST(test_flag_overrides_env),
        CFG_TEST(test_every_key_has_a_flag),
        CFG_TEST(test_later_flag_wins),
        CFG_TEST(test_print_config_names_sources),
        CFG_TEST(test_help_prints_usage_and_exits),
        CFG_TEST(test_short_h_is_help),
        CFG_TEST(test_invalid_size_flag_names_key_and_value),
        CFG_TEST(test_invalid_size_env_names_key_and_variable),
        CFG_TEST(test_invalid_env_fails_even_when_flag_given),
        CFG_TEST(test_pipeline_depth_negative_rejected),
        CFG_TEST(test_pipeline_depth_not_a_number_rejected),
        CFG_TEST(test_pipeline_depth_range),
        CFG_TEST(test_segment_size_range),
        CFG_TEST(test_pool_size_above_pool_max_rejected),
        CFG_TEST(test_pool_size_zero_is_on_demand),
        CFG_TEST(test_log_level_unknown_rejected),
        CFG_TEST(test_socket_path_length),
        CFG_TEST(test_unknown_option_rejected),
        CFG_TEST(test_missing_flag_value_rejected),
        CFG_TEST(test_positional_argument_rejected),
        CFG_TEST(test_every_bad_flag_reported),
        CFG_TEST(test_reload_starts_from_defaults),
        CFG_TEST(test_reload_after_clustered_short_options),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
