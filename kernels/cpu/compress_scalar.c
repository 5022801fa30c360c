/*
 * The compression loops (compress_isa.h) in portable C, compiled without the vectorizer
 * (kernels/CMakeLists.txt): the reference every other instruction set must match bit for bit.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__compress_isa_t coll__compress_scalar = COLL__COMPRESS_ISA_TABLE("scalar");
