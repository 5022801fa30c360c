/* Unit tests of the status server's pieces: HTTP request parsing (base/http.h), the answers
 * to each route (admin/status_server.h), the JSON of /status and the text of /metrics
 * (admin/status_json.h, admin/metrics.h) for a daemon built by hand with one job, and the counters
 * (core/stats.h).
 * Nothing listens: the system tests (tests/system/ops) do that with real daemons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "admin/admin.h"
#include "admin/metrics.h"
#include "admin/report.h"
#include "admin/status_json.h"
#include "admin/status_server.h"
#include "base/http.h"
#include "core/job.h"
#include "core/stats.h"
#include "engine/op.h"

static void assert_contains(const char *text, const char *part)
{
    if (strstr(text, part) == NULL) {
        fail_msg("\"%s\" not found in:\n%s", part, text);
    }
}

/* ---- HTTP requests ---- */

static int feed(coll_http_request_t *r, const char *text)
{
    return coll_http_request_feed(r, text, strlen(text));
}

static void test_request_in_pieces(void **state)
{
    coll_http_request_t r;
    char path[64];

    coll_http_request_init(&r);
    assert_int_equal(feed(&r, "GET /met"), 0);
    assert_int_equal(feed(&r, "rics?x=1 HTTP/1.1\r\nHost: a\r\n"), 0);
    assert_int_equal(feed(&r, "\r\n"), 1);
    assert_string_equal(coll_http_request_method(&r), "GET");
    assert_int_equal(coll_http_request_path(&r, path, sizeof(path)), 0);
    assert_string_equal(path, "/metrics");
}

static void test_request_http10_and_body_ignored(void **state)
{
    coll_http_request_t r;

    coll_http_request_init(&r);
    assert_int_equal(feed(&r, "POST /status HTTP/1.0\r\nContent-Length: 5\r\n\r\nhello"), 1);
    assert_string_equal(coll_http_request_method(&r), "POST");
}

static void test_request_garbage_is_400(void **state)
{
    coll_http_request_t r;

    coll_http_request_init(&r);
    assert_int_equal(feed(&r, "\x01\x02 not http\r\n\r\n"), -1);
    assert_int_equal(r.error, 400);
}

static void test_request_long_url_is_414(void **state)
{
    coll_http_request_t r;
    char line[COLL_HTTP_URL_MAX + 64];

    memset(line, 'a', sizeof(line));
    memcpy(line, "GET /", 5);
    line[sizeof(line) - 1] = '\0';
    coll_http_request_init(&r);
    assert_int_equal(feed(&r, line), -1);
    assert_int_equal(r.error, 414);
}

static void test_request_endless_headers_are_431(void **state)
{
    coll_http_request_t r;
    int rc = 0;

    coll_http_request_init(&r);
    feed(&r, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 2000 && rc == 0; i++) {
        rc = feed(&r, "X-Filler: 0123456789012345678901234567890123456789\r\n");
    }
    assert_int_equal(rc, -1);
    assert_int_equal(r.error, 431);
}

static void test_response_format(void **state)
{
    size_t len;
    char *full = coll_http_response(200, "text/plain", NULL, "hi\n", 3, 0, &len);
    char *head = coll_http_response(200, "text/plain", "Allow: GET\r\n", "hi\n", 3, 1, &len);

    assert_contains(full, "HTTP/1.1 200 OK\r\n");
    assert_contains(full, "Content-Length: 3\r\n");
    assert_contains(full, "Connection: close\r\n\r\nhi\n");
    assert_contains(head, "Allow: GET\r\n\r\n");
    assert_int_equal(head[len - 1], '\n');
    assert_int_equal(strstr(head, "hi") == NULL, 1);
    free(full);
    free(head);
}

/* ---- a daemon with one job, built by hand ---- */

typedef struct {
    coll_daemon_t d;
    coll_admin_t svc;
    coll_job_t job;
    coll_session_t s[2];
    coll_session_t *locals[2];
    uint32_t ranks[2];
    coll_node_t nodes[2];
    uint32_t node_ranks[2][2];
    uint32_t rank_node[4], rank_local[4];
} world_t;

static world_t w;
static const coll_impl_t fake_impl = {.name = "fake"};

static int world_setup(void **state)
{
    memset(&w, 0, sizeof(w));
    coll_list_init(&w.d.sessions);
    coll_list_init(&w.d.jobs);
    coll_list_init(&w.d.peer_links);
    w.d.auth.mode = COLL_PEERS_AUTHENTICATED;
    w.d.cfg.peer_secret_file = "/etc/collectived/peer.secret";
    snprintf(w.d.hostname, sizeof(w.d.hostname), "node-a");
    snprintf(w.d.control_addr, sizeof(w.d.control_addr), "10.0.0.1:29510");
    w.d.cfg.socket = "/run/x/c.sock";
    w.d.cfg.status_socket = "/run/x/status.sock";
    w.d.cfg.config_file = "";
    w.d.admin = &w.svc;
    w.svc.d = &w.d;
    coll_stats_init(&w.d.stats, 1024);
    for (int i = 0; i < 2; i++) {
        w.s[i] = (coll_session_t){.d = &w.d, .id = 10 + i, .local_rank = i, .rank = i};
        w.s[i].cred.pid = 1000 + i;
        w.s[i].cred.uid = 500;
        coll_list_push(&w.d.sessions, &w.s[i].link);
        w.locals[i] = &w.s[i];
        w.ranks[i] = i;
        w.node_ranks[0][i] = i;
        w.node_ranks[1][i] = 2 + i;
    }
    for (int r = 0; r < 4; r++) {
        w.rank_node[r] = (uint32_t)r / 2;
        w.rank_local[r] = (uint32_t)r % 2;
    }
    w.job = (coll_job_t){.d = &w.d, .state = COLL_JOB_READY, .world_size = 4, .local_size = 2,
                         .njoined = 2, .locals = w.locals, .ranks = w.ranks, .nnodes = 2,
                         .nodes = w.nodes, .rank_node = w.rank_node, .rank_local = w.rank_local};
    snprintf(w.job.id, sizeof(w.job.id), "job\"7");
    for (int n = 0; n < 2; n++) {
        w.nodes[n] = (coll_node_t){.job = &w.job, .index = n, .nranks = 2,
                                   .ranks = w.node_ranks[n]};
        snprintf(w.nodes[n].host, sizeof(w.nodes[n].host), "node-%c", 'a' + n);
    }
    coll_list_init(&w.job.engine.ops);
    coll_list_init(&w.job.groups);
    assert_int_equal(coll_group_world(&w.job), COLL_OK);
    assert_int_equal(coll_pool_create("test", 1 << 20, &w.job.pool), COLL_OK);
    coll_list_push(&w.d.jobs, &w.job.link);
    return 0;
}

static int world_teardown(void **state)
{
    coll_op_t *op, *tmp;
    coll_list_for_each_safe(op, tmp, &w.job.engine.ops, coll_op_t, link)
    {
        op->done = 1;
        coll_list_init(&op->posted);
        coll_op_maybe_free(op);
    }
    coll_group_free_all(&w.job);
    coll_pool_destroy(w.job.pool);
    return 0;
}

static coll_op_t *add_op(uint64_t key, uint32_t submitted_mask)
{
    coll_desc_t desc = {.coll = COLL_KIND_ALLREDUCE, .key = key, .count = 1000,
                        .dtype = COLL_FLOAT32, .op = COLL_SUM, .world_size = 4};
    coll_op_t *op = coll_op_create(&w.job, w.job.world, &desc);

    assert_non_null(op);
    for (uint32_t l = 0; l < 2; l++) {
        if (submitted_mask & (1u << l)) {
            op->members[l].session = &w.s[l];
        }
    }
    return op;
}

static json_t *status_doc(void)
{
    size_t len;
    char *text = coll_report_status(&w.d, &len);
    json_error_t err;
    json_t *doc;

    assert_non_null(text);
    doc = json_loadb(text, len, 0, &err);
    if (doc == NULL) {
        fail_msg("not JSON (%s):\n%s", err.text, text);
    }
    free(text);
    return doc;
}

static void test_status_names_missing_rank(void **state)
{
    json_t *doc, *op, *missing;

    add_op(7, 1u << 0);
    doc = status_doc();
    assert_string_equal(json_string_value(json_object_get(doc, "version")), "0.1.0");
    op = json_array_get(json_object_get(json_array_get(json_object_get(doc, "jobs"), 0),
                                        "operations"), 0);
    assert_string_equal(json_string_value(json_object_get(op, "state")), "queued");
    assert_string_equal(json_string_value(json_object_get(op, "collective")), "allreduce");
    assert_int_equal(json_integer_value(json_object_get(op, "bytes")), 4000);
    missing = json_object_get(op, "missing_ranks");
    assert_int_equal(json_array_size(missing), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(missing, 0), "rank")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(missing, 0), "pid")), 1001);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(op, "submitted_ranks"), 0)),
                     0);
    json_decref(doc);
}

static void test_status_running_op_waits_on_node(void **state)
{
    coll_op_t *op = add_op(8, 3);
    coll_xfer_t x = {.op = op, .peer = 1};
    json_t *doc, *o, *wait;

    op->impl = &fake_impl;
    coll_list_push(&op->posted, &x.posted);
    doc = status_doc();
    o = json_array_get(json_object_get(json_array_get(json_object_get(doc, "jobs"), 0),
                                       "operations"), 0);
    assert_string_equal(json_string_value(json_object_get(o, "state")), "running");
    assert_string_equal(json_string_value(json_object_get(o, "algo")), "fake");
    assert_int_equal(json_array_size(json_object_get(o, "missing_ranks")), 0);
    wait = json_object_get(o, "waiting_on_nodes");
    assert_int_equal(json_array_size(wait), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(wait, 0), "host")),
                        "node-b");
    coll_list_remove(&x.posted);
    json_decref(doc);
}

static void test_status_members_peers_pool(void **state)
{
    json_t *doc, *job, *peers;

    w.nodes[1].gone = COLL_ERR_PEER;
    snprintf(w.nodes[1].gone_why, sizeof(w.nodes[1].gone_why), "connection lost");
    coll_stats_refused(&w.d.stats, COLL_LISTENER_CONTROL, COLL_REFUSED_HANDSHAKE_BYTES);
    doc = status_doc();
    job = json_array_get(json_object_get(doc, "jobs"), 0);
    assert_string_equal(json_string_value(json_object_get(job, "id")), "job\"7");
    assert_string_equal(json_string_value(json_object_get(job, "state")), "ready");
    assert_int_equal(json_integer_value(json_object_get(job, "epoch")), 0);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(job, "members"), 1), "pid")), 1001);
    peers = json_object_get(job, "peers");
    assert_string_equal(json_string_value(json_object_get(json_array_get(peers, 0), "state")),
                        "self");
    assert_string_equal(json_string_value(json_object_get(json_array_get(peers, 1), "state")),
                        "lost");
    assert_string_equal(json_string_value(json_object_get(json_array_get(peers, 1), "reason")),
                        "connection lost");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(job, "pool"), "bytes")),
                     1 << 20);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(doc, "node"),
                                                        "sessions")), 2);
    peers = json_object_get(json_object_get(doc, "node"), "peers");
    assert_string_equal(json_string_value(json_object_get(peers, "mode")), "authenticated");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(peers, "refused"),
                                                        "handshake_bytes")), 1);
    json_decref(doc);
}

static void test_metrics_counts(void **state)
{
    coll_op_t *op = add_op(9, 3);
    size_t len;
    char *text;

    coll_stats_op_t counted = {op->desc.coll, op->desc.dtype, w.job.world_size,
                               coll_stats_op_bytes(op->desc.coll, op->desc.count, op->esize,
                                                   w.job.world_size),
                               COLL_COMPRESS_NONE};

    coll_stats_op_waited(&w.d.stats, op->desc.coll, 0.0);
    coll_stats_op_done(&w.d.stats, &counted, 1e-3, COLL_OK);
    coll_stats_op_done(&w.d.stats, &counted, 1e-3, COLL_ERR_MISMATCH);
    coll_stats_request_done(&w.d.stats, COLL_ERR_TIMEDOUT);
    coll_stats_job_failed(&w.d.stats, COLL_ERR_PEER);
    coll_stats_refused(&w.d.stats, COLL_LISTENER_CONTROL, COLL_REFUSED_AUTH);
    coll_stats_refused(&w.d.stats, COLL_LISTENER_CONTROL, COLL_REFUSED_AUTH);
    text = coll_report_metrics(&w.d, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    assert_contains(text, "collectived_operations_total{collective=\"allreduce\",dtype=\"float32\","
                          "compression=\"none\"} 1\n");
    assert_contains(text, "collectived_operation_failures_total{collective=\"allreduce\","
                          "dtype=\"float32\",compression=\"none\"} 1\n");
    assert_contains(text, "collectived_operation_bytes_total{collective=\"allreduce\","
                          "dtype=\"float32\",compression=\"none\"} 4000\n");
    assert_contains(text, "collectived_operation_duration_seconds_count{collective=\"allreduce\"} 1\n");
    assert_contains(text, "collectived_operation_duration_seconds_bucket{collective=\"allreduce\","
                          "le=\"+Inf\"} 1\n");
    assert_contains(text, "collectived_errors_total{kind=\"COLL_ERR_TIMEDOUT\"} 1\n");
    assert_contains(text, "collectived_job_failures_total{kind=\"COLL_ERR_PEER\"} 1\n");
    assert_contains(text, "collectived_connections_refused_total{listener=\"control\","
                          "reason=\"auth\"} 2\n");
    assert_contains(text, "collectived_peer_auth_mode{mode=\"authenticated\"} 1\n");
    assert_contains(text, "collectived_peer_auth_mode{mode=\"off\"} 0\n");
    assert_contains(text, "collectived_last_large_operation_bytes{collective=\"allreduce\","
                          "dtype=\"float32\",world_size=\"4\"} 4000\n");
    /* The job id is escaped; the peer is up. */
    assert_contains(text, "collectived_peer_up{job_id=\"job\\\"7\",node=\"1\",host=\"node-b\"} 1\n");
    assert_contains(text, "collectived_operations_pending{job_id=\"job\\\"7\"} 1\n");
    assert_contains(text, "# TYPE collectived_operation_duration_seconds histogram\n");
    free(text);
}

static char *answer(const char *request, size_t *len)
{
    coll_http_request_t r;

    coll_http_request_init(&r);
    coll_http_request_feed(&r, request, strlen(request));
    return coll_status_answer(&w.d, &r, len);
}

static void test_routes(void **state)
{
    static const struct {
        const char *request, *want;
    } cases[] = {
        {"GET /status HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Type: application/json"},
        {"GET /metrics HTTP/1.1\r\n\r\n", "Content-Type: text/plain; version=0.0.4"},
        {"GET /healthz HTTP/1.1\r\n\r\n", "\r\n\r\nok\n"},
        {"GET / HTTP/1.1\r\n\r\n", "GET /metrics"},
        {"GET /nothing HTTP/1.1\r\n\r\n", "HTTP/1.1 404 Not Found"},
        {"DELETE /status HTTP/1.1\r\n\r\n", "HTTP/1.1 405 Method Not Allowed\r\n"},
        {"BREW /status HTTP/1.1\r\n\r\n", "HTTP/1.1 400 Bad Request"},
        {"HEAD /status HTTP/1.1\r\n\r\n", "Content-Type: application/json"},
    };
    size_t len;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *resp = answer(cases[i].request, &len);
        assert_non_null(resp);
        assert_contains(resp, cases[i].want);
        if (strncmp(cases[i].request, "HEAD", 4) == 0) {
            assert_string_equal(strstr(resp, "\r\n\r\n"), "\r\n\r\n");
        }
        free(resp);
    }
    w.d.stopping = 1;
    {
        char *resp = answer("GET /healthz HTTP/1.1\r\n\r\n", &len);
        assert_contains(resp, "HTTP/1.1 503 Service Unavailable");
        free(resp);
    }
}

/* ---- counters ---- */

static void test_bus_factor_and_bytes(void **state)
{
    assert_true(coll_stats_bus_factor(COLL_KIND_ALLREDUCE, 4) == 1.5);
    assert_true(coll_stats_bus_factor(COLL_KIND_ALLGATHER, 4) == 0.75);
    assert_true(coll_stats_bus_factor(COLL_KIND_REDUCE_SCATTER, 1) == 0.0);
    assert_true(coll_stats_bus_factor(COLL_KIND_BROADCAST, 8) == 1.0);
    assert_int_equal(coll_stats_op_bytes(COLL_KIND_ALLREDUCE, 10, 4, 8), 40);
    assert_int_equal(coll_stats_op_bytes(COLL_KIND_ALLGATHER, 10, 4, 8), 320);
    assert_int_equal(coll_stats_op_bytes(COLL_KIND_BARRIER, 10, 4, 8), 0);
    assert_true(coll_stats_bus_factor(COLL_KIND_GATHER, 4) == 0.75);
    assert_int_equal(coll_stats_op_bytes(COLL_KIND_SCATTER, 10, 4, 8), 320);
    assert_string_equal(coll_stats_kind_name(COLL_KIND_GATHER), "gather");
    assert_string_equal(coll_stats_kind_name(COLL_KIND_SCATTER), "scatter");
    assert_string_equal(coll_stats_kind_name(COLL_KIND_ALLTOALLV), "alltoallv");
}

static void test_histogram_buckets(void **state)
{
    coll_histogram_t h;

    memset(&h, 0, sizeof(h));
    coll_histogram_observe(&h, 0.0);
    coll_histogram_observe(&h, coll_stats_bucket_bound(3));
    coll_histogram_observe(&h, 1e9);
    assert_int_equal(h.bucket[0], 1);
    assert_int_equal(h.bucket[3], 1); /* le is inclusive */
    assert_int_equal(h.bucket[COLL_STATS_BUCKETS], 1);
    assert_int_equal(h.count, 3);
    for (unsigned i = 1; i < COLL_STATS_BUCKETS; i++) {
        assert_true(coll_stats_bucket_bound(i) > coll_stats_bucket_bound(i - 1));
    }
}

static void test_error_index_round_trip(void **state)
{
    unsigned i = coll_stats_error_index(COLL_ERR_MISMATCH);
    assert_int_equal(coll_stats_error_status(i), COLL_ERR_MISMATCH);
    assert_true(coll_stats_error_index((coll_status_t)-4242) < COLL_STATS_ERRORS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request_in_pieces),
        cmocka_unit_test(test_request_http10_and_body_ignored),
        cmocka_unit_test(test_request_garbage_is_400),
        cmocka_unit_test(test_request_long_url_is_414),
        cmocka_unit_test(test_request_endless_headers_are_431),
        cmocka_unit_test(test_response_format),
        cmocka_unit_test_setup_teardown(test_status_names_missing_rank, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_status_running_op_waits_on_node, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_status_members_peers_pool, world_setup,
                                        world_teardown),
        cmocka_unit_test_setup_teardown(test_metrics_counts, world_setup, world_teardown),
        cmocka_unit_test_setup_teardown(test_routes, world_setup, world_teardown),
        cmocka_unit_test(test_bus_factor_and_bytes),
        cmocka_unit_test(test_histogram_buckets),
        cmocka_unit_test(test_error_index_round_trip),
    };
    return cmocka_run_group_tests_name("status", tests, NULL, NULL);
}
