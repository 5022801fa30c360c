/*
 * The compression loops (compress_isa.h) for AVX-512 F/BW/VL/DQ (+ F16C): this file is compiled
 * with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mf16c, 512-bit vectors preferred
 * (kernels/CMakeLists.txt). Nothing here runs before compress.c has checked the CPU.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__compress_isa_t coll__compress_avx512 = COLL__COMPRESS_ISA_TABLE("avx512");
