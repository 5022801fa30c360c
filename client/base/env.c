/*
 * Where a communicator's parameters come from, field by field: the caller's struct, else COLL_*
 * variables, else the variables torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
 * else those of the launcher that started the process (Open MPI's mpirun, Slurm's srun;
 * launcher.c).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/base/env.h"
#include "common/size.h"
#include "proto/wire.h"

#define COLL_DEFAULT_SOCKET "/run/collectived/collectived.sock"

static const char *env2(const char *a, const char *b)
{
    const char *v = getenv(a);
    return v != NULL ? v : (b != NULL ? getenv(b) : NULL);
}

/* An integer bound of env_int(): what the value is, for the message, and its range. */
typedef struct {
    const char *what;
    long min, max;
} bound_t;

static const bound_t world_bound = {"the world size", 1, COLL_WORLD_MAX};
static const bound_t local_bound = {"the local size", 1, COLL_WORLD_MAX};
static const bound_t rank_bound = {"a rank", 0, COLL_WORLD_MAX - 1};
static const bound_t ms_bound = {"a time in ms", 0, COLL_TIMEOUT_MAX_MS};

/* COLL_<x>, else torchrun's, else the launcher's value (@p from), else an error naming all; a
 * value outside @p bd is an error naming the variable read, its value and the range. */
static int env_int(const char *a, const char *b, int from, const coll__launcher_t *l,
                   const bound_t *bd, int *out, char *err, size_t errlen)
{
    const char *v = getenv(a), *name = a;
    char *end;
    long x;

    if (v == NULL && b != NULL && (v = getenv(b)) != NULL) {
        name = b;
    }
    if (v == NULL && l->name != NULL) {
        *out = from;
        return 0;
    }
    if (v == NULL) {
        snprintf(err, errlen, "%s is not set (and no value was passed, nor did a launcher: "
                 "torchrun, mpirun or srun)", a);
        return -1;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || x < bd->min || x > bd->max) {
        snprintf(err, errlen, "%s=%s: %s must be an integer in %ld..%ld", name, v, bd->what,
                 bd->min, bd->max);
        return -1;
    }
    *out = (int)x;
    return 0;
}

static int resolve_ints(const coll_comm_params_t *in, const coll__launcher_t *l,
                        coll_comm_params_t *out, char *err, size_t errlen)
{
    if (in->field_mask & COLL_COMM_PARAM_RANK) {
        out->rank = in->rank;
        out->world_size = in->world_size;
    } else if (env_int("COLL_RANK", "RANK", l->rank, l, &rank_bound, &out->rank, err,
                       errlen) < 0 ||
               env_int("COLL_WORLD_SIZE", "WORLD_SIZE", l->world_size, l, &world_bound,
                       &out->world_size, err, errlen) < 0) {
        return -1;
    }
    if (in->field_mask & COLL_COMM_PARAM_LOCAL_RANK) {
        out->local_rank = in->local_rank;
        out->local_size = in->local_size;
    } else if (env_int("COLL_LOCAL_RANK", "LOCAL_RANK", l->local_rank, l, &rank_bound,
                       &out->local_rank, err, errlen) < 0 ||
               env_int("COLL_LOCAL_SIZE", "LOCAL_WORLD_SIZE", l->local_size, l, &local_bound,
                       &out->local_size, err, errlen) < 0) {
        return -1;
    }
    out->timeout_ms = 0; /* the daemon's */
    if (in->field_mask & COLL_COMM_PARAM_TIMEOUT) {
        out->timeout_ms = in->timeout_ms;
    } else if (getenv("COLL_TIMEOUT_MS") != NULL &&
               env_int("COLL_TIMEOUT_MS", NULL, 0, &(coll__launcher_t){0}, &ms_bound,
                       &out->timeout_ms, err, errlen) < 0) {
        return -1;
    }
    if (out->timeout_ms != 0 && (out->timeout_ms < (int)COLL_TIMEOUT_MIN_MS ||
                                 (unsigned)out->timeout_ms > COLL_TIMEOUT_MAX_MS)) {
        snprintf(err, errlen, "the job's timeout (%s) is %d ms: use %u..%u ms, or 0 for the "
                 "daemon's", in->field_mask & COLL_COMM_PARAM_TIMEOUT ? "timeout_ms"
                 : "COLL_TIMEOUT_MS", out->timeout_ms, COLL_TIMEOUT_MIN_MS, COLL_TIMEOUT_MAX_MS);
        return -1;
    }
    out->connect_timeout_ms = COLL_CONNECT_TIMEOUT_DEFAULT_MS;
    if (in->field_mask & COLL_COMM_PARAM_CONNECT_TIMEOUT) {
        out->connect_timeout_ms = in->connect_timeout_ms;
    } else if (getenv("COLL_CONNECT_TIMEOUT_MS") != NULL &&
               env_int("COLL_CONNECT_TIMEOUT_MS", NULL, 0, &(coll__launcher_t){0}, &ms_bound,
                       &out->connect_timeout_ms, err, errlen) < 0) {
        return -1;
    }
    return 0;
}

/* Where the world size came from (@p in's, else the variables env_int() reads, else the
 * launcher's), for a message about it. */
static const char *world_source(const coll_comm_params_t *in)
{
    return (in->field_mask & COLL_COMM_PARAM_RANK) ? "params->world_size"
           : getenv("COLL_WORLD_SIZE") != NULL     ? "COLL_WORLD_SIZE"
           : getenv("WORLD_SIZE") != NULL          ? "WORLD_SIZE"
                                                   : "the launcher's";
}

static int check(const coll_comm_params_t *in, const coll_comm_params_t *p, char *err,
                 size_t errlen)
{
    if (p->world_size < 1 || (unsigned)p->world_size > COLL_WORLD_MAX) {
        snprintf(err, errlen, "the world size (%s) is %d: a job has 1..%u ranks",
                 world_source(in), p->world_size, COLL_WORLD_MAX);
    } else if (p->rank < 0 || p->rank >= p->world_size) {
        snprintf(err, errlen, "rank %d is not in 0..world size %d - 1", p->rank, p->world_size);
    } else if (p->local_size < 1 || p->local_size > p->world_size || p->local_rank < 0 ||
               p->local_rank >= p->local_size) {
        snprintf(err, errlen, "local rank %d / local size %d do not fit world size %d",
                 p->local_rank, p->local_size, p->world_size);
    } else if (!coll_wire_job_id_valid(p->job)) {
        snprintf(err, errlen, "job id '%s' must be 1..%u characters of [A-Za-z0-9._:-]", p->job,
                 COLL_JOB_ID_MAX);
    } else if (p->connect_timeout_ms < 0) {
        snprintf(err, errlen, "the connect timeout %d ms is negative", p->connect_timeout_ms);
    } else if (p->root[0] == '\0' && p->local_size != p->world_size) {
        snprintf(err, errlen, "COLL_ROOT (host:port of the root daemon; under torchrun "
                 "MASTER_ADDR and COLL_ROOT_PORT) is not set and the job "
                 "spans several nodes (world size %d, local size %d)", p->world_size,
                 p->local_size);
    } else {
        return 0;
    }
    return -1;
}

/* A string field whose bit is set must be there (collective.h's NULL rule): the socket, job
 * and root; a NULL token is no token, as an unset COLL_JOB_TOKEN. */
static int strings_given(const coll_comm_params_t *in, char *err, size_t errlen)
{
    static const struct {
        uint64_t bit;
        const char *name;
        size_t off;
    } fields[] = {
        {COLL_COMM_PARAM_SOCKET, "socket_path", offsetof(coll_comm_params_t, socket_path)},
        {COLL_COMM_PARAM_JOB, "job", offsetof(coll_comm_params_t, job)},
        {COLL_COMM_PARAM_ROOT, "root", offsetof(coll_comm_params_t, root)},
    };

    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const char *const *v = (const char *const *)(const void *)((const char *)in + fields[i].off);
        if ((in->field_mask & fields[i].bit) && *v == NULL) {
            snprintf(err, errlen, "coll_comm_create: params->%s must not be NULL (its bit is "
                     "set in field_mask)", fields[i].name);
            return -1;
        }
    }
    return 0;
}

/* The strings: socket, job, root and token. */
static coll_status_t resolve_strings(const coll_comm_params_t *in, coll__launcher_t *l,
                                     coll_comm_params_t *out, char *err, size_t errlen)
{
    const char *v = env2("COLL_SOCKET", NULL);

    if (strings_given(in, err, errlen) < 0) {
        return COLL_ERR_INVALID;
    }

    out->socket_path = (in->field_mask & COLL_COMM_PARAM_SOCKET) ? in->socket_path
                       : v != NULL                               ? v
                                                                 : COLL_DEFAULT_SOCKET;
    out->job = (in->field_mask & COLL_COMM_PARAM_JOB) ? in->job : env2("COLL_JOB", NULL);
    out->job = out->job == NULL && l->job[0] != '\0' ? l->job : out->job;
    out->root = (in->field_mask & COLL_COMM_PARAM_ROOT) ? in->root : env2("COLL_ROOT", NULL);
    out->root = out->root == NULL && l->root[0] != '\0' ? l->root : out->root;
    if (out->root == NULL && coll__root_from_master(l->root, sizeof(l->root)) == 0) {
        out->root = l->root;
    }
    if (out->job == NULL) {
        snprintf(err, errlen, "COLL_JOB is not set (and no job id was passed)");
        return COLL_ERR_INVALID;
    }
    out->root = out->root != NULL ? out->root : "";
    out->job_token = (in->field_mask & COLL_COMM_PARAM_TOKEN) ? in->job_token
                                                               : env2("COLL_JOB_TOKEN", NULL);
    out->job_token = out->job_token != NULL ? out->job_token : "";
    return COLL_OK;
}

coll_status_t coll__params_resolve(const coll_comm_params_t *in, coll__launcher_t *launcher,
                                   coll_comm_params_t *out, char *err, size_t errlen)
{
    static const coll_comm_params_t none;
    char why[256] = "";
    const char *v;

    if (in == NULL) {
        in = &none;
    }
    memset(out, 0, sizeof(*out));
    /* A launcher's malformed variables matter only where a value is missing. */
    if (coll__launcher_env(launcher, why, sizeof(why)) < 0) {
        memset(launcher, 0, sizeof(*launcher));
    }
    if (in->field_mask & COLL_COMM_PARAM_POOL_SIZE) {
        out->pool_bytes = in->pool_bytes;
    } else if ((v = getenv("COLL_POOL_SIZE")) != NULL && coll_parse_size(v, &out->pool_bytes) < 0) {
        snprintf(err, errlen, "COLL_POOL_SIZE=%s is not a size; use bytes or K, M, G, T", v);
        return COLL_ERR_INVALID;
    }
    if (resolve_strings(in, launcher, out, err, errlen) != COLL_OK ||
        resolve_ints(in, launcher, out, err, errlen) < 0 || check(in, out, err, errlen) < 0) {
        size_t n = strlen(err);
        if (why[0] != '\0' && n + 4 < errlen) {
            snprintf(err + n, errlen - n, " (%s)", why);
        }
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}
