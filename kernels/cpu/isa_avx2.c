/*
 * The loops of every host kernel (isa.h) for AVX2 + F16C: this file is compiled with -mavx2
 * -mf16c (kernels/CMakeLists.txt). Nothing here runs before isa.c has checked the CPU.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/optim_loops.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__isa_t coll__isa_avx2 = COLL__ISA_TABLE("avx2");
