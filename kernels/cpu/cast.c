/*
 * The 16-bit wire cast (cast.h): the choice of the span's exponent and argument checks; the
 * loops are in cast_loops.h, per instruction set.
 */
#include "kernels/cpu/cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/half.h"

static int format_ok(coll_cast_format_t fmt)
{
    return fmt == COLL_CAST_FP16 || fmt == COLL_CAST_BF16;
}

/*
 * The smallest magnitude key the encoder rejects. At the top binade of float32 the span is scaled
 * by 2^-113 and a 16-bit value that rounds up to 2^15 decodes to 2^128, which is infinity in
 * float32: for magnitudes from 2^128 - 2^116 (float16: half an ulp below 2^128 at 11 significant
 * bits) or 2^128 - 2^119 (bfloat16, 8 bits). Everything below decodes to at most 2^127 * (2 -
 * ulp). Infinities and NaNs lie above both limits.
 */
static uint32_t reject_key(coll_cast_format_t fmt)
{
    return fmt == COLL_CAST_FP16 ? 0x7f7ff000u : 0x7f7f8000u;
}

/* 2^p for p in [-126, 127], built from its exponent bits (exact). */
static float pow2f(int p)
{
    return coll__f32_from_bits((uint32_t)(p + 127) << 23);
}

/*
 * The exponent p that puts the magnitude with key @p maxkey (a finite one) into
 * [2^COLL_CAST_TARGET_EXP, 2^(COLL_CAST_TARGET_EXP + 1)).
 */
static int32_t scale_exp_for(uint32_t maxkey)
{
    int e;

    if (maxkey == 0) {
        return 0;
    }
    if (maxkey >= 0x00800000u) {
        e = (int)(maxkey >> 23) - 127; /* normal: the unbiased exponent */
    } else {
        e = (31 - __builtin_clz(maxkey)) - 149; /* subnormal: mantissa * 2^-149 */
    }
    int p = COLL_CAST_TARGET_EXP - e;
    return p > COLL_CAST_EXP_MAX ? COLL_CAST_EXP_MAX : p;
}

coll_status_t coll_cast_encode(coll_cast_format_t fmt, const float *grad, float *residual,
                               size_t count, uint16_t *out, int32_t *scale_exp)
{
    const coll__compress_loops_t *isa = &coll__isa()->compress;

    if (!format_ok(fmt) || scale_exp == NULL ||
        (count > 0 && (grad == NULL || out == NULL))) {
        return COLL_ERR_INVALID;
    }
    if (count == 0) {
        *scale_exp = 0;
        return COLL_OK;
    }
    uint32_t maxkey = isa->cast_maxkey(grad, residual, count);
    if (maxkey >= reject_key(fmt)) {
        return COLL_ERR_INVALID;
    }
    int32_t p = scale_exp_for(maxkey);
    isa->cast_encode((int)fmt, grad, residual, count, pow2f(p), pow2f(-p), out);
    *scale_exp = p;
    return COLL_OK;
}

static coll_status_t decode_check(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                  int32_t scale_exp, const float *out)
{
    if (!format_ok(fmt) || scale_exp < COLL_CAST_EXP_MIN || scale_exp > COLL_CAST_EXP_MAX ||
        (count > 0 && (in == NULL || out == NULL))) {
        return COLL_ERR_INVALID;
    }
    return COLL_OK;
}

coll_status_t coll_cast_decode(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                               int32_t scale_exp, float *out)
{
    coll_status_t st = decode_check(fmt, in, count, scale_exp, out);

    if (st == COLL_OK && count > 0) {
        coll__isa()->compress.cast_decode((int)fmt, in, count, pow2f(-scale_exp), 0, out);
    }
    return st;
}

coll_status_t coll_cast_accumulate(coll_cast_format_t fmt, const uint16_t *in, size_t count,
                                   int32_t scale_exp, float weight, float *acc)
{
    coll_status_t st = decode_check(fmt, in, count, scale_exp, acc);

    if (st == COLL_OK && count > 0) {
        float mul = weight * pow2f(-scale_exp);
        coll__isa()->compress.cast_decode((int)fmt, in, count, mul, 1, acc);
    }
    return st;
}
