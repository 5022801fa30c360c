/*
 * Every public entry point of the headers in include/ given NULL for each pointer argument that
 * must not be NULL: COLL_ERR_INVALID (or the documented value of a function that returns no
 * status) and a message naming the argument, where coll_comm_last_error() of the call's
 * communicator, or of NULL for a call without one, gives it. The destroy and free functions
 * take NULL as a no-op. Every message begins with the name of the function called (a blocking
 * call's, not its asynchronous form's). And every collective given a bad value (a count that
 * overflows, a dtype, reduction, root or peer out of range, an invalid compression, a buffer
 * outside the pool, a split's color, a grid's size): its code, a message naming the function,
 * the rank and the value, and the job ended; a local call's bad value (a grid's size, order,
 * rank or dimension, a service's bucket, a bucketer's parameters, parameter or bucket): its
 * code and a message naming the function and the value, on the thread for a call without a
 * communicator.
 * No daemon: a communicator of this process whose link is a socketpair (the daemon's end is
 * drained, never answered), a request and a parameter service made on it, and a real bucketer.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/ps/ps.h"
#include "client/req/request.h"
#include "proto/frame.h"

static coll_comm_t *comm;
static int daemon_fd;
static coll_request_t *req;
static coll_ps_t *ps;
static coll_bucketer_t *bucketer;
static coll_layout_t layout;
static float buf[16]; /* stands for a buffer wherever one is given: never reached */

/* A world communicator of rank 0 of 2, as coll_comm_create() leaves it, without a pool. */
static coll_comm_t *comm_new(void)
{
    coll_comm_t *c = calloc(1, sizeof(*c));
    int sv[2];

    assert_non_null(c);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    assert_int_equal(coll_frame_reader_init(&c->reader, COLL_FRAME_MAX_CLIENT), COLL_OK);
    c->hooks = &coll__request_link_hooks;
    c->conn = c;
    c->refs = 1;
    c->owner = pthread_self();
    c->fd = sv[0];
    daemon_fd = sv[1];
    c->passed_fd[0] = c->passed_fd[1] = c->doorbell_fd = -1;
    c->pending.next = c->pending.prev = &c->pending;
    c->done.next = c->done.prev = &c->done;
    snprintf(c->job, sizeof(c->job), "unit");
    c->world_size = c->local_size = 2;
    c->node_count = 1;
    c->job_timeout_ms = 1000;
    c->next_id = 1;
    return c;
}

static int setup(void **state)
{
    (void)state;
    comm = comm_new();
    pthread_mutex_lock(&comm->lock);
    req = coll__req_new(comm, COLL_REQ_COLLECTIVE);
    pthread_mutex_unlock(&comm->lock);
    ps = calloc(1, sizeof(*ps));
    assert_non_null(req);
    assert_non_null(ps);
    ps->comm = comm;
    assert_int_equal(coll_bucketer_create(comm, NULL, &bucketer), COLL_OK);
    assert_int_equal(coll_layout_init(&layout, 2, 1, 1, NULL), COLL_OK);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    coll_bucketer_destroy(bucketer);
    free(ps);
    pthread_mutex_lock(&comm->lock);
    coll__req_free_owned(comm);
    pthread_mutex_unlock(&comm->lock);
    close(comm->fd);
    close(daemon_fd);
    coll_frame_reader_cleanup(&comm->reader);
    free(comm);
    return 0;
}

/* Before each call: no message on the communicator, another one for the thread (a failed
 * coll_comm_create() of a world of 0 ranks, which stops at its parameters), and the aborts
 * that refused calls sent read off the link. */
static void drain(void)
{
    char sink[4096];

    while (read(daemon_fd, sink, sizeof(sink)) > 0) {
    }
}

static void reset(void)
{
    coll_comm_params_t p = {.field_mask = COLL_COMM_PARAM_RANK};
    coll_comm_t *none = NULL;

    comm->last_error[0] = '\0';
    comm->ended = COLL_OK; /* each case refused as the first */
    assert_int_equal(coll_comm_create(&p, &none), COLL_ERR_INVALID);
    assert_null(strstr(coll_comm_last_error(NULL), "must not be NULL"));
    drain();
}

/* The public function that @p call (a call's text) calls: its first name of the library. */
static void called_function(const char *call, char *func, size_t len)
{
    const char *p = strstr(call, "coll_");
    size_t n = 0;

    assert_non_null(p);
    while (n + 1 < len && (p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z') ||
                           (p[n] >= '0' && p[n] <= '9'))) {
        func[n] = p[n];
        n++;
    }
    func[n] = '\0';
}

/* The message of @p where begins with the name of the function that @p call calls (not another
 * one that it called in turn, e.g. a blocking call's asynchronous form) and holds @p want. */
static void expect_named(const coll_comm_t *where, const char *call, const char *want)
{
    const char *msg = coll_comm_last_error(where);
    char func[64];

    called_function(call, func, sizeof(func));
    if (strncmp(msg, func, strlen(func)) != 0 || msg[strlen(func)] != ':' ||
        strstr(msg, want) == NULL) {
        fail_msg("%s: the %s message \"%s\" does not begin with \"%s:\" and say \"%s\"", call,
                 where != NULL ? "communicator's" : "thread's", msg, func, want);
    }
}

static void expect_message(const coll_comm_t *where, const char *call, const char *arg)
{
    char want[64];

    snprintf(want, sizeof(want), "%s must not be NULL", arg);
    expect_named(where, call, want);
}

static void expect_status(long long got, long long want, const char *call)
{
    if (got != want) {
        fail_msg("%s returned %lld, expected %lld", call, got, want);
    }
}

/* Whether @p call sent the daemon a frame (an Abort: nothing else is sent), as @p aborts says. */
static void expect_abort(int aborts, const char *call)
{
    char byte;

    if ((recv(daemon_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1) != aborts) {
        fail_msg("%s %s", call, aborts ? "sent the daemon nothing: the job goes on"
                                       : "sent the daemon a frame: a local call ended the job");
    }
}

/* @p call returns @p want and leaves a message that @p arg must not be NULL on @p where (the
 * communicator, or NULL: the calling thread). */
#define NULL_ARG(where, want, arg, call)                                                           \
    do {                                                                                           \
        reset();                                                                                   \
        expect_status((long long)(call), (long long)(want), #call);                               \
        expect_message((where), #call, (arg));                                                     \
    } while (0)

/* The same for a function that returns nothing (the message is the thread's). */
#define NULL_ARG_VOID(arg, call)                                                                   \
    do {                                                                                           \
        reset();                                                                                   \
        call;                                                                                      \
        expect_message(NULL, #call, (arg));                                                        \
    } while (0)

/* The same for a call that every rank makes: refused, it also ends the job (an Abort frame
 * went to the daemon). */
#define NULL_REFUSED(want, arg, call)                                                              \
    do {                                                                                           \
        NULL_ARG(comm, want, arg, call);                                                           \
        expect_abort(1, #call);                                                                    \
    } while (0)

#define INV COLL_ERR_INVALID
#define F32 COLL_FLOAT32
#define SUM COLL_SUM
#define SB "the send buffer"
#define RB "the receive buffer"

/* coll_comm_create() with a string whose bit is set NULL: refused, naming the field, before
 * the socket is touched (the socket_path one crashed in the connect); a NULL job_token is no
 * token, so such a call goes on to connect (to a socket that is not there). */
static void comm_params_null(void)
{
    const uint64_t world = COLL_COMM_PARAM_RANK | COLL_COMM_PARAM_LOCAL_RANK;
    coll_comm_params_t p = {.socket_path = "/nonexistent/collectived.sock", .job = "nulls",
                            .world_size = 1, .local_size = 1, .connect_timeout_ms = 1};
    coll_comm_t *c = NULL;

    p.field_mask = world | COLL_COMM_PARAM_SOCKET | COLL_COMM_PARAM_JOB | COLL_COMM_PARAM_ROOT;
    p.socket_path = NULL;
    NULL_ARG(NULL, INV, "params->socket_path", coll_comm_create(&p, &c));
    p.socket_path = "/nonexistent/collectived.sock";
    p.job = NULL;
    NULL_ARG(NULL, INV, "params->job", coll_comm_create(&p, &c));
    p.job = "nulls";
    NULL_ARG(NULL, INV, "params->root", coll_comm_create(&p, &c));
    p.root = "";
    p.field_mask |= COLL_COMM_PARAM_TOKEN | COLL_COMM_PARAM_CONNECT_TIMEOUT;
    assert_int_equal(coll_comm_create(&p, &c), COLL_ERR_CONNREFUSED);
    assert_null(c);
}

/* collective.h: communicators and the pool. */
static void test_comm_and_memory(void **state)
{
    void *p = NULL;
    coll_mem_info_t info;

    (void)state;
    NULL_ARG(NULL, INV, "comm_p", coll_comm_create(NULL, NULL));
    comm_params_null();
    NULL_ARG(NULL, -1, "comm", coll_comm_rank(NULL));
    NULL_ARG(NULL, -1, "comm", coll_comm_world_size(NULL));
    NULL_ARG(NULL, -1, "comm", coll_comm_local_rank(NULL));
    NULL_ARG(NULL, -1, "comm", coll_comm_local_size(NULL));
    NULL_ARG(NULL, 0, "comm", coll_comm_shm_max_bytes(NULL));
    NULL_ARG(NULL, 0, "comm", coll_comm_shm_node_max_bytes(NULL));
    NULL_ARG(NULL, 0, "comm", coll_comm_direct_max_bytes(NULL));
    NULL_ARG(NULL, INV, "comm", coll_comm_abort(NULL, "why"));
    NULL_ARG(comm, INV, "reason", coll_comm_abort(comm, NULL));
    NULL_ARG(NULL, INV, "comm", coll_mem_alloc(NULL, 64, &p));
    NULL_ARG(comm, INV, "ptr_p", coll_mem_alloc(comm, 64, NULL));
    NULL_ARG(NULL, INV, "comm", coll_mem_free(NULL, buf));
    NULL_ARG(NULL, INV, "comm", coll_mem_alloc_on(NULL, 64, COLL_MEMORY_CUDA, 0, &p));
    NULL_ARG(comm, INV, "ptr_p", coll_mem_alloc_on(comm, 64, COLL_MEMORY_CUDA, 0, NULL));
    NULL_ARG(NULL, INV, "comm", coll_mem_query(NULL, buf, &info));
    NULL_ARG(comm, INV, "info", coll_mem_query(comm, buf, NULL));
    /* Releasing nothing is a no-op, as free(NULL). */
    coll_comm_destroy(NULL);
    assert_int_equal(coll_mem_free(comm, NULL), COLL_OK);
    assert_null(p);
}

/* collective.h: every collective and point-to-point call, without its communicator, its
 * request pointer, or a buffer it reads or writes. */
static void test_collectives(void **state)
{
    const size_t n[2] = {1, 1}, d[2] = {0, 1};
    coll_request_t *r = NULL;
    float *b = buf, *e = buf + 4;

    (void)state;
    NULL_ARG(NULL, INV, "comm", coll_allreduce_async(NULL, b, b, 4, F32, SUM, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_reduce_scatter_async(NULL, b, b, 4, F32, SUM, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_allgather_async(NULL, b, b, 4, F32, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_broadcast_async(NULL, b, b, 4, F32, 0, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_reduce_async(NULL, b, b, 4, F32, SUM, 0, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_gather_async(NULL, b, b, 4, F32, 0, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_scatter_async(NULL, b, b, 4, F32, 0, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_alltoallv_async(NULL, b, n, d, b, n, d, F32, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_alltoall_async(NULL, b, b, 1, F32, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_barrier_async(NULL, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_send_async(NULL, b, 4, F32, 1, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_recv_async(NULL, b, 4, F32, 1, NULL, &r));
    NULL_ARG(NULL, INV, "comm", coll_allreduce(NULL, b, b, 4, F32, SUM));

    NULL_REFUSED(INV, "req_p", coll_allreduce_async(comm, b, b, 4, F32, SUM, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_reduce_scatter_async(comm, b, b, 2, F32, SUM, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_allgather_async(comm, b, b, 2, F32, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_broadcast_async(comm, b, b, 4, F32, 0, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_reduce_async(comm, b, b, 4, F32, SUM, 0, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_gather_async(comm, b, b, 2, F32, 0, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_scatter_async(comm, b, b, 2, F32, 0, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_alltoallv_async(comm, b, n, d, e, n, d, F32, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_alltoall_async(comm, b, e, 1, F32, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_barrier_async(comm, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_send_async(comm, b, 4, F32, 1, NULL, NULL));
    NULL_REFUSED(INV, "req_p", coll_recv_async(comm, b, 4, F32, 1, NULL, NULL));

    /* A buffer of count > 0 elements; a buffer of none may be NULL (not refused for it: the
     * fake pool refuses the other buffer as outside it). */
    NULL_REFUSED(INV, SB, coll_allreduce_async(comm, NULL, b, 4, F32, SUM, NULL, &r));
    NULL_REFUSED(INV, RB, coll_allreduce_async(comm, b, NULL, 4, F32, SUM, NULL, &r));
    NULL_REFUSED(INV, SB, coll_reduce_scatter_async(comm, NULL, b, 2, F32, SUM, NULL, &r));
    NULL_REFUSED(INV, RB, coll_allgather_async(comm, b, NULL, 2, F32, NULL, &r));
    NULL_REFUSED(INV, SB, coll_broadcast_async(comm, NULL, b, 4, F32, 0, NULL, &r));
    NULL_REFUSED(INV, RB, coll_reduce_async(comm, b, NULL, 4, F32, SUM, 0, NULL, &r));
    NULL_REFUSED(INV, RB, coll_gather_async(comm, b, NULL, 2, F32, 0, NULL, &r));
    NULL_REFUSED(INV, SB, coll_scatter_async(comm, NULL, b, 2, F32, 0, NULL, &r));
    NULL_REFUSED(INV, SB, coll_alltoallv_async(comm, NULL, n, d, b, n, d, F32, NULL, &r));
    NULL_REFUSED(INV, RB, coll_alltoall_async(comm, b, NULL, 1, F32, NULL, &r));
    NULL_REFUSED(INV, SB, coll_send_async(comm, NULL, 4, F32, 1, NULL, &r));
    NULL_REFUSED(INV, RB, coll_recv_async(comm, NULL, 4, F32, 1, NULL, &r));
    NULL_REFUSED(INV, SB, coll_allreduce(comm, NULL, b, 4, F32, SUM));
    NULL_REFUSED(INV, "sendcounts",
             coll_alltoallv_async(comm, b, NULL, d, e, n, d, F32, NULL, &r));
    NULL_REFUSED(INV, "sdispls", coll_alltoallv_async(comm, b, n, NULL, e, n, d, F32, NULL, &r));
    NULL_REFUSED(INV, "recvcounts",
             coll_alltoallv_async(comm, b, n, d, e, NULL, d, F32, NULL, &r));
    NULL_REFUSED(INV, "rdispls", coll_alltoallv_async(comm, b, n, d, e, n, NULL, F32, NULL, &r));
    reset();
    assert_int_equal(coll_broadcast_async(comm, NULL, NULL, 4, F32, 0, NULL, &r),
                     COLL_ERR_INVALID); /* the root's buffers */
    reset();
    assert_int_equal(coll_reduce_async(comm, b, NULL, 4, F32, SUM, 1, NULL, &r),
                     COLL_ERR_NOT_IN_POOL); /* not the root: its receive buffer is not read */
    assert_null(r);
}

/* @p call returns @p want with a message naming @p func, rank 0 and @p value; an Abort went to
 * the daemon when @p aborts (the calls every rank makes), nothing otherwise. */
#define REFUSED(want, aborts, func, value, call)                                                   \
    do {                                                                                           \
        const char *msg_;                                                                          \
        reset();                                                                                   \
        expect_status((long long)(call), (long long)(want), #call);                               \
        msg_ = coll_comm_last_error(comm);                                                         \
        if (strstr(msg_, func ": rank 0: ") == NULL || strstr(msg_, value) == NULL) {             \
            fail_msg("%s: the message \"%s\" does not name %s, rank 0 and %s", #call, msg_,      \
                     func, value);                                                                 \
        }                                                                                          \
        expect_abort((aborts), #call);                                                             \
    } while (0)

#define HUGE_COUNT "9223372036854775808" /* SIZE_MAX / 2 + 1: twice of it overflows */

/* collective.h: every collective given a value it refuses; collective_compress.h: a default
 * compression refused (a local call: the job goes on). */
static void test_bad_values(void **state)
{
    const size_t huge = SIZE_MAX / 2 + 1, n[2] = {1, 1}, d[2] = {0, 1}, far[2] = {0, huge};
    const coll_dtype_t nodtype = (coll_dtype_t)99;
    coll_op_params_t zp = {.field_mask = COLL_OP_PARAM_COMPRESSION, .compression.method = 99};
    coll_op_params_t ap = {.field_mask = COLL_OP_PARAM_ALGO, .algo = (coll_algo_t)42};
    coll_op_params_t np = {.field_mask = COLL_OP_PARAM_ALGO, .algo = (coll_algo_t)-1};
    coll_op_params_t mp = {.field_mask = COLL_OP_PARAM_KEY | (1u << 20), .key = 5};
    coll_request_t *r = NULL;
    float *b = buf, *e = buf + 4;

    (void)state;
    REFUSED(INV, 1, "coll_reduce_scatter_async", HUGE_COUNT,
            coll_reduce_scatter_async(comm, b, e, huge, F32, SUM, NULL, &r));
    REFUSED(INV, 1, "coll_allgather_async", HUGE_COUNT,
            coll_allgather_async(comm, b, e, huge, F32, NULL, &r));
    REFUSED(INV, 1, "coll_gather_async", HUGE_COUNT,
            coll_gather_async(comm, b, e, huge, F32, 0, NULL, &r));
    REFUSED(INV, 1, "coll_scatter_async", HUGE_COUNT,
            coll_scatter_async(comm, b, e, huge, F32, 1, NULL, &r));
    REFUSED(INV, 1, "coll_alltoall_async", HUGE_COUNT,
            coll_alltoall_async(comm, b, e, huge, F32, NULL, &r));
    REFUSED(INV, 1, "coll_allreduce_async", HUGE_COUNT,
            coll_allreduce_async(comm, b, e, huge, F32, SUM, NULL, &r));
    REFUSED(INV, 1, "coll_alltoallv_async", "rank 1 overflows",
            coll_alltoallv_async(comm, b, n, far, e, n, d, F32, NULL, &r));
    REFUSED(INV, 1, "coll_allreduce_async", "dtype 99",
            coll_allreduce_async(comm, b, e, 4, nodtype, SUM, NULL, &r));
    REFUSED(INV, 1, "coll_alltoallv_async", "dtype 99",
            coll_alltoallv_async(comm, b, n, d, e, n, d, nodtype, NULL, &r));
    REFUSED(INV, 1, "coll_reduce_async", "reduction 42",
            coll_reduce_async(comm, b, e, 4, F32, (coll_redop_t)42, 0, NULL, &r));
    REFUSED(INV, 1, "coll_allreduce_async", "reduction band does not apply to float32",
            coll_allreduce_async(comm, b, e, 4, F32, COLL_BAND, NULL, &r));
    REFUSED(INV, 1, "coll_broadcast_async", "root 2",
            coll_broadcast_async(comm, b, e, 4, F32, 2, NULL, &r));
    REFUSED(INV, 1, "coll_gather_async", "root -1",
            coll_gather_async(comm, b, e, 4, F32, -1, NULL, &r));
    REFUSED(INV, 1, "coll_send_async", "peer 0",
            coll_send_async(comm, b, 4, F32, 0, NULL, &r));
    REFUSED(INV, 1, "coll_recv_async", "peer 7",
            coll_recv_async(comm, b, 4, F32, 7, NULL, &r));
    REFUSED(INV, 1, "coll_barrier_async", "invalid compression (method 99",
            coll_barrier_async(comm, &zp, &r));
    REFUSED(INV, 1, "coll_allreduce_async", "algo 42 is not a coll_algo_t",
            coll_allreduce_async(comm, b, e, 4, F32, SUM, &ap, &r));
    REFUSED(INV, 1, "coll_broadcast_async", "algo -1 is not a coll_algo_t",
            coll_broadcast_async(comm, b, e, 4, F32, 0, &np, &r));
    REFUSED(INV, 1, "coll_allreduce_async", "field_mask 0x100001 names fields there are not",
            coll_allreduce_async(comm, b, e, 4, F32, SUM, &mp, &r));
    REFUSED(COLL_ERR_NOT_IN_POOL, 1, "coll_allgather_async", "is not inside the job's pool",
            coll_allgather_async(comm, b, e, 2, F32, NULL, &r));
    REFUSED(INV, 0, "coll_comm_set_compression", "invalid compression (method 99",
            coll_comm_set_compression(comm, &zp.compression));
    /* The blocking allreduce names itself, not coll_allreduce_async(). */
    REFUSED(INV, 1, "coll_allreduce", "dtype 99", coll_allreduce(comm, b, e, 4, nodtype, SUM));
    REFUSED(INV, 1, "coll_allreduce", "reduction 42",
            coll_allreduce(comm, b, e, 4, F32, (coll_redop_t)42));
    REFUSED(COLL_ERR_NOT_IN_POOL, 1, "coll_allreduce", "is not inside the job's pool",
            coll_allreduce(comm, b, e, 4, F32, SUM));
    /* Refused, this rank's next submission gets the refusal at once (the shared-memory path may
     * not know of the Abort yet), and no second Abort goes. */
    REFUSED(INV, 1, "coll_reduce_scatter_async", HUGE_COUNT,
            coll_reduce_scatter_async(comm, b, e, huge, F32, SUM, NULL, &r));
    drain();
    assert_int_equal(coll_barrier_async(comm, NULL, &r), INV);
    assert_non_null(strstr(coll_comm_last_error(comm),
                           "job unit failed earlier: coll_reduce_scatter_async: rank 0: count"));
    expect_abort(0, "coll_barrier_async after a refusal");
    assert_null(r);
}

/* collective_groups.h: a split of a color below COLL_UNDEFINED, the groups of a grid of another
 * size than the communicator's. */
static void test_bad_groups(void **state)
{
    coll_comm_t *g = NULL;
    coll_groups_t groups;
    coll_layout_t four;

    (void)state;
    assert_int_equal(coll_layout_init(&four, 2, 2, 1, NULL), COLL_OK);
    REFUSED(INV, 1, "coll_comm_split", "color -2", coll_comm_split(comm, -2, 0, &g));
    REFUSED(INV, 1, "coll_comm_groups", "has 4 ranks, the communicator 2",
            coll_comm_groups(comm, &four, &groups));
    assert_null(g);
}

/* @p call, a local call without a communicator, returns COLL_ERR_INVALID with the calling
 * thread's message naming its function and @p value. */
#define LOCAL_REFUSED(value, call)                                                                 \
    do {                                                                                           \
        reset();                                                                                   \
        expect_status((long long)(call), (long long)COLL_ERR_INVALID, #call);                     \
        expect_named(NULL, #call, (value));                                                        \
    } while (0)

/* collective_groups.h: a grid's bad sizes, order, ranks and dimensions, on the thread's message;
 * the layout given is left as it was. */
static void test_bad_layouts(void **state)
{
    coll_layout_t l = layout;
    int coords[COLL_DIM_COUNT], ranks[2], color;

    (void)state;
    LOCAL_REFUSED("tp 0 is below 1", coll_layout_init(&l, 0, 1, 1, NULL));
    LOCAL_REFUSED("pp -3 is below 1", coll_layout_init(&l, 1, -3, 1, NULL));
    LOCAL_REFUSED("dp 0 is below 1", coll_layout_init(&l, 2, 2, 0, "tp-pp-dp"));
    LOCAL_REFUSED("tp 1024 x pp 1024 x dp 2 = 2097152 ranks, above the 1048576",
                  coll_layout_init(&l, 1024, 1024, 2, NULL));
    LOCAL_REFUSED("order \"tp-tp-pp\" does not name tp, pp and dp once each",
                  coll_layout_init(&l, 2, 1, 1, "tp-tp-pp"));
    LOCAL_REFUSED("order \"tp,dp,pp\"", coll_layout_init(&l, 2, 1, 1, "tp,dp,pp"));
    assert_memory_equal(&l, &layout, sizeof(l));
    LOCAL_REFUSED("rank 2 is not a rank of the grid of 2 (tp 2 x pp 1 x dp 1)",
                  coll_layout_coords(&layout, 2, coords));
    LOCAL_REFUSED("rank -1 is not a rank of the grid of 2",
                  coll_layout_coords(&layout, -1, coords));
    LOCAL_REFUSED("dim 3 is not a coll_dim_t",
                  coll_layout_group(&layout, (coll_dim_t)3, 0, ranks, &color));
    LOCAL_REFUSED("rank 5 is not a rank of the grid of 2",
                  coll_layout_group(&layout, COLL_DIM_TP, 5, ranks, &color));
}

/* collective_ps.h: a bucket that does not exist (a local call: the job goes on), the
 * blocking step given gradients outside the pool, which names itself, not
 * coll_ps_step_bucket_async(), and a step given parameters other than a stream. */
static void test_bad_ps_values(void **state)
{
    size_t off = 7, count = 7, zero = 0, four = 4;
    uint64_t steps = 0;
    coll_ps_t one = {.comm = comm, .params = buf, .count = 4, .num_layers = 1, .num_buckets = 1,
                     .bucket_off = &zero, .bucket_count = &four, .bucket_steps = &steps};
    const coll_op_params_t key_and_stream = {
        .field_mask = COLL_OP_PARAM_KEY | COLL_OP_PARAM_STREAM, .key = 1};

    (void)state;
    REFUSED(INV, 0, "coll_ps_bucket_range", "bucket 1 does not exist (the service has 1)",
            coll_ps_bucket_range(&one, 1, &off, &count));
    REFUSED(INV, 0, "coll_ps_bucket_range", "bucket 0 does not exist (the service has 0)",
            coll_ps_bucket_range(ps, 0, &off, &count));
    assert_int_equal(off, 7);
    assert_int_equal(count, 7);
    REFUSED(COLL_ERR_NOT_IN_POOL, 1, "coll_ps_step",
            "the gradients of bucket 0 are not inside the job's pool",
            coll_ps_step(&one, buf));
    REFUSED(COLL_ERR_NOT_IN_POOL, 1, "coll_ps_step_bucket_async",
            "the gradients of bucket 0 are not inside the job's pool",
            coll_ps_step_bucket_async(&one, 0, buf, &(coll_request_t *){NULL}));
    REFUSED(INV, 1, "coll_ps_step_bucket_params_async",
            "field_mask 0x11 of the parameters: a step takes only a stream",
            coll_ps_step_bucket_params_async(&one, 0, buf, &key_and_stream,
                                             &(coll_request_t *){NULL}));
    assert_int_equal(steps, 0);
}

/* collective.h and collective_trace.h: requests. */
static void test_requests(void **state)
{
    coll_req_timing_t t;
    coll_req_step_t steps[COLL_MAX_STEPS];
    uint32_t nsteps;
    uint64_t sent, dense;

    (void)state;
    NULL_ARG(NULL, INV, "req", coll_req_test(NULL));
    NULL_ARG(NULL, INV, "req", coll_req_wait(NULL, 0));
    NULL_ARG(NULL, 0, "req", strcmp(coll_req_algo(NULL), "unknown"));
    NULL_ARG(NULL, INV, "req", coll_req_stream_wait(NULL, NULL));
    NULL_ARG(NULL, INV, "req", coll_req_timing(NULL, &t));
    NULL_ARG(comm, INV, "timing", coll_req_timing(req, NULL));
    NULL_ARG(NULL, INV, "req", coll_req_steps(NULL, steps, &nsteps));
    NULL_ARG(comm, INV, "steps", coll_req_steps(req, NULL, &nsteps));
    NULL_ARG(comm, INV, "nsteps", coll_req_steps(req, steps, NULL));
    NULL_ARG(NULL, INV, "req", coll_req_wire_bytes(NULL, &sent, &dense));
    NULL_ARG(comm, INV, "sent", coll_req_wire_bytes(req, NULL, &dense));
    NULL_ARG(comm, INV, "dense", coll_req_wire_bytes(req, &sent, NULL));
    coll_req_free(NULL);
}

/* collective_compress.h and the timeline of collective_bucketer.h. */
static void test_compression_and_timeline(void **state)
{
    coll_compression_t z = {.method = COLL_COMPRESS_NONE};
    const uint64_t shapes[2] = {2, 2};
    char text[32];

    (void)state;
    NULL_ARG(NULL, INV, "text", coll_compression_parse(NULL, &z));
    NULL_ARG(NULL, INV, "out", coll_compression_parse("fp16", NULL));
    NULL_ARG(NULL, -1, "c", coll_compression_format(NULL, text, sizeof(text)));
    NULL_ARG(NULL, -1, "buf", coll_compression_format(&z, NULL, sizeof(text)));
    NULL_ARG(NULL, INV, "comm", coll_comm_set_compression(NULL, &z));
    NULL_ARG(comm, INV, "c", coll_comm_set_compression(comm, NULL));
    NULL_ARG(NULL, INV, "comm", coll_comm_compression(NULL, &z));
    NULL_ARG(comm, INV, "out", coll_comm_compression(comm, NULL));
    NULL_ARG(NULL, INV, "comm", coll_layout_register(NULL, 1, 1, shapes));
    NULL_ARG(comm, INV, "shapes", coll_layout_register(comm, 1, 1, NULL));
    NULL_ARG(NULL, INV, "comm", coll_timeline_span(NULL, "step", "fwd", 0, 1));
    NULL_ARG(comm, INV, "track", coll_timeline_span(comm, NULL, "fwd", 0, 1));
    NULL_ARG(comm, INV, "name", coll_timeline_span(comm, "step", NULL, 0, 1));
    NULL_ARG(NULL, 0, "comm", coll_timeline_enabled(NULL));
    NULL_ARG(NULL, INV, "comm", coll_timeline_flush(NULL));
    /* snprintf's contract: no buffer of 0 bytes gives the length. */
    assert_int_equal(coll_compression_format(&z, NULL, 0), 4);
}

/* collective_groups.h. */
static void test_groups_and_layouts(void **state)
{
    coll_comm_t *g = NULL;
    coll_groups_t groups;
    int coords[COLL_DIM_COUNT], ranks[2], color;

    (void)state;
    NULL_ARG(NULL, INV, "comm", coll_comm_split(NULL, 0, 0, &g));
    NULL_REFUSED(INV, "newcomm_p", coll_comm_split(comm, 0, 0, NULL));
    NULL_ARG(NULL, -1, "comm", coll_comm_node_count(NULL));
    NULL_ARG(NULL, -1, "comm", coll_comm_job_rank(NULL, 0));
    NULL_ARG(NULL, INV, "layout", coll_layout_init(NULL, 1, 1, 1, NULL));
    NULL_ARG(NULL, 0, "layout", coll_layout_size(NULL));
    NULL_ARG(NULL, INV, "layout", coll_layout_coords(NULL, 0, coords));
    NULL_ARG(NULL, INV, "coords", coll_layout_coords(&layout, 0, NULL));
    NULL_ARG(NULL, INV, "layout", coll_layout_group(NULL, COLL_DIM_TP, 0, ranks, &color));
    NULL_ARG(NULL, 0, "layout", coll_layout_intra_node(NULL, COLL_DIM_TP, 2));
    NULL_ARG(NULL, INV, "comm", coll_comm_groups(NULL, &layout, &groups));
    NULL_REFUSED(INV, "layout", coll_comm_groups(comm, NULL, &groups));
    NULL_REFUSED(INV, "groups", coll_comm_groups(comm, &layout, NULL));
    coll_groups_destroy(NULL);
    /* ranks and color are optional. */
    assert_int_equal(coll_layout_group(&layout, COLL_DIM_TP, 1, NULL, NULL), COLL_OK);
    assert_null(g);
}

/* collective_ps.h. */
static void test_parameter_service(void **state)
{
    coll_ps_params_t p = {.num_layers = 1};
    coll_ps_optimizer_t kind;
    coll_ps_t *made = NULL;
    coll_request_t *r = NULL;
    const void *images[1] = {NULL};
    size_t bytes[1] = {4096}, off, count;
    void *image;

    (void)state;
    NULL_ARG_VOID("o", coll_ps_optim_init(COLL_PS_SGD, NULL));
    NULL_ARG_VOID("s", coll_ps_schedule_constant(0.1, NULL));
    NULL_ARG(NULL, INV, "name", coll_ps_optimizer_parse(NULL, &kind));
    NULL_ARG(NULL, INV, "kind", coll_ps_optimizer_parse("sgd", NULL));
    NULL_ARG(NULL, INV, "comm", coll_ps_create(NULL, &p, &made));
    NULL_REFUSED(INV, "params", coll_ps_create(comm, NULL, &made));
    NULL_REFUSED(INV, "ps_p", coll_ps_create(comm, &p, NULL));
    NULL_ARG(NULL, 0, "ps", coll_ps_num_buckets(NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_bucket_range(NULL, 0, &off, &count));
    NULL_ARG(comm, INV, "offset", coll_ps_bucket_range(ps, 0, NULL, &count));
    NULL_ARG(comm, INV, "count", coll_ps_bucket_range(ps, 0, &off, NULL));
    NULL_ARG(NULL, 0, "ps", coll_ps_steps(NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_step_bucket_async(NULL, 0, buf, &r));
    NULL_REFUSED(INV, "grad", coll_ps_step_bucket_async(ps, 0, NULL, &r));
    NULL_REFUSED(INV, "req_p", coll_ps_step_bucket_async(ps, 0, buf, NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_step_bucket_params_async(NULL, 0, buf, NULL, &r));
    NULL_REFUSED(INV, "grad", coll_ps_step_bucket_params_async(ps, 0, NULL, NULL, &r));
    NULL_REFUSED(INV, "req_p", coll_ps_step_bucket_params_async(ps, 0, buf, NULL, NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_step(NULL, buf));
    NULL_REFUSED(INV, "grads", coll_ps_step(ps, NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_save(NULL, &image, bytes));
    NULL_REFUSED(INV, "image_p", coll_ps_save(ps, NULL, bytes));
    NULL_REFUSED(INV, "bytes_p", coll_ps_save(ps, &image, NULL));
    NULL_ARG(NULL, INV, "ps", coll_ps_load(NULL, images, bytes, 1));
    NULL_REFUSED(INV, "images", coll_ps_load(ps, NULL, bytes, 1));
    NULL_REFUSED(INV, "bytes", coll_ps_load(ps, images, NULL, 1));
    NULL_REFUSED(INV, "images[0]", coll_ps_load(ps, images, bytes, 1));
    coll_ps_destroy(NULL);
    assert_null(made);
    assert_null(r);
}

/* A bucketer's call refused (COLL_ERR_INVALID), its message beginning with its name. */
#define BK_REFUSED(value, call)                                                                    \
    do { reset(); expect_status((long long)(call), INV, #call);                                    \
         expect_named(comm, #call, (value)); } while (0)
/* collective_bucketer.h: the bucketer. */
static void test_bucketer(void **state)
{
    coll_bucketer_t *made = NULL;
    coll_bucketer_stats_t stats;
    coll_bucketer_param_info_t pinfo;
    coll_bucketer_bucket_info_t binfo;
    const coll_bucketer_params_t bad_op = {.field_mask = COLL_BUCKETER_PARAM_OP, .op = 42};
    void *grad;

    (void)state;
    NULL_ARG(NULL, INV, "comm", coll_bucketer_create(NULL, NULL, &made));
    NULL_ARG(comm, INV, "bucketer_p", coll_bucketer_create(comm, NULL, NULL));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_add_param(NULL, 4, COLL_FLOAT32, "w", NULL));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_param_shape(NULL, 0, 2, 2));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_param_grad(NULL, 0, &grad));
    NULL_ARG(comm, INV, "grad_p", coll_bucketer_param_grad(bucketer, 0, NULL));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_grad_ready(NULL, 0));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_mark_unused(NULL, 0));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_wait_all(NULL, 0));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_stats(NULL, &stats));
    NULL_ARG(comm, INV, "stats", coll_bucketer_stats(bucketer, NULL));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_param_info(NULL, 0, &pinfo));
    NULL_ARG(comm, INV, "info", coll_bucketer_param_info(bucketer, 0, NULL));
    NULL_ARG(NULL, INV, "bucketer", coll_bucketer_bucket_info(NULL, 0, &binfo));
    NULL_ARG(comm, INV, "info", coll_bucketer_bucket_info(bucketer, 0, NULL));
    /* Without a bucketer, its last error is the thread's, as coll_comm_last_error(NULL). */
    reset();
    assert_string_equal(coll_bucketer_last_error(NULL), coll_comm_last_error(NULL));
    coll_bucketer_destroy(NULL);
    /* A bad value: the message names the function called, the bucketer and the value. */
    BK_REFUSED("unknown reduction 42", coll_bucketer_create(comm, &bad_op, &made));
    setenv("COLL_BUCKET_CAP_MB", "lots", 1);
    BK_REFUSED("COLL_BUCKET_CAP_MB=lots", coll_bucketer_create(comm, NULL, &made));
    unsetenv("COLL_BUCKET_CAP_MB");
    BK_REFUSED("bucketer: unknown datatype", coll_bucketer_add_param(bucketer, 4, 99, "w", NULL));
    BK_REFUSED("bucketer: shape 2 x 2 of parameter 3",
               coll_bucketer_param_shape(bucketer, 3, 2, 2));
    /* The parameter's name and index pointer are optional. */
    assert_int_equal(coll_bucketer_add_param(bucketer, 4, COLL_FLOAT32, NULL, NULL), COLL_OK);
    assert_null(made);
    /* Those that seal it, on one without parameters (no pool here for a bucket). */
    assert_int_equal(coll_bucketer_create(comm, NULL, &made), COLL_OK);
    BK_REFUSED("bucketer: parameter 3 is not registered", coll_bucketer_grad_ready(made, 3));
    BK_REFUSED("parameter 3 is not registered", coll_bucketer_param_info(made, 3, &pinfo));
    BK_REFUSED("bucketer: bucket 0 does not exist", coll_bucketer_bucket_info(made, 0, &binfo));
    coll_bucketer_destroy(made);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comm_and_memory),
        cmocka_unit_test(test_collectives),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_bad_groups),
        cmocka_unit_test(test_bad_layouts),
        cmocka_unit_test(test_bad_ps_values),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_compression_and_timeline),
        cmocka_unit_test(test_groups_and_layouts),
        cmocka_unit_test(test_parameter_service),
        cmocka_unit_test(test_bucketer),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
