/*
 * The instruction-set choice of every host kernel (isa.h). The CPU checks live here, in a file
 * compiled for the baseline, because isa_avx2.c and isa_avx512.c are compiled whole with -mavx2 /
 * -mavx512f: any code of theirs could use those instructions, so none of it may run before a
 * check said yes.
 */
#include <stdatomic.h>
#include <string.h>
#if defined(COLL_KERNELS_X86)
#include <cpuid.h>
#endif

#include "kernels/cpu/isa.h"

typedef struct {
    const coll__isa_t *loops;
    int (*supported)(void);
} isa_entry_t;

static int scalar_supported(void)
{
    return 1;
}

#if defined(COLL_KERNELS_X86)
/* __builtin_cpu_supports() also checks that the OS saves the YMM (and ZMM, mask) state. F16C
 * comes from CPUID: clang's __builtin_cpu_supports() does not know "f16c". */
static int avx2_supported(void)
{
    unsigned eax, ebx, ecx, edx;

    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2") || !__get_cpuid(1, &eax, &ebx, &ecx, &edx)) {
        return 0;
    }
    return (ecx & bit_F16C) != 0;
}

static int avx512_supported(void)
{
    __builtin_cpu_init();
    return avx2_supported() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
}
#endif

/* Widest first: the first supported one is the default. */
static const isa_entry_t isas[] = {
#if defined(COLL_KERNELS_X86)
    {&coll__isa_avx512, avx512_supported},
    {&coll__isa_avx2, avx2_supported},
#endif
    {&coll__isa_scalar, scalar_supported},
};

#define NISAS (sizeof(isas) / sizeof(isas[0]))

/* NULL until the first call chooses; concurrent first calls choose the same, so a relaxed race
 * is harmless. */
static _Atomic(const coll__isa_t *) isa_cur;

const coll__isa_t *coll__isa(void)
{
    const coll__isa_t *cur = atomic_load_explicit(&isa_cur, memory_order_relaxed);

    for (size_t i = 0; i < NISAS && cur == NULL; i++) {
        if (isas[i].supported()) {
            cur = isas[i].loops;
            atomic_store_explicit(&isa_cur, cur, memory_order_relaxed);
        }
    }
    return cur;
}

const char *coll_cpu_isa(void)
{
    return coll__isa()->name;
}

int coll_cpu_force_isa(const char *isa)
{
    for (size_t i = 0; i < NISAS; i++) {
        if (strcmp(isas[i].loops->name, isa) == 0) {
            if (!isas[i].supported()) {
                return -1;
            }
            atomic_store_explicit(&isa_cur, isas[i].loops, memory_order_relaxed);
            return 0;
        }
    }
    return -1;
}
