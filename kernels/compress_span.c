/*
 * What every memory kind computes alike for a span of a compressor (compress.h), on the host
 * side of its executor: the cast's scale exponent, the 1-bit scale, TopK's argument check. In
 * the executors' objects (no libm: sqrt is an instruction under -fno-math-errno), which
 * libcollective.a holds too.
 */
#include <math.h>

#include "kernels/compress.h"

/*
 * The smallest magnitude key the cast rejects. At the top binade of float32 the span is scaled
 * by 2^-113 and a 16-bit value that rounds up to 2^15 decodes to 2^128, which is infinity in
 * float32: for magnitudes from 2^128 - 2^116 (float16: half an ulp below 2^128 at 11 significant
 * bits) or 2^128 - 2^119 (bfloat16, 8 bits). Everything below decodes to at most 2^127 * (2 -
 * ulp). Infinities and NaNs lie above both limits.
 */
static uint32_t cast_reject_key(coll_cast_format_t fmt)
{
    return fmt == COLL_CAST_FP16 ? 0x7f7ff000u : 0x7f7f8000u;
}

coll_status_t coll_cast_scale_exp(coll_cast_format_t fmt, uint32_t maxkey, int32_t *scale_exp)
{
    int e;

    if (maxkey >= cast_reject_key(fmt)) {
        return COLL_ERR_INVALID;
    }
    if (maxkey == 0) {
        *scale_exp = 0;
        return COLL_OK;
    }
    if (maxkey >= 0x00800000u) {
        e = (int)(maxkey >> 23) - 127; /* normal: the unbiased exponent */
    } else {
        e = (31 - __builtin_clz(maxkey)) - 149; /* subnormal: mantissa * 2^-149 */
    }
    int p = COLL_CAST_TARGET_EXP - e;
    *scale_exp = p > COLL_CAST_EXP_MAX ? COLL_CAST_EXP_MAX : p;
    return COLL_OK;
}

coll_status_t coll_onebit_scale(coll_onebit_scale_t rule, double sum, size_t count, float *scale)
{
    /* Squares of float32 values cannot overflow a double sum (n * 2^256 << 2^1024), so the sum
     * is non-finite exactly when some x is. */
    if (!isfinite(sum)) {
        return COLL_ERR_INVALID;
    }
    double mean = sum / (double)count;
    *scale = (float)(rule == COLL_ONEBIT_SCALE_L1 ? mean : sqrt(mean));
    return COLL_OK;
}

coll_status_t coll_topk_args_check(const coll_topk_args_t *a)
{
    if (a == NULL || a->k > a->count || a->count > COLL_TOPK_MAX_COUNT ||
        (unsigned)a->select > COLL_TOPK_SELECT_SAMPLED) {
        return COLL_ERR_INVALID;
    }
    if (a->count > 0 &&
        (a->grad == NULL || (a->k > 0 && (a->indices == NULL || a->values == NULL)))) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}
