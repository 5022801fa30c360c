/*
 * The compression loops (compress_isa.h) in portable C, compiled without the vectorizer
 * (kernels/CMakeLists.txt): the reference every other instruction set must match bit for bit.
 */
#include "cast_loops.h"
#include "lowrank_loops.h"
#include "onebit_loops.h"
#include "topk_loops.h"

const coll__compress_isa_t coll__compress_scalar = COLL__COMPRESS_ISA_TABLE("scalar");
