/*
 * The host's optimizer steps (optim.h): partial sums of squares, the finiteness check, and the
 * element loops of every optimizer on a step's coefficients, on the instruction set in use
 * (isa.h; the loops are in optim_loops.h). Lanes and their combination: optim_isa.h and
 * coll__optim_lanes_total(). Nothing here needs libm: libcollective links it (kernels/exec.h).
 */
#include <string.h>

#include "kernels/cpu/isa.h"
#include "kernels/cpu/optim.h"

/* Elements of each array per round of coll_optim_sumsq2(): a multiple of the lane count, so
 * element i still lands in lane i mod LANES, and small enough that the pair streams together. */
#define SUMSQ2_BLOCK 4096

double coll_optim_sumsq(const float *x, size_t n)
{
    double acc[COLL__OPTIM_LANES] = {0};

    if (n > 0) {
        coll__isa()->optim.sumsq(acc, x, n);
    }
    return coll__optim_lanes_total(acc);
}

void coll_optim_sumsq2(const float *a, const float *b, size_t n, double out[2])
{
    const coll__optim_loops_t *isa = &coll__isa()->optim;
    double acc_a[COLL__OPTIM_LANES] = {0}, acc_b[COLL__OPTIM_LANES] = {0};

    for (size_t off = 0; off < n; off += SUMSQ2_BLOCK) {
        size_t len = n - off < SUMSQ2_BLOCK ? n - off : SUMSQ2_BLOCK;
        isa->sumsq(acc_a, a + off, len);
        isa->sumsq(acc_b, b + off, len);
    }
    out[0] = coll__optim_lanes_total(acc_a);
    out[1] = coll__optim_lanes_total(acc_b);
}

double coll__optim_lanes_total(const double *acc)
{
    double l[COLL__OPTIM_LANES];

    memcpy(l, acc, sizeof(l));
    for (size_t half = COLL__OPTIM_LANES / 2; half > 0; half /= 2) {
        for (size_t j = 0; j < half; j++) {
            l[j] += l[j + half];
        }
    }
    return l[0];
}

int coll_optim_all_finite(const float *x, size_t n)
{
    return n == 0 || !coll__isa()->optim.any_nonfinite(x, n);
}

void coll_optim_sgd_step(const coll_optim_sgd_coef_t *k, float *w, const float *g, float *buf,
                         size_t n)
{
    if (n > 0) {
        coll__isa()->optim.sgd(k, w, g, buf, n);
    }
}

void coll_optim_adamw_step(const coll_optim_adamw_coef_t *k, float *w, const float *g, float *m,
                           float *v, size_t n)
{
    if (n > 0) {
        coll__isa()->optim.adamw(k, w, g, m, v, n);
    }
}

void coll_optim_lars_step(const coll_optim_lars_coef_t *k, float *w, const float *g, float *v,
                          size_t n)
{
    if (n > 0) {
        coll__isa()->optim.lars(k, w, g, v, n);
    }
}

void coll_optim_lamb_moments_step(const coll_optim_lamb_coef_t *k, const float *w,
                                  const float *g, float *m, float *v, size_t n, double sumsq[2])
{
    double accw[COLL__OPTIM_LANES] = {0}, accr[COLL__OPTIM_LANES] = {0};

    if (n > 0) {
        coll__isa()->optim.lamb_moments(k, w, g, m, v, n, accw, accr);
    }
    sumsq[0] = coll__optim_lanes_total(accw);
    sumsq[1] = coll__optim_lanes_total(accr);
}

void coll_optim_lamb_apply_step(const coll_optim_lamb_coef_t *k, float *w, const float *m,
                                const float *v, size_t n)
{
    if (n > 0) {
        coll__isa()->optim.lamb_apply(k, w, m, v, n);
    }
}
