/*
 * Where a communicator's parameters come from (client/base/env.c, client/base/launcher.c): COLL_*,
 * torchrun's variables, and the environments that Open MPI's mpirun and Slurm's srun give
 * their processes, with the values those launchers set (Open MPI 4.1 and Slurm 23 as observed:
 * OMPI_COMM_WORLD_*, PMIX_NAMESPACE; SLURM_PROCID, SLURM_STEP_TASKS_PER_NODE "4(x2)", host
 * lists "gpu[07-08]").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client/base/env.h"

extern char **environ;

/* Every variable any of the sources reads is cleared before each test. */
static int clear_env(void **state)
{
    static const char *const prefixes[] = {"COLL_", "OMPI_", "PMIX_", "SLURM_", "RANK=",
                                           "WORLD_SIZE=", "LOCAL_RANK=", "LOCAL_WORLD_SIZE=",
                                           "MASTER_ADDR="};
    int again = 1;

    while (again) {
        again = 0;
        for (char **e = environ; *e != NULL && !again; e++) {
            for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
                if (strncmp(*e, prefixes[i], strlen(prefixes[i])) == 0) {
                    char name[128];
                    snprintf(name, sizeof(name), "%.*s", (int)strcspn(*e, "="), *e);
                    unsetenv(name);
                    again = 1; /* environ changed under us */
                    break;
                }
            }
        }
    }
    return 0;
}

static void set_all(const char *const *pairs)
{
    for (; pairs[0] != NULL; pairs += 2) {
        setenv(pairs[0], pairs[1], 1);
    }
}

static coll_status_t resolve(coll_comm_params_t *p, coll__launcher_t *l, char *err)
{
    return coll__params_resolve(NULL, l, p, err, 512);
}

static void assert_ranks(const coll_comm_params_t *p, int rank, int world, int lrank, int lsize)
{
    assert_int_equal(p->rank, rank);
    assert_int_equal(p->world_size, world);
    assert_int_equal(p->local_rank, lrank);
    assert_int_equal(p->local_size, lsize);
}

static void test_torchrun(void **state)
{
    static const char *const env[] = {"RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1",
                                      "LOCAL_WORLD_SIZE", "2", "COLL_JOB", "t",
                                      "COLL_ROOT", "10.0.0.1:29510", NULL};
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(env);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 3, 4, 1, 2);
    assert_string_equal(p.job, "t");
    assert_string_equal(p.root, "10.0.0.1:29510");
}

/* torchrun with only its own variables: the root is MASTER_ADDR at COLL_ROOT_PORT (29510 by
 * default, an IPv6 address bracketed); COLL_ROOT still wins. */
static void test_torchrun_master_addr(void **state)
{
    static const char *const env[] = {"RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1",
                                      "LOCAL_WORLD_SIZE", "2", "COLL_JOB", "t",
                                      "MASTER_ADDR", "node01", NULL};
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    set_all(env);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.root, "node01:29510");
    setenv("COLL_ROOT_PORT", "7000", 1);
    setenv("MASTER_ADDR", "fd00::5", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.root, "[fd00::5]:7000");
    setenv("COLL_ROOT", "10.0.0.1:29510", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.root, "10.0.0.1:29510");
}

/* A world size of 0 or above COLL_WORLD_MAX (from a variable or the caller's field): the
 * message names its source, the value and the range, as does a rank out of its range. */
static void test_world_size_range(void **state)
{
    static const char *const env[] = {"COLL_RANK", "0", "COLL_WORLD_SIZE", "0",
                                      "COLL_LOCAL_RANK", "0", "COLL_LOCAL_SIZE", "1",
                                      "COLL_JOB", "t", NULL};
    coll_comm_params_t in = {.field_mask = COLL_COMM_PARAM_RANK, .rank = 0,
                             .world_size = 2000000};
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(env);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_string_equal(err, "COLL_WORLD_SIZE=0: the world size must be an integer in "
                             "1..1048576");
    setenv("COLL_WORLD_SIZE", "99999999", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_string_equal(err, "COLL_WORLD_SIZE=99999999: the world size must be an integer in "
                             "1..1048576");
    unsetenv("COLL_WORLD_SIZE");
    setenv("WORLD_SIZE", "2000000", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_string_equal(err, "WORLD_SIZE=2000000: the world size must be an integer in "
                             "1..1048576");
    assert_int_equal(coll__params_resolve(&in, &l, &p, err, sizeof(err)), COLL_ERR_INVALID);
    assert_string_equal(err, "the world size (params->world_size) is 2000000: a job has "
                             "1..1048576 ranks");
    in.world_size = 0;
    assert_int_equal(coll__params_resolve(&in, &l, &p, err, sizeof(err)), COLL_ERR_INVALID);
    assert_string_equal(err, "the world size (params->world_size) is 0: a job has 1..1048576 "
                             "ranks");
    setenv("WORLD_SIZE", "1", 1);
    setenv("COLL_RANK", "-1", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_string_equal(err, "COLL_RANK=-1: a rank must be an integer in 0..1048575");
}

/* The connect timeout: 10 s by default, COLL_CONNECT_TIMEOUT_MS, or the caller's field. */
static void test_connect_timeout(void **state)
{
    static const char *const env[] = {"RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0",
                                      "LOCAL_WORLD_SIZE", "1", "COLL_JOB", "t", NULL};
    coll_comm_params_t in = {.field_mask = COLL_COMM_PARAM_CONNECT_TIMEOUT,
                             .connect_timeout_ms = 250};
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(env);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_int_equal(p.connect_timeout_ms, COLL_CONNECT_TIMEOUT_DEFAULT_MS);
    assert_int_equal(COLL_CONNECT_TIMEOUT_DEFAULT_MS, 10000);
    setenv("COLL_CONNECT_TIMEOUT_MS", "1500", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_int_equal(p.connect_timeout_ms, 1500);
    assert_int_equal(coll__params_resolve(&in, &l, &p, err, sizeof(err)), COLL_OK);
    assert_int_equal(p.connect_timeout_ms, 250);
    setenv("COLL_CONNECT_TIMEOUT_MS", "soon", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_non_null(strstr(err, "COLL_CONNECT_TIMEOUT_MS=soon"));
}

/* The job's timeout within the daemon's bounds (100..86400000 ms), or 0 for the daemon's. */
static void test_job_timeout(void **state)
{
    static const char *const env[] = {"RANK", "0", "WORLD_SIZE", "1", "LOCAL_RANK", "0",
                                      "LOCAL_WORLD_SIZE", "1", "COLL_JOB", "t", NULL};
    coll_comm_params_t in = {.field_mask = COLL_COMM_PARAM_TIMEOUT, .timeout_ms = 86400001};
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(env);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_int_equal(p.timeout_ms, 0);
    setenv("COLL_TIMEOUT_MS", "100", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_int_equal(p.timeout_ms, 100);
    setenv("COLL_TIMEOUT_MS", "50", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_non_null(strstr(err, "(COLL_TIMEOUT_MS) is 50 ms: use 100..86400000 ms"));
    assert_int_equal(coll__params_resolve(&in, &l, &p, err, sizeof(err)), COLL_ERR_INVALID);
    assert_non_null(strstr(err, "(timeout_ms) is 86400001 ms"));
    in.timeout_ms = 86400000;
    assert_int_equal(coll__params_resolve(&in, &l, &p, err, sizeof(err)), COLL_OK);
    assert_int_equal(p.timeout_ms, 86400000);
}

/* What mpirun -np 4 gives its rank 2 on a host with 4 ranks (Open MPI 4.1.4). */
static const char *const ompi[] = {"OMPI_COMM_WORLD_RANK", "2", "OMPI_COMM_WORLD_SIZE", "4",
                                   "OMPI_COMM_WORLD_LOCAL_RANK", "2",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE", "4",
                                   "OMPI_MCA_ess_base_jobid", "1395785729",
                                   "PMIX_NAMESPACE", "1395785729", NULL};

static void test_ompi(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(ompi);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 2, 4, 2, 4);
    assert_string_equal(p.job, "ompi-1395785729");
    assert_string_equal(p.root, "");
    /* Open MPI 5's namespaces hold characters a job id may not. */
    setenv("PMIX_NAMESPACE", "prterun-host-12@1", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.job, "ompi-prterun-host-12-1");
}

static void test_coll_wins(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(ompi);
    setenv("COLL_RANK", "0", 1);
    setenv("COLL_JOB", "mine", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 0, 4, 2, 4);
    assert_string_equal(p.job, "mine");
}

/* Task 5 of `srun -N2 --ntasks-per-node=4` (step 3 of job 77), on the second node. */
static const char *const slurm[] = {"SLURM_JOB_ID", "77", "SLURM_STEP_ID", "3",
                                    "SLURM_PROCID", "5", "SLURM_STEP_NUM_TASKS", "8",
                                    "SLURM_NTASKS", "8", "SLURM_LOCALID", "1",
                                    "SLURM_NODEID", "1", "SLURM_STEP_TASKS_PER_NODE", "4(x2)",
                                    "SLURM_STEP_NODELIST", "gpu[07-08]",
                                    "SLURM_JOB_NODELIST", "gpu[07-08]", NULL};

static void test_slurm(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(slurm);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 5, 8, 1, 4);
    assert_string_equal(p.job, "slurm-77.3");
    assert_string_equal(p.root, "gpu07:29510");
    setenv("COLL_ROOT_PORT", "1234", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.root, "gpu07:1234");
    setenv("COLL_ROOT", "10.1.1.1:5", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_string_equal(p.root, "10.1.1.1:5");
}

/* Uneven steps: node 2 of "3,2(x2)" runs 2 tasks; one node needs no root. */
static void test_slurm_shapes(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(slurm);
    set_all((const char *const[]){"SLURM_STEP_TASKS_PER_NODE", "3,2(x2)", "SLURM_NODEID", "2",
                                  "SLURM_STEP_NUM_TASKS", "7", "SLURM_PROCID", "6",
                                  "SLURM_LOCALID", "1", NULL});
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 6, 7, 1, 2);
    set_all((const char *const[]){"SLURM_STEP_TASKS_PER_NODE", "4", "SLURM_NODEID", "0",
                                  "SLURM_STEP_NUM_TASKS", "4", "SLURM_PROCID", "2",
                                  "SLURM_STEP_NODELIST", "gpu07", NULL});
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 2, 4, 1, 4);
    assert_string_equal(p.root, "");
}

/* A batch script has SLURM_PROCID but no step: its numbers are not this process's. */
static void test_slurm_batch_script(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(slurm);
    unsetenv("SLURM_STEP_ID");
    setenv("COLL_JOB", "j", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_non_null(strstr(err, "COLL_RANK is not set"));
}

/* Broken launcher variables: an error naming them, unless COLL_* leave nothing to take. */
static void test_slurm_malformed(void **state)
{
    coll_comm_params_t p;
    coll__launcher_t l;
    char err[512];

    set_all(slurm);
    setenv("SLURM_STEP_TASKS_PER_NODE", "4(x", 1);
    assert_int_equal(resolve(&p, &l, err), COLL_ERR_INVALID);
    assert_non_null(strstr(err, "SLURM_STEP_TASKS_PER_NODE=4(x has no task count for node 1"));
    set_all((const char *const[]){"COLL_RANK", "1", "COLL_WORLD_SIZE", "2", "COLL_LOCAL_RANK",
                                  "1", "COLL_LOCAL_SIZE", "2", "COLL_JOB", "j", NULL});
    assert_int_equal(resolve(&p, &l, err), COLL_OK);
    assert_ranks(&p, 1, 2, 1, 2);
}

static void test_host_lists(void **state)
{
    char h[64];

    assert_int_equal(coll__slurm_first_host("gpu[07-09,11],login2", h, sizeof(h)), 0);
    assert_string_equal(h, "gpu07");
    assert_int_equal(coll__slurm_first_host("rack[1-2]-n[01-04],x", h, sizeof(h)), 0);
    assert_string_equal(h, "rack1-n01");
    assert_int_equal(coll__slurm_first_host("a,b", h, sizeof(h)), 0);
    assert_string_equal(h, "a");
    assert_int_equal(coll__slurm_first_host("n[3,5]", h, sizeof(h)), 0);
    assert_string_equal(h, "n3");
    assert_int_equal(coll__slurm_first_host("bad[1-", h, sizeof(h)), -1);
    assert_int_equal(coll__slurm_first_host("", h, sizeof(h)), -1);
    assert_int_equal(coll__slurm_first_host("averyverylonghostname", h, 8), -1);
    assert_int_equal(coll__slurm_tasks_on_node("4(x2),3", 0), 4);
    assert_int_equal(coll__slurm_tasks_on_node("4(x2),3", 1), 4);
    assert_int_equal(coll__slurm_tasks_on_node("4(x2),3", 2), 3);
    assert_int_equal(coll__slurm_tasks_on_node("4(x2),3", 3), -1);
    assert_int_equal(coll__slurm_tasks_on_node("x", 0), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_torchrun, clear_env),
        cmocka_unit_test_setup(test_torchrun_master_addr, clear_env),
        cmocka_unit_test_setup(test_world_size_range, clear_env),
        cmocka_unit_test_setup(test_connect_timeout, clear_env),
        cmocka_unit_test_setup(test_job_timeout, clear_env),
        cmocka_unit_test_setup(test_ompi, clear_env),
        cmocka_unit_test_setup(test_coll_wins, clear_env),
        cmocka_unit_test_setup(test_slurm, clear_env),
        cmocka_unit_test_setup(test_slurm_shapes, clear_env),
        cmocka_unit_test_setup(test_slurm_batch_script, clear_env),
        cmocka_unit_test_setup(test_slurm_malformed, clear_env),
        cmocka_unit_test_setup(test_host_lists, clear_env),
    };
    return cmocka_run_group_tests_name("env", tests, NULL, NULL);
}
