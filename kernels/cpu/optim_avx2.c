/*
 * The optimizer element loops (optim_body.h) compiled for AVX2: every function of this file
 * carries the target, and optim_isa.c calls them only after avx2_supported() said yes. No FMA
 * (not in the target, and -ffp-contract=off), so the results are those of the generic loops.
 */
#if defined(__x86_64__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC target("avx2")
#endif

static int avx2_supported(void)
{
    /* __builtin_cpu_supports("avx2") also checks that the OS saves the YMM state. */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
}

#define OPTIM_ISA_VAR coll__optim_avx2
#define OPTIM_ISA_NAME "avx2"
#define OPTIM_ISA_SUPPORTED avx2_supported
#define OPTIM_ISA_VBYTES 32 /* vectors of the sums of squares */
#include "kernels/cpu/optim_body.h"

#if defined(__clang__)
#pragma clang attribute pop
#endif

#endif /* __x86_64__ */
