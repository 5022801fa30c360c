/**
 * @file env.h
 * @brief Where a communicator's parameters come from when the caller leaves them out: COLL_*
 *        variables, torchrun's, and a launcher's (Open MPI, Slurm). Not installed.
 */
#ifndef COLL_CLIENT_BASE_ENV_H
#define COLL_CLIENT_BASE_ENV_H

#include <stddef.h>

#include <collective.h>
#include "proto/wire.h"

/** The port of the root daemon when only its host is known (Slurm's first node, torchrun's
 *  MASTER_ADDR) and COLL_ROOT_PORT is not set: the daemon's default listen port. */
#define COLL_DEFAULT_ROOT_PORT "29510"

/** What a launcher's environment says about this process (launcher.c). */
typedef struct {
    const char *name;      /**< "Open MPI", "Slurm"; NULL when no launcher was recognised */
    int rank, world_size, local_rank, local_size;
    char job[COLL_JOB_ID_MAX + 1]; /**< a job id from the launcher's job, "" when it has none */
    char root[300];        /**< "host:port" of node 0's daemon, "" when the launcher names none */
} coll__launcher_t;

/**
 * @brief Read the launcher's variables: Open MPI's mpirun (OMPI_COMM_WORLD_RANK, _SIZE,
 *        _LOCAL_RANK, _LOCAL_SIZE; job id "ompi-" + PMIX_NAMESPACE; no root) or a task of a
 *        Slurm job step (SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_LOCALID, the count of
 *        SLURM_STEP_TASKS_PER_NODE for SLURM_NODEID; job id "slurm-<job>.<step>"; root: the
 *        first host of SLURM_STEP_NODELIST, port COLL_ROOT_PORT or 29510, when the step spans
 *        several nodes). A Slurm batch script, which has no step, is not a launcher here.
 * @param [out] l Filled; zeroed when there is no launcher.
 * @return 1 found, 0 no launcher, -1 its variables are malformed (message in @p err).
 */
int coll__launcher_env(coll__launcher_t *l, char *err, size_t errlen);

/**
 * @brief The root under torchrun: "MASTER_ADDR:port", port COLL_ROOT_PORT or 29510 (an IPv6
 *        address bracketed), for a job over several nodes whose root is named nowhere else.
 * @return 0, or -1 when MASTER_ADDR is not set.
 */
int coll__root_from_master(char *out, size_t len);

/** @brief The task count of node @p node in a Slurm list such as "4(x2),3"; -1 if none. */
int coll__slurm_tasks_on_node(const char *list, int node);

/** @brief The first host of a Slurm host list ("gpu[07-09],x" -> "gpu07"). @return 0 or -1. */
int coll__slurm_first_host(const char *list, char *out, size_t len);

/**
 * @brief Resolve parameters, field by field: explicit fields first, then COLL_* variables,
 *        torchrun's, and the launcher's (coll__launcher_env()).
 * @param [out] launcher Storage for strings that come from a launcher (out points into it).
 * @return COLL_OK, or COLL_ERR_INVALID with a message in @p err.
 */
coll_status_t coll__params_resolve(const coll_comm_params_t *in, coll__launcher_t *launcher,
                                   coll_comm_params_t *out, char *err, size_t errlen);

#endif
