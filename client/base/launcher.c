/*
 * What a launcher tells a process about its place in a job, for ranks started by Open MPI's
 * mpirun (OMPI_COMM_WORLD_*) or by Slurm's srun (SLURM_PROCID, ...) without a wrapper script.
 * env.c asks here only for what neither the caller, COLL_* nor torchrun's variables gave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/base/env.h"

/* The port of node 0's daemon when Slurm names only its host (the daemon's default listen). */

/* A non-negative integer variable; -1 with a message when it is not one. */
static int int_var(const char *name, const char *launcher, int *out, char *err, size_t errlen)
{
    const char *v = getenv(name);
    char *end;
    long x;

    if (v == NULL) {
        snprintf(err, errlen, "%s is not set, though %s started this process", name, launcher);
        return -1;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < 0 || x > (1 << 24)) {
        snprintf(err, errlen, "%s=%s (set by %s) is not a non-negative integer", name, v,
                 launcher);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* "<prefix><id>" (cut to @p len) with every character a job id may not hold replaced by '-'. */
static void make_job_id(char *out, size_t len, const char *prefix, const char *id)
{
    snprintf(out, len, "%s%.*s", prefix, (int)(len - 1 - strlen(prefix)), id);
    for (char *q = out; *q != '\0'; q++) {
        if (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-", *q) ==
            NULL) {
            *q = '-';
        }
    }
}

/* mpirun: the world's rank and size, the node's, and the namespace of this mpirun as job id.
 * Open MPI names no host of the job: a job over several hosts needs COLL_ROOT (mpirun -x). */
static int from_ompi(coll__launcher_t *l, char *err, size_t errlen)
{
    const char *ns = getenv("PMIX_NAMESPACE");

    if (ns == NULL) {
        ns = getenv("OMPI_MCA_ess_base_jobid");
    }
    l->name = "Open MPI";
    if (int_var("OMPI_COMM_WORLD_RANK", l->name, &l->rank, err, errlen) < 0 ||
        int_var("OMPI_COMM_WORLD_SIZE", l->name, &l->world_size, err, errlen) < 0 ||
        int_var("OMPI_COMM_WORLD_LOCAL_RANK", l->name, &l->local_rank, err, errlen) < 0 ||
        int_var("OMPI_COMM_WORLD_LOCAL_SIZE", l->name, &l->local_size, err, errlen) < 0) {
        return -1;
    }
    if (ns != NULL) {
        make_job_id(l->job, sizeof(l->job), "ompi-", ns);
    }
    return 1;
}

/*
 * Tasks on node @p node (0-based) of a Slurm task count list: "4", "4(x2),3", "2,1(x3)".
 * -1 when the list is malformed or shorter.
 */
int coll__slurm_tasks_on_node(const char *list, int node)
{
    const char *p = list;

    while (*p != '\0') {
        char *end;
        long tasks = strtol(p, &end, 10), times = 1;

        if (end == p || tasks < 1) {
            return -1;
        }
        if (strncmp(end, "(x", 2) == 0) {
            p = end + 2;
            times = strtol(p, &end, 10);
            if (end == p || times < 1 || *end != ')') {
                return -1;
            }
            end++;
        }
        if (node < times) {
            return (int)tasks;
        }
        node -= (int)times;
        if (*end != ',' && *end != '\0') {
            return -1;
        }
        p = *end == ',' ? end + 1 : end;
    }
    return -1;
}

/*
 * The first host of a Slurm host list, expanded: "gpu[07-09,11],login2" -> "gpu07",
 * "rack[1-2]-n[01-04]" -> "rack1-n01", "a,b" -> "a". -1 when malformed or too long.
 */
int coll__slurm_first_host(const char *list, char *out, size_t len)
{
    size_t o = 0;

    for (const char *p = list; *p != '\0' && *p != ','; p++) {
        if (*p == '[') {
            /* The first number of the range list: up to '-', ',' or ']'. */
            for (p++; *p != '\0' && *p != '-' && *p != ',' && *p != ']'; p++) {
                if (o + 1 >= len) {
                    return -1;
                }
                out[o++] = *p;
            }
            p = strchr(p, ']');
            if (p == NULL) {
                return -1;
            }
        } else if (*p == ']') {
            return -1;
        } else {
            if (o + 1 >= len) {
                return -1;
            }
            out[o++] = *p;
        }
    }
    out[o] = '\0';
    return o > 0 ? 0 : -1;
}

/* The root of a job over several nodes: the step's first node, port COLL_ROOT_PORT. */
static int slurm_root(coll__launcher_t *l, char *err, size_t errlen)
{
    const char *list = getenv("SLURM_STEP_NODELIST");
    const char *port = getenv("COLL_ROOT_PORT");
    char host[256];

    list = list != NULL ? list : getenv("SLURM_JOB_NODELIST");
    if (list == NULL || coll__slurm_first_host(list, host, sizeof(host)) < 0) {
        snprintf(err, errlen, "cannot find node 0 of the Slurm step in SLURM_STEP_NODELIST=%s; "
                 "set COLL_ROOT", list != NULL ? list : "(unset)");
        return -1;
    }
    snprintf(l->root, sizeof(l->root), "%s:%s", host,
             port != NULL ? port : COLL_DEFAULT_ROOT_PORT);
    return 0;
}

int coll__root_from_master(char *out, size_t len)
{
    const char *host = getenv("MASTER_ADDR");
    const char *port = getenv("COLL_ROOT_PORT");
    int bracket;

    if (host == NULL || host[0] == '\0') {
        return -1;
    }
    bracket = strchr(host, ':') != NULL && host[0] != '[';
    snprintf(out, len, "%s%s%s:%s", bracket ? "[" : "", host, bracket ? "]" : "",
             port != NULL ? port : COLL_DEFAULT_ROOT_PORT);
    return 0;
}

/* srun: a task of a job step. (A batch script has SLURM_PROCID too, but no step: it is not
 * read there, where the numbers describe the allocation and not this process.) */
static int from_slurm(coll__launcher_t *l, char *err, size_t errlen)
{
    const char *per_node = getenv("SLURM_STEP_TASKS_PER_NODE");
    const char *size = getenv("SLURM_STEP_NUM_TASKS") ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    const char *job = getenv("SLURM_JOB_ID");
    char id[128];
    int node;

    l->name = "Slurm";
    if (int_var("SLURM_PROCID", l->name, &l->rank, err, errlen) < 0 ||
        int_var(size, l->name, &l->world_size, err, errlen) < 0 ||
        int_var("SLURM_LOCALID", l->name, &l->local_rank, err, errlen) < 0 ||
        int_var("SLURM_NODEID", l->name, &node, err, errlen) < 0) {
        return -1;
    }
    per_node = per_node != NULL ? per_node : getenv("SLURM_TASKS_PER_NODE");
    l->local_size = per_node != NULL ? coll__slurm_tasks_on_node(per_node, node) : -1;
    if (l->local_size < 0) {
        snprintf(err, errlen, "SLURM_STEP_TASKS_PER_NODE=%s has no task count for node %d",
                 per_node != NULL ? per_node : "(unset)", node);
        return -1;
    }
    snprintf(id, sizeof(id), "%s.%s", job != NULL ? job : "0", getenv("SLURM_STEP_ID"));
    make_job_id(l->job, sizeof(l->job), "slurm-", id);
    return l->local_size == l->world_size ? 1 : (slurm_root(l, err, errlen) < 0 ? -1 : 1);
}

int coll__launcher_env(coll__launcher_t *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    if (getenv("OMPI_COMM_WORLD_RANK") != NULL) {
        return from_ompi(l, err, errlen);
    }
    if (getenv("SLURM_STEP_ID") != NULL && getenv("SLURM_PROCID") != NULL) {
        return from_slurm(l, err, errlen);
    }
    return 0;
}
