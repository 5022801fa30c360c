/*
 * Groups: a communicator's ranks, nodes and local members, computed from the job's tables once,
 * so that the algorithms run on a group as on a job of its own.
 */
#include "core/group.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/job.h"

/* The arrays of a group of @p size ranks on @p nnodes nodes of a job with @p nlocal_job local
 * ranks; NULL when out of memory. */
static coll_group_t *group_alloc(uint32_t size, uint32_t nnodes, uint32_t nlocal_job)
{
    coll_group_t *g = calloc(1, sizeof(*g));

    if (g == NULL) {
        return NULL;
    }
    coll_list_init(&g->link);
    g->ranks = malloc(size * sizeof(uint32_t));
    g->rank_node = malloc(size * sizeof(uint32_t));
    g->rank_local = malloc(size * sizeof(uint32_t));
    g->nodes = malloc(nnodes * sizeof(uint32_t));
    g->node_ranks = calloc(nnodes, sizeof(*g->node_ranks));
    g->node_nranks = calloc(nnodes, sizeof(uint32_t));
    g->locals = malloc(nlocal_job * sizeof(uint32_t));
    g->local_of = malloc(nlocal_job * sizeof(uint32_t));
    if (g->ranks == NULL || g->rank_node == NULL || g->rank_local == NULL || g->nodes == NULL ||
        g->node_ranks == NULL || g->node_nranks == NULL || g->locals == NULL ||
        g->local_of == NULL) {
        coll_group_free(g);
        return NULL;
    }
    g->size = size;
    g->nnodes = nnodes;
    return g;
}

void coll_group_free(coll_group_t *g)
{
    if (g == NULL) {
        return;
    }
    for (uint32_t n = 0; g->node_ranks != NULL && n < g->nnodes; n++) {
        free((void *)g->node_ranks[n]);
    }
    free(g->ranks);
    free(g->rank_node);
    free(g->rank_local);
    free(g->nodes);
    free(g->node_ranks);
    free(g->node_nranks);
    free(g->locals);
    free(g->local_of);
    free(g);
}

/* Group rank of every job rank (COLL_GROUP_NONE outside), checking @p ranks; the number of
 * nodes with a member in @p nnodes_p and, per job node, 1 + its group node (0: none) in
 * @p gnode. */
static coll_status_t index_members(const coll_job_t *job, const uint32_t *ranks, uint32_t size,
                                   uint32_t *grank, uint32_t *gnode, uint32_t *nnodes_p,
                                   char *err, size_t errlen)
{
    uint32_t nnodes = 0;

    for (uint32_t r = 0; r < job->world_size; r++) {
        grank[r] = COLL_GROUP_NONE;
    }
    for (uint32_t g = 0; g < size; g++) {
        if (ranks[g] >= job->world_size || grank[ranks[g]] != COLL_GROUP_NONE) {
            snprintf(err, errlen, "rank %u of the group is %s", ranks[g],
                     ranks[g] >= job->world_size ? "not a rank of the job" : "listed twice");
            return COLL_ERR_INVALID;
        }
        grank[ranks[g]] = g;
        gnode[job->rank_node[ranks[g]]] = 1;
    }
    for (uint32_t n = 0; n < job->nnodes; n++) {
        gnode[n] = gnode[n] ? ++nnodes : 0;
    }
    *nnodes_p = nnodes;
    return COLL_OK;
}

/* Each group node's members in local rank order, and this node's local members. */
static coll_status_t lay_out(const coll_job_t *job, coll_group_t *g, const uint32_t *grank,
                             const uint32_t *gnode)
{
    for (uint32_t jn = 0; jn < job->nnodes; jn++) {
        const coll_node_t *node = &job->nodes[jn];
        uint32_t n, k = 0, *list;
        if (gnode[jn] == 0) {
            continue;
        }
        n = gnode[jn] - 1;
        g->nodes[n] = jn;
        if ((list = malloc(node->nranks * sizeof(uint32_t))) == NULL) {
            return COLL_ERR_NOMEM;
        }
        for (uint32_t l = 0; l < node->nranks; l++) {
            uint32_t gr = grank[node->ranks[l]];
            if (gr != COLL_GROUP_NONE) {
                g->rank_node[gr] = n;
                g->rank_local[gr] = k;
                list[k++] = gr;
            }
        }
        g->node_ranks[n] = list;
        g->node_nranks[n] = k;
    }
    for (uint32_t l = 0; l < job->local_size; l++) {
        uint32_t gr = grank[job->ranks[l]];
        g->local_of[l] = gr == COLL_GROUP_NONE ? COLL_GROUP_NONE : g->nlocal;
        if (gr != COLL_GROUP_NONE) {
            g->locals[g->nlocal++] = l;
        }
    }
    return COLL_OK;
}

static coll_status_t build(const coll_job_t *job, uint32_t id, const uint32_t *ranks,
                           uint32_t size, uint32_t *grank, uint32_t *gnode, coll_group_t **g_p,
                           char *err, size_t errlen)
{
    uint32_t nnodes;
    coll_group_t *g;
    coll_status_t st = index_members(job, ranks, size, grank, gnode, &nnodes, err, errlen);

    if (st != COLL_OK) {
        return st;
    }
    if (gnode[job->node_rank] == 0) {
        snprintf(err, errlen, "none of the group's %u ranks is on this node", size);
        return COLL_ERR_INVALID;
    }
    if ((g = group_alloc(size, nnodes, job->local_size)) == NULL) {
        return COLL_ERR_NOMEM;
    }
    g->id = id;
    g->node_rank = gnode[job->node_rank] - 1;
    memcpy(g->ranks, ranks, size * sizeof(uint32_t));
    if (lay_out(job, g, grank, gnode) != COLL_OK) {
        coll_group_free(g);
        return COLL_ERR_NOMEM;
    }
    *g_p = g;
    return COLL_OK;
}

coll_status_t coll_group_build(const coll_job_t *job, uint32_t id, const uint32_t *ranks,
                               uint32_t size, coll_group_t **g_p, char *err, size_t errlen)
{
    uint32_t *grank = malloc(job->world_size * sizeof(uint32_t));
    uint32_t *gnode = calloc(job->nnodes, sizeof(uint32_t));
    coll_status_t st = COLL_ERR_NOMEM;

    if (grank != NULL && gnode != NULL) {
        st = build(job, id, ranks, size, grank, gnode, g_p, err, errlen);
    }
    if (st == COLL_ERR_NOMEM) {
        snprintf(err, errlen, "daemon out of memory for a group of %u ranks", size);
    }
    free(grank);
    free(gnode);
    return st;
}

coll_status_t coll_group_world(coll_job_t *job)
{
    uint32_t *ranks = malloc(job->world_size * sizeof(uint32_t));
    char err[128];
    coll_status_t st = COLL_ERR_NOMEM;

    if (ranks != NULL) {
        for (uint32_t r = 0; r < job->world_size; r++) {
            ranks[r] = r;
        }
        st = coll_group_build(job, 0, ranks, job->world_size, &job->world, err, sizeof(err));
    }
    free(ranks);
    return st;
}

coll_group_t *coll_group_find(const coll_job_t *job, uint32_t id)
{
    coll_group_t *g, *tmp;

    if (id == 0) {
        return job->world;
    }
    coll_list_for_each_safe(g, tmp, &((coll_job_t *)job)->groups, coll_group_t, link)
    {
        if (g->id == id) {
            return g;
        }
    }
    return NULL;
}

int coll_group_same_ranks(const coll_group_t *g, const uint32_t *ranks, uint32_t size)
{
    return g->size == size && memcmp(g->ranks, ranks, size * sizeof(uint32_t)) == 0;
}

void coll_group_unref(coll_group_t *g)
{
    if (g->id != 0 && g->registered == 0 && g->ops == 0) {
        coll_list_remove(&g->link);
        coll_group_free(g);
    }
}

void coll_group_free_all(coll_job_t *job)
{
    coll_group_t *g, *tmp;

    coll_list_for_each_safe(g, tmp, &job->groups, coll_group_t, link)
    {
        coll_list_remove(&g->link);
        coll_group_free(g);
    }
    coll_group_free(job->world);
    job->world = NULL;
}
