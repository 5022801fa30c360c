/*
 * Partial sums of squares (the per-shard half of every layer norm) and the finiteness check.
 * Lanes and their combination: optim_isa.h and coll__optim_lanes_total().
 */
#include <string.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/isa.h"

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
