/*
 * Choice of the optimizer kernels' instruction set (optim_isa.h), made once on first use, and
 * the fixed-order combination of the lanes of a sum of squares.
 */
#include <stdatomic.h>
#include <string.h>

#include "kernels/cpu/optim.h"
#include "kernels/cpu/optim_isa.h"

/* Widest first: the first supported one is the default. AVX2 is compiled on x86-64 only. */
static const coll__optim_isa_t *const optim_isas[] = {
#if defined(__x86_64__)
    &coll__optim_avx2,
#endif
    &coll__optim_generic,
};

#define NISAS (sizeof(optim_isas) / sizeof(optim_isas[0]))

/* NULL until the first call chooses; concurrent first calls choose the same, so a relaxed race
 * is harmless. */
static _Atomic(const coll__optim_isa_t *) optim_isa_cur;

const coll__optim_isa_t *coll__optim_isa_get(void)
{
    const coll__optim_isa_t *isa = atomic_load_explicit(&optim_isa_cur, memory_order_relaxed);

    if (isa == NULL) {
        for (size_t i = 0; i < NISAS && isa == NULL; i++) {
            if (optim_isas[i]->supported()) {
                isa = optim_isas[i];
            }
        }
        atomic_store_explicit(&optim_isa_cur, isa, memory_order_relaxed);
    }
    return isa;
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

const char *coll_optim_isa(void)
{
    return coll__optim_isa_get()->name;
}

int coll_optim_force_isa(const char *isa)
{
    for (size_t i = 0; i < NISAS; i++) {
        if (strcmp(optim_isas[i]->name, isa) == 0) {
            if (!optim_isas[i]->supported()) {
                return -1;
            }
            atomic_store_explicit(&optim_isa_cur, optim_isas[i], memory_order_relaxed);
            return 0;
        }
    }
    return -1;
}
