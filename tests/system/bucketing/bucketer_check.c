/*
 * bucketer_check: the gradient bucketer (coll_bucketer_*) on real daemons, run as every rank of
 * a job by collective-launch. One scenario per run (--test):
 *
 *   layout   bucket assignment from COLL_BUCKET_CAP_MB / COLL_FIRST_BUCKET_CAP_MB (set by the
 *            test to 4 KiB / 1 KiB) against a layout computed by hand; explicit caps win over
 *            the environment; a malformed variable is refused; one iteration's results; a
 *            bitwise reduction's bucketer refuses a float parameter, naming both.
 *   rebuild  rank 0 reports its gradients in one order, the other ranks in others: after the
 *            first wait_all every rank has the layout rank 0's order gives (by hand), the
 *            reduced gradients moved with it, and later iterations are correct; with rebuild
 *            off the layout stays.
 *   unused   a parameter marked unused on one rank, one never reported on another (detected by
 *            wait_all), one reported by nobody: results are the average with zeros from those
 *            ranks, the counters say so, nothing hangs; reporting twice or an unknown parameter
 *            is refused.
 *   order    every rank reports in its own random order, new every iteration, so buckets fill
 *            and are submitted in different orders on different ranks: results stay exact.
 *   timeout  the last rank reaches wait_all 1.5 s late: the others' wait_all(300 ms) returns
 *            COLL_ERR_TIMEDOUT within the bound, saying what is pending, and so do 100
 *            wait_all(2 ms), none before its 2 ms; waiting again succeeds.
 *   stall    (job timeout COLL_TIMEOUT_MS = 2000) the last rank never reports its gradients:
 *            the others' wait_all with no bound of its own ends with the daemon's
 *            COLL_ERR_TIMEDOUT within the job's timeout + 1 s, and its message names that rank.
 *
 * Expected values are computed here, independently of the library: rank r's gradient element i
 * of parameter p in iteration t is the small integer grad_value(r, p, i, t), so every sum is
 * exact in float32 and the average is sum / world rounded once, as collective.h documents.
 * Exit status 0 when every check passed; messages name the rank, parameter and element.
 */
#include <collective.h>

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PARAMS 16
#define WAIT_MS 30000
#define SHORT_WAITS 100 /* wait_all(2 ms) calls while the last rank is late */

static int g_rank, g_world, g_failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "bucketer_check: rank %d: %s:%d: ", g_rank, __func__, __LINE__);       \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            g_failures++;                                                                          \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#define CHECK_ST(call)                                                                             \
    do {                                                                                           \
        coll_status_t st_ = (call);                                                                \
        CHECK(st_ == COLL_OK, "%s: %s: %s", #call, coll_err_name(st_), last_error);                \
    } while (0)

static const char *last_error = "";

/* A model: parameter sizes in floats, registered in this order. */
typedef struct {
    size_t n;
    size_t count[MAX_PARAMS];
} model_t;

static float grad_value(int rank, size_t p, size_t i, int iter)
{
    return (float)((rank + 1) * 3 + (int)((p * 7 + i) % 13) + iter);
}

/* Who contributes param p this iteration (1) or sends zeros (0). */
typedef int (*contributes_fn)(int rank, size_t p, int iter);

static int everyone(int rank, size_t p, int iter)
{
    return 1;
}

static float expected(size_t p, size_t i, int iter, contributes_fn who)
{
    long sum = 0;

    for (int r = 0; r < g_world; r++) {
        sum += who(r, p, iter) ? (long)grad_value(r, p, i, iter) : 0;
    }
    return (float)sum / (float)g_world;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
    return now_ns() / 1000000;
}

static coll_status_t make_bucketer(coll_comm_t *comm, const model_t *m, size_t first_cap,
                                   size_t cap, int rebuild, coll_bucketer_t **b)
{
    coll_bucketer_params_t p = {COLL_BUCKETER_PARAM_CAP | COLL_BUCKETER_PARAM_FIRST_CAP |
                                    COLL_BUCKETER_PARAM_REBUILD | COLL_BUCKETER_PARAM_NAME,
                                cap, first_cap, COLL_AVG, rebuild, 0, COLL_ALGO_AUTO, "check",
                                {COLL_COMPRESS_NONE, 0.0, 0, 0, 0, 0}};
    coll_status_t st = coll_bucketer_create(comm, first_cap ? &p : NULL, b);
    char name[32];

    for (size_t k = 0; st == COLL_OK && k < m->n; k++) {
        size_t idx;
        snprintf(name, sizeof(name), "p%zu", k);
        st = coll_bucketer_add_param(*b, m->count[k], COLL_FLOAT32, name, &idx);
        if (st == COLL_OK && idx != k) {
            st = COLL_ERR_INVALID;
        }
    }
    last_error = st == COLL_OK ? "" : coll_comm_last_error(comm);
    return st;
}

/* Compare the layout with buckets given as -1-terminated member lists; offsets follow. */
static int check_layout(coll_bucketer_t *b, const model_t *m, const int want[][MAX_PARAMS + 1],
                        size_t nbuckets)
{
    coll_bucketer_stats_t s;
    coll_bucketer_param_info_t seal;

    last_error = coll_bucketer_last_error(b);
    CHECK_ST(coll_bucketer_param_info(b, 0, &seal)); /* stats count buckets once sealed */
    CHECK_ST(coll_bucketer_stats(b, &s));
    CHECK(s.num_buckets == nbuckets, "%zu buckets, expected %zu", s.num_buckets, nbuckets);
    for (size_t k = 0; k < nbuckets; k++) {
        coll_bucketer_bucket_info_t bi;
        size_t off = 0, j = 0;
        CHECK_ST(coll_bucketer_bucket_info(b, k, &bi));
        for (; want[k][j] >= 0; j++) {
            coll_bucketer_param_info_t pi;
            size_t p = (size_t)want[k][j];
            CHECK(j < bi.num_params && bi.params[j] == p, "bucket %zu member %zu: %zu, expected "
                  "p%zu", k, j, j < bi.num_params ? bi.params[j] : (size_t)-1, p);
            CHECK_ST(coll_bucketer_param_info(b, p, &pi));
            CHECK(pi.bucket == k && pi.offset == off, "p%zu at bucket %zu offset %zu, expected "
                  "%zu / %zu", p, pi.bucket, pi.offset, k, off);
            off += m->count[p];
        }
        CHECK(bi.num_params == j && bi.count == off, "bucket %zu: %zu params, %zu elements; "
              "expected %zu, %zu", k, bi.num_params, bi.count, j, off);
    }
    return 0;
}

static int fill(coll_bucketer_t *b, const model_t *m, size_t p, int iter)
{
    float *g;

    last_error = coll_bucketer_last_error(b);
    CHECK_ST(coll_bucketer_param_grad(b, p, (void **)&g));
    for (size_t i = 0; i < m->count[p]; i++) {
        g[i] = grad_value(g_rank, p, i, iter);
    }
    return 0;
}

/* Write and report every parameter in @p order (n entries). */
static int backward(coll_bucketer_t *b, const model_t *m, const size_t *order, size_t n,
                    int iter)
{
    for (size_t k = 0; k < n; k++) {
        if (fill(b, m, order[k], iter) != 0) {
            return -1;
        }
        last_error = coll_bucketer_last_error(b);
        CHECK_ST(coll_bucketer_grad_ready(b, order[k]));
    }
    return 0;
}

static int check_values(coll_bucketer_t *b, const model_t *m, int iter, contributes_fn who)
{
    for (size_t p = 0; p < m->n; p++) {
        float *g;
        last_error = coll_bucketer_last_error(b);
        CHECK_ST(coll_bucketer_param_grad(b, p, (void **)&g));
        for (size_t i = 0; i < m->count[p]; i++) {
            float want = expected(p, i, iter, who);
            CHECK(g[i] == want, "iteration %d p%zu[%zu] = %.9g, expected %.9g", iter, p, i,
                  (double)g[i], (double)want);
        }
    }
    return 0;
}

static int wait_all(coll_bucketer_t *b, int timeout_ms)
{
    last_error = coll_bucketer_last_error(b);
    CHECK_ST(coll_bucketer_wait_all(b, timeout_ms));
    return 0;
}

static void reverse(size_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        order[k] = n - 1 - k;
    }
}

/* ---- layout ----------------------------------------------------------------------------------- */

/* Sizes 1200, 40, 2800, 200, 800, 20 bytes; caps from the environment: first 1 KiB, then
 * 4 KiB. Walking p5..p0: 20 + 800 + 200 = 1020 < 1024, + 2800 closes bucket 0 = {p5 p4 p3 p2};
 * 40 + 1200 stays below 4096: bucket 1 = {p1 p0}. */
static int test_layout(coll_comm_t *comm)
{
    static const model_t m = {6, {300, 10, 700, 50, 200, 5}};
    static const int want[][MAX_PARAMS + 1] = {{5, 4, 3, 2, -1}, {1, 0, -1}};
    static const int one[][MAX_PARAMS + 1] = {{5, 4, 3, 2, 1, 0, -1}};
    size_t order[6];
    coll_bucketer_t *b, *big;
    coll_bucketer_stats_t s;
    const char *cap = getenv("COLL_BUCKET_CAP_MB");

    CHECK(cap != NULL && getenv("COLL_FIRST_BUCKET_CAP_MB") != NULL,
          "the test sets COLL_BUCKET_CAP_MB and COLL_FIRST_BUCKET_CAP_MB");
    CHECK_ST(make_bucketer(comm, &m, 0, 0, 1, &b));
    if (check_layout(b, &m, want, 2) != 0) {
        return -1;
    }
    reverse(order, m.n);
    if (backward(b, &m, order, m.n, 0) != 0 || wait_all(b, WAIT_MS) != 0 ||
        check_values(b, &m, 0, everyone) != 0) {
        return -1;
    }
    coll_bucketer_stats(b, &s);
    CHECK(s.rebuilt && !s.layout_changed && s.iterations == 1 && s.buckets_late == 0,
          "stats after the first iteration: rebuilt %d changed %d iterations %llu late %zu",
          s.rebuilt, s.layout_changed, (unsigned long long)s.iterations, s.buckets_late);
    coll_bucketer_destroy(b);
    /* Explicit caps win over the environment. */
    CHECK_ST(make_bucketer(comm, &m, SIZE_MAX, SIZE_MAX, 1, &big));
    if (check_layout(big, &m, one, 1) != 0) {
        return -1;
    }
    coll_bucketer_destroy(big);
    /* A malformed variable is refused, naming it. */
    setenv("COLL_BUCKET_CAP_MB", "25MB", 1);
    CHECK(coll_bucketer_create(comm, NULL, &b) == COLL_ERR_INVALID &&
          strstr(coll_comm_last_error(comm), "COLL_BUCKET_CAP_MB") != NULL,
          "COLL_BUCKET_CAP_MB=25MB accepted (%s)", coll_comm_last_error(comm));
    setenv("COLL_BUCKET_CAP_MB", cap, 1);
    /* A bucketer of a bitwise reduction takes integer parameters only, and says why. */
    coll_bucketer_params_t bor = {.field_mask = COLL_BUCKETER_PARAM_OP, .op = COLL_BOR};
    CHECK_ST(coll_bucketer_create(comm, &bor, &b));
    CHECK(coll_bucketer_add_param(b, 10, COLL_INT64, "i", NULL) == COLL_OK &&
          coll_bucketer_add_param(b, 10, COLL_FLOAT32, "f", NULL) == COLL_ERR_INVALID &&
          strstr(coll_comm_last_error(comm), "reduction bor does not apply to float32") != NULL,
          "a float32 parameter of a bor bucketer: %s", coll_comm_last_error(comm));
    coll_bucketer_destroy(b);
    return 0;
}

/* ---- rebuild ---------------------------------------------------------------------------------- */

/* Six parameters of 400 bytes, first cap 500, cap 1000. Initial walk p5..p0: {p5 p4},
 * {p3 p2 p1}, {p0}. Rank 0's ready order 0 2 4 1 3 5 gives {p0 p2} (800 >= 500),
 * {p4 p1 p3} (1200 >= 1000), {p5}. */
static int test_rebuild(coll_comm_t *comm)
{
    static const model_t m = {6, {100, 100, 100, 100, 100, 100}};
    static const int initial[][MAX_PARAMS + 1] = {{5, 4, -1}, {3, 2, 1, -1}, {0, -1}};
    static const int rebuilt[][MAX_PARAMS + 1] = {{0, 2, -1}, {4, 1, 3, -1}, {5, -1}};
    static const size_t order0[] = {0, 2, 4, 1, 3, 5};
    size_t order[6];
    coll_bucketer_t *b, *fixed;
    coll_bucketer_stats_t s;

    for (int pass = 0; pass < 2; pass++) {
        int rebuild = pass == 0;
        CHECK_ST(make_bucketer(comm, &m, 500, 1000, rebuild, &b));
        if (check_layout(b, &m, initial, 3) != 0) {
            return -1;
        }
        /* Rank 0 its order; the others reversed or rotated, so they disagree with it. */
        for (size_t k = 0; k < 6; k++) {
            order[k] = g_rank == 0 ? order0[k] : (g_rank % 2 ? 5 - k : (k + (size_t)g_rank) % 6);
        }
        if (backward(b, &m, order, 6, 0) != 0 || wait_all(b, WAIT_MS) != 0 ||
            check_layout(b, &m, rebuild ? rebuilt : initial, 3) != 0 ||
            check_values(b, &m, 0, everyone) != 0) {
            return -1;
        }
        coll_bucketer_stats(b, &s);
        CHECK(s.rebuilt == rebuild && s.layout_changed == rebuild, "rebuilt %d changed %d",
              s.rebuilt, s.layout_changed);
        for (int it = 1; it < 4; it++) {
            reverse(order, 6);
            if (backward(b, &m, order, 6, it) != 0 || wait_all(b, WAIT_MS) != 0 ||
                check_values(b, &m, it, everyone) != 0) {
                return -1;
            }
        }
        fixed = b;
        coll_bucketer_destroy(fixed);
    }
    return 0;
}

/* ---- unused ----------------------------------------------------------------------------------- */

/* Iteration 0: rank 1 marks p1 unused, rank world-1 (rank 0 in a job of one) never reports p2,
 * nobody reports p3; iteration 1: everyone reports everything. */
static int contributes_unused(int rank, size_t p, int iter)
{
    if (iter != 0) {
        return 1;
    }
    return !((p == 1 && rank == 1) || (p == 2 && rank == g_world - 1) || p == 3);
}

static int test_unused(coll_comm_t *comm)
{
    static const model_t m = {5, {64, 300, 17, 40, 1000}};
    coll_bucketer_t *b;
    coll_bucketer_stats_t s;
    size_t order[5];

    CHECK_ST(make_bucketer(comm, &m, 256, 1024, 1, &b));
    reverse(order, m.n);
    for (size_t k = 0; k < m.n; k++) {
        size_t p = order[k];
        if (fill(b, &m, p, 0) != 0) {
            return -1;
        }
        if (!contributes_unused(g_rank, p, 0) && p == 1) {
            last_error = coll_bucketer_last_error(b);
            CHECK_ST(coll_bucketer_mark_unused(b, p));
        } else if (contributes_unused(g_rank, p, 0)) {
            last_error = coll_bucketer_last_error(b);
            CHECK_ST(coll_bucketer_grad_ready(b, p));
        }
    }
    CHECK(coll_bucketer_grad_ready(b, 0) == COLL_ERR_INVALID, "p0 reported twice was accepted");
    CHECK(coll_bucketer_grad_ready(b, 99) == COLL_ERR_INVALID, "p99 was accepted");
    if (wait_all(b, WAIT_MS) != 0 || check_values(b, &m, 0, contributes_unused) != 0) {
        return -1;
    }
    coll_bucketer_stats(b, &s);
    {
        size_t marked = g_rank == 1, detected = 1 + (g_rank == g_world - 1);
        CHECK(s.unused_marked == marked && s.unused_detected == detected &&
              s.unused_detected_total == detected && s.buckets_late >= 1,
              "marked %zu (expected %zu), detected %zu (expected %zu), late buckets %zu",
              s.unused_marked, marked, s.unused_detected, detected, s.buckets_late);
    }
    reverse(order, m.n);
    if (backward(b, &m, order, m.n, 1) != 0 || wait_all(b, WAIT_MS) != 0 ||
        check_values(b, &m, 1, everyone) != 0) {
        return -1;
    }
    coll_bucketer_stats(b, &s);
    CHECK(s.unused_detected == 0 && s.unused_marked == 0 && s.buckets_late == 0,
          "second iteration: detected %zu marked %zu late %zu", s.unused_detected,
          s.unused_marked, s.buckets_late);
    coll_bucketer_destroy(b);
    return 0;
}

/* ---- order ------------------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int test_order(coll_comm_t *comm)
{
    static const model_t m = {9, {5000, 40, 20000, 300, 1, 7000, 64, 12000, 10}};
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(g_rank + 1);
    coll_bucketer_t *b;
    coll_bucketer_stats_t s;
    size_t order[9];

    /* 4 KiB first cap, 32 KiB cap: about five buckets. */
    CHECK_ST(make_bucketer(comm, &m, 4096, 32768, 1, &b));
    for (int it = 0; it < 6; it++) {
        for (size_t k = 0; k < m.n; k++) {
            order[k] = k;
        }
        for (size_t k = m.n - 1; k > 0; k--) {
            size_t j = rng_next(&seed) % (k + 1), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        if (backward(b, &m, order, m.n, it) != 0 || wait_all(b, WAIT_MS) != 0 ||
            check_values(b, &m, it, everyone) != 0) {
            return -1;
        }
    }
    coll_bucketer_stats(b, &s);
    CHECK(s.iterations == 6 && s.num_buckets >= 3, "%llu iterations, %zu buckets",
          (unsigned long long)s.iterations, s.num_buckets);
    coll_bucketer_destroy(b);
    return 0;
}

/* ---- timeout ---------------------------------------------------------------------------------- */

static int test_timeout(coll_comm_t *comm)
{
    static const model_t m = {3, {1000, 10, 3000}};
    coll_bucketer_t *b;
    size_t order[3];
    int late = g_rank == g_world - 1;
    uint64_t t0;
    coll_status_t st;

    CHECK_ST(make_bucketer(comm, &m, 1024, 8192, 1, &b));
    reverse(order, m.n);
    if (late) {
        usleep(1500 * 1000);
    }
    if (backward(b, &m, order, m.n, 0) != 0) {
        return -1;
    }
    if (!late) {
        t0 = now_ms();
        st = coll_bucketer_wait_all(b, 300);
        CHECK(st == COLL_ERR_TIMEDOUT && strstr(coll_bucketer_last_error(b), "not complete"),
              "wait_all(300) with a late rank: %s (%s)", coll_err_name(st),
              coll_bucketer_last_error(b));
        CHECK(now_ms() - t0 < 1000, "wait_all(300) took %llu ms",
              (unsigned long long)(now_ms() - t0));
        /* Short bounds, many times: a wait that timed out even a little early took its own
         * bound for a failed bucket, and the successful wait below returned that error. */
        for (int i = 0; i < SHORT_WAITS; i++) {
            t0 = now_ns();
            st = coll_bucketer_wait_all(b, 2);
            CHECK(st == COLL_ERR_TIMEDOUT && now_ns() - t0 >= 2000000,
                  "wait_all(2) #%d: %s after %llu us", i, coll_err_name(st),
                  (unsigned long long)(now_ns() - t0) / 1000);
        }
    }
    if (wait_all(b, WAIT_MS) != 0 || check_values(b, &m, 0, everyone) != 0) {
        return -1;
    }
    coll_bucketer_destroy(b);
    return 0;
}

/* ---- stall ------------------------------------------------------------------------------------ */

static int test_stall(coll_comm_t *comm)
{
    static const model_t m = {3, {1000, 10, 3000}};
    coll_bucketer_t *b;
    size_t order[3];
    char who[32];
    uint64_t t0 = now_ms();
    coll_status_t st;

    CHECK_ST(make_bucketer(comm, &m, 1024, 8192, 1, &b));
    reverse(order, m.n);
    if (g_rank == g_world - 1) {
        usleep(4000 * 1000); /* past the job's timeout: the job has failed by then */
        coll_bucketer_destroy(b);
        return 0;
    }
    if (backward(b, &m, order, m.n, 0) != 0) {
        return -1;
    }
    st = coll_bucketer_wait_all(b, -1);
    snprintf(who, sizeof(who), "rank %d", g_world - 1);
    CHECK(st == COLL_ERR_TIMEDOUT && strstr(coll_bucketer_last_error(b), who) != NULL,
          "wait_all with rank %d stalled: %s (%s), expected COLL_ERR_TIMEDOUT naming it",
          g_world - 1, coll_err_name(st), coll_bucketer_last_error(b));
    CHECK(now_ms() - t0 < 3000 + 500, "wait_all returned after %llu ms (job timeout 2000 ms)",
          (unsigned long long)(now_ms() - t0));
    coll_bucketer_destroy(b);
    return 0;
}

/* ---- main ------------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    int (*fn)(coll_comm_t *);
} tests[] = {
    {"layout", test_layout}, {"rebuild", test_rebuild}, {"unused", test_unused},
    {"order", test_order},   {"timeout", test_timeout}, {"stall", test_stall},
};

int main(int argc, char **argv)
{
    const char *which = argc == 3 && strcmp(argv[1], "--test") == 0 ? argv[2] : NULL;
    coll_comm_t *comm;
    int rc = -1;

    for (size_t t = 0; which != NULL && t < sizeof(tests) / sizeof(tests[0]); t++) {
        if (strcmp(which, tests[t].name) == 0) {
            if (coll_comm_create(NULL, &comm) != COLL_OK) {
                fprintf(stderr, "bucketer_check: joining: %s\n", coll_comm_last_error(NULL));
                return 1;
            }
            g_rank = coll_comm_rank(comm);
            g_world = coll_comm_world_size(comm);
            rc = tests[t].fn(comm);
            coll_comm_destroy(comm);
            break;
        }
    }
    if (rc == -1 && g_failures == 0) {
        fprintf(stderr, "usage: bucketer_check --test layout|rebuild|unused|order|timeout|stall\n");
        return 2;
    }
    if (rc == 0 && g_failures == 0 && g_rank == 0) {
        printf("bucketer_check: %s: passed on %d ranks\n", which, g_world);
    }
    return rc == 0 && g_failures == 0 ? 0 : 1;
}
