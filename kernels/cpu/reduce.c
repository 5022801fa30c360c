/*
 * The reduction driver: cuts a reduction into blocks and folds the sources into each block a
 * few at a time (reduce_isa.h). With many sources, every source is streamed from memory once
 * and the block being accumulated stays in L1; with few sources this is a single pass. The
 * element loops of the instruction set in use (isa.h) live in reduce_loops.h.
 */
#include <string.h>

#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/isa.h"

/* A pointer @p off elements of @p esize bytes into @p p. */
static const void *at(const void *p, size_t off, size_t esize)
{
    return (const char *)p + off * esize;
}

/*
 * One block of float32, float64 or integers: the destination is the accumulator. The first pass
 * combines up to FANIN + 1 sources into it (src[0] may be the destination itself), each later
 * pass the accumulator and up to FANIN more sources; AVG then divides on the last combine.
 */
static void reduce_block(const coll__reduce_loops_t *isa, const coll_reduce_args_t *a,
                         size_t off, size_t n)
{
    const size_t es = coll__reduce_esize(a->dtype);
    const void *in[COLL__REDUCE_FANIN + 1];
    void *out = (char *)a->dst + off * es;
    unsigned m = a->nsrc < COLL__REDUCE_FANIN + 1 ? a->nsrc : COLL__REDUCE_FANIN + 1;

    for (unsigned j = 0; j < m; j++) {
        in[j] = at(a->src[j], off, es);
    }
    if (m > 1) {
        isa->combine(a->dtype, a->op, out, in, m, n);
    } else if (out != in[0]) {
        memcpy(out, in[0], n * es);
    }
    for (unsigned k = m; k < a->nsrc; k += m) {
        m = a->nsrc - k < COLL__REDUCE_FANIN ? a->nsrc - k : COLL__REDUCE_FANIN;
        in[0] = out;
        for (unsigned j = 0; j < m; j++) {
            in[1 + j] = at(a->src[k + j], off, es);
        }
        isa->combine(a->dtype, a->op, out, in, m + 1, n);
    }
    if (a->op == COLL_AVG && a->finalize && a->world_size > 1) {
        isa->divide(a->dtype, out, a->world_size, n);
    }
}

/* acc = op(acc, src) over @p n float32 values (a partial result kept in float32), or a copy
 * of src when nothing was accumulated yet. */
static void fold_f32(const coll__reduce_loops_t *isa, coll_redop_t op, float *acc, int has_acc,
                     const float *src, size_t n)
{
    const void *in[2] = {acc, src};

    if (!has_acc) {
        memcpy(acc, src, n * sizeof(float));
    } else {
        isa->combine(COLL_FLOAT32, op, acc, in, 2, n);
    }
}

/* The accumulator itself is the result: rounded once to the 16-bit dtype (half.h rounds as
 * the vector kernels do), or kept in float32 for a partial destination. */
static void store_acc(const coll_reduce_args_t *a, const float *acc, size_t off, size_t n)
{
    uint16_t *out = (uint16_t *)a->dst + off;

    if (a->dst_f32) {
        memcpy((float *)a->dst + off, acc, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = a->dtype == COLL_FLOAT16 ? coll__f32_to_f16(acc[i]) : coll__f32_to_bf16(acc[i]);
    }
}

/* Consecutive 16-bit sources from @p k on, at most FANIN. */
static unsigned run_of_half(const coll_reduce_args_t *a, unsigned k)
{
    unsigned m = 0;
    while (k + m < a->nsrc && m < COLL__REDUCE_FANIN && !((a->f32_mask >> (k + m)) & 1)) {
        m++;
    }
    return m;
}

/* One block of float16 or bfloat16: fold every source into a float32 accumulator, left to
 * right, 16-bit sources FANIN at a time; a last pass of 16-bit sources rounds once into the
 * destination instead of storing the accumulator. */
static void reduce_block_half(const coll__reduce_loops_t *isa, const coll_reduce_args_t *a,
                              const float *scale, float *acc, size_t off, size_t n)
{
    const void *in[COLL__REDUCE_FANIN];
    unsigned k = 0;

    while (k < a->nsrc) {
        unsigned m = run_of_half(a, k);
        if (m == 0) {
            fold_f32(isa, a->op, acc, k > 0, (const float *)a->src[k] + off, n);
            k++;
            continue;
        }
        void *out = k + m == a->nsrc && !a->dst_f32 ? (char *)a->dst + off * 2 : NULL;
        for (unsigned j = 0; j < m; j++) {
            in[j] = at(a->src[k + j], off, 2);
        }
        isa->combine_half(a->dtype, a->op, acc, k > 0, in, scale + k, m, n, out);
        if (out != NULL) {
            return;
        }
        k += m;
    }
    store_acc(a, acc, off, n);
}

static void reduce_half(const coll__reduce_loops_t *isa, const coll_reduce_args_t *a)
{
    _Alignas(64) float acc[COLL__REDUCE_BLOCK_BYTES / sizeof(float)];
    float scale[COLL_REDUCE_MAX_SRCS];
    const size_t blk = coll__reduce_block_elems(a->dtype);

    /* AVG: every rank's raw input is scaled by 1/world_size, in float32, before the sum;
     * partial results were scaled already. The kernels read the scales for AVG only. */
    const float inv = 1.0f / (float)a->world_size;
    for (unsigned k = 0; k < a->nsrc; k++) {
        scale[k] = a->op == COLL_AVG && ((a->raw_mask >> k) & 1) ? inv : 1.0f;
    }
    for (size_t off = 0; off < a->count; off += blk) {
        size_t n = a->count - off < blk ? a->count - off : blk;
        reduce_block_half(isa, a, scale, acc, off, n);
    }
}

void coll_reduce(const coll_reduce_args_t *args)
{
    const coll__reduce_loops_t *isa = &coll__isa()->reduce;

    if (args->count == 0) {
        return;
    }
    if (coll__reduce_is_half(args->dtype)) {
        reduce_half(isa, args);
        return;
    }
    const size_t blk = coll__reduce_block_elems(args->dtype);
    for (size_t off = 0; off < args->count; off += blk) {
        size_t n = args->count - off < blk ? args->count - off : blk;
        reduce_block(isa, args, off, n);
    }
}
