/*
 * Unit tests of which job a join belongs to (daemon/job/formation.h): a job is named by its id
 * and its digest; another user's rank forms a job of its own, the same user's rank with another
 * token is refused with COLL_ERR_DENIED; a join that disagrees with the job is refused alone;
 * a second formation of one name fails the job and bars the name for the job's timeout. The jobs
 * are built by hand over the real core (core/job.h), as job/join.c would have made them; each
 * expected verdict and message is the rule of formation.h, written out here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../core/daemon_fixture.h"
#include "base/auth.h"
#include "job/formation.h"

#define UID_A 1000
#define UID_B 1001

typedef struct {
    coll_daemon_t d;
    uv_loop_t loop;
    coll_session_t first, second; /* the job's first rank, and a later joiner */
    char err[512];
} fx_t;

static int setup(void **state)
{
    fx_t *fx = calloc(1, sizeof(*fx));

    assert_int_equal(uv_loop_init(&fx->loop), 0);
    daemon_fixture_init(&fx->d, &fx->loop, 1);
    fx->first.cred.pid = 10;
    fx->first.cred.uid = UID_A;
    fx->second.cred.pid = 20;
    fx->second.cred.uid = UID_A;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fx_t *fx = *state;
    coll_job_t *job, *tmp;

    coll_list_for_each_safe(job, tmp, &fx->d.jobs, coll_job_t, link)
    {
        coll_list_remove(&job->link);
        free(job->locals);
        free(job->ranks);
        free(job);
    }
    coll_formation_clear(&fx->d);
    daemon_fixture_close_loop(&fx->loop);
    daemon_fixture_fini(&fx->d);
    free(fx);
    return 0;
}

/* A job "a" of @p world ranks, @p local of them here, gathering, whose first rank (fx->first,
 * local rank 0, rank 0) joined with @p token, timeout @p timeout_ms. */
static coll_job_t *add_job(fx_t *fx, const char *token, uint32_t world, uint32_t local,
                           uint32_t timeout_ms)
{
    coll_job_t *job = calloc(1, sizeof(*job));

    assert_non_null(job);
    job->d = &fx->d;
    strcpy(job->id, "a");
    job->state = COLL_JOB_GATHERING;
    job->world_size = world;
    job->local_size = local;
    strcpy(job->root, "10.0.0.1:7000");
    job->locals = calloc(local, sizeof(*job->locals));
    job->ranks = calloc(local, sizeof(*job->ranks));
    job->locals[0] = &fx->first;
    job->ranks[0] = 0;
    job->njoined = 1;
    job->timeout_ms = timeout_ms;
    job->owner_uid = fx->first.cred.uid;
    coll_auth_job_digest("a", token, fx->first.cred.uid, job->token_digest);
    coll_list_push(&fx->d.jobs, &job->link);
    return job;
}

/* A join of job "a" by @p s: rank and local rank @p rank, the job's shape and root. */
static Coll__Wire__JoinJob join_of(uint32_t rank, uint32_t world, uint32_t local,
                                   const char *token)
{
    Coll__Wire__JoinJob j = COLL__WIRE__JOIN_JOB__INIT;

    j.job = "a";
    j.rank = rank;
    j.local_rank = rank;
    j.world_size = world;
    j.local_size = local;
    j.root = "10.0.0.1:7000";
    j.token = (char *)token;
    return j;
}

static coll_status_t find(fx_t *fx, const coll_session_t *s, const Coll__Wire__JoinJob *j,
                          coll_job_t **job_p)
{
    uint8_t digest[COLL_AUTH_BYTES];

    coll_auth_job_digest(j->job, j->token, s->cred.uid, digest);
    fx->err[0] = '\0';
    return coll_formation_find(&fx->d, s, j, digest, job_p, fx->err, sizeof(fx->err));
}

static void test_new_name_creates(void **state)
{
    fx_t *fx = *state;
    Coll__Wire__JoinJob j = join_of(0, 2, 2, "t");
    coll_job_t *job = (coll_job_t *)1;

    assert_int_equal(find(fx, &fx->first, &j, &job), COLL_OK);
    assert_null(job);
}

static void test_same_name_joins(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 1000), *job = NULL;
    Coll__Wire__JoinJob j = join_of(1, 2, 2, "t");

    assert_int_equal(find(fx, &fx->second, &j, &job), COLL_OK);
    assert_ptr_equal(job, mine);
    assert_int_equal(mine->state, COLL_JOB_GATHERING);
}

/* Another user's rank with the same id (and token) never meets the job: a job of its own. */
static void test_other_user_forms_its_own(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "", 2, 2, 1000), *job = (coll_job_t *)1;
    Coll__Wire__JoinJob j = join_of(1, 2, 2, "");

    fx->second.cred.uid = UID_B;
    assert_int_equal(find(fx, &fx->second, &j, &job), COLL_OK);
    assert_null(job);
    assert_int_equal(mine->state, COLL_JOB_GATHERING);
    assert_null(mine->locals[1]);
}

static void test_same_user_wrong_token_denied(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 1000), *job = NULL;
    Coll__Wire__JoinJob other = join_of(1, 2, 2, "u"), none = join_of(1, 2, 2, "");

    assert_int_equal(find(fx, &fx->second, &other, &job), COLL_ERR_DENIED);
    assert_null(job);
    assert_string_equal(fx->err, "wrong job token for job a (its ranks here run as uid 1000 "
                                 "too, with another token or none)");
    assert_int_equal(find(fx, &fx->second, &none, &job), COLL_ERR_DENIED);
    assert_string_equal(fx->err, "wrong job token for job a (its ranks here run as uid 1000 "
                                 "too, with a token)");
    assert_int_equal(mine->state, COLL_JOB_GATHERING);
}

/* Another shape or root refuses the join alone: the job goes on gathering. */
static void test_disagreement_refuses_the_join(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 4, 2, 1000), *job = NULL;
    Coll__Wire__JoinJob shape = join_of(1, 4, 3, "t"), root = join_of(1, 4, 2, "t");

    assert_int_equal(find(fx, &fx->second, &shape, &job), COLL_ERR_RENDEZVOUS);
    assert_string_equal(fx->err, "rank 1 says world size 4, local size 3; earlier ranks of job "
                                 "a said 4, 2");
    root.root = "10.0.0.2:7000";
    assert_int_equal(find(fx, &fx->second, &root, &job), COLL_ERR_RENDEZVOUS);
    assert_string_equal(fx->err, "rank 1 says root 10.0.0.2:7000; earlier ranks said "
                                 "10.0.0.1:7000");
    assert_int_equal(mine->state, COLL_JOB_GATHERING);
    assert_true(coll_list_empty(&fx->d.barred_jobs));
}

static void test_failed_job_refuses(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 1000), *job = NULL;
    Coll__Wire__JoinJob j = join_of(1, 2, 2, "t");

    mine->state = COLL_JOB_FAILED;
    strcpy(mine->errmsg, "rank 0 left");
    assert_int_equal(find(fx, &fx->second, &j, &job), COLL_ERR_RENDEZVOUS);
    assert_ptr_equal(job, mine);
    assert_string_equal(fx->err, "job a failed on this node (rank 0 left); use a new job id");
}

/* A closing job is gone for formation: its name forms a new job. */
static void test_closing_job_is_ignored(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 1000), *job = (coll_job_t *)1;
    Coll__Wire__JoinJob j = join_of(0, 2, 2, "t");

    mine->closing = 1;
    assert_int_equal(find(fx, &fx->second, &j, &job), COLL_OK);
    assert_null(job);
}

/* A local rank claimed twice: two launches met. The job fails on every rank, the join is refused
 * with why, and the name is barred for the job's timeout, to the same digest only. */
static void test_second_formation_fails_and_bars(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 60000), *job = NULL;
    Coll__Wire__JoinJob again = join_of(0, 2, 2, "t"), later = join_of(1, 2, 2, "t");
    Coll__Wire__JoinJob stranger = join_of(1, 2, 2, "");
    const char *why = "job a: a second formation with the same job id and token joined this "
                      "node (rank 0, local rank 0, pid 20; held by pid 10): the ranks of two "
                      "launches cannot be told apart, so neither forms; give each launch its "
                      "own job id or COLL_JOB_TOKEN";

    assert_int_equal(find(fx, &fx->second, &again, &job), COLL_ERR_RENDEZVOUS);
    assert_string_equal(fx->err, why);
    assert_int_equal(mine->state, COLL_JOB_FAILED);
    assert_int_equal(mine->error, COLL_ERR_RENDEZVOUS);
    assert_string_equal(mine->errmsg, why);
    assert_false(coll_list_empty(&fx->d.barred_jobs));
    /* The job closes; the later ranks of both launches still hear why. */
    mine->closing = 1;
    assert_int_equal(find(fx, &fx->second, &later, &job), COLL_ERR_RENDEZVOUS);
    assert_null(job);
    assert_string_equal(fx->err, why);
    /* Another user's job of the same id is not barred. */
    fx->second.cred.uid = UID_B;
    assert_int_equal(find(fx, &fx->second, &stranger, &job), COLL_OK);
    assert_null(job);
}

/* A formed job (ready) takes no more joins: one is a second formation. */
static void test_join_of_a_formed_job(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 60000), *job = NULL;
    Coll__Wire__JoinJob j = join_of(1, 2, 2, "t");

    mine->state = COLL_JOB_READY;
    assert_int_equal(find(fx, &fx->second, &j, &job), COLL_ERR_RENDEZVOUS);
    assert_non_null(strstr(fx->err, "(rank 1, local rank 1, pid 20; the job had formed)"));
    assert_int_equal(mine->state, COLL_JOB_FAILED);
}

/* The bar lasts the job's timeout (loop time), then the name forms again. */
static void test_bar_expires(void **state)
{
    fx_t *fx = *state;
    coll_job_t *mine = add_job(fx, "t", 2, 2, 20), *job = NULL;
    Coll__Wire__JoinJob again = join_of(0, 2, 2, "t");
    struct timespec past = {0, 40 * 1000000};

    uv_update_time(fx->d.loop);
    assert_int_equal(find(fx, &fx->second, &again, &job), COLL_ERR_RENDEZVOUS);
    mine->closing = 1;
    nanosleep(&past, NULL);
    uv_update_time(fx->d.loop);
    assert_int_equal(find(fx, &fx->second, &again, &job), COLL_OK);
    assert_null(job);
    assert_true(coll_list_empty(&fx->d.barred_jobs));
}

#define FX_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        FX_TEST(test_new_name_creates),
        FX_TEST(test_same_name_joins),
        FX_TEST(test_other_user_forms_its_own),
        FX_TEST(test_same_user_wrong_token_denied),
        FX_TEST(test_disagreement_refuses_the_join),
        FX_TEST(test_failed_job_refuses),
        FX_TEST(test_closing_job_is_ignored),
        FX_TEST(test_second_formation_fails_and_bars),
        FX_TEST(test_join_of_a_formed_job),
        FX_TEST(test_bar_expires),
    };
    return cmocka_run_group_tests_name("job_formation", tests, NULL, NULL);
}
