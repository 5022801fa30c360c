/*
 * COLL_DEBUG: what libcollective itself writes on stderr, in the manner of NCCL_DEBUG. The
 * library returns every error to its caller (a status, and the text of coll_comm_last_error()),
 * so by default it prints only what the caller cannot see in a return value.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "client/base/base.h"

static int level = COLL__DEBUG_WARN;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void read_level(void)
{
    static const char *const names[] = {"NONE", "WARN", "INFO"};
    const char *v = getenv("COLL_DEBUG");

    if (v == NULL || v[0] == '\0') {
        return;
    }
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
        if (strcasecmp(v, names[i]) == 0) {
            level = i;
            return;
        }
    }
    fprintf(stderr, "libcollective: COLL_DEBUG=%s: use NONE, WARN or INFO; WARN it is\n", v);
}

int coll__debug_enabled(int lvl)
{
    pthread_once(&once, read_level);
    return lvl <= level;
}

void coll__debug(int lvl, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    if (!coll__debug_enabled(lvl)) {
        return;
    }
    n = snprintf(line, sizeof(line), "libcollective %d: ", (int)getpid());
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    /* One write per line: lines of several threads and ranks do not interleave. */
    (void)!write(STDERR_FILENO, line, strlen(line));
}
