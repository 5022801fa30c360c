/**
 * @file half.h
 * @brief Scalar conversions between float32 and the 16-bit float formats (IEEE 754 binary16
 *        and bfloat16), bit-exact with the vector conversions of the SIMD kernels.
 *
 * Internal to kernels/cpu. Every function is pure and thread-safe. Float32 -> 16-bit rounds to
 * nearest, ties to even (IEEE 754-2008 §4.3.1 roundTiesToEven), keeps subnormals (no flush to
 * zero) and overflows to infinity. NaN stays NaN with the quiet bit set and the payload's upper
 * bits kept, which is what the x86 F16C instructions VCVTPH2PS / VCVTPS2PH do (Intel SDM vol. 2,
 * "VCVTPS2PH"), so the scalar path and the F16C path give the same bits.
 *
 * bfloat16 rounding follows the "BFLOAT16 - Hardware Numerics Definition" white paper (Intel,
 * 2018, document 338302-001US) and PyTorch's c10::BFloat16 round_to_nearest_even(): add
 * 0x7fff plus the lowest kept bit, then truncate. Unlike the AVX512_BF16 instruction VCVTNEPS2BF16
 * it keeps subnormals.
 */
#ifndef COLL_KERNELS_HALF_H
#define COLL_KERNELS_HALF_H

#include <stdint.h>
#include <string.h>

/** @return The bits of @p f. */
static inline uint32_t coll__f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
}

/** @return The float whose bits are @p u. */
static inline float coll__f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/** @return binary16 @p h widened to float32 (exact; a signaling NaN comes back quiet). */
static inline float coll__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) {
        return coll__f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    }
    if (exp != 0) {
        return coll__f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    }
    /* Zero or subnormal: man * 2^-24, exact in float32 and a normal float32 when non-zero. */
    return coll__f32_from_bits(sign | coll__f32_bits((float)man * 0x1p-24f));
}

/** @return float32 @p f rounded to the nearest binary16, ties to even. */
static inline uint16_t coll__f32_to_f16(float f)
{
    uint32_t x = coll__f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) { /* NaN: quiet, upper 9 payload bits kept */
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) { /* at or past 65520 = half-way between 65504 and 2^16 */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) { /* normal binary16: rebias 127 -> 15, round at bit 13 */
        ax += 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
    }
    /* Below 2^-25, half the smallest subnormal: 0 (2^-25 itself ties to 0 further down). */
    if (ax < 0x33000000u) {
        return (uint16_t)sign;
    }
    /* Subnormal binary16: the significand (with its implicit bit) in units of 2^-24. */
    uint32_t shift = 126 - (ax >> 23);
    uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q);
}

/** @return bfloat16 @p b widened to float32 (exact: bfloat16 is the upper half of a float32). */
static inline float coll__bf16_to_f32(uint16_t b)
{
    return coll__f32_from_bits((uint32_t)b << 16);
}

/** @return float32 @p f rounded to the nearest bfloat16, ties to even; NaN stays a quiet NaN. */
static inline uint16_t coll__f32_to_bf16(float f)
{
    uint32_t x = coll__f32_bits(f);

    if ((x & 0x7fffffffu) > 0x7f800000u) {
        return (uint16_t)((x | 0x400000u) >> 16);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

#endif
