/* Notifications through libsystemd. */
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "base/notify.h"

int coll_notify(const char *state)
{
    int rc = sd_notify(0, state);
    return rc > 0 ? 1 : rc == 0 ? 0 : -1;
}

uint64_t coll_notify_watchdog_usec(void)
{
    uint64_t usec = 0;
    return sd_watchdog_enabled(0, &usec) > 0 ? usec : 0;
}

int coll_notify_enabled(void)
{
    const char *s = getenv("NOTIFY_SOCKET");
    return s != NULL && s[0] != '\0';
}
