/*
 * libFuzzer harness: the daemon's configuration loader (daemon/config.c) reading the input as
 * its configuration file (INI through libinih), as `collectived --config FILE` does.
 *
 * The input is written to a memfd named by its /proc/self/fd path. The loader's messages
 * (stderr) go to /dev/null while it runs; this harness and the sanitizers report on a copy of
 * the original stderr.
 *
 * Invariants: the loader answers RUN or ERROR (never EXIT without --help or --print-config);
 * after RUN every value is within the limits config.c enforces (timeout, pipeline depth, segment
 * size, pool size against pool_max, job-token requirement, kernel threads, UCX error mode, log
 * level, socket path lengths, status socket not the client socket), every string key is set,
 * and the file read is the one given; whatever the result, coll_config_cleanup() frees
 * everything (LeakSanitizer).
 */
#include "fuzz.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/config.h"
#include "base/log.h"

/* From the sanitizers' runtime; absent in the plain replay build (standalone.c). */
extern void __sanitizer_set_report_fd(void *fd) __attribute__((weak));

static int memfd = -1, quiet = -1, saved_stderr = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    extern char **environ;

    /* Only the file may set keys: drop COLLD_* and COLL_LOG_* from the environment. */
    for (char **e = environ; *e != NULL;) {
        if (strncmp(*e, "COLLD_", 6) == 0 || strncmp(*e, "COLL_LOG_", 9) == 0) {
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
            unsetenv(name);
        } else {
            e++;
        }
    }
    memfd = memfd_create("collectived.conf", 0);
    quiet = open("/dev/null", O_WRONLY);
    saved_stderr = dup(STDERR_FILENO);
    if (memfd < 0 || quiet < 0 || saved_stderr < 0) {
        perror("fuzz_config: setup");
        abort();
    }
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    if (__sanitizer_set_report_fd != NULL) {
        __sanitizer_set_report_fd((void *)(intptr_t)saved_stderr);
    }
    fuzz_report_to(fdopen(dup(saved_stderr), "w"));
    return 0;
}

static void check_values(const coll_config_t *c)
{
    FUZZ_CHECK(c->socket != NULL && c->listen != NULL && c->addr_file != NULL &&
                   c->ucx_error_mode != NULL && c->log_level != NULL && c->log_subsys != NULL &&
                   c->status_socket != NULL && c->status_listen != NULL &&
                   c->socket_group != NULL && c->peer_secret_file != NULL &&
                   c->config_file != NULL,
               "a string key without a value");
    FUZZ_CHECK(strcmp(c->config_file, path) == 0, "read '%s', not %s", c->config_file, path);
    FUZZ_CHECK(c->pipeline_depth >= 1 && c->pipeline_depth <= 64, "pipeline_depth %llu",
               (unsigned long long)c->pipeline_depth);
    FUZZ_CHECK(c->segment_size >= 4096 && c->segment_size <= (64u << 20), "segment_size %llu",
               (unsigned long long)c->segment_size);
    /* 0: on demand, up to pool_max. */
    FUZZ_CHECK(c->pool_size <= c->pool_max, "pool_size %llu, pool_max %llu",
               (unsigned long long)c->pool_size, (unsigned long long)c->pool_max);
    FUZZ_CHECK(c->timeout_ms >= 100 && c->timeout_ms <= 86400000, "timeout_ms %llu",
               (unsigned long long)c->timeout_ms);
    FUZZ_CHECK(c->require_job_token <= 1, "require_job_token %llu",
               (unsigned long long)c->require_job_token);
    FUZZ_CHECK(c->kernel_threads <= 64, "kernel_threads %llu",
               (unsigned long long)c->kernel_threads);
    FUZZ_CHECK(c->loop_stall_ms >= 10 && c->loop_stall_ms <= 60000, "loop_stall_ms %llu",
               (unsigned long long)c->loop_stall_ms);
    FUZZ_CHECK(strcmp(c->ucx_error_mode, "none") == 0 || strcmp(c->ucx_error_mode, "peer") == 0 ||
                   strcmp(c->ucx_error_mode, "auto") == 0,
               "ucx_error_mode '%s'", c->ucx_error_mode);
    FUZZ_CHECK(coll_log_level_parse(c->log_level) >= 0, "log_level '%s'", c->log_level);
    FUZZ_CHECK(strlen(c->socket) >= 1 && strlen(c->socket) <= 107, "socket '%s'", c->socket);
    FUZZ_CHECK(strlen(c->status_socket) <= 107 && strcmp(c->status_socket, c->socket) != 0,
               "status_socket '%s'", c->status_socket);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *argv[] = {"collectived", "--config", path, NULL};
    coll_config_t cfg;
    coll_config_result_t res;

    if (ftruncate(memfd, 0) != 0 || pwrite(memfd, data, size, 0) != (ssize_t)size) {
        perror("fuzz_config: memfd");
        abort();
    }
    fflush(stderr);
    dup2(quiet, STDERR_FILENO);
    res = coll_config_load(3, argv, &cfg);
    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);

    FUZZ_CHECK(res == COLL_CONFIG_RUN || res == COLL_CONFIG_ERROR, "loader answered %d",
               (int)res);
    if (res == COLL_CONFIG_RUN) {
        check_values(&cfg);
    }
    coll_config_cleanup(&cfg);
    return 0;
}
