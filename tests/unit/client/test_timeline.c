/*
 * The COLL_TIMELINE writer (client/trace/timeline.c): file names (%r, directory, ".json" suffix),
 * the events of a request (its phases nested in it, with their names, times and arguments),
 * spans, skipped requests, and that the file is a complete JSON document after every write,
 * not only after close (read back with jansson).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "client/base/base.h"
#include "client/trace/timeline.h"

static char tmpdir[256];

static int setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/coll-test-timeline-XXXXXX");
    return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int teardown(void **state)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

static coll_timeline_t *open_with(const char *value, int rank, int world)
{
    char v[512];
    snprintf(v, sizeof(v), "%s/%s", tmpdir, value);
    setenv("COLL_TIMELINE", v, 1);
    return coll__timeline_open(rank, world);
}

static void assert_file(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    assert_int_equal(access(path, F_OK), 0);
}

/* The file's traceEvents, which must parse as JSON. */
static json_t *load_events(const char *name, json_t **root)
{
    char path[512];
    json_error_t err;
    json_t *ev;

    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    *root = json_load_file(path, 0, &err);
    if (*root == NULL) {
        fail_msg("%s is not JSON: %s at line %d", path, err.text, err.line);
    }
    ev = json_object_get(*root, "traceEvents");
    assert_true(json_is_array(ev));
    return ev;
}

/* Events named @p name with phase @p ph. */
static size_t count_events(json_t *ev, const char *name, const char *ph)
{
    size_t i, n = 0;
    json_t *e;

    json_array_foreach(ev, i, e) {
        n += strcmp(json_string_value(json_object_get(e, "name")), name) == 0 &&
             strcmp(json_string_value(json_object_get(e, "ph")), ph) == 0;
    }
    return n;
}

static json_t *find_event(json_t *ev, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(ev, i, e) {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0) {
            return e;
        }
    }
    fail_msg("no event %s", name);
    return NULL;
}

static void test_file_names(void **state)
{
    static const struct {
        const char *value, *file;
        int rank, world;
    } cases[] = {
        {"t-%r.json", "t-3.json", 3, 4},    /* %r */
        {"dir/", "dir/rank2.json", 2, 4},   /* a directory, created */
        {"dir", "dir/rank1.json", 1, 4},    /* an existing directory */
        {"x.json", "x.1.json", 1, 4},       /* rank before the suffix */
        {"x.json", "x.json", 0, 1},         /* one rank: as it is */
        {"y", "y.5", 5, 8},                 /* no suffix: appended */
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        coll_timeline_t *tl = open_with(cases[i].value, cases[i].rank, cases[i].world);
        assert_non_null(tl);
        coll__timeline_close(tl);
        assert_file(cases[i].file);
    }
    setenv("COLL_TIMELINE", "/nonexistent-dir/x.json", 1);
    assert_null(coll__timeline_open(0, 1)); /* reported on stderr, no timeline */
    unsetenv("COLL_TIMELINE");
    assert_null(coll__timeline_open(0, 1));
}

static coll_request_t fake_request(uint64_t t0, long bucket)
{
    coll_request_t r;

    memset(&r, 0, sizeof(r));
    r.kind = COLL_REQ_COLLECTIVE;
    r.done = 1;
    r.status = COLL_OK;
    r.coll = 0; /* allreduce */
    r.dtype = COLL_FLOAT32;
    r.redop = COLL_AVG;
    r.count = 1000;
    r.key = 42;
    r.bucket = bucket;
    r.iteration = 7;
    snprintf(r.algo, sizeof(r.algo), "ring");
    snprintf(r.track, sizeof(r.track), "b bucket %ld", bucket);
    snprintf(r.name, sizeof(r.name), "bucket %ld", bucket);
    /* submit, ready, peers, reduced, done, complete: 1 ms apart */
    r.timing = (coll_req_timing_t){t0, t0 + 1000000, t0 + 2000000, t0 + 3000000, t0 + 4000000,
                                   t0 + 5000000};
    return r;
}

/* One request: the enclosing event, five phases of 1 ms inside it, the submit instant. */
static void test_request_events(void **state)
{
    coll_timeline_t *tl = open_with("req.json", 0, 1);
    coll_request_t r = fake_request(1000000000, 3);
    json_t *root, *ev, *e, *args;

    assert_non_null(tl);
    coll__timeline_request(tl, &r);
    coll__timeline_close(tl);
    ev = load_events("req.json", &root);
    e = find_event(ev, "bucket 3");
    assert_string_equal(json_string_value(json_object_get(e, "ph")), "X");
    assert_true(json_real_value(json_object_get(e, "ts")) == 1000000.0);
    assert_true(json_real_value(json_object_get(e, "dur")) == 5000.0);
    args = json_object_get(e, "args");
    assert_int_equal(json_integer_value(json_object_get(args, "iteration")), 7);
    assert_int_equal(json_integer_value(json_object_get(args, "bucket")), 3);
    assert_int_equal(json_integer_value(json_object_get(args, "bytes")), 4000);
    assert_string_equal(json_string_value(json_object_get(args, "algo")), "ring");
    assert_string_equal(json_string_value(json_object_get(args, "op")), "avg");
    static const char *const phases[] = {"wait local ranks", "wait other nodes", "reduce",
                                         "distribute", "complete"};
    for (int i = 0; i < 5; i++) {
        json_t *p = find_event(ev, phases[i]);
        assert_true(json_real_value(json_object_get(p, "ts")) == 1000000.0 + 1000.0 * i);
        assert_true(json_real_value(json_object_get(p, "dur")) == 1000.0);
        assert_int_equal(json_integer_value(json_object_get(p, "tid")),
                         json_integer_value(json_object_get(e, "tid")));
    }
    assert_int_equal(count_events(ev, "submit", "i"), 1);
    assert_int_equal(count_events(ev, "thread_name", "M"), 1);
    assert_int_equal(count_events(ev, "process_name", "M"), 1);
    json_decref(root);
}

/* The event named @p name: its ts and dur (microseconds). */
static void assert_span(json_t *ev, const char *name, double ts, double dur)
{
    json_t *e = find_event(ev, name);
    assert_string_equal(json_string_value(json_object_get(e, "cat")), "step");
    if (json_real_value(json_object_get(e, "ts")) != ts ||
        json_real_value(json_object_get(e, "dur")) != dur) {
        fail_msg("%s: ts %.3f dur %.3f, expected %.3f %.3f", name,
                 json_real_value(json_object_get(e, "ts")),
                 json_real_value(json_object_get(e, "dur")), ts, dur);
    }
}

/* Algorithm steps (ready at 1001000 us, peers 1002000, reduced 1003000, done 1004000): ring
 * steps nest in "reduce" and "distribute", each beginning where the previous ended; merged
 * records are named by their range; recursive doubling's steps span reduce to done, and an
 * end past done is cut there. */
static void test_step_events(void **state)
{
    coll_timeline_t *tl = open_with("steps.json", 0, 1);
    coll_request_t ring = fake_request(1000000000, 0), merged = fake_request(2000000000, 1);
    coll_request_t rd = fake_request(3000000000, 2);
    const uint64_t ring_steps[] = {coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 0, 1500),
                                   coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 1, 2000),
                                   coll_ctl_step_pack(COLL_STEP_ALLGATHER, 0, 2400),
                                   coll_ctl_step_pack(COLL_STEP_ALLGATHER, 1, 3000)};
    const uint64_t merged_steps[] = {coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 2, 1500),
                                     coll_ctl_step_pack(COLL_STEP_REDUCE_SCATTER, 5, 2000),
                                     coll_ctl_step_pack(COLL_STEP_ALLGATHER, 5, 3000)};
    const uint64_t rd_steps[] = {coll_ctl_step_pack(COLL_STEP_RD_FOLD, 0, 1200),
                                 coll_ctl_step_pack(COLL_STEP_RD_ROUND, 0, 1600),
                                 coll_ctl_step_pack(COLL_STEP_RD_ROUND, 1, 2000),
                                 coll_ctl_step_pack(COLL_STEP_RD_UNFOLD, 0, 3500)};
    json_t *root, *ev;

    ring.nsteps = 4;
    memcpy(ring.steps, ring_steps, sizeof(ring_steps));
    merged.nsteps = 3;
    memcpy(merged.steps, merged_steps, sizeof(merged_steps));
    rd.nsteps = 4;
    memcpy(rd.steps, rd_steps, sizeof(rd_steps));
    rd.timing.reduced_ns = 0;
    snprintf(rd.algo, sizeof(rd.algo), "rd");
    coll__timeline_request(tl, &ring);
    coll__timeline_request(tl, &merged);
    coll__timeline_request(tl, &rd);
    coll__timeline_close(tl);
    ev = load_events("steps.json", &root);
    assert_span(ev, "reduce-scatter step 1/2", 1002000.0, 500.0);
    assert_span(ev, "reduce-scatter step 2/2", 1002500.0, 500.0);
    assert_span(ev, "all-gather step 1/2", 1003000.0, 400.0);
    assert_span(ev, "all-gather step 2/2", 1003400.0, 600.0);
    assert_span(ev, "reduce-scatter steps 1-3/6", 2002000.0, 500.0);
    assert_span(ev, "reduce-scatter steps 4-6/6", 2002500.0, 500.0);
    assert_span(ev, "all-gather steps 1-6/6", 2003000.0, 1000.0);
    assert_span(ev, "fold", 3002000.0, 200.0);
    assert_span(ev, "round 1/2", 3002200.0, 400.0);
    assert_span(ev, "round 2/2", 3002600.0, 400.0);
    assert_span(ev, "unfold", 3003000.0, 1000.0);
    json_decref(root);
}

/* Without "reduced" (an algorithm other than the ring) the reduction lasts until done; without
 * daemon times only the request itself is drawn. Failed requests and allocations are left
 * out. Spans go to their own track. */
static void test_partial_and_skipped(void **state)
{
    coll_timeline_t *tl = open_with("partial.json", 1, 2);
    coll_request_t rd = fake_request(1000000000, 0), bare = fake_request(2000000000, 1);
    coll_request_t failed = fake_request(3000000000, 2), alloc = fake_request(4000000000, 3);
    json_t *root, *ev;

    rd.timing.reduced_ns = 0;
    bare.timing.ready_ns = bare.timing.peers_ns = bare.timing.reduced_ns = 0;
    bare.timing.done_ns = 0;
    failed.status = COLL_ERR_PEER;
    alloc.kind = COLL_REQ_ALLOC;
    coll__timeline_request(tl, &rd);
    coll__timeline_request(tl, &bare);
    coll__timeline_request(tl, &failed);
    coll__timeline_request(tl, &alloc);
    coll__timeline_span(tl, "step", "backward", 5000000000, 5002000000);
    coll__timeline_close(tl);
    ev = load_events("partial.1.json", &root);
    assert_int_equal(count_events(ev, "reduce", "X"), 1);
    assert_int_equal(count_events(ev, "distribute", "X"), 0);
    assert_true(json_real_value(json_object_get(find_event(ev, "reduce"), "dur")) == 2000.0);
    assert_int_equal(count_events(ev, "bucket 1", "X"), 1);
    assert_int_equal(count_events(ev, "bucket 2", "X"), 0);
    assert_int_equal(count_events(ev, "bucket 3", "X"), 0);
    assert_int_equal(count_events(ev, "submit", "i"), 2);
    assert_true(json_real_value(json_object_get(find_event(ev, "backward"), "dur")) == 2000.0);
    json_decref(root);
}

/* More events than the buffer holds: the file is complete JSON after the automatic writes
 * (before close), with the events written so far, and after close with all of them. */
static void test_incremental(void **state)
{
    coll_timeline_t *tl = open_with("inc.json", 0, 1);
    json_t *root, *ev;
    size_t mid;

    assert_non_null(tl);
    ev = load_events("inc.json", &root); /* valid from the start */
    assert_int_equal(json_array_size(ev), 0);
    json_decref(root);
    for (int i = 0; i < 600; i++) {
        coll_request_t r = fake_request(1000000000 + (uint64_t)i * 10000000, i % 4);
        coll__timeline_request(tl, &r);
    }
    ev = load_events("inc.json", &root);
    mid = json_array_size(ev);
    assert_true(mid > 100);
    json_decref(root);
    assert_int_equal(coll__timeline_flush(tl), COLL_OK);
    coll__timeline_close(tl);
    ev = load_events("inc.json", &root);
    assert_true(json_array_size(ev) > mid);
    assert_int_equal(count_events(ev, "submit", "i"), 600);
    assert_int_equal(count_events(ev, "thread_name", "M"), 4);
    json_decref(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_names),
        cmocka_unit_test(test_request_events),
        cmocka_unit_test(test_step_events),
        cmocka_unit_test(test_partial_and_skipped),
        cmocka_unit_test(test_incremental),
    };
    return cmocka_run_group_tests_name("timeline", tests, setup, teardown);
}
