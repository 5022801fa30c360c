/**
 * @file compress.h
 * @brief Gradient compression kernels with error feedback: what every one of them promises, and
 *        the instruction set they run on.
 *
 * The compressors, one header each:
 * - cast.h     float32 -> float16 / bfloat16 on the wire, a power-of-two scale per span.
 * - topk.h     the k largest magnitudes as (index, value) pairs (Stich et al. 2018; Lin et al.
 *              2018, Deep Gradient Compression), exact selection, sparse accumulate and merge.
 * - onebit.h   signs packed 8 per byte and one scale per span (Tang et al. 2021, 1-bit Adam).
 * - lowrank.h  PowerSGD rank-r factors P and Q (Vogels et al. 2019).
 * - compress_wire.h  the byte layout of each on the wire, and the receiver's checks.
 *
 * Error feedback (Seide et al. 2014; Karimireddy et al. 2019, "Error Feedback Fixes SignSGD"):
 * a compressor sends C(g + e) and keeps e' = (g + e) - D(C(g + e)), where g is this step's
 * gradient, e the residual kept from the last step and D the decoder. Every encoder here fuses the
 * addition and the residual update into its passes over the data (the residual is read and written
 * in place), and takes the residual as optional (NULL: no error feedback).
 *
 * Conventions of every kernel in these headers:
 * - Counts are in elements, never bytes. A count of 0 is valid and does nothing (documented per
 *   kernel where it still writes a scale or a header value).
 * - Pure functions of their arguments, no global state except the instruction-set choice
 *   (kernels/cpu/isa.h):
 *   thread-safe for calls on disjoint output buffers.
 * - No allocation on the data path. A kernel that needs working memory takes it from the caller
 *   (TopK's candidate scratch); where it uses the stack, its header says how much.
 * - Non-finite input (NaN, infinity): callers reject it before (a NaN gradient fails its bucket).
 *   The kernels never crash or loop on it; what each one does with it is documented per kernel.
 * - Every instruction set gives bit-identical results: the kernels are written once in C
 *   (*_loops.h) and compiled per instruction set, float operations are never reassociated
 *   or contracted into fused multiply-adds, and sums run over a fixed number of lanes in a fixed
 *   order.
 */
#ifndef COLL_KERNELS_COMPRESS_H
#define COLL_KERNELS_COMPRESS_H

#endif
