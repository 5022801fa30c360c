/*
 * The compression loops (compress_isa.h) for AVX2 + F16C: this file is compiled with -mavx2
 * -mf16c (kernels/CMakeLists.txt). Nothing here runs before compress.c has checked the CPU.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__compress_isa_t coll__compress_avx2 = COLL__COMPRESS_ISA_TABLE("avx2");
