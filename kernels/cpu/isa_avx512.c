/*
 * The loops of every host kernel (isa.h) for AVX-512 F/BW/VL/DQ (+ F16C): this file is compiled
 * with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c, 512-bit vectors preferred
 * (kernels/CMakeLists.txt). Nothing here runs before isa.c has checked the CPU.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/optim_loops.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__isa_t coll__isa_avx512 = COLL__ISA_TABLE("avx512");
