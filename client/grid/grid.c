/*
 * 3D-parallel grids: the coordinates of a rank in a grid of tp x pp x dp ranks numbered in a
 * chosen order (Megatron-LM's RankGenerator in megatron/core/parallel_state.py, order
 * "tp-dp-pp" by default), the groups along each dimension, and the groups themselves, made with
 * coll_comm_split(). The public API calls a grid coll_layout_t (collective_groups.h); here
 * "layout" is kept for what it means everywhere else in client/, a tensor layout's fingerprint.
 */
#include <stdlib.h>
#include <string.h>

#include "client/api/api.h"

static const char *const dim_names[COLL_DIM_COUNT] = {"tp", "pp", "dp"};

/* The dimension named at @p s ("tp", "pp" or "dp"), or -1. */
static int parse_dim(const char *s)
{
    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        if (strncmp(s, dim_names[d], 2) == 0) {
            return d;
        }
    }
    return -1;
}

/* "tp-dp-pp": three distinct names, '-' between them. */
static coll_status_t parse_order(const char *order, coll_dim_t out[COLL_DIM_COUNT])
{
    unsigned seen = 0;

    if (strlen(order) != 3 * COLL_DIM_COUNT - 1) {
        return COLL_ERR_INVALID;
    }
    for (int i = 0; i < COLL_DIM_COUNT; i++) {
        int d = parse_dim(order + 3 * i);
        if (d < 0 || (seen & (1u << d)) || (i > 0 && order[3 * i - 1] != '-')) {
            return COLL_ERR_INVALID;
        }
        seen |= 1u << d;
        out[i] = (coll_dim_t)d;
    }
    return COLL_OK;
}

/* Sizes of at least 1 whose product is at most COLL_WORLD_MAX; else COLL_ERR_INVALID and the
 * calling thread's message. */
static coll_status_t check_sizes(const int size[COLL_DIM_COUNT])
{
    int64_t ranks = 1;

    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        if (size[d] < 1) {
            coll__thread_set_error("coll_layout_init: %s %d is below 1", dim_names[d], size[d]);
            return COLL_ERR_INVALID;
        }
        ranks *= size[d];
    }
    if (ranks > (int64_t)COLL_WORLD_MAX) {
        coll__thread_set_error("coll_layout_init: tp %d x pp %d x dp %d = %lld ranks, above "
                               "the %d a job may have", size[0], size[1], size[2],
                               (long long)ranks, (int)COLL_WORLD_MAX);
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

coll_status_t coll_layout_init(coll_layout_t *layout, int tp, int pp, int dp, const char *order)
{
    coll_layout_t l = {.size = {tp, pp, dp}};

    COLL_ARG_CHECK(NULL, layout);
    if (check_sizes(l.size) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    order = order != NULL ? order : "tp-dp-pp";
    if (parse_order(order, l.order) != COLL_OK) {
        coll__thread_set_error("coll_layout_init: order \"%.64s\" does not name tp, pp and dp "
                               "once each, joined by '-' (e.g. \"tp-dp-pp\")", order);
        return COLL_ERR_INVALID;
    }
    *layout = l;
    return COLL_OK;
}

int coll_layout_size(const coll_layout_t *layout)
{
    COLL_ARG_CHECK_OR(NULL, layout, 0);
    return layout->size[0] * layout->size[1] * layout->size[2];
}

/* The coordinates of @p rank in @p grid (public function @p func, for the message): COLL_OK,
 * or COLL_ERR_INVALID and the calling thread's message when it is not a rank of the grid. */
static coll_status_t coords_of(const char *func, const coll_layout_t *grid, int rank,
                               int coords[COLL_DIM_COUNT])
{
    int size = coll_layout_size(grid);

    if (rank < 0 || rank >= size) {
        coll__thread_set_error("%s: rank %d is not a rank of the grid of %d (tp %d x pp %d x "
                               "dp %d)", func, rank, size, grid->size[COLL_DIM_TP],
                               grid->size[COLL_DIM_PP], grid->size[COLL_DIM_DP]);
        return COLL_ERR_INVALID;
    }
    for (int i = 0; i < COLL_DIM_COUNT; i++) {
        int d = grid->order[i];
        coords[d] = rank % grid->size[d];
        rank /= grid->size[d];
    }
    return COLL_OK;
}

coll_status_t coll_layout_coords(const coll_layout_t *layout, int rank,
                                 int coords[COLL_DIM_COUNT])
{
    COLL_ARG_CHECK(NULL, layout);
    COLL_ARG_CHECK(NULL, coords);
    return coords_of(__func__, layout, rank, coords);
}

/* The rank of @p coords. */
static int rank_of(const coll_layout_t *grid, const int coords[COLL_DIM_COUNT])
{
    int rank = 0;

    for (int i = COLL_DIM_COUNT - 1; i >= 0; i--) {
        int d = grid->order[i];
        rank = rank * grid->size[d] + coords[d];
    }
    return rank;
}

coll_status_t coll_layout_group(const coll_layout_t *layout, coll_dim_t dim, int rank,
                                int *ranks, int *color)
{
    int c[COLL_DIM_COUNT], index = 0, scale = 1;

    COLL_ARG_CHECK(NULL, layout);
    if ((unsigned)dim >= COLL_DIM_COUNT) {
        coll__thread_set_error("%s: dim %d is not a coll_dim_t (COLL_DIM_TP, _PP or _DP)",
                               __func__, (int)dim);
        return COLL_ERR_INVALID;
    }
    if (coords_of(__func__, layout, rank, c) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
    /* The group's index: the other coordinates, in the order's sense (faster first). */
    for (int i = 0; i < COLL_DIM_COUNT; i++) {
        int d = layout->order[i];
        if (d != (int)dim) {
            index += c[d] * scale;
            scale *= layout->size[d];
        }
    }
    for (int k = 0; ranks != NULL && k < layout->size[dim]; k++) {
        c[dim] = k;
        ranks[k] = rank_of(layout, c);
    }
    if (color != NULL) {
        *color = index;
    }
    return COLL_OK;
}

int coll_layout_intra_node(const coll_layout_t *layout, coll_dim_t dim, int ranks_per_node)
{
    int n, *ranks;
    int ok = ranks_per_node >= 1 && (unsigned)dim < COLL_DIM_COUNT;

    COLL_ARG_CHECK_OR(NULL, layout, 0);
    if (!ok || (ranks = malloc((size_t)(n = layout->size[dim]) * sizeof(int))) == NULL) {
        return 0;
    }
    for (int r = 0; ok && r < coll_layout_size(layout); r++) {
        coll_layout_group(layout, dim, r, ranks, NULL);
        for (int k = 1; ok && k < n; k++) {
            ok = ranks[k] / ranks_per_node == ranks[0] / ranks_per_node;
        }
    }
    free(ranks);
    return ok;
}

coll_status_t coll_comm_groups(coll_comm_t *comm, const coll_layout_t *layout,
                               coll_groups_t *groups)
{
    coll_groups_t g = {0};
    coll_status_t st = COLL_OK;

    COLL_ARG_CHECK(NULL, comm);
    if (layout == NULL || groups == NULL) {
        return coll__refuse_null(comm, __func__, layout == NULL ? "layout" : "groups");
    }
    if (coll_layout_size(layout) != comm->world_size) {
        return coll__refuse(comm, COLL_ERR_INVALID, "%s: rank %d: the grid (coll_layout_t) has "
                            "%d ranks, the communicator %d", __func__, comm->rank,
                            coll_layout_size(layout), comm->world_size);
    }
    coll_layout_coords(layout, comm->rank, g.coords);
    for (int d = 0; d < COLL_DIM_COUNT && st == COLL_OK; d++) {
        int color;
        coll_layout_group(layout, (coll_dim_t)d, comm->rank, NULL, &color);
        st = coll_comm_split(comm, color, g.coords[d], &g.comm[d]);
        g.intra_node[d] = st == COLL_OK && coll_comm_node_count(g.comm[d]) == 1;
    }
    if (st != COLL_OK) {
        coll_groups_destroy(&g);
        return st;
    }
    *groups = g;
    return COLL_OK;
}

void coll_groups_destroy(coll_groups_t *groups)
{
    if (groups == NULL) {
        return;
    }
    for (int d = 0; d < COLL_DIM_COUNT; d++) {
        coll_comm_destroy(groups->comm[d]);
    }
    memset(groups, 0, sizeof(*groups));
}
