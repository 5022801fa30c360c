/*
 * group_fault_check: a rank of one group dies (--kill) or leaves (--leave) on 2 nodes x 2
 * ranks; the test pins down what that does to its group and to a disjoint one (the rule of
 * include/collective_groups.h). Groups: A = ranks 1, 2 (one on each node), B = ranks 0, 3
 * (likewise). Every rank first allreduces in its group (checked) and enters a world barrier.
 *
 * --kill: rank 1 submits an allreduce on A (a key rank 2 never submits, so it stays pending
 *   whatever the timing) and is killed (SIGKILL) with it pending. The job
 *   fails as a whole: rank 2's allreduce on A fails with COLL_ERR_JOB naming rank 1, and so do
 *   the allreduces that ranks 0 and 3 keep running on B, each within the job's timeout + 2 s of
 *   the kill. (The launcher starts rank 1 as a parent that forks the real rank, so that the
 *   kill does not end the run; the parent exits 0 once its child died of SIGKILL.)
 * --leave: rank 1 exits (its process ends, nothing pending) right after the barrier. B goes on:
 *   ranks 0 and 3 complete 20 more allreduces (checked) after it left; rank 2's next allreduce
 *   on A fails the job at the timeout naming "rank 1 (node 0, left the job)", and B's
 *   operations fail from then on with the same error.
 *
 * Exit status: 0 when everything happened as stated, 1 otherwise, 2 on a usage error.
 */
#include "check_common.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define VICTIM 1
#define SLACK_S 2.0

typedef struct {
    check_ctx_t c;
    coll_comm_t *g;   /* A for ranks 1, 2; B for ranks 0, 3 */
    int32_t *buf;
    int kill;
    double timeout_s;
} run_t;

/* One allreduce of (job rank + 1) * (i + 1) in @p g; its status (the sum checked on success). */
static coll_status_t allreduce(run_t *t, int i)
{
    coll_request_t *r = NULL;
    int32_t want = 0;
    coll_status_t st;

    for (int m = 0; m < 2; m++) {
        want += (coll_comm_job_rank(t->g, m) + 1) * (i + 1);
    }
    t->buf[0] = (t->c.rank + 1) * (i + 1);
    st = coll_allreduce_async(t->g, t->buf, t->buf, 1, COLL_INT32, COLL_SUM, NULL, &r);
    if (st == COLL_INPROGRESS) {
        coll_req_timing_t tm;
        st = coll_req_wait(r, (int)(1000 * (t->timeout_s + 10)));
        /* COLL_ERR_TIMEDOUT is also how an operation that timed out in the daemon ends. */
        if (coll_req_timing(r, &tm) == COLL_INPROGRESS) {
            check_die("allreduce %d: not complete after %.0f s", i, t->timeout_s + 10);
        }
        coll_req_free(r);
    }
    if (st == COLL_OK && t->buf[0] != want) {
        check_die("allreduce %d gave %d, expected %d", i, t->buf[0], want);
    }
    return st;
}

static void expect_failure(run_t *t, coll_status_t st, coll_status_t want, const char *name,
                           double since, const char *who)
{
    const char *err = coll_comm_last_error(t->c.comm);
    double dt = check_now_s() - since;

    if (st != want || strstr(err, name) == NULL) {
        check_die("%s: %s '%s', expected %s naming '%s'", who, coll_err_name(st), err,
                  coll_err_name(want), name);
    }
    if (dt > t->timeout_s + SLACK_S + (t->kill ? 0 : t->timeout_s)) {
        check_die("%s: the error came %.2f s after the fault", who, dt);
    }
    check_say(&t->c, 0, "%s: %s after %.2f s: %s", who, coll_err_name(st), dt, err);
}

static void setup(run_t *t)
{
    coll_request_t *r = NULL;
    coll_status_t st;

    check_join(&t->c, 16u << 20);
    if (t->c.world != 4 || t->c.local_size != 2) {
        check_usage_error("run on 2 nodes x 2 ranks");
    }
    if (coll_comm_split(t->c.comm, t->c.rank == 1 || t->c.rank == 2 ? 0 : 1, t->c.rank, &t->g) !=
        COLL_OK) {
        check_die("coll_comm_split: %s", coll_comm_last_error(t->c.comm));
    }
    if (coll_mem_alloc(t->c.comm, 64, (void **)&t->buf) != COLL_OK) {
        check_die("coll_mem_alloc: %s", coll_comm_last_error(t->c.comm));
    }
    for (int i = 0; i < 3; i++) {
        if ((st = allreduce(t, i)) != COLL_OK) {
            check_die("warm-up allreduce %d: %s: %s", i, coll_err_name(st),
                      coll_comm_last_error(t->c.comm));
        }
    }
    st = coll_barrier_async(t->c.comm, NULL, &r);
    if (st == COLL_INPROGRESS) {
        st = check_wait(&t->c, r, 60000, "barrier", NULL, 0);
    }
    if (st != COLL_OK) {
        check_die("barrier: %s", coll_err_name(st));
    }
}

/* Ranks 0 and 3: allreduces on B until one fails (at most a minute). */
static void disjoint(run_t *t, double t_fault)
{
    coll_status_t st = COLL_OK;
    int done = 0;

    while (st == COLL_OK && check_now_s() - t_fault < 60.0) {
        if ((st = allreduce(t, 10 + done)) == COLL_OK) {
            done++;
        }
        if (!t->kill && done == 20) {
            check_say(&t->c, 0, "B after rank 1 left: 20 allreduces correct");
        }
        usleep(done > 20 ? 20000 : 0); /* then no more than one per tick */
    }
    if (!t->kill && done < 20) {
        check_die("B failed after %d allreduces, while rank 1 only left", done);
    }
    expect_failure(t, st, t->kill ? COLL_ERR_JOB : COLL_ERR_TIMEDOUT, "rank 1", t_fault,
                   "B (disjoint group)");
}

static int run(run_t *t)
{
    double t_fault;

    setup(t);
    t_fault = check_now_s();
    if (t->c.rank == VICTIM) {
        coll_request_t *r = NULL;
        if (!t->kill) {
            _exit(0); /* leaves with nothing pending, its communicators undestroyed */
        }
        /* A key rank 2 never uses: the operation stays pending whatever the timing. */
        coll_op_params_t p = {.field_mask = COLL_OP_PARAM_KEY, .key = 99999};
        t->buf[0] = 2;
        coll_allreduce_async(t->g, t->buf, t->buf, 1, COLL_INT32, COLL_SUM, &p, &r);
        usleep(100000);
        raise(SIGKILL);
    }
    if (t->c.rank == 2) {
        usleep(t->kill ? 0 : 1000000);
        expect_failure(t, allreduce(t, 100), t->kill ? COLL_ERR_JOB : COLL_ERR_TIMEDOUT,
                       "rank 1", t_fault, "A (rank 1's group)");
    } else {
        disjoint(t, t_fault);
    }
    /* The failed job's communicators are destroyed as a program would (and LeakSanitizer
     * checks that destroying them frees everything). */
    coll_mem_free(t->c.comm, t->buf);
    coll_comm_destroy(t->g);
    coll_comm_destroy(t->c.comm);
    return 0;
}

int main(int argc, char **argv)
{
    run_t t = {0};
    const char *rank = getenv("COLL_RANK"), *timeout = getenv("COLL_TIMEOUT_MS");
    int status;
    pid_t pid;

    check_set_prog(argv[0]);
    if (argc != 2 || (strcmp(argv[1], "--kill") != 0 && strcmp(argv[1], "--leave") != 0) ||
        timeout == NULL) {
        check_usage_error("usage: group_fault_check --kill|--leave (with COLL_TIMEOUT_MS set)");
    }
    t.kill = strcmp(argv[1], "--kill") == 0;
    t.timeout_s = atof(timeout) / 1000.0;
    if (!t.kill || rank == NULL || atoi(rank) != VICTIM) {
        return run(&t);
    }
    if ((pid = fork()) == 0) {
        return run(&t);
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status) ||
        WTERMSIG(status) != SIGKILL) {
        fprintf(stderr, "group_fault_check: the victim did not die of SIGKILL\n");
        return 1;
    }
    return 0;
}
