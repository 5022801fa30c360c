#include "base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

coll_log_level_t coll__log_level = COLL_LOG_INFO;
uint32_t coll__log_subsys = COLL_SUB_ALL;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};
/* syslog priorities of the levels, for journald's "<N>" prefix. */
static const int level_prio[] = {3, 4, 6, 7, 7};

static const struct {
    const char *name;
    uint32_t bit;
} subsys_names[] = {
    {"core", COLL_SUB_CORE}, {"session", COLL_SUB_SESSION}, {"job", COLL_SUB_JOB},
    {"rdv", COLL_SUB_RDV},   {"ucx", COLL_SUB_UCX},         {"engine", COLL_SUB_ENGINE},
    {"pool", COLL_SUB_POOL}, {"status", COLL_SUB_STATUS}, {"all", COLL_SUB_ALL},
};

int coll_log_level_parse(const char *name)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

int coll_log_subsys_parse(const char *list, uint32_t *mask_p)
{
    char buf[256];
    uint32_t mask = 0;
    char *save = NULL;

    if (strlen(list) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, list);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size_t i;
        for (i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++) {
            if (strcmp(tok, subsys_names[i].name) == 0) {
                mask |= subsys_names[i].bit;
                break;
            }
        }
        if (i == sizeof(subsys_names) / sizeof(subsys_names[0])) {
            return -1;
        }
    }
    *mask_p = mask;
    return 0;
}

int coll_log_configure(const char *level, const char *subsys)
{
    int lvl = coll_log_level_parse(level);
    uint32_t mask = COLL_SUB_ALL;

    if (lvl < 0 || (subsys != NULL && subsys[0] != '\0' && coll_log_subsys_parse(subsys, &mask) < 0)) {
        return -1;
    }
    coll__log_level = (coll_log_level_t)lvl;
    coll__log_subsys = mask;
    return 0;
}

static const char *subsys_name(coll_log_subsys_t s)
{
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++) {
        if (subsys_names[i].bit == (uint32_t)s) {
            return subsys_names[i].name;
        }
    }
    return "?";
}

/* Whether stderr is the journal: journald sets JOURNAL_STREAM for services whose stderr it
 * collects; -1 until known, 0 once a log file replaced stderr. */
static int journal = -1;

int coll_log_open_file(const char *path)
{
    int fd;

    if (path[0] == '\0') {
        return 0;
    }
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    /* dup2 replaces stderr in one step: a line written meanwhile goes to the old file or the
     * new one, and what else writes on stderr (UCX) follows. */
    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
        }
        errno = e;
        return -1;
    }
    close(fd);
    if (journal != 0) { /* written once, before the kernel threads start */
        journal = 0;
    }
    return 0;
}

void coll__log(coll_log_level_t level, coll_log_subsys_t subsys, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    va_list ap;
    int n;

    if (journal < 0) {
        journal = getenv("JOURNAL_STREAM") != NULL;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    if (journal) {
        n = snprintf(line, sizeof(line), "<%d>%s %s: ", level_prio[level], level_names[level],
                     subsys_name(subsys));
    } else {
        struct tm tm;
        localtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%06ld collectived[%d] %s %s: ",
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, (int)getpid(),
                     level_names[level], subsys_name(subsys));
    }
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    strcat(line, "\n");
    /* One write per line so lines of concurrent writers do not interleave. */
    (void)!write(STDERR_FILENO, line, strlen(line));
}
