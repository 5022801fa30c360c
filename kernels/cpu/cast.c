/*
 * The 16-bit wire cast (cast.h): argument checks and the passes; the span's exponent is
 * compress.h's (coll_cast_scale_exp()), the loops are in cast_loops.h, per instruction set.
 */
#include "kernels/cpu/cast.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/half.h"

static int format_ok(coll_cast_format_t fmt)
{
    return fmt == COLL_CAST_FP16 || fmt == COLL_CAST_BF16;
}

/* 2^p for p in [-126, 127], built from its exponent bits (exact). */
static float pow2f(int p)
{
    return coll__f32_from_bits((uint32_t)(p + 127) << 23);
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
    int32_t p;
    if (coll_cast_scale_exp(fmt, isa->cast_maxkey(grad, residual, count), &p) != COLL_OK) {
        return COLL_ERR_INVALID;
    }
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
