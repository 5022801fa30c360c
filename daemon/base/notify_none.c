/* Without libsystemd: the daemon runs (as Type=simple) but tells the service manager nothing. */
#include "base/notify.h"

int coll_notify(const char *state)
{
    (void)state;
    return 0;
}

uint64_t coll_notify_watchdog_usec(void)
{
    return 0;
}

int coll_notify_enabled(void)
{
    return 0;
}
