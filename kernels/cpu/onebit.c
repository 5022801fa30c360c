/*
 * 1-bit compression (onebit.h): argument checks and the passes; the scale is compress.h's
 * (coll_onebit_scale()), the loops are in onebit_loops.h, per instruction set.
 */
#include "kernels/cpu/isa.h"
#include "kernels/cpu/onebit.h"

coll_status_t coll_onebit_encode(coll_onebit_scale_t rule, const float *grad, float *residual,
                                 size_t count, uint8_t *signs, float *scale)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;
    const int l1 = rule == COLL_ONEBIT_SCALE_L1;

    if ((rule != COLL_ONEBIT_SCALE_L2 && !l1) || scale == NULL ||
        (count > 0 && (grad == NULL || signs == NULL))) {
        return COLL_ERR_INVALID;
    }
    if (count == 0) {
        *scale = 0.0f;
        return COLL_OK;
    }
    float s;
    if (coll_onebit_scale(rule, isa->onebit_sum(grad, residual, count, l1), count, &s) !=
        COLL_OK) {
        return COLL_ERR_INVALID;
    }
    isa->onebit_pack(grad, residual, count, s, signs);
    *scale = s;
    return COLL_OK;
}

coll_status_t coll_onebit_decode(const uint8_t *signs, size_t count, float scale, float weight,
                                 float *out)
{
    if (count > 0 && (signs == NULL || out == NULL)) {
        return COLL_ERR_INVALID;
    }
    if (count > 0) {
        coll__isa()->compress.onebit_unpack(signs, count, scale * weight, 0, out);
    }
    return COLL_OK;
}

coll_status_t coll_onebit_accumulate(const uint8_t *signs, size_t count, float scale,
                                     float weight, float *acc)
{
    if (count > 0 && (signs == NULL || acc == NULL)) {
        return COLL_ERR_INVALID;
    }
    if (count > 0) {
        coll__isa()->compress.onebit_unpack(signs, count, scale * weight, 1, acc);
    }
    return COLL_OK;
}
