/**
 * @file compress_wire.h
 * @brief The byte layout of every compressor's message, its size, and the receiver's checks.
 *
 * Every message is a fixed 16-byte header followed by the payload, all little-endian (the kernels
 * write host order, and the library builds only for little-endian hosts: a static assertion in
 * compress_wire.c). Buffers should start 8-byte aligned; the payload then starts 8-byte aligned
 * and every array in it is aligned to its element size. A receiver reads the header with
 * coll_wire_hdr_read(), which checks it against the message's length before any payload byte is
 * used, so the kernels can take the payload pointers as they are.
 *
 * Header (coll_wire_hdr_t), offsets in bytes:
 *   0  u8   method    coll_wire_method_t
 *   1  u8   version   COLL_COMPRESS_WIRE_VERSION (2: TopK indices of w bytes)
 *   2  u16  flags     0 (receivers reject others; room for later variants)
 *   4  u32  param     per method, below
 *   8  u64  count     dense elements the message stands for (float32 elements of the span)
 *
 * Payload, from offset 16 (COLL_WIRE_HDR_BYTES):
 *   FP16, BF16   param: the scale exponent p as int32 (two's complement), in
 *                [COLL_CAST_EXP_MIN, COLL_CAST_EXP_MAX]; payload count u16 values (cast.h).
 *                Bytes: 16 + 2 * count.
 *   TOPK         param: k <= count (and count <= COLL_TOPK_MAX_COUNT); payload k float32
 *                values, then at 16 + 4k the k indices, strictly ascending and < count, each in
 *                w = coll_topk_index_bytes(count) bytes (1 to 4: the fewest that hold count - 1;
 *                little-endian). Bytes: 16 + (4 + w) * k: 7 per pair for buckets of up to 2^24
 *                elements instead of 8, the difference between 24.7x and 28x at 1 % on 4 nodes.
 *                The kernels take u32 indices: coll_topk_wire_pack() and _unpack() convert in
 *                place. The indices are checked by coll_topk_accumulate().
 *   ONEBIT       param: the scale, float32 bits, finite and >= 0; payload ceil(count / 8) sign
 *                bytes (onebit.h bit order). Bytes: 16 + ceil(count / 8).
 *   LOWRANK_P,   param: the rank r, 1 .. COLL_LOWRANK_MAX_RANK; count: the factor's length
 *   LOWRANK_Q    (n rows for P, m columns for Q); payload count * r float32, column-major
 *                (lowrank.h). Bytes: 16 + 4 * count * r. These are allreduced (summed), so the
 *                engine sends the payload only, and the header once to agree on the shape.
 *   F32          param: 0; payload count float32 values: uncompressed data, as the engine's
 *                PowerSGD sends its factors together with the tensors it does not compress
 *                (and the partial sums of both), one span per chunk. Bytes: 16 + 4 * count.
 */
#ifndef COLL_KERNELS_COMPRESS_WIRE_H
#define COLL_KERNELS_COMPRESS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <collective.h>

/** Bytes of every header; the payload starts here. */
#define COLL_WIRE_HDR_BYTES 16
/** The layout version this file describes. */
#define COLL_COMPRESS_WIRE_VERSION 2

/** The compressor of a message (header byte 0). */
typedef enum {
    COLL_WIRE_FP16 = 1,
    COLL_WIRE_BF16 = 2,
    COLL_WIRE_TOPK = 3,
    COLL_WIRE_ONEBIT = 4,
    COLL_WIRE_LOWRANK_P = 5,
    COLL_WIRE_LOWRANK_Q = 6,
    COLL_WIRE_F32 = 7,
} coll_wire_method_t;

/** A header, decoded. Fields as in the file comment. */
typedef struct {
    coll_wire_method_t method;
    uint32_t param; /**< raw bits: int32 exponent, k, float32 scale or rank */
    uint64_t count;
} coll_wire_hdr_t;

/** @return Message bytes of an FP16 or BF16 span of @p count elements: 16 + 2 * count. */
size_t coll_cast_wire_bytes(size_t count);

/** @return Bytes of each index of a TopK message of a @p count element bucket: 1 for count <=
 *          2^8, 2 up to 2^16, 3 up to 2^24, else 4. */
size_t coll_topk_index_bytes(uint64_t count);

/** @return Message bytes of a TopK set of @p k pairs of a @p count element bucket:
 *          16 + (4 + coll_topk_index_bytes(count)) * k. */
size_t coll_topk_wire_bytes(size_t k, uint64_t count);

/** @return Bytes a TopK message buffer needs to hold its indices as u32 (before
 *          coll_topk_wire_pack(), after coll_topk_wire_unpack()): 16 + 8 * k. */
size_t coll_topk_wire_buffer_bytes(size_t k);

/** @return Byte offset of the indices of a TopK message of @p k pairs: 16 + 4 * k (the values
 *          are at 16). */
size_t coll_topk_wire_indices_offset(size_t k);

/**
 * @brief Pack, in place, the @p k u32 indices at @p indices (a TopK message's indices offset,
 *        4-byte aligned, as coll_topk_compress() wrote them) into coll_topk_index_bytes(@p count)
 *        bytes each. Every index must be below @p count (the kernel's are). Thread-safe.
 */
void coll_topk_wire_pack(void *indices, size_t k, uint64_t count);

/**
 * @brief Unpack, in place, the @p k packed indices at @p indices (a received TopK message's
 *        indices offset, 4-byte aligned, in a buffer of coll_topk_wire_buffer_bytes(k)) into u32
 *        for coll_topk_accumulate(), which checks them. Thread-safe.
 */
void coll_topk_wire_unpack(void *indices, size_t k, uint64_t count);

/** @return Message bytes of a 1-bit span of @p count elements: 16 + ceil(count / 8). */
size_t coll_onebit_wire_bytes(size_t count);

/** @return Message bytes of a PowerSGD factor of @p len rows and @p rank columns. */
size_t coll_lowrank_wire_bytes(size_t len, unsigned rank);

/** @return Message bytes of an F32 span of @p count elements: 16 + 4 * count. */
size_t coll_f32_wire_bytes(size_t count);

/**
 * @brief Write @p hdr as the first COLL_WIRE_HDR_BYTES bytes of @p buf (version 2, flags 0).
 *        No check: the sender's values come from the kernels.
 */
void coll_wire_hdr_write(void *buf, const coll_wire_hdr_t *hdr);

/**
 * @brief Decode and check the header of a received message of @p bytes bytes.
 *
 * Checks, in order: bytes >= 16; version 2; flags 0; a known method; the method's param (range of
 * the exponent, k <= count <= COLL_TOPK_MAX_COUNT, a finite scale >= 0, rank 1 ..
 * COLL_LOWRANK_MAX_RANK, 0 for F32); and that @p bytes is exactly the method's size for
 * (count, param), computed without overflow for any count.
 *
 * @param [in]  buf   The message (any alignment).
 * @param [in]  bytes Its length.
 * @param [out] hdr   Filled on COLL_OK only.
 * @return COLL_OK; COLL_ERR_VERSION for another version; COLL_ERR_PROTOCOL for anything else that
 *         fails a check.
 * Thread-safe. No allocation.
 */
coll_status_t coll_wire_hdr_read(const void *buf, size_t bytes, coll_wire_hdr_t *hdr);

#endif
