/**
 * @file desc.h
 * @brief Descriptor of one operation, exchanged between neighbouring daemons before its data
 *        is used, so that ranks that disagree fail instead of reducing garbage.
 *
 * Fixed 64-byte little-endian layout (the daemons of one cluster share a byte order; the
 * build refuses big-endian hosts). Every node sends its descriptor to the next node of the ring
 * and checks the one of the previous node: equal neighbours all the way round means all equal.
 */
#ifndef COLL_DESC_H
#define COLL_DESC_H

#include <stdint.h>
#include <stdio.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "collectived's data path assumes a little-endian host"
#endif

#define COLL_DESC_MAGIC 0x43534544u /* "DESC" */

/** What every rank of an operation must agree on. */
typedef struct {
    uint32_t magic;
    uint16_t version;    /**< COLL_WIRE_VERSION */
    uint16_t coll;       /**< Collective */
    uint64_t key;        /**< operation key */
    uint64_t count;      /**< elements */
    uint32_t dtype;      /**< coll_dtype_t */
    uint32_t op;         /**< coll_op_t */
    uint32_t seg_bytes;  /**< pipeline segment the plan was made with */
    uint32_t world_size; /**< ranks */
    uint32_t node;       /**< sender's node rank (not compared) */
    uint32_t first_rank; /**< sender's lowest global rank (not compared; for messages) */
    uint8_t reserved[16];
} coll_desc_t;

_Static_assert(sizeof(coll_desc_t) == 64, "descriptor is 64 bytes on the wire");

/** @return 1 when @p a and @p b describe the same operation, 0 otherwise. */
static inline int coll_desc_equal(const coll_desc_t *a, const coll_desc_t *b)
{
    return a->magic == b->magic && a->version == b->version && a->coll == b->coll &&
           a->key == b->key && a->count == b->count && a->dtype == b->dtype && a->op == b->op &&
           a->seg_bytes == b->seg_bytes && a->world_size == b->world_size;
}

/** @brief Describe @p d in @p buf, e.g. "count=1000 dtype=float32 op=sum". */
void coll_desc_format(const coll_desc_t *d, char *buf, size_t len);

#endif
