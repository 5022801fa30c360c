/**
 * @file notify.h
 * @brief systemd's service notifications (sd_notify(3)): READY=1, STATUS=, WATCHDOG=1,
 *        STOPPING=1. Built from notify_systemd.c with libsystemd, or notify_none.c (which does
 *        nothing) without it; CMake chooses.
 */
#ifndef COLL_NOTIFY_H
#define COLL_NOTIFY_H

#include <stdint.h>

/**
 * @brief Send @p state ("READY=1\nSTATUS=...") to the service manager.
 * @return 1 when sent, 0 when the daemon was not started by one (no NOTIFY_SOCKET), -1 on
 *         error (logged by the caller).
 */
int coll_notify(const char *state);

/** @return The watchdog period in microseconds that the service manager expects, 0 when off. */
uint64_t coll_notify_watchdog_usec(void);

/** @return 1 when a service manager listens for notifications, 0 otherwise. */
int coll_notify_enabled(void);

#endif
