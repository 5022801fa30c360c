/**
 * @file isa.h
 * @brief The one instruction-set choice of the host kernels: every loop of kernels/cpu is
 *        written once and compiled per instruction set into one table, and isa.c, the only
 *        place that reads the CPU's features, picks the table every kernel uses.
 *
 * The loops live in *_loops.h (reduction, cast, 1-bit, TopK, PowerSGD, optimizers). isa_scalar.c,
 * isa_avx2.c and isa_avx512.c each include all of them and are compiled whole with their own
 * flags (kernels/CMakeLists.txt): the build's baseline, -mavx2 -mf16c, and
 * -mavx512{f,bw,vl,dq} -mf16c with 512-bit vectors preferred. Nothing in those files runs before
 * isa.c has checked the CPU, which it does in code compiled for the baseline.
 *
 * Identical results on every set follow from the source: no -ffast-math, no contraction into
 * fused multiply-adds (-ffp-contract=off), element-wise operations in a fixed order, and every
 * sum over many elements written with a fixed number of partial sums combined in a fixed order.
 * The one exception: the payload of a NaN that SUM, AVG or PROD produces in the reduction.
 */
#ifndef COLL_KERNELS_CPU_ISA_H
#define COLL_KERNELS_CPU_ISA_H

#include "kernels/cpu/compress_isa.h"
#include "kernels/cpu/optim_isa.h"
#include "kernels/cpu/reduce_isa.h"

/** @return The instruction set the host kernels use: "avx512", "avx2" or "scalar". Chosen on
 *          first use (the widest the CPU and OS support). Thread-safe. */
const char *coll_cpu_isa(void);

/**
 * @brief Force an instruction set ("avx512", "avx2", "scalar") for tests and benchmarks.
 * @param [in] isa Name as coll_cpu_isa() returns it.
 * @return 0 on success; -1 when the name is unknown or the CPU lacks it (nothing changes).
 *         Not thread-safe with concurrent kernel calls (they may run on either set).
 */
int coll_cpu_force_isa(const char *isa);

/* ---- internal to kernels/cpu ---------------------------------------------------------------- */

/** Bytes of the vectors the loops of the file being compiled are written for (reduce_loops.h,
 *  optim_loops.h): the widest its flags allow. */
#if defined(__AVX512F__)
#define COLL__VBYTES 64
#elif defined(__AVX2__)
#define COLL__VBYTES 32
#else
#define COLL__VBYTES 16
#endif

/** Every loop of one instruction set. Immutable; the tables are constants. */
typedef struct {
    const char *name; /**< "avx512", "avx2" or "scalar" */
    coll__reduce_loops_t reduce;
    coll__compress_loops_t compress;
    coll__optim_loops_t optim;
} coll__isa_t;

/** Fills a table from the static loops of the including file (isa_<set>.c). */
#define COLL__ISA_TABLE(isa_name)                                                              \
    {                                                                                          \
        .name = isa_name,                                                                      \
        .reduce = {.combine = rl_combine, .combine_half = rl_combine_half,                     \
                   .divide = rl_divide},                                                       \
        .compress = {.cast_maxkey = cast_maxkey, .cast_encode = cast_encode,                   \
                     .cast_decode = cast_decode, .onebit_sum = onebit_sum,                     \
                     .onebit_pack = onebit_pack, .onebit_unpack = onebit_unpack,               \
                     .ef_add = ef_add, .topk_mask = topk_mask, .lr_dots = lr_dots,             \
                     .lr_axpy = lr_axpy, .lr_recon = lr_recon, .lr_dot = lr_dot,               \
                     .lr_sub_scaled = lr_sub_scaled, .lr_div = lr_div},                        \
        .optim = {.sumsq = ob_isa_sumsq, .any_nonfinite = ob_any_nonfinite,                    \
                  .sgd = ob_isa_sgd, .adamw = ob_isa_adamw, .lars = ob_isa_lars,               \
                  .lamb_moments = ob_isa_lamb_moments, .lamb_apply = ob_isa_lamb_apply},       \
    }

/** Portable C for the build's baseline (SSE2 on x86-64), which the compiler vectorizes. */
extern const coll__isa_t coll__isa_scalar;
#if defined(COLL_KERNELS_X86)
/** AVX2 + F16C (x86-64-v3 without FMA, which no loop uses). */
extern const coll__isa_t coll__isa_avx2;
/** AVX-512 F, BW, VL, DQ (+ F16C), 512-bit vectors. */
extern const coll__isa_t coll__isa_avx512;
#endif

/** @return The loops of the instruction set in use (chosen on first call). Thread-safe. */
const coll__isa_t *coll__isa(void);

#endif
