/*
 * group_p2p_check: one rank of a live test of point-to-point on groups, started as every rank
 * of a local cluster by collective-launch. The groups are the pipeline groups of a layout
 * (-t tp -p pp, dp = world / (tp pp)), so a pp rank is a pipeline stage.
 *
 * - Order: every stage sends M micro-batches of activations (of different sizes) to the next
 *   stage and M gradients back, without keys; the receiver posts all its receives first, in
 *   order: the n-th send to a peer must land in the n-th receive from it.
 * - Tags: the same, with keys 100 + m, received in the reverse order of the keys.
 * - Communicators apart: each rank sends to the next job rank on the world and on a group of
 *   the same ranks in the same order, with the same key, other sizes and other data, at once:
 *   each receive must get its own communicator's message.
 * - Size mismatch: stage 0 sends 1009 floats, stage 1 expects 1014 (then 1000): both must fail
 *   with COLL_ERR_MISMATCH naming both sizes; a matching exchange then works.
 * Every received byte is checked against the sender's pattern, computed here.
 *
 * Exit status: 0 when everything checked out, 1 on a failed check, 2 on a usage error.
 */
#include "check_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WAIT_MS 60000
#define MICRO 6

/* A message: its communicator's ends (ranks of it), count, key (-1: none), data salt. */
typedef struct {
    coll_comm_t *comm;
    int src, dst;
    size_t count;
    int64_t key;
    uint64_t salt;
    float *buf;
    coll_request_t *req;
    coll_status_t st;
} msg_t;

static float pattern(const msg_t *m, size_t k)
{
    return (float)(check_mix(m->salt * 1000003u + (uint64_t)m->src * 7919u + k) % 1000000);
}

static void post(const check_ctx_t *c, msg_t *m, size_t count)
{
    coll_op_params_t p = {.field_mask = m->key >= 0 ? COLL_OP_PARAM_KEY : 0,
                          .key = (uint64_t)m->key};
    int sending = coll_comm_rank(m->comm) == m->src;
    void *mem = NULL;

    if (coll_mem_alloc(c->comm, (count ? count : 1) * sizeof(float), &mem) != COLL_OK) {
        check_die("coll_mem_alloc of %zu floats failed", count);
    }
    m->buf = mem;
    for (size_t k = 0; k < count; k++) {
        m->buf[k] = sending ? pattern(m, k) : -1.0f;
    }
    m->st = sending ? coll_send_async(m->comm, m->buf, count, COLL_FLOAT32, m->dst, &p, &m->req)
                    : coll_recv_async(m->comm, m->buf, count, COLL_FLOAT32, m->src, &p, &m->req);
    if (m->st != COLL_INPROGRESS && m->st != COLL_OK) {
        check_die("posting %s %d -> %d: %s: %s", sending ? "send" : "receive", m->src, m->dst,
                  coll_err_name(m->st), coll_comm_last_error(c->comm));
    }
}

static void wait_msg(const check_ctx_t *c, msg_t *m, const char *what)
{
    if (m->st == COLL_INPROGRESS) {
        m->st = check_wait(c, m->req, WAIT_MS, what, NULL, 0);
    }
}

/* The message arrived whole (receiver) or was kept (sender); then the buffer goes. */
static void verify(const check_ctx_t *c, msg_t *m, const char *what)
{
    wait_msg(c, m, what);
    if (m->st != COLL_OK) {
        check_die("%s %d -> %d (key %lld): %s: %s", what, m->src, m->dst, (long long)m->key,
                  coll_err_name(m->st), coll_comm_last_error(c->comm));
    }
    for (size_t k = 0; k < m->count; k++) {
        if (m->buf[k] != pattern(m, k)) {
            check_die("%s %d -> %d (key %lld): element %zu of %zu is %g, expected %g", what,
                      m->src, m->dst, (long long)m->key, k, m->count, (double)m->buf[k],
                      (double)pattern(m, k));
        }
    }
    coll_mem_free(c->comm, m->buf);
}

/* Micro-batch @p m's activation (@p fwd) or gradient between stages @p s and s + 1. */
static msg_t micro(coll_comm_t *pp, int s, int m, int fwd, int keyed)
{
    return (msg_t){.comm = pp, .src = fwd ? s : s + 1, .dst = fwd ? s + 1 : s,
                   .count = 1000 + 37 * (size_t)m + (fwd ? 0 : 5),
                   .key = keyed ? 100 + m + (fwd ? 0 : 50) : -1,
                   .salt = (uint64_t)(2 * m + fwd + 10 * keyed)};
}

static void add(const check_ctx_t *c, msg_t *msgs, int *k, msg_t m)
{
    msgs[*k] = m;
    post(c, &msgs[*k], m.count);
    (*k)++;
}

/* Every stage's messages to and from its neighbours: receives first (in order, or reversed
 * when keyed), then sends, then checks. */
static void pipeline(const check_ctx_t *c, coll_comm_t *pp, int keyed)
{
    int s = coll_comm_rank(pp), n = coll_comm_world_size(pp), k = 0;
    msg_t msgs[4 * MICRO];

    for (int i = 0; i < MICRO; i++) {
        int m = keyed ? MICRO - 1 - i : i;
        if (s > 0) {
            add(c, msgs, &k, micro(pp, s - 1, m, 1, keyed));
        }
        if (s + 1 < n) {
            add(c, msgs, &k, micro(pp, s, m, 0, keyed));
        }
    }
    for (int m = 0; m < MICRO; m++) {
        if (s + 1 < n) {
            add(c, msgs, &k, micro(pp, s, m, 1, keyed));
        }
        if (s > 0) {
            add(c, msgs, &k, micro(pp, s - 1, m, 0, keyed));
        }
    }
    for (int i = 0; i < k; i++) {
        verify(c, &msgs[i], keyed ? "keyed micro-batch" : "micro-batch in order");
    }
}

/* The same (source, destination, key) on the world and on a group of the same ranks. */
static void twins(const check_ctx_t *c)
{
    coll_comm_t *same = NULL;
    int next = (c->rank + 1) % c->world, prev = (c->rank + c->world - 1) % c->world, k = 0;
    msg_t msgs[4];

    if (coll_comm_split(c->comm, 0, c->rank, &same) != COLL_OK) {
        check_die("twins: coll_comm_split: %s", coll_comm_last_error(c->comm));
    }
    for (int w = 0; w < 2; w++) {
        coll_comm_t *comm = w ? same : c->comm;
        add(c, msgs, &k, (msg_t){.comm = comm, .src = prev, .dst = c->rank, .key = 9,
                                 .count = w ? 333 : 4096, .salt = 40 + (uint64_t)w});
    }
    for (int w = 0; w < 2; w++) {
        coll_comm_t *comm = w ? same : c->comm;
        add(c, msgs, &k, (msg_t){.comm = comm, .src = c->rank, .dst = next, .key = 9,
                                 .count = w ? 333 : 4096, .salt = 40 + (uint64_t)w});
    }
    for (int i = 0; i < k; i++) {
        verify(c, &msgs[i], i % 2 ? "group twin" : "world twin");
    }
    coll_comm_destroy(same);
}

/* Stage 0 sends 1009 floats to stage 1, which expects @p expect: both get MISMATCH, the sender
 * told both sizes, the receiver its own and, for a shorter message, the sender's (UCX does not
 * say how long a longer one was). */
static void mismatch(const check_ctx_t *c, coll_comm_t *pp, size_t expect, int key)
{
    int s = coll_comm_rank(pp);
    msg_t m = {.comm = pp, .src = 0, .dst = 1, .count = 1009, .key = key, .salt = 77};
    char sent[32], wanted[32];
    const char *err;

    post(c, &m, s == 0 ? m.count : expect);
    wait_msg(c, &m, "mismatched message");
    err = coll_comm_last_error(c->comm);
    snprintf(sent, sizeof(sent), "%d bytes", 4 * 1009);
    snprintf(wanted, sizeof(wanted), "%zu", 4 * expect);
    if (m.st != COLL_ERR_MISMATCH || strstr(err, wanted) == NULL ||
        ((s == 0 || expect > m.count) && strstr(err, sent) == NULL)) {
        check_die("stage %d of a message of 1009 floats, %zu expected: %s: '%s' (expected "
                  "COLL_ERR_MISMATCH naming %s and %s)", s, expect, coll_err_name(m.st), err,
                  sent, wanted);
    }
    coll_mem_free(c->comm, m.buf);
}

int main(int argc, char **argv)
{
    int tp = 1, pp = 2, opt;
    coll_layout_t l;
    coll_groups_t g;
    check_ctx_t c;

    check_set_prog(argv[0]);
    while ((opt = getopt(argc, argv, "t:p:")) != -1) {
        if (opt == 't' || opt == 'p') {
            *(opt == 't' ? &tp : &pp) = atoi(optarg);
        } else {
            fprintf(stderr, "usage: %s [-t TP] [-p PP]\n", argv[0]);
            return 2;
        }
    }
    check_join(&c, 64u << 20);
    if (pp < 2 || tp < 1 || coll_layout_init(&l, tp, pp, c.world / (tp * pp), NULL) != COLL_OK ||
        coll_layout_size(&l) != c.world) {
        check_usage_error("-t %d -p %d does not lay out %d ranks with pp >= 2", tp, pp, c.world);
    }
    if (coll_comm_groups(c.comm, &l, &g) != COLL_OK) {
        check_die("coll_comm_groups: %s", coll_comm_last_error(c.comm));
    }
    pipeline(&c, g.comm[COLL_DIM_PP], 0);
    pipeline(&c, g.comm[COLL_DIM_PP], 1);
    check_say(&c, 1, "pp groups of tp%d pp%d dp%d: %d micro-batches each way, in order and by "
              "key in reverse", tp, pp, c.world / tp / pp, MICRO);
    twins(&c);
    check_say(&c, 1, "the same (source, destination, key) on the world and a group: apart");
    if (g.coords[COLL_DIM_PP] < 2) {
        mismatch(&c, g.comm[COLL_DIM_PP], 1014, 5);
        mismatch(&c, g.comm[COLL_DIM_PP], 1000, 6);
    }
    pipeline(&c, g.comm[COLL_DIM_PP], 1);
    check_say(&c, 1, "size mismatch on a group: both ends fail naming both sizes; then it works");
    coll_groups_destroy(&g);
    coll_comm_destroy(c.comm);
    return 0;
}
