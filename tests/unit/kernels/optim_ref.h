/*
 * Test-side helpers for the optimizer kernels (kernels/cpu/optim.h), shared by
 * test_optim_<name>.c: a PRNG, buffers, tolerance checks against references the tests compute
 * in double from the published formulas, and loops over the instruction sets this CPU has.
 * Nothing here calls the kernels' internals.
 */
#ifndef TEST_OPTIM_REF_H
#define TEST_OPTIM_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/optim.h"

static const char *const ref_optim_isas[] = {"avx512", "avx2", "scalar"};
#define REF_OPTIM_NISAS 3

static uint64_t ref_rng_state = 0x9e3779b97f4a7c15ull;

/* splitmix64 */
static inline uint64_t ref_rand(void)
{
    uint64_t z = (ref_rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [lo, hi), rounded to float. */
static inline float ref_uniform(double lo, double hi)
{
    return (float)(lo + (hi - lo) * (double)(ref_rand() >> 11) * 0x1p-53);
}

static inline float *ref_alloc(size_t n)
{
    float *p = calloc(n ? n : 1, sizeof(float));
    if (p == NULL) {
        abort();
    }
    return p;
}

static inline double *ref_alloc_d(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof(double));
    if (p == NULL) {
        abort();
    }
    return p;
}

static inline void ref_fill(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = ref_uniform(lo, hi);
    }
}

static inline void ref_widen(double *out, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        out[i] = x[i];
    }
}

static inline double ref_sumsq_d(const double *x, size_t n)
{
    long double s = 0;
    for (size_t i = 0; i < n; i++) {
        s += (long double)x[i] * x[i];
    }
    return (double)s;
}

/* |got - want| <= rel * |want| + abs for every element, else a failure naming the element. */
static inline void ref_check_close(const char *what, const float *got, const double *want,
                                   size_t n, double rel, double abs_tol)
{
    for (size_t i = 0; i < n; i++) {
        double err = fabs((double)got[i] - want[i]);
        if (!(err <= rel * fabs(want[i]) + abs_tol)) {
            fail_msg("%s[%zu] = %.9g, reference %.9g (error %.3g, allowed %.3g)", what, i,
                     (double)got[i], want[i], err, rel * fabs(want[i]) + abs_tol);
        }
    }
}

/* The same bits (NaNs included) in every element. */
static inline void ref_check_same(const char *what, const float *a, const float *b,
                                  size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
            fail_msg("%s[%zu]: %.9g vs %.9g differ in their bits", what, i, (double)a[i],
                     (double)b[i]);
        }
    }
}

/* @return Non-zero when @p isa could be forced (the CPU has it); the kernels then use it. */
static inline int ref_use_isa(const char *isa)
{
    return coll_cpu_force_isa(isa) == 0;
}

#endif
