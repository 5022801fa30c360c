/* Unit tests of the daemon configuration's file layer (daemon/config.h): precedence
 * flag > environment > file > default for every key type, choosing the file, the INI syntax
 * accepted, warnings for unknown keys and the messages of invalid values (key, value,
 * file:line, reason). */
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

#define MiB (1ULL << 20)

extern char **environ;

static coll_config_t cfg;
static char dir[64];
static char path[128];

/* ---- fixtures ---- */

static void clear_env(void)
{
    char name[128];
    size_t i = 0;

    while (environ[i] != NULL) {
        const char *eq = strchr(environ[i], '=');
        size_t n = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        if ((strncmp(environ[i], "COLLD_", 6) == 0 || strncmp(environ[i], "COLL_LOG_", 9) == 0) &&
            n < sizeof(name)) {
            memcpy(name, environ[i], n);
            name[n] = '\0';
            unsetenv(name);
        } else {
            i++;
        }
    }
}

static int setup(void **state)
{
    clear_env();
    memset(&cfg, 0, sizeof(cfg));
    snprintf(dir, sizeof(dir), "/tmp/coll-cfg-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/c.conf", dir);
    return 0;
}

static int teardown(void **state)
{
    capture_end();
    coll_config_cleanup(&cfg);
    unlink(path);
    rmdir(dir);
    clear_env();
    return 0;
}

static void write_file(const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

#define ARGC(argv) ((int)(sizeof(argv) / sizeof((argv)[0])) - 1)

static coll_config_result_t load(int argc, char **argv)
{
    coll_config_result_t res;
    coll_config_cleanup(&cfg); /* what an earlier load filled, whatever its result */
    capture_start(STDERR_FILENO);
    res = coll_config_load(argc, argv, &cfg);
    capture_end();
    return res;
}

/* One key of each type, as the file gives them. */
static const char every_type[] = "socket = /tmp/file.sock\n"   /* string */
                                 "pool_size = 8M\n"             /* size */
                                 "pipeline_depth = 6\n"         /* unsigned integer */
                                 "log_level = debug\n";         /* log level */

/* ---- precedence ---- */

static void test_file_over_default_every_type(void **state)
{
    char *argv[] = {"collectived", "--config", path, NULL};

    write_file(every_type);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.socket, "/tmp/file.sock");
    assert_int_equal(cfg.pool_size, 8 * MiB);
    assert_int_equal(cfg.pipeline_depth, 6);
    assert_string_equal(cfg.log_level, "debug");
    assert_int_equal(coll_config_source(&cfg, "socket"), COLL_CFG_FILE);
    assert_int_equal(coll_config_source(&cfg, "pool_size"), COLL_CFG_FILE);
    assert_int_equal(coll_config_source(&cfg, "pipeline_depth"), COLL_CFG_FILE);
    assert_int_equal(coll_config_source(&cfg, "log_level"), COLL_CFG_FILE);
    assert_int_equal(coll_config_source(&cfg, "segment_size"), COLL_CFG_DEFAULT);
    assert_int_equal(cfg.segment_size, 256 * 1024);
    assert_string_equal(cfg.config_file, path);
}

static void test_env_over_file_every_type(void **state)
{
    char *argv[] = {"collectived", "--config", path, NULL};

    write_file(every_type);
    setenv("COLLD_SOCKET", "/tmp/env.sock", 1);
    setenv("COLLD_POOL_SIZE", "16M", 1);
    setenv("COLLD_PIPELINE_DEPTH", "7", 1);
    setenv("COLLD_LOG_LEVEL", "trace", 1);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.socket, "/tmp/env.sock");
    assert_int_equal(cfg.pool_size, 16 * MiB);
    assert_int_equal(cfg.pipeline_depth, 7);
    assert_string_equal(cfg.log_level, "trace");
    assert_int_equal(coll_config_source(&cfg, "pool_size"), COLL_CFG_ENV);
    assert_int_equal(coll_config_source(&cfg, "log_level"), COLL_CFG_ENV);
}

static void test_flag_over_env_over_file_every_type(void **state)
{
    char *argv[] = {"collectived", "--config", path,      "--socket",   "/tmp/flag.sock",
                    "--pool-size", "32M",      "--pipeline-depth", "9", "--log-level",
                    "warn",        NULL};

    write_file(every_type);
    setenv("COLLD_SOCKET", "/tmp/env.sock", 1);
    setenv("COLLD_POOL_SIZE", "16M", 1);
    setenv("COLLD_PIPELINE_DEPTH", "7", 1);
    setenv("COLLD_LOG_LEVEL", "trace", 1);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.socket, "/tmp/flag.sock");
    assert_int_equal(cfg.pool_size, 32 * MiB);
    assert_int_equal(cfg.pipeline_depth, 9);
    assert_string_equal(cfg.log_level, "warn");
    assert_int_equal(coll_config_source(&cfg, "socket"), COLL_CFG_FLAG);
    assert_int_equal(coll_config_source(&cfg, "pipeline_depth"), COLL_CFG_FLAG);
}

static void test_log_aliases(void **state)
{
    char *argv[] = {"collectived", "--config", "none", NULL};

    setenv("COLL_LOG_LEVEL", "debug", 1);
    setenv("COLL_LOG_SUBSYS", "job,engine", 1);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.log_level, "debug");
    assert_string_equal(cfg.log_subsys, "job,engine");
    assert_int_equal(coll_config_source(&cfg, "log_level"), COLL_CFG_ENV);
    /* The daemon's own variable wins over the alias. */
    setenv("COLLD_LOG_LEVEL", "error", 1);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.log_level, "error");
}

static void test_print_config_names_file_and_line(void **state)
{
    char *argv[] = {"collectived", "--config", path, "--print-config", NULL};
    char want[256];
    const char *out;

    write_file(every_type);
    capture_start(STDOUT_FILENO);
    assert_int_equal(coll_config_load(ARGC(argv), argv, &cfg), COLL_CONFIG_EXIT);
    out = capture_end();
    snprintf(want, sizeof(want), "pool_size = 8388608  # file %s:2\n", path);
    assert_contains(out, want);
    snprintf(want, sizeof(want), "log_level = debug  # file %s:4\n", path);
    assert_contains(out, want);
    snprintf(want, sizeof(want), "# configuration file: %s\n", path);
    assert_contains(out, want);
}

/* ---- choosing the file ---- */

static void test_config_from_env_and_flag_forms(void **state)
{
    char flag[200];
    char *by_eq[] = {"collectived", flag, NULL};
    char *none[] = {"collectived", "--config", "none", NULL};
    char *plain[] = {"collectived", NULL};

    write_file("pool_size = 4M\n");
    setenv("COLLD_CONFIG", path, 1);
    assert_int_equal(load(ARGC(plain), plain), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 4 * MiB);
    /* --config wins over COLLD_CONFIG; "none" reads no file. */
    assert_int_equal(load(ARGC(none), none), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 0 /* the default: on demand */);
    assert_string_equal(cfg.config_file, "");
    unsetenv("COLLD_CONFIG");
    snprintf(flag, sizeof(flag), "--config=%s", path);
    assert_int_equal(load(ARGC(by_eq), by_eq), COLL_CONFIG_RUN);
    assert_int_equal(cfg.pool_size, 4 * MiB);
}

static void test_missing_named_file_is_an_error(void **state)
{
    char *argv[] = {"collectived", "--config", "/nonexistent/collectived.conf", NULL};

    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "/nonexistent/collectived.conf: No such file or directory");
}

/* ---- syntax ---- */

static void test_sections_comments_and_inline_comments(void **state)
{
    char *argv[] = {"collectived", "--config", path, NULL};

    write_file("# comment\n; another\n\n[collectived]\npool_size = 2M ; inline comment\n"
               "  \nlisten=127.0.0.1:1234\nsegment_size : 8K\n"
               "socket = /tmp/a#b.sock   # '#' after a space starts a comment, as ';' does\n"
               "addr_file =  # empty\nallow_unauthenticated_peers = 1\n"
               "log_file = \"\"  # the empty value as the docs write it\n"
               "cost_params = \"none\"\n");
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    assert_string_equal(cfg.log_file, "");
    assert_string_equal(cfg.cost_params, "none");
    assert_int_equal(cfg.pool_size, 2 * MiB);
    assert_string_equal(cfg.listen, "127.0.0.1:1234");
    assert_int_equal(cfg.segment_size, 8192);
    assert_string_equal(cfg.socket, "/tmp/a#b.sock");
    assert_string_equal(cfg.addr_file, "");
    assert_string_equal(capture_text(), "");
}

static void test_unknown_key_and_section_warn(void **state)
{
    char *argv[] = {"collectived", "--config", path, NULL};
    char want[256];

    write_file("pool_size = 2M\nfancy = yes\n[other]\npool_max = 1G\n");
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_RUN);
    snprintf(want, sizeof(want), "%s:2: unknown key 'fancy' ignored", path);
    assert_contains(capture_text(), want);
    snprintf(want, sizeof(want), "%s:4: unknown section [other]", path);
    assert_contains(capture_text(), want);
    assert_contains(capture_text(), "warn core:");
    /* The key under the unknown section was not applied. */
    assert_int_equal(cfg.pool_max, 16ULL << 30);
}

static void test_invalid_values_name_key_value_file_line(void **state)
{
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"pool_size = 2M\npool_size = huge\n", "pool_size=huge (%s:2): not a size"},
        {"\n\npipeline_depth = 3x\n", "pipeline_depth=3x (%s:3): not a non-negative integer"},
        {"log_level = shouty\n", "log_level=shouty (%s:1): unknown log level"},
        {"pool_size = 2M\nno equals sign here\n", "%s:2: syntax error"},
    };
    char *argv[] = {"collectived", "--config", path, NULL};
    char want[256];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(cases[i].text);
        assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_ERROR);
        snprintf(want, sizeof(want), cases[i].want, path);
        assert_contains(capture_text(), want);
    }
}

static void test_line_too_long_refused(void **state)
{
    char *argv[] = {"collectived", "--config", path, NULL};
    char text[1200];

    memset(text, 'x', sizeof(text));
    memcpy(text, "socket = /", 10);
    text[sizeof(text) - 2] = '\n';
    text[sizeof(text) - 1] = '\0';
    write_file(text);
    assert_int_equal(load(ARGC(argv), argv), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "line too long");
}

/* ---- the status server's keys ---- */

static void test_status_socket_relative_to_client_socket(void **state)
{
    char *rel[] = {"collectived", "--config", "none", "--socket", "/tmp/a/c.sock", NULL};
    char *off[] = {"collectived", "--config", "none", "--status-socket", "none", NULL};
    char *abs[] = {"collectived", "--config", "none", "--status-socket", "/tmp/s.sock", NULL};

    assert_int_equal(load(ARGC(rel), rel), COLL_CONFIG_RUN);
    assert_string_equal(cfg.status_socket, "/tmp/a/status.sock");
    assert_int_equal(load(ARGC(off), off), COLL_CONFIG_RUN);
    assert_string_equal(cfg.status_socket, "");
    assert_int_equal(load(ARGC(abs), abs), COLL_CONFIG_RUN);
    assert_string_equal(cfg.status_socket, "/tmp/s.sock");
}

/* A value refused by a range or cross-key check names where it came from: the file and line,
 * the environment, a flag; pool_size against pool_max names pool_max's origin too. */
static void test_checked_values_name_their_origin(void **state)
{
    char *file[] = {"collectived", "--config", path, NULL};
    char *flag[] = {"collectived", "--config", path, "--pool-size", "64M", NULL};
    char want[512];

    write_file("pipeline_depth = 4\ntimeout_ms = 20\n");
    assert_int_equal(load(ARGC(file), file), COLL_CONFIG_ERROR);
    snprintf(want, sizeof(want), "timeout_ms=20 (file %s:2): must be 100..86400000", path);
    assert_contains(capture_text(), want);

    write_file("pool_max = 32M\npool_size = 16M\n");
    setenv("COLLD_KERNEL_THREADS", "65", 1);
    assert_int_equal(load(ARGC(file), file), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "kernel_threads=65 (env): must be 0..64");
    unsetenv("COLLD_KERNEL_THREADS");

    assert_int_equal(load(ARGC(flag), flag), COLL_CONFIG_ERROR);
    snprintf(want, sizeof(want), "pool_size=67108864 (flag): must be 0..pool_max (33554432, "
             "file %s:1)", path);
    assert_contains(capture_text(), want);
}

/* Both listen addresses must be numeric host:port, refused at start-up, not when opened. */
static void test_listen_addresses_checked(void **state)
{
    static const struct {
        const char *flag, *good, *bad, *message;
    } cases[] = {
        {"--status-listen", "[::1]:9464", "host-without-port", "status_listen=host-without-port"},
        {"--listen", "[::1]:29510", "localhost:29510",
         "listen=localhost:29510 (flag): not a numeric host:port"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *good[] = {"collectived", "--config", "none", "--allow-unauthenticated-peers",
                        "1", (char *)cases[i].flag, (char *)cases[i].good, NULL};
        char *bad[] = {"collectived", "--config", "none", "--allow-unauthenticated-peers",
                       "1", (char *)cases[i].flag, (char *)cases[i].bad, NULL};

        assert_int_equal(load(ARGC(good), good), COLL_CONFIG_RUN);
        assert_int_equal(load(ARGC(bad), bad), COLL_CONFIG_ERROR);
        assert_contains(capture_text(), cases[i].message);
    }
}

/* A listener other than the default needs a node secret, or the consent to go without one;
 * the default address needs neither (no listener then), nor does --make-secret. */
static void test_listener_needs_a_secret(void **state)
{
    char *none[] = {"collectived", "--config", "none", "--listen", "127.0.0.1:0",
                    "--peer-secret-file", "", NULL};
    char *missing[] = {"collectived", "--config", "none", "--listen", "127.0.0.1:0",
                       "--peer-secret-file", "/nonexistent/peer.secret", NULL};
    char *allowed[] = {"collectived", "--config", "none", "--listen", "127.0.0.1:0",
                       "--peer-secret-file", "", "--allow-unauthenticated-peers", "1", NULL};
    char *with[] = {"collectived", "--config", "none", "--listen", "127.0.0.1:0",
                    "--peer-secret-file", path, NULL};
    char *defaults[] = {"collectived", "--config", "none", "--peer-secret-file", "",
                        "--listen", "127.0.0.1:29510", NULL};
    char *make[] = {"collectived", "--config", "none", "--listen", "127.0.0.1:0",
                    "--peer-secret-file", "/nonexistent/peer.secret", "--make-secret=nobody",
                    NULL};

    assert_int_equal(load(ARGC(none), none), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "listen=127.0.0.1:0 (flag): no node secret");
    assert_int_equal(load(ARGC(missing), missing), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "\"/nonexistent/peer.secret\": No such file or directory");
    assert_int_equal(load(ARGC(allowed), allowed), COLL_CONFIG_RUN);
    write_file("secret secret secret\n");
    assert_int_equal(load(ARGC(with), with), COLL_CONFIG_RUN);
    assert_int_equal(load(ARGC(defaults), defaults), COLL_CONFIG_RUN);
    assert_int_equal(load(ARGC(make), make), COLL_CONFIG_MAKE_SECRET);
    assert_true(cfg.make_secret);
    assert_string_equal(cfg.make_secret_owner, "nobody");
}

/* What one connection may cost is bounded, and so are the bounds. */
static void test_connection_limits_checked(void **state)
{
    char *small[] = {"collectived", "--config", "none", "--peer-handshake-bytes", "100", NULL};
    char *zero[] = {"collectived", "--config", "none", "--status-max-connections", "0", NULL};
    char *ok[] = {"collectived", "--config", "none", "--peer-handshake-bytes", "4K",
                  "--peer-max-connections", "8", "--fd-reserve", "0", NULL};

    assert_int_equal(load(ARGC(small), small), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "peer_handshake_bytes=100 (flag): must be 256..65536");
    assert_int_equal(load(ARGC(zero), zero), COLL_CONFIG_ERROR);
    assert_contains(capture_text(), "status_max_connections=0 (flag): must be 1..4096");
    assert_int_equal(load(ARGC(ok), ok), COLL_CONFIG_RUN);
    assert_int_equal(cfg.peer_handshake_bytes, 4096);
    assert_int_equal(cfg.peer_max_connections, 8);
    assert_int_equal(cfg.fd_reserve, 0);
    assert_int_equal(cfg.peer_idle_ms, 30000);
}

static void test_socket_group(void **state)
{
    char *numeric[] = {"collectived", "--config", "none", "--socket-group", "4242", NULL};
    char *missing[] = {"collectived", "--config", path, NULL};
    unsigned gid = 0;
    char want[512];

    assert_int_equal(load(ARGC(numeric), numeric), COLL_CONFIG_RUN);
    assert_int_equal(coll_config_group(cfg.socket_group, &gid), 0);
    assert_int_equal(gid, 4242);
    assert_int_equal(coll_config_group("root", &gid), 0);
    assert_int_equal(gid, 0);
    /* A group named on purpose must exist. */
    write_file("socket_group = no-such-group-anywhere\n");
    assert_int_equal(load(ARGC(missing), missing), COLL_CONFIG_ERROR);
    snprintf(want, sizeof(want), "socket_group=no-such-group-anywhere (file %s:1): no such group",
             path);
    assert_contains(capture_text(), want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_file_over_default_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_over_file_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_flag_over_env_over_file_every_type, setup, teardown),
        cmocka_unit_test_setup_teardown(test_log_aliases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_print_config_names_file_and_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_from_env_and_flag_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_named_file_is_an_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sections_comments_and_inline_comments, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_unknown_key_and_section_warn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_invalid_values_name_key_value_file_line, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_line_too_long_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_socket_relative_to_client_socket, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_checked_values_name_their_origin, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listen_addresses_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_needs_a_secret, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_limits_checked, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_group, setup, teardown),
    };
    return cmocka_run_group_tests_name("config_file", tests, NULL, NULL);
}
