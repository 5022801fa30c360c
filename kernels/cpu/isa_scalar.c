/*
 * The loops of every host kernel (isa.h) for the build's baseline: portable C that the compiler
 * vectorizes for what every CPU of the architecture has (SSE2 on x86-64). Always supported.
 */
#include "kernels/cpu/cast_loops.h"
#include "kernels/cpu/lowrank_loops.h"
#include "kernels/cpu/onebit_loops.h"
#include "kernels/cpu/optim_loops.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/topk_loops.h"

const coll__isa_t coll__isa_scalar = COLL__ISA_TABLE("scalar");
