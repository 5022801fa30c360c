/* A daemon object on a loop of its own for the unit tests of net and job: daemon_fixture.h. */
#include "daemon_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "base/log.h"

void daemon_fixture_init(coll_daemon_t *d, uv_loop_t *loop, uint8_t key_seed)
{
    char *argv[] = {"test", "--config", "none", "--log-level", "warn", NULL};

    memset(d, 0, sizeof(*d));
    assert_int_equal(coll_config_load(5, argv, &d->cfg), COLL_CONFIG_RUN);
    assert_int_equal(coll_log_configure(d->cfg.log_level, ""), 0);
    free(d->cfg.listen);
    d->cfg.listen = strdup("127.0.0.1:0");
    d->loop = loop;
    coll_list_init(&d->sessions);
    coll_list_init(&d->jobs);
    coll_list_init(&d->peer_links);
    coll_list_init(&d->rdvs);
    coll_list_init(&d->barred_jobs);
    coll_stats_init(&d->stats, 0);
    for (unsigned i = 0; i < COLL_AUTH_BYTES; i++) {
        d->auth.key[i] = (uint8_t)(i * 7 + key_seed);
    }
    d->auth.enabled = 1;
    d->auth.mode = COLL_PEERS_AUTHENTICATED;
    strcpy(d->hostname, "test");
}

static void close_left(uv_handle_t *h, void *arg)
{
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

void daemon_fixture_fini(coll_daemon_t *d)
{
    coll_config_cleanup(&d->cfg);
}

void daemon_fixture_close_loop(uv_loop_t *loop)
{
    uv_walk(loop, close_left, NULL);
    for (int i = 0; i < 100 && uv_loop_alive(loop); i++) {
        uv_run(loop, UV_RUN_NOWAIT);
    }
    assert_int_equal(uv_loop_close(loop), 0);
}

int daemon_fixture_run_until(uv_loop_t *loop, int (*done)(void *), void *arg, unsigned ms)
{
    struct timespec pause = {0, 1000000};
    uint64_t end;
    int v;

    uv_update_time(loop);
    end = uv_now(loop) + ms;
    while (!(v = done(arg)) && uv_now(loop) < end) {
        uv_run(loop, UV_RUN_NOWAIT);
        nanosleep(&pause, NULL);
        uv_update_time(loop);
    }
    return v;
}
