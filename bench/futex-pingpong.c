/*
 * futex-pingpong: the floor of one wake-up on this machine, the hop a rank asleep in shared
 * memory (client/shm/progress.c) or on its control block pays when another process completes
 * its operation.
 *
 *   build/bench/futex-pingpong [-n ITERS] [-s SPIN_NS]
 *
 * Two processes share one anonymous page and pass a token back and forth through a word on it:
 * each writes the other's turn, FUTEX_WAKEs it, and waits for its own turn, spinning for at most
 * SPIN_NS (default 0: straight to FUTEX_WAIT) before it sleeps. A round trip is two hand-offs;
 * prints p50, p90 and p99 of the one-way time (half a round trip, microseconds) over ITERS round
 * trips (default 20000) after 1000 untimed, and how many waits slept. Run it pinned to two CPUs
 * (taskset -c 0,1) or to one (taskset -c 0: the wake-up includes a context switch).
 *
 * Exit status: 0, 1 on a system error, 2 on a usage error.
 */
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WARMUP 1000

typedef struct {
    _Atomic uint32_t turn; /* whose turn: 0 the parent, 1 the child */
    _Atomic uint32_t sleeps;
} shared_t;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void futex(_Atomic uint32_t *w, int op, uint32_t v)
{
    syscall(SYS_futex, (uint32_t *)w, op, v, NULL, NULL, 0);
}

/* Waits until it is @p self's turn: spins for at most @p spin_ns, then sleeps on the word. */
static void take(shared_t *s, uint32_t self, uint64_t spin_ns)
{
    uint64_t t0 = now_ns();
    uint32_t v;

    while ((v = atomic_load(&s->turn)) != self) {
        if (now_ns() - t0 < spin_ns) {
            continue;
        }
        atomic_fetch_add_explicit(&s->sleeps, 1, memory_order_relaxed);
        futex(&s->turn, FUTEX_WAIT, v);
    }
}

/* Gives the turn to @p other and wakes it. */
static void give(shared_t *s, uint32_t other)
{
    atomic_store(&s->turn, other);
    futex(&s->turn, FUTEX_WAKE, 1);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long iters = 20000;
    uint64_t spin_ns = 0;
    shared_t *s;
    double *t;
    pid_t child;

    for (int c; (c = getopt(argc, argv, "n:s:")) != -1;) {
        if (c == 'n') {
            iters = atol(optarg);
        } else if (c == 's') {
            spin_ns = strtoull(optarg, NULL, 10);
        } else {
            fprintf(stderr, "usage: futex-pingpong [-n ITERS] [-s SPIN_NS]\n");
            return 2;
        }
    }
    if (iters < 10) {
        fprintf(stderr, "futex-pingpong: -n must be at least 10\n");
        return 2;
    }
    s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    t = calloc((size_t)iters, sizeof(*t));
    if (s == MAP_FAILED || t == NULL || (child = fork()) < 0) {
        perror("futex-pingpong");
        return 1;
    }
    if (child == 0) { /* the child answers every hand-off */
        for (long i = 0; i < WARMUP + iters; i++) {
            take(s, 1, spin_ns);
            give(s, 0);
        }
        _exit(0);
    }
    for (long i = 0; i < WARMUP + iters; i++) {
        uint64_t t0 = now_ns();
        give(s, 1);
        take(s, 0, spin_ns);
        if (i >= WARMUP) {
            t[i - WARMUP] = (double)(now_ns() - t0) / 2e3;
        }
    }
    waitpid(child, NULL, 0);
    qsort(t, (size_t)iters, sizeof(*t), cmp);
    printf("futex one-way hand-off (half a round trip), %ld round trips, spin %llu ns: "
           "p50 %.2f us, p90 %.2f us, p99 %.2f us; %u of %ld waits slept\n",
           iters, (unsigned long long)spin_ns, t[iters / 2], t[iters * 9 / 10], t[iters * 99 / 100],
           atomic_load(&s->sleeps), 2 * (WARMUP + iters));
    return 0;
}
