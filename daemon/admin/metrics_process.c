/*
 * The standard process_* metrics that Prometheus' client libraries export for every process
 * (client_golang's process collector, client_python's ProcessCollector): CPU time, memory,
 * file descriptors and start time, read from /proc/self, so that the usual dashboards and
 * alerts (file descriptors running out, memory growing) work for the daemon.
 */
#include "admin/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* Fields of /proc/self/stat (proc(5)) this file reads. */
typedef struct {
    unsigned long long utime, stime, starttime; /* clock ticks */
    unsigned long long vsize, rss;              /* bytes, pages */
} proc_stat_t;

static int read_stat(proc_stat_t *s)
{
    char buf[1024], *p;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f != NULL) {
        fclose(f);
    }
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: fields 3.. follow the last
     * ')'. utime and stime are fields 14 and 15, starttime, vsize and rss 22 to 24. */
    if ((p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d "
                      "%*d %*d %llu %llu %llu", &s->utime, &s->stime, &s->starttime, &s->vsize,
               &s->rss) != 5) {
        return -1;
    }
    return 0;
}

/* Boot time, seconds since the epoch (the btime line of /proc/stat); 0 when unknown. */
static double boot_time(void)
{
    char line[256];
    double t = 0;
    FILE *f = fopen("/proc/stat", "r");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "btime %lf", &t) == 1) {
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return t;
}

static long open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (dir == NULL) {
        return -1;
    }
    while ((e = readdir(dir)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(dir);
    return n - 1; /* the directory's own descriptor */
}

static void gauge(FILE *f, const char *name, const char *type, const char *help, double v)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, v);
}

void coll_metrics_process(FILE *f)
{
    double tick = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
    struct rlimit fds, as;
    proc_stat_t s;
    long nfds = open_fds();

    if (read_stat(&s) == 0 && tick > 0) {
        gauge(f, "process_cpu_seconds_total", "counter", "Total user and system CPU time "
              "spent in seconds.", (double)(s.utime + s.stime) / tick);
        gauge(f, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
              (double)s.vsize);
        gauge(f, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
              (double)s.rss * page);
        gauge(f, "process_start_time_seconds", "gauge", "Start time of the process since unix "
              "epoch in seconds.", boot_time() + (double)s.starttime / tick);
    }
    if (nfds >= 0) {
        gauge(f, "process_open_fds", "gauge", "Number of open file descriptors.", (double)nfds);
    }
    if (getrlimit(RLIMIT_NOFILE, &fds) == 0) {
        gauge(f, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
              (double)fds.rlim_cur);
    }
    if (getrlimit(RLIMIT_AS, &as) == 0) {
        gauge(f, "process_virtual_memory_max_bytes", "gauge", "Maximum amount of virtual "
              "memory available in bytes.", (double)as.rlim_cur);
    }
}
