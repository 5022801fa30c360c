/*
 * The shared-memory path of multi-node jobs (client/shm*.c) with threads as ranks
 * (shm_world.h): the hand-over of a multi-node job's collective to the daemon in exactly one
 * node submission; and a multi-node allreduce reduced into local rank 0's node buffer, handed
 * over once, and distributed after the daemon's word (or ended with the error the word
 * carries, outputs untouched, also on a rank that had not agreed yet); and a rank that fails
 * the node after another one moved a post to DONE leaves that post its word.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "client/shm/shm.h"
#include "proto/frame.h"
#include "proto/wire.h"

#include "shm_world.h"

/* ---- a multi-node job: one node submission, the daemon completes every rank -------------- */

static void run_node(world_t *w, uint32_t l, void *p)
{
    coll_request_t *r = NULL;
    coll_status_t st;
    char algo[32];

    fill(w, l, 100);
    T_EQ(DONE(coll_allreduce_async(w->c[l], sendbuf(w, l), recvbuf(w, l), 100,
                                                     COLL_FLOAT32, COLL_SUM, NULL, &r), algo),
                     COLL_OK);
    T_STREQ(algo, "rd");
}

/* Takes the one node submission and completes every rank's request as the daemon does. */
static void *daemon_for_node(void *p)
{
    world_t *w = p;
    coll_submission_t rec;
    uint32_t found = 0, slot;
    uint64_t state;
    coll_shm_rec_t d;

    while (found == 0) {
        for (uint32_t l = 0; l < w->nlocal; l++) {
            while (coll_ctl_take(coll_ctl_of(w->pool, l), &rec) == 1) {
                T_EQ(rec.flags, COLL_SUBMISSION_NODE);
                found++;
            }
        }
        usleep(1000);
    }
    usleep(20000);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_ctl_t *ctl = coll_ctl_of(w->pool, l);
        T_EQ(coll_ctl_take(ctl, &rec), 0); /* exactly one submission in all */
        T_CHECK(coll_shm_find(coll_shm_rank_of(w->pool, w->nlocal, l), rec.key,
                                  COLL_SHM_POSTED, &slot, &state, &d));
        coll_shm_move(&coll_shm_rank_of(w->pool, w->nlocal, l)->post[slot], state,
                      COLL_SHM_TAKEN);
        uint32_t head = atomic_load(&ctl->comp_head);
        ctl->comp[head % COLL_CTL_SLOTS] = (coll_ctl_comp_t){.req_id = d.sub.req_id, .algo = "rd"};
        atomic_store(&ctl->comp_head, head + 1);
        coll_ctl_notify(ctl);
    }
    T_EQ(found, 1);
    return NULL;
}

static void test_node_submission(void **state)
{
    with_daemon(2, 2, daemon_for_node, run_node, NULL);
}

/* ---- a multi-node allreduce reduced in shared memory around the daemon's phase ------------ */

#define NODE_COUNT 20000 /* two chunks of the reduce, two of the distribution */
#define OTHER_NODE 1000.0f /* what the fake daemon adds: the other node's sum, everywhere */

/* Local rank 0's node buffers, after every rank's (the library allocates them; here given). */
#define NODE_REGION (COLL_POOL_PREFIX(MAXL) + MAXL * 2 * BUF)

/* g_late: the last rank posts first and waits once the others ended (it has not agreed, as a
 * rank descheduled meanwhile): it must still get the error, not a timeout. */
static int g_late;
static _Atomic uint32_t g_posted, g_ended;

static void wait_for(_Atomic uint32_t *v, uint32_t n)
{
    for (int i = 0; atomic_load(v) < n && i < WAIT_MS; i++) {
        usleep(1000);
    }
}

static void run_reduced(world_t *w, uint32_t l, void *p)
{
    coll_status_t want = *(const coll_status_t *)p, st;
    float *out = l % 2 ? sendbuf(w, l) : recvbuf(w, l); /* odd ranks in place */
    coll_request_t *r = NULL;
    char algo[32];
    int late = g_late && l == w->nlocal - 1;

    fill(w, l, NODE_COUNT);
    wait_for(&g_posted, g_late && !late);
    st = coll_allreduce_async(w->c[l], sendbuf(w, l), out, NODE_COUNT, COLL_FLOAT32, COLL_SUM,
                              NULL, &r);
    atomic_store(&g_posted, 1);
    wait_for(&g_ended, late ? w->nlocal - 1 : 0);
    T_EQ(finish_req(st, r, algo), want);
    atomic_fetch_add(&g_ended, 1);
    for (size_t i = 0; i < NODE_COUNT; i++) {
        T_CHECK(out[i] == (want == COLL_OK ? sum_at(w, i) + OTHER_NODE
                                           : l % 2 ? input(l, i) : -1e30f));
    }
    T_CHECK(want == COLL_OK ? strcmp(algo, "shm+rd") == 0
                            : strstr(coll_comm_last_error(w->c[l]), "inter-node phase") != NULL);
}

/* The one node submission of the reduced allreduce: no output written, the node sum in local
 * rank 0's node buffer; then the other node's part is added and the node word written. */
static void play_inter_node(world_t *w, const coll_submission_t *rec, coll_status_t status)
{
    coll_shm_rank_t *home = coll_shm_rank_of(w->pool, w->nlocal, 0);
    uint32_t slot;
    uint64_t state;
    coll_shm_rec_t d;
    float *node;

    T_CHECK(coll_shm_find(home, rec->key, COLL_SHM_POSTED, &slot, &state, &d));
    T_EQ(d.node_off, NODE_REGION);
    node = (float *)(void *)(w->pool + d.node_off);
    for (size_t i = 0; i < NODE_COUNT; i++) {
        T_CHECK(node[i] == sum_at(w, i));
        for (uint32_t l = 0; l < w->nlocal; l++) {
            T_CHECK(l % 2 ? sendbuf(w, l)[i] == input(l, i) : recvbuf(w, l)[i] == -1e30f);
        }
        node[i] += OTHER_NODE;
    }
    atomic_store_explicit(&home->post[slot].node,
                          coll_shm_node_word(coll_shm_gen(state), status, COLL_ALGO_RD),
                          memory_order_release);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        coll_ctl_notify(coll_ctl_of(w->pool, l));
    }
}

static coll_status_t g_node_status; /* what the fake daemon's node word says */

static void *daemon_for_reduced(void *p)
{
    world_t *w = p;
    coll_submission_t rec;
    uint32_t found = 0;

    for (int tries = 0; found == 0 && tries < WAIT_MS; tries++) {
        for (uint32_t l = 0; l < w->nlocal; l++) {
            while (coll_ctl_take(coll_ctl_of(w->pool, l), &rec) == 1) {
                T_EQ(rec.flags, COLL_SUBMISSION_NODE | COLL_SUBMISSION_REDUCED);
                found++;
            }
        }
        usleep(found == 0 ? 1000 : 0);
    }
    T_EQ(found, 1);
    play_inter_node(w, &rec, g_node_status);
    usleep(20000);
    for (uint32_t l = 0; l < w->nlocal; l++) {
        T_EQ(coll_ctl_take(coll_ctl_of(w->pool, l), &rec), 0); /* exactly one in all */
    }
    return NULL;
}

static void reduced_case(uint32_t nlocal, coll_status_t status, int late)
{
    world_t *w = world_new(nlocal, 2);
    pthread_t d;

    g_late = late;
    atomic_store(&g_posted, 0);
    atomic_store(&g_ended, 0);

    coll_shm_hdr_of(w->pool, nlocal)->node_max_bytes = NODE_BYTES;
    coll__shm_node_provide(w->c[0]->shm, NODE_REGION, NODE_BYTES * COLL_SHM_NODE_BUFS);
    g_node_status = status;
    pthread_create(&d, NULL, daemon_for_reduced, w);
    on_every_rank(w, run_reduced, &status);
    pthread_join(d, NULL);
    T_EQ(w->c[0]->shm->node_busy, 0); /* the node buffer is free again */
    world_free(w);
}

static void test_node_reduced(void **state)
{
    reduced_case(2, COLL_OK, 0);
    reduced_case(3, COLL_OK, 0);
    reduced_case(4, COLL_OK, 0);
    reduced_case(3, COLL_ERR_UNSUPPORTED, 0);
    reduced_case(3, COLL_ERR_UNSUPPORTED, 1);
    reduced_case(2, COLL_OK, 1);
}

/* Two ranks fail the node word of a third's post at once: rank 0's word went in first, rank 1
 * moved the post to DONE before rank 0 could (here: it is DONE, its word not yet there when
 * rank 0 writes it). Rank 0 must not take its word back: the owner, finding DONE, reads it
 * (taken back, the owner reported COLL_OK for outputs never written). */
static void test_fail_node_after_another_rank(void **state)
{
    world_t *w = world_new(3, 2);
    coll_shm_t *s = w->c[0]->shm;
    uint32_t slots[3] = {0, 0, 0};
    uint64_t states[3], word = coll_shm_node_word(1, COLL_ERR_UNSUPPORTED, COLL_ALGO_RD);
    coll_shm_op_t op = {.route = COLL_SHM_ROUTE_NODE, .agreed = 1, .peer_slot = slots,
                        .peer_state = states};

    (void)state;
    for (uint32_t l = 0; l < 3; l++) {
        states[l] = coll_shm_state(1, COLL_SHM_POSTED);
        atomic_store(&coll__shm_post_of(s, l, 0)->state, states[l]);
    }
    atomic_store(&coll__shm_post_of(s, 2, 0)->state, coll_shm_state(1, COLL_SHM_DONE));
    coll__post_fail_node(s, &op, word);
    for (uint32_t l = 1; l < 3; l++) {
        coll_shm_post_t *p = coll__shm_post_of(s, l, 0);
        T_EQ(coll_shm_phase(atomic_load(&p->state)), COLL_SHM_DONE);
        T_EQ(atomic_load(&p->node), word);
    }
    world_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_submission),
        cmocka_unit_test(test_node_reduced),
        cmocka_unit_test(test_fail_node_after_another_rank),
    };
    return cmocka_run_group_tests_name("client shared-memory path, multi-node jobs", tests, NULL,
                                       NULL);
}
