/*
 * collectived: the collective-communication daemon, one per node.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/auth.h"
#include "base/config.h"
#include "base/log.h"
#include "daemon.h"

int main(int argc, char **argv)
{
    coll_daemon_t d;
    uv_loop_t *loop = uv_default_loop();
    int rc;

    memset(&d, 0, sizeof(d));
    switch (coll_config_load(argc, argv, &d.cfg)) {
    case COLL_CONFIG_EXIT:
        coll_config_cleanup(&d.cfg);
        return 0;
    case COLL_CONFIG_ERROR:
        coll_config_cleanup(&d.cfg);
        return 2;
    case COLL_CONFIG_MAKE_SECRET:
        rc = coll_auth_make_secret(d.cfg.peer_secret_file, d.cfg.make_secret_owner) == COLL_OK
                 ? 0 : 1;
        coll_config_cleanup(&d.cfg);
        return rc;
    case COLL_CONFIG_RUN:
        break;
    }
    if (coll_log_open_file(d.cfg.log_file) < 0) {
        fprintf(stderr, "collectived: log_file=%s: %s\n", d.cfg.log_file, strerror(errno));
        coll_config_cleanup(&d.cfg);
        return 2;
    }
    if (coll_log_configure(d.cfg.log_level, d.cfg.log_subsys) < 0) {
        fprintf(stderr, "collectived: log_subsys=%s: unknown subsystem; use core, session, job, "
                        "rdv, ucx, engine, pool, status or all\n", d.cfg.log_subsys);
        coll_config_cleanup(&d.cfg);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    rc = coll_daemon_start(&d, loop) == COLL_OK ? 0 : 1;
    uv_run(loop, UV_RUN_DEFAULT);
    coll_daemon_cleanup(&d);
    uv_loop_close(loop);
    coll_config_cleanup(&d.cfg);
    return rc;
}
