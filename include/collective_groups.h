/**
 * @file collective_groups.h
 * @brief Groups of a job's ranks: communicator split (as MPI_Comm_split and ncclCommSplit) and
 *        the tensor-, pipeline- and data-parallel groups of a (tp, pp, dp) layout in
 *        Megatron-LM's rank order. Included by collective.h.
 *
 * A group is a communicator of its own: collectives, point-to-point and the bucketer work on
 * it with ranks, sizes and roots of the group, and involve only its ranks and the nodes they
 * are on. It shares its parent's connection to the daemon, its pool (coll_mem_alloc() on any
 * communicator of a rank allocates in the one pool of the job on its node), its lock and its
 * coll_comm_last_error(); no new rendezvous is made. Many groups may run operations at the
 * same time: the daemons match operations by (group, key), so two groups' operations never
 * pair, whatever their keys.
 *
 * Failures: a job fails as a whole. A rank that dies (or leaves) while an operation of one of
 * its communicators is pending, a daemon that dies, a mismatch or a timeout in any group end
 * every communicator of the job, the disjoint groups' included: their pending and later
 * operations fail with the error that names the culprit (COLL_ERR_JOB, COLL_ERR_PEER, ...). A
 * rank that leaves with nothing pending ends its part cleanly: a group without it goes on; the
 * next collective of a group with it fails the job, naming it (at once when a member on its
 * node submits that collective, otherwise at the job's timeout: "rank R (node N, left the
 * job)").
 */
#ifndef COLLECTIVE_GROUPS_H
#define COLLECTIVE_GROUPS_H

#ifdef __cplusplus
extern "C" {
#endif

/** The color of a rank that joins no group in coll_comm_split() (as MPI_UNDEFINED). */
#define COLL_UNDEFINED (-1)

/** Most groups a job can make over its life (group ids are 12 bits of the data path's tags;
 *  a split uses one id per group that shares a node with another group of the same split). */
#define COLL_MAX_GROUP_ID 4095

/**
 * @brief Split @p comm into groups: the ranks that give the same @p color form one group,
 *        ordered by @p key (ties by their rank in @p comm). Collective over @p comm: every
 *        rank of it must call it, in the same order as its other collectives (it takes two of
 *        @p comm's call-order numbers), from the thread that created @p comm.
 *
 * It exchanges the colors and keys with one all-gather over @p comm, registers the new group
 * with this rank's daemon (which already knows every node) and confirms with an allreduce that
 * every rank succeeded, so that it succeeds or fails on all ranks alike.
 *
 * @param [in]  comm       Parent communicator (the world or a group).
 * @param [in]  color      >= 0, or COLL_UNDEFINED for a rank that joins no group.
 * @param [in]  key        Any value; orders the group's ranks.
 * @param [out] newcomm_p  The rank's group, destroyed with coll_comm_destroy() (before or after
 *                         its parent: the connection stays until the last communicator of the
 *                         rank goes); NULL for COLL_UNDEFINED. Set on COLL_OK only.
 * @return COLL_OK;
 *         COLL_ERR_INVALID for a NULL @p comm (nothing else happens); for a NULL @p newcomm_p,
 *         a color below COLL_UNDEFINED or a call from another thread (the job fails on every
 *         rank then, as they would wait in vain), or
 *         when a split run at the same time by ranks of a shared node took the same group id
 *         (every rank of this split gets it; split one after the other);
 *         COLL_ERR_NOMEM when the job has used up its group ids (COLL_MAX_GROUP_ID) or memory;
 *         COLL_ERR_TIMEDOUT, COLL_ERR_MISMATCH when some ranks of @p comm did not call it (or
 *         called another collective at its place): the exchange fails with the ranks that are
 *         missing in coll_comm_last_error(); COLL_ERR_JOB, COLL_ERR_CLOSED as collectives.
 */
COLL_API coll_status_t coll_comm_split(coll_comm_t *comm, int color, int key,
                                       coll_comm_t **newcomm_p);

/** @return The number of nodes @p comm's ranks are on (1: all on this node); -1 for a NULL
 *          @p comm. Thread-safe. */
COLL_API int coll_comm_node_count(const coll_comm_t *comm);

/**
 * @return The rank in the job (the world communicator) of rank @p rank of @p comm; -1 when
 *         @p rank is out of range or @p comm is NULL. Thread-safe.
 */
COLL_API int coll_comm_job_rank(const coll_comm_t *comm, int rank);

/** Dimensions of a 3D-parallel layout. */
typedef enum {
    COLL_DIM_TP = 0, /**< tensor parallelism: the matrices of a layer split over the group */
    COLL_DIM_PP = 1, /**< pipeline parallelism: consecutive stages of layers */
    COLL_DIM_DP = 2, /**< data parallelism: replicas whose gradients are averaged */
    COLL_DIM_COUNT
} coll_dim_t;

/**
 * A (tp, pp, dp) layout of tp x pp x dp ranks. Ranks are numbered with order[0] fastest:
 * rank = c[o0] + size[o0] * (c[o1] + size[o1] * c[o2]) for the coordinates c. Megatron-LM's
 * default order "tp-dp-pp" (megatron/core/parallel_state.py) puts a tp group on consecutive
 * ranks, that is on one node when tp divides the ranks per node.
 */
typedef struct {
    int size[COLL_DIM_COUNT];         /**< ranks along each dimension, >= 1 */
    coll_dim_t order[COLL_DIM_COUNT]; /**< the dimensions, fastest varying first */
} coll_layout_t;

/**
 * @brief Fill @p layout for sizes @p tp, @p pp, @p dp and rank order @p order: the three names
 *        "tp", "pp", "dp" separated by '-', fastest first ("tp-dp-pp", "tp-pp-dp", "dp-tp-pp",
 *        ...); NULL means "tp-dp-pp". Pure function; thread-safe.
 * @return COLL_OK; COLL_ERR_INVALID for a size below 1, a product above 2^20 or an order that
 *         does not name each dimension once (@p layout unchanged), or a NULL @p layout (the
 *         message, naming the function and the bad value, in coll_comm_last_error(NULL)).
 */
COLL_API coll_status_t coll_layout_init(coll_layout_t *layout, int tp, int pp, int dp,
                                        const char *order);

/** @return The number of ranks of @p layout, tp x pp x dp; 0 for a NULL @p layout. */
COLL_API int coll_layout_size(const coll_layout_t *layout);

/**
 * @brief The coordinates of @p rank in @p layout: @p coords[COLL_DIM_TP] is its tp rank (its
 *        rank in its tp group), and so on. Pure function.
 * @return COLL_OK; COLL_ERR_INVALID when @p rank is not in 0 .. coll_layout_size() - 1, or
 *         for a NULL @p layout or @p coords (the message, naming the function and the bad
 *         value, in coll_comm_last_error(NULL)).
 */
COLL_API coll_status_t coll_layout_coords(const coll_layout_t *layout, int rank,
                                          int coords[COLL_DIM_COUNT]);

/**
 * @brief The group of dimension @p dim that contains @p rank: its members in group rank order
 *        (the coordinate along @p dim) and its index among the groups of that dimension (the
 *        color coll_comm_groups() splits with: the other two coordinates, the faster one
 *        first). Pure function.
 * @param [out] ranks  Room for layout->size[dim] ranks; may be NULL.
 * @param [out] color  The group's index, 0 .. size / size[dim] - 1; may be NULL.
 * @return COLL_OK; COLL_ERR_INVALID for a bad @p dim or @p rank, or a NULL @p layout (the
 *         message, naming the function and the bad value, in coll_comm_last_error(NULL)).
 */
COLL_API coll_status_t coll_layout_group(const coll_layout_t *layout, coll_dim_t dim, int rank,
                                         int *ranks, int *color);

/**
 * @brief Whether every group of dimension @p dim lies inside one node when the ranks fill the
 *        nodes in order, @p ranks_per_node each (rank r on node r / ranks_per_node). Pure.
 * @return 1 when they all do, 0 when one spans nodes, @p ranks_per_node < 1 or @p layout is
 *         NULL.
 */
COLL_API int coll_layout_intra_node(const coll_layout_t *layout, coll_dim_t dim,
                                    int ranks_per_node);

/** The tp, pp and dp groups of one rank (coll_comm_groups()). */
typedef struct {
    coll_comm_t *comm[COLL_DIM_COUNT]; /**< its group of each dimension (owned) */
    int coords[COLL_DIM_COUNT];        /**< its rank in each (coll_layout_coords()) */
    int intra_node[COLL_DIM_COUNT];    /**< 1 when that group's ranks are all on this node */
} coll_groups_t;

/**
 * @brief Make the tp, pp and dp groups of @p layout over @p comm (three coll_comm_split(),
 *        colors and keys from coll_layout_group()), whatever the ranks' placement: the flags
 *        say which groups stay inside a node as placed. Collective over @p comm, as
 *        coll_comm_split().
 * @param [out] groups  Filled on COLL_OK; free with coll_groups_destroy().
 * @return COLL_OK; COLL_ERR_INVALID for a NULL @p comm, and (the job fails then, as in
 *         coll_comm_split(), before anything is exchanged) when coll_layout_size(@p layout)
 *         differs from @p comm's size or for a NULL @p layout or @p groups; the errors of
 *         coll_comm_split() (groups made before the failure are destroyed).
 */
COLL_API coll_status_t coll_comm_groups(coll_comm_t *comm, const coll_layout_t *layout,
                                        coll_groups_t *groups);

/** @brief Destroy the groups of coll_comm_groups() and clear @p groups. Safe with NULL. */
COLL_API void coll_groups_destroy(coll_groups_t *groups);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_GROUPS_H */
