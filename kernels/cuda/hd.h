/**
 * @file hd.h
 * @brief What every element function of the CUDA kernels is built from: the COLL_HD marker, the
 *        float operations that never contract, bit casts and the 16-bit float conversions.
 *
 * The element functions (elem_*.h) are compiled twice: by nvcc for the device kernels, and by the
 * host's C compiler for the unit tests that check them against the host kernels (kernels/cpu)
 * for every datatype and operation, so that their arithmetic is checked on a machine without a
 * GPU. Under nvcc COLL_HD is __host__ __device__; in C it is nothing, and each header is plain
 * C11 (static inline functions, no C++).
 *
 * Rounding. The host kernels are built without contraction into fused multiply-adds
 * (-ffp-contract=off) and round every float operation to nearest even; nvcc contracts a * b + c
 * by default. Every float operation of an element function is therefore written with the macros
 * below, which on the device are the intrinsics that round once and are never contracted
 * (__fmul_rn, __fadd_rn, ...), and the plain operators in C: the same operations in the same
 * order give the same bits. Division and square root are the correctly rounded ones on both
 * sides. Denormals are kept on both sides (the module is built without -ftz).
 */
#ifndef COLL_KERNELS_CUDA_HD_H
#define COLL_KERNELS_CUDA_HD_H

#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define COLL_HD __host__ __device__ __forceinline__
#else
#define COLL_HD static inline
#endif

#if defined(__CUDA_ARCH__)
#include <cuda_fp16.h>
#define COLL_FADD(a, b) __fadd_rn((a), (b))
#define COLL_FSUB(a, b) __fsub_rn((a), (b))
#define COLL_FMUL(a, b) __fmul_rn((a), (b))
#define COLL_FDIV(a, b) __fdiv_rn((a), (b))
#define COLL_FSQRT(a) __fsqrt_rn(a)
#define COLL_DADD(a, b) __dadd_rn((a), (b))
#define COLL_DSUB(a, b) __dsub_rn((a), (b))
#define COLL_DMUL(a, b) __dmul_rn((a), (b))
#define COLL_DDIV(a, b) __ddiv_rn((a), (b))
#define COLL_DSQRT(a) __dsqrt_rn(a)
#else
#include <math.h>
#define COLL_FADD(a, b) ((a) + (b))
#define COLL_FSUB(a, b) ((a) - (b))
#define COLL_FMUL(a, b) ((a) * (b))
#define COLL_FDIV(a, b) ((a) / (b))
#define COLL_FSQRT(a) sqrtf(a)
#define COLL_DADD(a, b) ((a) + (b))
#define COLL_DSUB(a, b) ((a) - (b))
#define COLL_DMUL(a, b) ((a) * (b))
#define COLL_DDIV(a, b) ((a) / (b))
#define COLL_DSQRT(a) sqrt(a)
#endif

/* ---- bit casts ---------------------------------------------------------------------------- */

COLL_HD uint32_t coll_hd_f32_bits(float f)
{
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    return u;
#endif
}

COLL_HD float coll_hd_f32_from_bits(uint32_t u)
{
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
#endif
}

COLL_HD uint64_t coll_hd_f64_bits(double d)
{
#if defined(__CUDA_ARCH__)
    return (uint64_t)__double_as_longlong(d);
#else
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
#endif
}

COLL_HD double coll_hd_f64_from_bits(uint64_t u)
{
#if defined(__CUDA_ARCH__)
    return __longlong_as_double((long long)u);
#else
    double d;
    memcpy(&d, &u, sizeof(d));
    return d;
#endif
}

/** @return Non-zero when the float with bits @p u is a NaN. */
COLL_HD int coll_hd_f32_bits_nan(uint32_t u)
{
    return (u & 0x7fffffffu) > 0x7f800000u;
}

/* ---- float16 and bfloat16 ------------------------------------------------------------------ */

/*
 * The conversions round as the host's (kernels/cpu/half.h, which rounds as x86's F16C): nearest
 * even, subnormals kept, overflow to infinity, a NaN kept quiet with the upper bits of its
 * payload. The _sw forms spell that out with integers and are what C compiles; the device's
 * float16 forms use the conversion instructions (cvt.rn, exact for every value but a NaN) and
 * take the NaN from the _sw form, so that every input gives the same bits on both sides
 * (tests/gpu/kernel_check compares the two on the device for every input).
 */

/** @return binary16 @p h widened to float32, exact; a NaN comes back quiet. */
COLL_HD float coll_hd_f16_to_f32_sw(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;

    if (exp == 0x1f) {
        return coll_hd_f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    }
    if (exp != 0) {
        return coll_hd_f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
    }
    /* Zero or subnormal: man * 2^-24, exact in float32. */
    return coll_hd_f32_from_bits(sign | coll_hd_f32_bits(COLL_FMUL((float)man, 0x1p-24f)));
}

/** @return float32 @p f rounded to the nearest binary16, ties to even. */
COLL_HD uint16_t coll_hd_f32_to_f16_sw(float f)
{
    uint32_t x = coll_hd_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t ax = x & 0x7fffffffu;

    if (ax > 0x7f800000u) {
        return (uint16_t)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
    }
    if (ax >= 0x477ff000u) { /* at or past 65520, half-way between 65504 and 2^16 */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (ax >= 0x38800000u) { /* normal binary16: rebias, round at bit 13 */
        ax += 0xfffu + ((ax >> 13) & 1u);
        return (uint16_t)(sign | ((ax - 0x38000000u) >> 13));
    }
    if (ax < 0x33000000u) { /* below half the smallest subnormal (2^-25 ties to 0 below) */
        return (uint16_t)sign;
    }
    uint32_t shift = 126 - (ax >> 23);
    uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
    uint32_t q = sig >> shift, rem = sig & ((1u << shift) - 1), half = 1u << (shift - 1);
    q += rem > half || (rem == half && (q & 1u));
    return (uint16_t)(sign | q);
}

/** @return binary16 @p h widened to float32 (as coll_hd_f16_to_f32_sw()). */
COLL_HD float coll_hd_f16_to_f32(uint16_t h)
{
#if defined(__CUDA_ARCH__)
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0) {
        return coll_hd_f16_to_f32_sw(h);
    }
    return __half2float(__ushort_as_half(h));
#else
    return coll_hd_f16_to_f32_sw(h);
#endif
}

/** @return float32 @p f rounded to binary16 (as coll_hd_f32_to_f16_sw()). */
COLL_HD uint16_t coll_hd_f32_to_f16(float f)
{
#if defined(__CUDA_ARCH__)
    if (coll_hd_f32_bits_nan(coll_hd_f32_bits(f))) {
        return coll_hd_f32_to_f16_sw(f);
    }
    return __half_as_ushort(__float2half_rn(f));
#else
    return coll_hd_f32_to_f16_sw(f);
#endif
}

/** @return bfloat16 @p b widened to float32 (exact: the upper half of a float32). */
COLL_HD float coll_hd_bf16_to_f32(uint16_t b)
{
    return coll_hd_f32_from_bits((uint32_t)b << 16);
}

/** @return float32 @p f rounded to the nearest bfloat16, ties to even; a NaN stays quiet. */
COLL_HD uint16_t coll_hd_f32_to_bf16(float f)
{
    uint32_t x = coll_hd_f32_bits(f);

    if (coll_hd_f32_bits_nan(x)) {
        return (uint16_t)((x | 0x400000u) >> 16);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/** The 16-bit float formats of the element functions: float16 (0) or bfloat16 (1). */
enum { COLL_HD_F16 = 0, COLL_HD_BF16 = 1 };

/** @return @p h of format @p fmt (COLL_HD_F16 or COLL_HD_BF16) widened to float32. */
COLL_HD float coll_hd_widen(int fmt, uint16_t h)
{
    return fmt == COLL_HD_BF16 ? coll_hd_bf16_to_f32(h) : coll_hd_f16_to_f32(h);
}

/** @return @p f rounded to format @p fmt. */
COLL_HD uint16_t coll_hd_narrow(int fmt, float f)
{
    return fmt == COLL_HD_BF16 ? coll_hd_f32_to_bf16(f) : coll_hd_f32_to_f16(f);
}

#endif
