/*
 * The timeline of COLL_TIMELINE (collective.h, "Timeline"): Chrome trace-event JSON written by
 * the library as requests finish, in the spirit of Horovod's timeline. Events are formatted
 * into a bounded buffer and written in chunks; after each write the file ends with the closing
 * brackets, which the next write overwrites, so the file is valid JSON whenever no write is in
 * progress, even if the process never reaches coll_comm_destroy().
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/base/base.h"
#include "client/trace/timeline.h"

#define TL_BUF_BYTES (64 * 1024)       /* bound of the buffered events */
#define TL_EVENT_MAX 1024              /* bound of one formatted event */
#define TL_FLUSH_NS 1000000000ull      /* write at least this often while events come */
#define TL_MAX_TRACKS 256
#define TL_TRAILER "\n]}\n"

typedef struct {
    char name[32];
    long sort;
} tl_track_t;

struct coll_timeline {
    int fd;
    char path[512];
    int rank;
    off_t end;          /* where the next chunk goes: just after the last event written */
    int any;            /* an event was formatted: the next one needs a comma */
    char *buf;
    size_t len;
    uint64_t last_flush_ns;
    tl_track_t tracks[TL_MAX_TRACKS];
    int ntracks;
};

/* ---- file name ---------------------------------------------------------------------------- */

/* "%r" -> rank. */
static int subst_rank(const char *v, int rank, char *out, size_t outlen)
{
    size_t o = 0;

    for (const char *p = v; *p != '\0'; p++) {
        int n = (p[0] == '%' && p[1] == 'r') ? snprintf(out + o, outlen - o, "%d", rank)
                                             : snprintf(out + o, outlen - o, "%c", *p);
        p += p[0] == '%' && p[1] == 'r';
        if (n < 0 || (size_t)n >= outlen - o) {
            return -1;
        }
        o += (size_t)n;
    }
    return 0;
}

static int is_dir(const char *v)
{
    struct stat st;
    size_t n = strlen(v);

    if (n > 0 && v[n - 1] == '/') {
        if (mkdir(v, 0755) != 0 && errno != EEXIST) {
            return -1;
        }
        return 1;
    }
    return stat(v, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The rank's file (see collective.h). */
static int timeline_path(const char *v, int rank, int world, char *out, size_t outlen)
{
    size_t n = strlen(v);
    int dir;
    int w;

    if (strstr(v, "%r") != NULL) {
        return subst_rank(v, rank, out, outlen);
    }
    if ((dir = is_dir(v)) < 0) {
        return -1;
    }
    if (dir) {
        w = snprintf(out, outlen, "%s%srank%d.json", v, v[n - 1] == '/' ? "" : "/", rank);
    } else if (world == 1) {
        w = snprintf(out, outlen, "%s", v);
    } else if (n > 5 && strcmp(v + n - 5, ".json") == 0) {
        w = snprintf(out, outlen, "%.*s.%d.json", (int)(n - 5), v, rank);
    } else {
        w = snprintf(out, outlen, "%s.%d", v, rank);
    }
    return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

/* ---- writing ------------------------------------------------------------------------------ */

static int write_all_at(int fd, const char *p, size_t n, off_t off)
{
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        p += w;
        n -= (size_t)w;
        off += w;
    }
    return 0;
}

/* A fatal signal can cut a write to a regular file short, which would leave half an event
 * where the closing brackets were: signals that can be blocked wait until the chunk is in. */
static int write_at(int fd, const char *p, size_t n, off_t off)
{
    sigset_t all, old;
    int rc;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = write_all_at(fd, p, n, off);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

static void disable(coll_timeline_t *tl, const char *what)
{
    coll__debug(COLL__DEBUG_WARN, "rank %d: timeline %s: %s failed: %s; timeline off", tl->rank,
                tl->path, what, strerror(errno));
    close(tl->fd);
    tl->fd = -1;
}

coll_status_t coll__timeline_flush(coll_timeline_t *tl)
{
    if (tl == NULL || tl->fd < 0) {
        return tl == NULL ? COLL_OK : COLL_ERR_IO;
    }
    tl->last_flush_ns = coll__now_ns();
    if (tl->len == 0) {
        return COLL_OK;
    }
    memcpy(tl->buf + tl->len, TL_TRAILER, sizeof(TL_TRAILER) - 1);
    if (write_at(tl->fd, tl->buf, tl->len + sizeof(TL_TRAILER) - 1, tl->end) != 0) {
        disable(tl, "write");
        return COLL_ERR_IO;
    }
    tl->end += (off_t)tl->len;
    tl->len = 0;
    return COLL_OK;
}

/* Append one formatted event (without separator) to the buffer. */
static void append(coll_timeline_t *tl, const char *ev, size_t n)
{
    if (tl->fd < 0) {
        return;
    }
    if (tl->len + n + 2 > TL_BUF_BYTES && coll__timeline_flush(tl) != COLL_OK) {
        return;
    }
    if (tl->any) {
        memcpy(tl->buf + tl->len, ",\n", 2);
        tl->len += 2;
    }
    memcpy(tl->buf + tl->len, ev, n);
    tl->len += n;
    tl->any = 1;
    if (coll__now_ns() - tl->last_flush_ns > TL_FLUSH_NS) {
        coll__timeline_flush(tl);
    }
}

static void appendf(coll_timeline_t *tl, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void appendf(coll_timeline_t *tl, const char *fmt, ...)
{
    char ev[TL_EVENT_MAX];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(ev, sizeof(ev), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(ev)) {
        append(tl, ev, (size_t)n);
    }
}

/* A JSON string body: quotes, backslashes and control characters escaped; bounded. */
static const char *esc(const char *s, char *out, size_t outlen)
{
    size_t o = 0;

    for (; *s != '\0' && o + 7 < outlen; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            out[o++] = '\\';
            out[o++] = (char)ch;
        } else if (ch < 0x20) {
            o += (size_t)snprintf(out + o, outlen - o, "\\u%04x", ch);
        } else {
            out[o++] = (char)ch;
        }
    }
    out[o] = '\0';
    return out;
}

/* Microseconds with three decimals, exactly. */
#define TS_FMT "%llu.%03llu"
#define TS_ARG(ns) (unsigned long long)((ns) / 1000), (unsigned long long)((ns) % 1000)

/* ---- tracks ------------------------------------------------------------------------------- */

/* The tid of @p track; its thread_name and sort index are written on first use. */
static int track_tid(coll_timeline_t *tl, const char *track, long sort)
{
    char e[96];
    int t;

    for (t = 0; t < tl->ntracks; t++) {
        if (strcmp(tl->tracks[t].name, track) == 0) {
            return t + 1;
        }
    }
    if (tl->ntracks == TL_MAX_TRACKS) {
        return TL_MAX_TRACKS; /* rows beyond the bound share the last one */
    }
    snprintf(tl->tracks[t].name, sizeof(tl->tracks[t].name), "%s", track);
    tl->tracks[t].sort = sort < 0 ? t + 1 : sort;
    tl->ntracks++;
    appendf(tl, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"name\":\"%s\"}}", tl->rank, t + 1,
            esc(tl->tracks[t].name, e, sizeof(e)));
    appendf(tl, "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,"
                "\"args\":{\"sort_index\":%ld}}", tl->rank, t + 1, tl->tracks[t].sort);
    return t + 1;
}

/* ---- open and close ------------------------------------------------------------------------- */

static coll_timeline_t *tl_new(int rank, const char *path)
{
    coll_timeline_t *tl = calloc(1, sizeof(*tl));

    if (tl == NULL || (tl->buf = malloc(TL_BUF_BYTES + sizeof(TL_TRAILER))) == NULL) {
        free(tl);
        return NULL;
    }
    tl->rank = rank;
    tl->last_flush_ns = coll__now_ns();
    snprintf(tl->path, sizeof(tl->path), "%s", path);
    tl->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    return tl;
}

/* The document's head, and the trailer after it: a valid empty trace from the start. */
static int write_head(coll_timeline_t *tl, int world)
{
    char head[512];
    int n = snprintf(head, sizeof(head),
                     "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"producer\":\"libcollective\","
                     "\"rank\":%d,\"world_size\":%d,\"pid\":%d,\"clock\":\"CLOCK_MONOTONIC\"},"
                     "\"traceEvents\":[\n", tl->rank, world, (int)getpid());

    if (write_at(tl->fd, head, (size_t)n, 0) != 0 ||
        write_at(tl->fd, TL_TRAILER, sizeof(TL_TRAILER) - 1, n) != 0) {
        return -1;
    }
    tl->end = n;
    appendf(tl, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"name\":\"rank %d\"}}", tl->rank, tl->rank);
    appendf(tl, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                "\"args\":{\"sort_index\":%d}}", tl->rank, tl->rank);
    return 0;
}

coll_timeline_t *coll__timeline_open(int rank, int world_size)
{
    const char *v = getenv("COLL_TIMELINE");
    char path[512];
    coll_timeline_t *tl;

    if (v == NULL || v[0] == '\0') {
        return NULL;
    }
    if (timeline_path(v, rank, world_size, path, sizeof(path)) != 0) {
        coll__debug(COLL__DEBUG_WARN, "rank %d: COLL_TIMELINE=%s: cannot make a file name of "
                    "it (%s); timeline off", rank, v, strerror(errno));
        return NULL;
    }
    if ((tl = tl_new(rank, path)) == NULL) {
        return NULL;
    }
    if (tl->fd < 0 || write_head(tl, world_size) != 0) {
        coll__debug(COLL__DEBUG_WARN, "rank %d: timeline %s: %s; timeline off", rank, path,
                    strerror(errno));
        coll__timeline_close(tl);
        return NULL;
    }
    return tl;
}

void coll__timeline_close(coll_timeline_t *tl)
{
    if (tl == NULL) {
        return;
    }
    coll__timeline_flush(tl);
    if (tl->fd >= 0) {
        close(tl->fd);
    }
    free(tl->buf);
    free(tl);
}

/* ---- events --------------------------------------------------------------------------------- */

static const char *coll_name(uint32_t coll)
{
    static const char *const names[] = {"allreduce", "reduce_scatter", "allgather", "broadcast",
                                        "reduce", "barrier", "send", "recv", "ps_register",
                                        "ps_step", "ps_save", "ps_load", "gather", "scatter",
                                        "alltoallv"};
    return coll < sizeof(names) / sizeof(names[0]) ? names[coll] : "collective";
}

void coll__timeline_span(coll_timeline_t *tl, const char *track, const char *name,
                         uint64_t begin_ns, uint64_t end_ns)
{
    char e[96];
    int tid;

    if (tl == NULL || tl->fd < 0) {
        return;
    }
    tid = track_tid(tl, track, -1);
    appendf(tl, "{\"name\":\"%s\",\"cat\":\"span\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                "\"ts\":" TS_FMT ",\"dur\":" TS_FMT "}", esc(name, e, sizeof(e)), tl->rank,
            tid, TS_ARG(begin_ns), TS_ARG(end_ns - begin_ns));
}

/* Phase boundaries: submit, ready, peers, reduced, done, complete, made monotonic. A phase the
 * operation did not report takes no time, except a missing "reduced" (algorithms other than
 * the ring): the reduction then lasts until done. Only called with a done time. */
static void phase_stamps(const coll_req_timing_t *t, uint64_t s[6])
{
    s[0] = t->submit_ns;
    s[5] = t->complete_ns > s[0] ? t->complete_ns : s[0];
    s[1] = t->ready_ns;
    s[2] = t->peers_ns;
    s[4] = t->done_ns ? t->done_ns : s[5];
    s[3] = t->reduced_ns ? t->reduced_ns : s[4];
    for (int i = 1; i < 5; i++) {
        s[i] = s[i] < s[i - 1] ? s[i - 1] : (s[i] > s[5] ? s[5] : s[i]);
    }
}

static void request_phases(coll_timeline_t *tl, int tid, const uint64_t s[6])
{
    static const char *const phase[5] = {"wait local ranks", "wait other nodes", "reduce",
                                         "distribute", "complete"};

    for (int i = 0; i < 5; i++) {
        if (s[i + 1] > s[i]) {
            appendf(tl, "{\"name\":\"%s\",\"cat\":\"phase\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                        "\"ts\":" TS_FMT ",\"dur\":" TS_FMT "}", phase[i], tl->rank, tid,
                    TS_ARG(s[i]), TS_ARG(s[i + 1] - s[i]));
        }
    }
}

/* "reduce-scatter step 2/7", "all-gather steps 3-4/20", "round 1/3", "fold": a record's name,
 * with @p total the steps of its phase. */
static void step_name(const coll_req_step_t *st, uint32_t total, char *out, size_t len)
{
    static const char *const names[] = {"", "reduce-scatter", "all-gather", "fold", "round",
                                        "unfold"};
    const char *ring = st->phase <= COLL_STEP_ALLGATHER ? " step" : "";

    if (st->phase == COLL_STEP_RD_FOLD || st->phase == COLL_STEP_RD_UNFOLD) {
        snprintf(out, len, "%s", names[st->phase]);
    } else if (st->first == st->last) {
        snprintf(out, len, "%s%s %u/%u", names[st->phase], ring, st->first + 1, total);
    } else {
        snprintf(out, len, "%s%ss %u-%u/%u", names[st->phase], ring, st->first + 1,
                 st->last + 1, total);
    }
}

/* The algorithm's steps, each inside its phase: reduce-scatter within "reduce" (s[2]..s[3]),
 * all-gather within "distribute" (s[3]..s[4]), recursive doubling within both (s[2]..s[4]). */
static void request_steps(coll_timeline_t *tl, int tid, const coll_request_t *r,
                          const uint64_t s[6])
{
    coll_req_step_t st[COLL_MAX_STEPS];
    uint32_t n = coll__req_decode_steps(r, st), total[COLL_STEP_RD_UNFOLD + 1] = {0};
    uint64_t end = s[2];
    char name[64];

    for (uint32_t i = 0; i < n; i++) {
        total[st[i].phase] = st[i].last + 1;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t lo = st[i].phase == COLL_STEP_ALLGATHER ? s[3] : s[2];
        uint64_t hi = st[i].phase == COLL_STEP_REDUCE_SCATTER ? s[3] : s[4];
        uint64_t begin = end < lo ? lo : (end > hi ? hi : end);

        end = st[i].end_ns < begin ? begin : (st[i].end_ns > hi ? hi : st[i].end_ns);
        step_name(&st[i], total[st[i].phase], name, sizeof(name));
        appendf(tl, "{\"name\":\"%s\",\"cat\":\"step\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                    "\"ts\":" TS_FMT ",\"dur\":" TS_FMT "}", name, tl->rank, tid,
                TS_ARG(begin), TS_ARG(end - begin));
    }
}

void coll__timeline_request(coll_timeline_t *tl, const coll_request_t *r)
{
    char e1[96], e2[64];
    uint64_t s[6];
    int tid;

    if (tl == NULL || tl->fd < 0 || r->kind != COLL_REQ_COLLECTIVE || r->status != COLL_OK ||
        r->timing.submit_ns == 0) {
        return;
    }
    phase_stamps(&r->timing, s);
    tid = track_tid(tl, r->track[0] ? r->track : "collectives",
                    r->bucket >= 0 ? 1000 + r->bucket : -1);
    appendf(tl, "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
                "\"ts\":" TS_FMT ",\"dur\":" TS_FMT ",\"args\":{\"collective\":\"%s\","
                "\"bucket\":%ld,\"iteration\":%llu,\"count\":%llu,\"bytes\":%llu,"
                "\"dtype\":\"%s\",\"op\":\"%s\",\"key\":%llu,\"algo\":\"%s\"}}",
            esc(r->name[0] ? r->name : coll_name(r->coll), e1, sizeof(e1)), coll_name(r->coll),
            tl->rank, tid, TS_ARG(s[0]), TS_ARG(s[5] - s[0]), coll_name(r->coll), r->bucket,
            (unsigned long long)r->iteration, (unsigned long long)r->count,
            (unsigned long long)(r->count * coll_dtype_size((coll_dtype_t)r->dtype)),
            coll_dtype_name((coll_dtype_t)r->dtype), coll_redop_name((coll_redop_t)r->redop),
            (unsigned long long)r->key, esc(r->algo, e2, sizeof(e2)));
    appendf(tl, "{\"name\":\"submit\",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":%d,"
                "\"ts\":" TS_FMT "}", tl->rank, tid, TS_ARG(s[0]));
    if (r->timing.done_ns != 0) { /* without the daemon's times: the request alone */
        request_phases(tl, tid, s);
        request_steps(tl, tid, r, s);
    }
}

void coll__req_label(coll_request_t *r, const char *track, const char *name, uint64_t iteration,
                     long bucket)
{
    pthread_mutex_lock(&r->comm->lock);
    snprintf(r->track, sizeof(r->track), "%s", track);
    snprintf(r->name, sizeof(r->name), "%s", name);
    r->iteration = iteration;
    r->bucket = bucket;
    pthread_mutex_unlock(&r->comm->lock);
}

/* ---- public --------------------------------------------------------------------------------- */

coll_status_t coll_timeline_span(coll_comm_t *comm, const char *track, const char *name,
                                 uint64_t begin_ns, uint64_t end_ns)
{
    coll_comm_t *c;
    int bad = end_ns < begin_ns;

    COLL_ARG_CHECK(NULL, comm);
    COLL_ARG_CHECK(comm, track);
    COLL_ARG_CHECK(comm, name);
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    if (bad) {
        coll__set_error(c, "coll_timeline_span: end before begin");
    } else {
        coll__timeline_span(c->timeline, track, name, begin_ns, end_ns);
    }
    pthread_mutex_unlock(&c->lock);
    return bad ? COLL_ERR_INVALID : COLL_OK;
}

int coll_timeline_enabled(coll_comm_t *comm)
{
    coll_comm_t *c;
    int on;

    COLL_ARG_CHECK_OR(NULL, comm, 0);
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    on = c->timeline != NULL && c->timeline->fd >= 0;
    pthread_mutex_unlock(&c->lock);
    return on;
}

coll_status_t coll_timeline_flush(coll_comm_t *comm)
{
    coll_comm_t *c;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    c = comm->conn;
    pthread_mutex_lock(&c->lock);
    st = coll__timeline_flush(c->timeline);
    pthread_mutex_unlock(&c->lock);
    return st;
}
