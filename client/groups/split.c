/*
 * Communicator split: the ranks of a parent exchange (color, key, node, next unused group id)
 * with one all-gather, every rank computes the same groups and ids (split_plan.c), registers
 * its own group with its daemon, and an allreduce of the outcomes makes the split succeed or
 * fail on every rank alike. The new communicator uses the parent's connection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/api/api.h"
#include "client/groups/split_plan.h"

/* A group message is local work for the daemon; this only bounds a daemon that hangs. */
#define COLL_GROUP_TIMEOUT_MS 30000

/* Scratch of one split in the pool: this rank's entry, everyone's, the new group's ranks. */
typedef struct {
    coll__split_entry_t *mine;
    coll__split_entry_t *all;
    uint32_t *ranks;
    void *mem;
} scratch_t;

/* Send @p msg (a GroupQuery or GroupCreate, whose req_id this sets through @p req_id) and wait
 * for the daemon's GroupReply; on COLL_OK the answered request in @p r_p, to read and then
 * coll__req_release() (the reply's own status is in it); else the link's error or
 * COLL_ERR_TIMEDOUT. Connection lock held. */
static coll_status_t group_request(coll_comm_t *c, coll_client_msg_t *msg, uint32_t *req_id,
                                   coll_request_t **r_p)
{
    coll_request_t *r = coll__req_new(c, COLL_REQ_GROUP);
    coll_status_t st;

    if (r == NULL) {
        return COLL_ERR_NOMEM;
    }
    *req_id = r->id;
    st = coll__req_exchange(c, r, msg, COLL_GROUP_TIMEOUT_MS);
    if (st == COLL_OK) {
        *r_p = r;
    }
    return st;
}

/* The lowest group id that this rank's daemon and this rank know to be unused. */
static coll_status_t query_next(coll_comm_t *comm, uint32_t *next_p)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__GroupQuery q = COLL__WIRE__GROUP_QUERY__INIT;
    coll_comm_t *k = comm->conn;
    coll_request_t *r;
    coll_status_t st;

    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_GROUP_QUERY;
    msg.group_query = &q;
    pthread_mutex_lock(&k->lock);
    st = group_request(comm, &msg, &q.req_id, &r);
    if (st == COLL_OK) {
        st = r->status;
        *next_p = r->next_group > k->next_group ? r->next_group : k->next_group;
        coll__req_release(r);
    }
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* Wait for a collective of the split (bounded by the job's timeout, as every collective). */
static coll_status_t finish(coll_status_t st, coll_request_t *r)
{
    if (st == COLL_INPROGRESS) {
        st = coll_req_wait(r, -1);
        coll_req_free(r);
    }
    return st;
}

static coll_status_t exchange(coll_comm_t *comm, const scratch_t *sc, int color, int key,
                              uint32_t next)
{
    coll_request_t *r = NULL;

    coll_status_t st;

    *sc->mine = (coll__split_entry_t){.color = color, .key = key,
                                      .node = comm->conn->node_rank, .next_group = next};
    st = coll_allgather_async(comm, sc->mine, sc->all, 4, COLL_INT32, NULL, &r);
    return finish(st, r);
}

/* The most negative outcome over the parent's ranks (COLL_OK when all succeeded). */
static coll_status_t agree(coll_comm_t *comm, const scratch_t *sc, coll_status_t mine,
                           coll_status_t *all_p)
{
    coll_request_t *r = NULL;
    coll_status_t st;

    sc->mine->color = mine;
    st = coll_allreduce_async(comm, &sc->mine->color, &sc->mine->color, 1, COLL_INT32, COLL_MIN,
                              NULL, &r);
    st = finish(st, r);
    *all_p = (coll_status_t)sc->mine->color;
    return st;
}

/* Register this rank's group with its daemon; its place on this node in @p reply. */
static coll_status_t register_group(coll_comm_t *comm, const scratch_t *sc,
                                    const coll__split_t *p, const uint32_t *members,
                                    coll_request_t **reply)
{
    coll_client_msg_t msg = COLL__WIRE__CLIENT_MSG__INIT;
    Coll__Wire__GroupCreate g = COLL__WIRE__GROUP_CREATE__INIT;
    coll_comm_t *k = comm->conn;
    coll_status_t st;

    for (uint32_t i = 0; i < p->size; i++) {
        sc->ranks[i] = (uint32_t)coll_comm_job_rank(comm, (int)members[i]);
    }
    g.group = p->group;
    g.size = p->size;
    g.ranks_offset = (uint64_t)((uint8_t *)sc->ranks - k->pool);
    g.last_group = p->last_group;
    msg.body_case = COLL__WIRE__CLIENT_MSG__BODY_GROUP_CREATE;
    msg.group_create = &g;
    pthread_mutex_lock(&k->lock);
    st = group_request(comm, &msg, &g.req_id, reply);
    if (st == COLL_OK && (st = (*reply)->status) != COLL_OK) {
        coll__req_release(*reply);
    }
    pthread_mutex_unlock(&k->lock);
    return st;
}

/* The new communicator, from the plan and the daemon's reply. NULL: no memory. */
static coll_comm_t *make_group(coll_comm_t *comm, const coll__split_t *p, const uint32_t *members,
                               const coll_request_t *reply)
{
    coll_comm_t *k = comm->conn, *g = calloc(1, sizeof(*g));

    if (g == NULL || (g->job_ranks = malloc(p->size * sizeof(uint32_t))) == NULL) {
        free(g);
        return NULL;
    }
    for (uint32_t i = 0; i < p->size; i++) {
        g->job_ranks[i] = (uint32_t)coll_comm_job_rank(comm, (int)members[i]);
    }
    g->conn = k;
    g->group = p->group;
    g->rank = (int)p->rank;
    g->world_size = (int)p->size;
    g->local_rank = (int)reply->group_local_rank;
    g->local_size = (int)reply->group_local_size;
    g->node_count = reply->group_nodes;
    g->owner = pthread_self();
    g->algo = k->algo;
    return g;
}

static coll_status_t scratch_alloc(coll_comm_t *comm, scratch_t *sc)
{
    size_t n = (size_t)comm->world_size;
    coll_status_t st = coll_mem_alloc(comm, (1 + n) * sizeof(coll__split_entry_t) +
                                                n * sizeof(uint32_t), &sc->mem);

    if (st == COLL_OK) {
        sc->mine = sc->mem;
        sc->all = sc->mine + 1;
        sc->ranks = (uint32_t *)(void *)(sc->all + n);
    }
    return st;
}

/* The group of this rank (COLL_OK, NULL for COLL_UNDEFINED), registered on every rank's daemon,
 * or the split's error on every rank. */
static coll_status_t split(coll_comm_t *comm, const scratch_t *sc, int color, int key,
                           coll_comm_t **g_p)
{
    coll_comm_t *k = comm->conn;
    uint32_t next = 1, *members = malloc((size_t)comm->world_size * sizeof(uint32_t));
    coll_request_t *reply = NULL;
    coll__split_t p;
    coll_status_t st = members == NULL ? COLL_ERR_NOMEM : query_next(comm, &next);
    coll_status_t mine = COLL_OK, all = COLL_OK;
    int registered;
    char err[256];

    if (st == COLL_OK && (st = exchange(comm, sc, color, key, next)) != COLL_OK) {
        snprintf(err, sizeof(err), "%s", coll_comm_last_error(comm));
        coll__set_error(comm, "coll_comm_split: the exchange over the parent failed: %s", err);
    }
    if (st == COLL_OK && (st = coll__split_plan(sc->all, (uint32_t)comm->world_size,
                                                k->node_count, (uint32_t)comm->rank, members,
                                                &p, err, sizeof(err))) != COLL_OK) {
        coll__set_error(comm, "%s", err);
    }
    if (st != COLL_OK) {
        free(members);
        return st;
    }
    mine = p.group != 0 ? register_group(comm, sc, &p, members, &reply) : COLL_OK;
    registered = mine == COLL_OK && p.group != 0;
    if (registered && (*g_p = make_group(comm, &p, members, reply)) == NULL) {
        mine = COLL_ERR_NOMEM;
    }
    st = agree(comm, sc, mine, &all);
    if (st == COLL_OK && all != COLL_OK && mine == COLL_OK) {
        coll__set_error(comm, "coll_comm_split: registering the groups failed on another rank "
                        "of the parent (%s)", coll_err_name(all));
    }
    pthread_mutex_lock(&k->lock);
    k->next_group = p.last_group + 1 > k->next_group ? p.last_group + 1 : k->next_group;
    if (reply != NULL) {
        coll__req_release(reply);
    }
    if (registered && (st != COLL_OK || all != COLL_OK)) {
        coll__group_leave(k, p.group);
    }
    k->refs += st == COLL_OK && all == COLL_OK && *g_p != NULL;
    pthread_mutex_unlock(&k->lock);
    free(members);
    return st != COLL_OK ? st : all;
}

coll_status_t coll_comm_split(coll_comm_t *comm, int color, int key, coll_comm_t **newcomm_p)
{
    coll_comm_t *g = NULL;
    scratch_t sc;
    coll_status_t st;

    COLL_ARG_CHECK(NULL, comm);
    /* The other ranks would wait for this one in the split: refused, the job ends for them. */
    if (newcomm_p == NULL) {
        return coll__refuse_null(comm, __func__, "newcomm_p");
    }
    if (color < COLL_UNDEFINED) {
        return coll__refuse(comm, COLL_ERR_INVALID, "%s: rank %d: color %d is below "
                            "COLL_UNDEFINED (-1)", __func__, comm->rank, color);
    }
    if ((st = scratch_alloc(comm, &sc)) != COLL_OK) {
        return st;
    }
    st = split(comm, &sc, color, key, &g);
    coll_mem_free(comm, sc.mem);
    if (st != COLL_OK && g != NULL) {
        free(g->job_ranks);
        free(g);
        g = NULL;
    }
    if (st == COLL_OK) {
        *newcomm_p = g;
    }
    return st;
}

int coll_comm_node_count(const coll_comm_t *comm)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    return (int)comm->node_count;
}

int coll_comm_job_rank(const coll_comm_t *comm, int rank)
{
    COLL_ARG_CHECK_OR(NULL, comm, -1);
    if (rank < 0 || rank >= comm->world_size) {
        return -1;
    }
    return comm->job_ranks != NULL ? (int)comm->job_ranks[rank] : rank;
}
